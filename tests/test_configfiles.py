"""Configuration files (YAML / JSON / TOML, hydra composition) and the values scripts read."""

from __future__ import annotations

import os
import sys

import libcst as cst
import pytest

from distlint.analysis.configfiles import YAML_MISSING, ConfigFileError, compose_hydra, parse
from distlint.analysis.configsource import config_component, config_value
from distlint.analysis.index import walk
from distlint.analysis.project import Project

ROOT = os.path.abspath("/proj")


def P(rel: str) -> str:
    return os.path.join(ROOT, *rel.split("/"))


def value_of(files: dict[str, str], text: str, entry: str = "train.py"):
    """config_value of the (last) expression spelled ``text`` in ``entry``."""
    project = Project.from_sources(ROOT, files)
    info = project.module(P(entry))
    assert info is not None, project.errors
    node = _expr(info, text)
    return config_value(info.index, node, project, P(entry)), project


def _expr(info, text):
    found = [
        n
        for n in walk(info.module)
        if isinstance(n, cst.BaseExpression) and info.module.code_for_node(n) == text
    ]
    assert found, f"{text!r} not in module"
    return found[-1]


# ------------------------------------------------------------------------------ files
def test_yaml_values_carry_file_and_line():
    doc = parse(P("c.yaml"), b"# comment\noptimizer:\n  name: adamw\n  lr: 3.0e-4\nsteps: [1, 2]\n")
    lr = doc.root.find(["optimizer", "lr"])
    assert lr.value == 3.0e-4 and lr.line == 4 and lr.text == "3.0e-4" and lr.file == P("c.yaml")
    assert doc.root.find(["steps", 1]).value == 2
    assert doc.root.plain() == {"optimizer": {"name": "adamw", "lr": 3.0e-4}, "steps": [1, 2]}


def test_yaml_anchors_merge_keys_and_recursive_aliases():
    doc = parse(P("c.yaml"), b"base: &b {lr: 0.1, wd: 0.0}\nrun:\n  <<: *b\n  lr: 0.2\n")
    assert doc.root.find(["run"]).plain() == {"lr": 0.2, "wd": 0.0}
    parse(P("r.yaml"), b"a: &x [*x]\n")  # a recursive alias terminates


def test_yaml_is_safe_loaded_only():
    doc = parse(P("c.yaml"), b"x: !!python/object/apply:os.system ['echo hi']\n")
    assert doc.root.find(["x"]) is not None  # read, never constructed or executed


def test_invalid_files_name_the_line():
    with pytest.raises(ConfigFileError) as exc:
        parse(P("c.yaml"), b"a: 1\nb: [1, 2\nc: 3\n")
    assert exc.value.line is not None and "invalid YAML" in exc.value.message
    with pytest.raises(ConfigFileError) as exc:
        parse(P("c.json"), b'{\n  "lr": 1e-3,\n}\n')
    assert exc.value.line == 3 and "invalid JSON" in exc.value.message
    with pytest.raises(ConfigFileError) as exc:
        parse(P("c.toml"), b"a = 1\nb = = 2\n")
    assert exc.value.line == 2


def test_json_and_toml():
    doc = parse(P("c.json"), b'{"optimizer": {"lr": 1e-3}}')
    assert doc.root.find(["optimizer", "lr"]).value == 1e-3
    doc = parse(P("c.toml"), b"[optimizer]\nlr = 2e-4\n")
    assert doc.root.find(["optimizer", "lr"]).value == 2e-4


def test_without_pyyaml_a_clear_one_line_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ConfigFileError) as exc:
        parse(P("c.yaml"), b"lr: 1\n")
    assert exc.value.message == YAML_MISSING and "\n" not in YAML_MISSING
    project = Project.from_sources(ROOT, {"c.yaml": "lr: 1\n"})
    assert project.config_file(P("c.yaml")) is None
    assert project.config_file(P("c.yaml")) is None
    assert [e.message for e in project.errors] == [YAML_MISSING]


# ------------------------------------------------------------------------------ hydra
HYDRA = {
    "conf/config.yaml": "defaults:\n  - optimizer: adamw\n  - data: imagenet\n  - _self_\n  - override data: cifar\ntrainer:\n  epochs: 3\noptimizer:\n  weight_decay: 0.05\n",
    "conf/optimizer/adamw.yaml": "_target_: torch.optim.AdamW\nlr: 3e-4\nweight_decay: 0.01\n",
    "conf/data/imagenet.yaml": "batch_size: 256\n",
    "conf/data/cifar.yaml": "defaults:\n  - /aug@augment: light\nbatch_size: 128\n",
    "conf/aug/light.yaml": "flip: true\n",
    "conf/global.yaml": "# @package _global_\nseed: 7\n",
}


