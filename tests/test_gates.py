"""What the analysis asks of helpers in other modules before parsing them: a helper's module is
parsed only when its definition (followed into what it calls, through its defaults and
decorators, not its annotations) can hold the fact asked, and a fact two modules away is still
found (the per-device batch, the process group)."""

from __future__ import annotations

import os

import libcst as cst
import pytest

from distlint.analysis.facts import facts_for
from distlint.analysis.project import Project

ROOT = os.path.abspath(os.sep + "proj")


def P(rel: str) -> str:
    return os.path.join(ROOT, rel)


def _facts(project: Project, rel: str):
    info = project.module(P(rel))
    assert info is not None
    return facts_for(info.index, P(rel), project)


def _code(facts, nodes) -> list[str]:
    return [facts.index.module.code_for_node(n) for n in nodes]


# A training script calling helpers of a package whose logging reads the rank (a filter that
# logs on rank zero only), as diffusers' `training_utils` and `utils` do: none of them builds a
# loader, slices a batch or sets a batch attribute.
_NO_BATCH_USE = {
    "train.py": (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "from util import EMA, log_step, pick\n"
        "loader = DataLoader(range(64), batch_size=8)\n"
        "ema = EMA(torch.nn.Linear(2, 2).parameters(), decay=0.9)\n"
        "for step, batch in enumerate(loader):\n"
        "    log_step(step, batch)\n"
        "    ema.step(pick(batch, 0))\n"
    ),
    "util.py": (
        "from log import get_logger\n\nlogger = get_logger(__name__)\n\n"
        "class EMA:\n"
        "    def __init__(self, params, decay):\n"
        "        self.shadow = [p.clone() for p in params]\n"
        "        self.decay = decay\n"
        "    def step(self, params):\n"
        "        for s, p in zip(self.shadow, params):\n"
        "            s.mul_(self.decay).add_(p)\n\n"
        "def log_step(step, batch):\n    logger.info(step)\n\n"
        "def pick(batch, key):\n    return batch.get(key)\n"
    ),
    "log.py": (
        "import logging\nimport torch.distributed as dist\n\n"
        "class RankZero(logging.Filter):\n"
        "    def filter(self, record):\n"
        "        return not dist.is_initialized() or dist.get_rank() == 0\n\n"
        "def get_logger(name):\n"
        "    logger = logging.getLogger(name)\n    logger.addFilter(RankZero())\n    return logger\n"
    ),
}


def test_helpers_that_cannot_use_batches_are_not_parsed_for_them():
    project = Project.from_sources(ROOT, _NO_BATCH_USE)
    facts = _facts(project, "train.py")
    batch = facts.data.batch
    assert batch._calls_with_use == []
    assert not batch.held_constant_by_helpers
    assert project.parse_count == 1  # train.py only: util.py and log.py were outlined


# A batch use two modules away: the script's helper does nothing with batches itself, it hands
# each batch (or the loader's batch size) to a helper of a third module that does.
SHARD = (
    "import torch.distributed as dist\n\n"
    "def take_share(batch):\n"
    "    return batch[dist.get_rank() :: dist.get_world_size()]\n"
)
_TWO_AWAY = {
    "train.py": (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "from data import iterate, build\n"
        "loader = DataLoader(range(64), batch_size=32)\n"
        "for batch in iterate(loader):\n    pass\n"
        "other = build(range(64), 16)\n"
    ),
    "data.py": (
        "from shard import take_share\nfrom loaders import Endless\n\n"
        "def iterate(loader):\n"
        "    for batch in loader:\n        yield take_share(batch)\n\n"
        "def build(dataset, size):\n    return Endless(dataset, batch_size=size)\n"
    ),
    "shard.py": SHARD,
    "loaders.py": (
        "from torch.utils.data import DataLoader\n\nclass Endless(DataLoader):\n    pass\n"
    ),
}


