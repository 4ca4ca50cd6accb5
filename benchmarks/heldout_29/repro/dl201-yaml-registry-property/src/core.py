"""A registry filled by a decorator and a YAML config whose `type` keys pick from it (RT-DETR's
src/core/workspace.py and yaml_config.py, reduced)."""

import torch
import yaml

GLOBAL_CONFIG = {}


def register(cls):
    GLOBAL_CONFIG[cls.__name__] = cls
    return cls


register(torch.optim.AdamW)
register(torch.optim.SGD)


def create(name, cfg, **extra):
    node = dict(cfg[name])
    cls = GLOBAL_CONFIG[node.pop("type")]
    return cls(**extra, **node)


class YAMLConfig:
    def __init__(self, path):
        with open(path) as f:
            self.yaml_cfg = yaml.safe_load(f)
        self.model = torch.nn.Linear(8, 8)
        self._optimizer = None

    @property
    def optimizer(self):
        if self._optimizer is None:
            self._optimizer = create("optimizer", self.yaml_cfg, params=self.model.parameters())
        return self._optimizer