def test_hydra_defaults_list_composition():
    project = Project.from_sources(ROOT, HYDRA)
    cfg = compose_hydra(project, P("conf"), "config")
    assert cfg.plain() == {
        "optimizer": {"_target_": "torch.optim.AdamW", "lr": "3e-4", "weight_decay": 0.05},
        "data": {"batch_size": 128, "augment": {"flip": True}},
        "trainer": {"epochs": 3},
    }
    lr = cfg.find(["optimizer", "lr"])
    assert lr.file == P("conf/optimizer/adamw.yaml") and lr.line == 2
    wd = cfg.find(["optimizer", "weight_decay"])
    assert wd.file == P("conf/config.yaml")  # `_self_` after the group: the primary wins


def test_hydra_self_first_and_package_header():
    files = dict(HYDRA)
    files["conf/config.yaml"] = (
        "defaults:\n  - _self_\n  - optimizer: adamw\n  - global\noptimizer:\n  weight_decay: 0.05\n"
    )
    project = Project.from_sources(ROOT, files)
    cfg = compose_hydra(project, P("conf"), "config")
    assert cfg.find(["optimizer", "weight_decay"]).value == 0.01  # the group file wins now
    assert cfg.find(["seed"]).value == 7
    assert compose_hydra(project, P("conf"), "missing") is None


def test_hydra_self_including_config_terminates():
    project = Project.from_sources(ROOT, {"conf/a.yaml": "defaults:\n  - a\nx: 1\n"})
    assert compose_hydra(project, P("conf"), "a").plain() == {"x": 1}


# ------------------------------------------------------------------------------ values
def test_hydra_main_task_function():
    files = dict(HYDRA)
    files["train.py"] = (
        "import hydra\nfrom omegaconf import DictConfig\n\n"
        '@hydra.main(version_base=None, config_path="conf", config_name="config")\n'
        "def main(cfg: DictConfig):\n    opt_cfg = cfg.optimizer\n"
        "    a = cfg.optimizer.lr\n    b = opt_cfg['lr']\n    c = cfg.data.batch_size\n"
        "    d = cfg.nothing\n"
    )
    for text in ("cfg.optimizer.lr", "opt_cfg['lr']"):
        value, _ = value_of(files, text)
        assert value.value == 3e-4 and value.text == "3e-4"  # OmegaConf reads 3e-4 as a float
        assert value.key == "optimizer.lr" and value.file == P("conf/optimizer/adamw.yaml")
        assert value.line == 2
        assert value.describe(ROOT) == "conf/optimizer/adamw.yaml:2: optimizer.lr = 3e-4"
    value, _ = value_of(files, "cfg.data.batch_size")
    assert value.value == 128 and value.file == P("conf/data/cifar.yaml")
    assert value_of(files, "cfg.nothing")[0] is None


def test_omegaconf_load_and_interpolation():
    files = {
        "configs/train.yaml": "base_lr: 1.0e-3\noptimizer:\n  lr: ${base_lr}\n",
        "train.py": (
            "from omegaconf import OmegaConf as OC\n"
            "cfg = OC.load('configs/train.yaml')\nx = cfg.optimizer.lr\ny = cfg.get('base_lr')\n"
        ),
    }
    value, _ = value_of(files, "cfg.optimizer.lr")
    assert value.value == 1e-3 and value.line == 1 and value.key == "optimizer.lr"
    assert value_of(files, "cfg.get('base_lr')")[0].value == 1e-3