@pytest.mark.parametrize(
    "share",
    [
        SHARD,
        # the rank read from the launcher's environment: a string key, not a word of the code
        (
            "import os\n\ndef take_share(batch):\n"
            '    return batch[int(os.environ["RANK"]) :: int(os.environ["WORLD_SIZE"])]\n'
        ),
        # bound first, returned after
        (
            "from torch.distributed import get_rank, get_world_size\n\n"
            "def take_share(batch):\n"
            "    part = batch[get_rank() :: get_world_size()]\n    return part\n"
        ),
    ],
)
def test_a_batch_use_two_modules_away_is_found(share):
    project = Project.from_sources(ROOT, {**_TWO_AWAY, "shard.py": share})
    facts = _facts(project, "train.py")
    batch = facts.data.batch
    assert _code(facts, batch.sliced_loaders) == ["DataLoader(range(64), batch_size=32)"]
    assert _code(facts, batch.per_device_values) == ["16"]  # `build`'s loader is `Endless`
    assert batch.held_constant_by_helpers


def test_the_slice_two_modules_away_decides_a_finding():
    # without the slicing helper's share the loader's batch is per device; with it, global
    project = Project.from_sources(ROOT, _TWO_AWAY)
    facts = _facts(project, "train.py")
    loader = facts.data.loaders[0]
    assert isinstance(loader, cst.Call)
    assert loader in facts.data.batch.sliced_loaders
    alone = {**_TWO_AWAY, "shard.py": "def take_share(batch):\n    return batch\n"}
    project = Project.from_sources(ROOT, alone)
    assert _facts(project, "train.py").data.batch.sliced_loaders == []


def test_a_method_of_a_helper_class_that_slices_is_found():
    # `sharder.take(batch)`: the class of another module yields nothing itself, its method
    # returns each rank's slice
    files = {
        "train.py": (
            "from torch.utils.data import DataLoader\nfrom shard import Sharder\n"
            "loader = DataLoader(range(64), batch_size=32)\n"
            "sharder = Sharder()\n"
            "def batches(loader):\n"
            "    for batch in loader:\n        yield sharder.take(batch)\n"
            "for b in batches(loader):\n    pass\n"
        ),
        "shard.py": (
            "import torch.distributed as dist\n\n"
            "class Sharder:\n"
            "    def take(self, batch):\n"
            "        return batch[dist.get_rank() :: dist.get_world_size()]\n"
        ),
    }
    project = Project.from_sources(ROOT, files)
    facts = _facts(project, "train.py")
    assert _code(facts, facts.data.batch.sliced_loaders) == ["DataLoader(range(64), batch_size=32)"]


def test_the_process_group_question_searches_no_import_closure():
    # a script calling one helper of a package whose modules import each other in a chain: only
    # the helper's definition (and what it names) is read, not every module the imports reach
    files = {
        "train.py": (
            "from pkg.m0 import setup\n\ndef main():\n    setup()\n\nif __name__ == '__main__':\n"
            "    main()\n"
        ),
        "pkg/__init__.py": "",
        **{
            f"pkg/m{i}.py": f"from pkg.m{i + 1} import f{i + 1}\n\ndef f{i}():\n    return f{i + 1}()\n"
            for i in range(1, 30)
        },
        "pkg/m30.py": "import torch.distributed as dist\n\ndef f30():\n    dist.init_process_group('nccl')\n",
        "pkg/m0.py": "from pkg.m1 import f1\n\ndef setup():\n    print('ready')\n",
    }
    project = Project.from_sources(ROOT, files)
    facts = _facts(project, "train.py")
    main = next(iter(facts.index.functions["main"]))
    assert not facts.processes.starts_process_group(main)
    assert project.parse_count == 1
    assert len(project._scans) <= 2  # (before: the 31 modules of the chain were line-scanned)


@pytest.mark.parametrize(
    "signature, expected",
    [
        # an annotation names a type, never a value the function uses: not followed
        ("def step(model: Net, n: int = 1) -> Net:", False),
        # a default is a value: what it calls is followed
        ("def step(model, n=Net()):", True),
        # so is a decorator
        ("@Net\ndef step(model):", True),
    ],
)
def test_a_definition_is_followed_through_its_defaults_not_its_annotations(signature, expected):
    from distlint.analysis.common import _SEEDERS

    files = {
        "util.py": f"from models import Net\n\n{signature}\n    return model\n",
        "models.py": "import random\n\nclass Net:\n    def __init__(self):\n        random.seed(0)\n",
    }
    project = Project.from_sources(ROOT, files)
    assert project.name_may_write(P("util.py"), "step", _SEEDERS) is expected
    assert project.parse_count == 0