@pytest.mark.parametrize(
    "load",
    [
        "with open(os.path.join(os.path.dirname(__file__), 'cfg', 'run.yaml')) as f:\n    cfg = yaml.safe_load(f)\n",
        "cfg = yaml.safe_load(open('cfg/run.yaml'))\n",
        "cfg = yaml.load(Path(__file__).parent.joinpath('cfg/run.yaml').read_text(), Loader=yaml.SafeLoader)\n",
        "CONFIG = Path(__file__).resolve().parent / 'cfg' / 'run.yaml'\ncfg = yaml.safe_load(CONFIG.open())\n",
        "cfg = EasyDict(yaml.safe_load(open('cfg/run.yaml')))\n",
    ],
)
def test_yaml_loads_in_the_forms_seen_in_scripts(load):
    files = {
        "scripts/cfg/run.yaml": "train:\n  lr: 0.1\n",
        "scripts/train.py": "import os\nimport yaml\nfrom pathlib import Path\nfrom easydict import EasyDict\n"
        + load
        + "x = cfg['train']['lr']\n",
    }
    value, _ = value_of(files, "cfg['train']['lr']", "scripts/train.py")
    assert value is not None and value.value == 0.1 and value.line == 2
    assert value.file == P("scripts/cfg/run.yaml")


def test_pyyaml_reads_3e_4_as_text():
    # yaml.safe_load is YAML 1.1: `3e-4` (no dot) is a string there, not a float
    files = {
        "c.yaml": "lr: 3e-4\n",
        "train.py": "import yaml\ncfg = yaml.safe_load(open('c.yaml'))\nx = cfg['lr']\n",
    }
    assert value_of(files, "cfg['lr']")[0].value == "3e-4"


def test_json_and_toml_loads():
    files = {
        "c.json": '{"lr": 0.5}',
        "c.toml": "lr = 0.25\n",
        "train.py": "import json, tomllib\nj = json.load(open('c.json'))\n"
        "with open('c.toml', 'rb') as fh:\n    t = tomllib.load(fh)\na = j['lr']\nb = t['lr']\n",
    }
    assert value_of(files, "j['lr']")[0].value == 0.5
    found = value_of(files, "t['lr']")[0]
    assert found.value == 0.25 and found.line is None  # tomllib gives no lines


def test_class_attribute_and_in_file_callers():
    files = {
        "c.yaml": "optim:\n  lr: 0.01\n",
        "train.py": (
            "from omegaconf import OmegaConf\n\nclass Trainer:\n    def __init__(self, path):\n"
            "        self.cfg = OmegaConf.load('c.yaml')\n    def build(self):\n        return self.cfg.optim.lr\n\n"
            "def make(cfg):\n    return cfg.optim.lr * 2\n\nmake(OmegaConf.load('c.yaml'))\n"
        ),
    }
    assert value_of(files, "self.cfg.optim.lr")[0].value == 0.01
    assert value_of(files, "cfg.optim.lr")[0].value == 0.01


def test_unknown_paths_and_plain_values_are_not_config():
    files = {
        "c.yaml": "lr: 1\n",
        "train.py": "import sys, yaml\ncfg = yaml.safe_load(open(sys.argv[1]))\nx = cfg['lr']\n"
        "d = {'lr': 2}\ny = d['lr']\n",
    }
    assert value_of(files, "cfg['lr']")[0] is None
    assert value_of(files, "d['lr']")[0] is None


# ------------------------------------------------------------------------------ argparse
ARGPARSE = (
    "import argparse\nimport yaml\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--config', default='configs/base.yaml')\n"
    "parser.add_argument('--learning-rate', type=float, default='1e-4')\n"
    "parser.add_argument('--seed', type=int, default=0)\n"
)


def test_argparse_default_is_the_origin_without_a_config():
    files = {"train.py": ARGPARSE + "args = parser.parse_args()\nx = args.learning_rate\n"}
    value, _ = value_of(files, "args.learning_rate")
    assert value.kind == "argparse" and value.value == 1e-4 and value.key == "--learning-rate"
    assert value.line == 6 and value.file == P("train.py")
    assert value.describe(ROOT) == "train.py:6: default of --learning-rate = '1e-4'"


@pytest.mark.parametrize(
    "override",
    [
        "pre, _ = parser.parse_known_args()\nparser.set_defaults(**yaml.safe_load(open(pre.config)))\nargs = parser.parse_args()\n",
        "args = parser.parse_args()\nwith open(args.config) as f:\n    cfg = yaml.safe_load(f)\nargs.__dict__.update(cfg)\n",
        "args = parser.parse_args()\nvars(args).update(yaml.safe_load(open(args.config)))\n",
        "args = parser.parse_args()\ncfg = yaml.safe_load(open(args.config))\nfor k, v in cfg.items():\n    setattr(args, k, v)\n",
    ],
)
def test_config_file_overrides_argparse_defaults(override):
    files = {
        "configs/base.yaml": "learning_rate: 0.002\n",
        "train.py": ARGPARSE + override + "x = args.learning_rate\ny = args.seed\n",
    }
    value, _ = value_of(files, "args.learning_rate")
    assert value.kind == "file" and value.value == 0.002 and value.file == P("configs/base.yaml")
    seed, _ = value_of(files, "args.seed")  # not in the file: the parser's default
    assert seed.kind == "argparse" and seed.value == 0


def test_reassigned_argument_is_not_a_plain_config_read():
    files = {
        "train.py": ARGPARSE
        + "args = parser.parse_args()\nargs.seed = args.seed + 1\nx = args.seed\n"
    }
    assert value_of(files, "args.seed")[0] is None


# ------------------------------------------------------------------------------ instantiate
def test_torchtune_component_and_hydra_target():
    files = {
        "recipes/configs/full.yaml": "optimizer:\n  _component_: torch.optim.AdamW\n  lr: 2e-5\n  fused: true\nbatch_size: 4\n",
        "recipes/full.py": (
            "import argparse\nfrom omegaconf import OmegaConf\nfrom torchtune import config\n"
            "p = argparse.ArgumentParser()\np.add_argument('--config', default='recipes/configs/full.yaml')\n"
            "cfg = OmegaConf.load(p.parse_args().config)\n"
            "opt = config.instantiate(cfg.optimizer, model.parameters())\n"
        ),
        "conf/opt.yaml": "optim:\n  _target_: torch.optim.SGD\n  _partial_: true\n  lr: 0.1\n",
        "train.py": "from hydra.utils import instantiate\nfrom omegaconf import OmegaConf\n"
        "cfg = OmegaConf.load('conf/opt.yaml')\nmake = instantiate(cfg.optim)\n",
    }
    project = Project.from_sources(ROOT, files)
    info = project.module(P("recipes/full.py"))
    call = _expr(info, "config.instantiate(cfg.optimizer, model.parameters())")
    comp = config_component(info.index, call, project, P("recipes/full.py"))
    assert comp.target == "torch.optim.AdamW" and not comp.partial
    assert comp.kwargs["lr"].value == 2e-5 and comp.kwargs["lr"].key == "optimizer.lr"
    assert comp.kwargs["lr"].line == 3 and set(comp.kwargs) == {"lr", "fused"}
    info = project.module(P("train.py"))
    comp = config_component(
        info.index, _expr(info, "instantiate(cfg.optim)"), project, P("train.py")
    )
    assert comp.target == "torch.optim.SGD" and comp.partial and comp.kwargs["lr"].value == 0.1
    not_instantiate = _expr(info, "OmegaConf.load('conf/opt.yaml')")
    assert config_component(info.index, not_instantiate, project, P("train.py")) is None


def test_config_loaded_by_a_function_of_another_module():
    files = {
        "configs/base.yaml": "optimizer:\n  lr: 1.5e-4\n",
        "config.py": "import os\nfrom omegaconf import OmegaConf\n"
        "CONFIG_DIR = os.path.join(os.path.dirname(__file__), 'configs')\n\n"
        "def load_config(name='base'):\n    return OmegaConf.load(os.path.join(CONFIG_DIR, name + '.yaml'))\n",
        "pkg/__init__.py": "",
        "pkg/settings.py": "from ..config import load_config\n\ndef get():\n    return load_config()\n",
        "pkg/helpers.py": "from omegaconf import OmegaConf\n\ndef load():\n    return OmegaConf.load('configs/base.yaml')\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/run.py": "from ..helpers import load\nd = load().optimizer.lr\n",
        "train.py": "import config\nfrom config import load_config as lc\nfrom pkg import settings\n"
        "a = lc().optimizer.lr\nb = config.load_config().optimizer.lr\nc = settings.get().optimizer.lr\n",
    }
    for text in ("lc().optimizer.lr", "config.load_config().optimizer.lr"):
        value, _ = value_of(files, text)
        assert value is not None and value.value == 1.5e-4 and value.file == P("configs/base.yaml")
    assert value_of(files, "settings.get().optimizer.lr")[0] is None  # `..` above the root
    value, _ = value_of(files, "load().optimizer.lr", "pkg/sub/run.py")
    assert value is not None and value.line == 2


def test_mutually_recursive_helpers_terminate():
    files = {
        "a.py": "from b import g\n\ndef f():\n    return g()\n",
        "b.py": "from a import f\n\ndef g():\n    return f()\n",
        "train.py": "from a import f\nx = f().lr\n",
    }
    assert value_of(files, "f().lr")[0] is None


# ------------------------------------------------------------------ bounds (issue #27)
def _alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\noptimizer:\n  lr: 0.1\n"


def test_yaml_alias_bomb_is_refused_before_it_expands():
    pytest.importorskip("yaml")
    text = _alias_bomb()
    assert len(text) < 700
    with pytest.raises(ConfigFileError) as info:
        parse("bomb.yaml", text.encode())
    assert info.value.message.startswith("YAML aliases expand to ")
    assert info.value.message.endswith("over the limit of 100,000 repeated ones: not read")


def test_yaml_aliases_and_merge_keys_of_real_configs_still_read():
    pytest.importorskip("yaml")
    text = (
        "base: &base {lr: 0.1, batch: 32}\n"
        "train:\n  <<: *base\n  batch: 64\n"
        "eval: *base\n"
        "many: [" + ", ".join(["*base"] * 1000) + "]\n"
    )
    doc = parse("c.yaml", text.encode())
    assert doc.root.find(["train", "lr"]).value == 0.1
    assert doc.root.find(["train", "batch"]).value == 64
    assert doc.root.find(["eval", "batch"]).value == 32
    assert len(doc.root.find(["many"]).value) == 1000


@pytest.mark.parametrize(
    "name,data,kind",
    [
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "JSON"),
        ("deep2.json", b"[" * 150 + b"]" * 150, "JSON"),  # parsed by json, over our depth
        ("deep.yaml", b"a: " + b"[" * 600 + b"]" * 600 + b"\n", "YAML"),
        ("deep.toml", b"a = " + b"[" * 600 + b"]" * 600 + b"\n", "TOML"),
    ],
    ids=["json-100000", "json-600", "yaml-600", "toml-600"],
)
def test_deeply_nested_config_files_are_refused_naming_the_depth(name, data, kind):
    if kind == "YAML":
        pytest.importorskip("yaml")
    with pytest.raises(ConfigFileError) as info:
        parse(name, data)
    assert info.value.message == f"{kind} nested more than 100 levels deep: not read"


SCRIPT_READING = (
    "import {module}\nimport torch\nfrom accelerate import Accelerator\n\n"
    'cfg = {load}(open("{name}"))\naccelerator = Accelerator()\ntorch.manual_seed(0)\n'
    "model = torch.nn.Linear(4, 1)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr={use})\n"
    "order = torch.randperm(4).tolist()\nimport random\n\nrandom.shuffle(order)\n"
)


@pytest.mark.parametrize(
    "name,module,load,use,data,message",
    [
        (
            "deep.json",
            "json",
            "json.load",
            "cfg[0]",
            b"[" * 100_000 + b"]" * 100_000,
            "JSON nested more than 100 levels deep: not read",
        ),
        (
            "bomb.yaml",
            "yaml",
            "yaml.safe_load",
            'cfg["optimizer"]["lr"]',
            _alias_bomb().encode(),
            "YAML aliases expand to 4,412,961,508 values, over the limit of 100,000 repeated "
            "ones: not read",
        ),
    ],
    ids=["deep-json", "yaml-alias-bomb"],
)
@pytest.mark.slow
def test_a_data_file_too_big_to_read_is_reported_for_itself_and_the_findings_stand(
    tmp_path, name, module, load, use, data, message
):
    from bounded import bounded

    if module == "yaml":
        pytest.importorskip("yaml")
    (tmp_path / name).write_bytes(data)
    script = SCRIPT_READING.format(module=module, load=load, name=name, use=use)
    (tmp_path / "train.py").write_text(script)
    proc = bounded(["check", "--no-cache", "train.py"], cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert proc.stdout.startswith("train.py:7:1: DL101 "), proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"{tmp_path / name}: error: {message}"]


def test_a_function_imported_beside_other_names_is_the_one_called():
    files = {
        "configs/base.yaml": "optimizer:\n  lr: 1.5e-4\n",
        "config.py": "from omegaconf import OmegaConf\n\n"
        "def load_config():\n    return OmegaConf.load('configs/base.yaml')\n\n"
        "def other():\n    return OmegaConf.load('configs/none.yaml')\n",
        "train.py": "from config import load_config as lc, other\na = lc().optimizer.lr\n",
    }
    value, _ = value_of(files, "lc().optimizer.lr")
    assert value is not None and value.value == 1.5e-4 and value.file == P("configs/base.yaml")
