"""What the run's process mode asks of other modules before parsing them (issue #32): a class of
another module is not summarised to learn whether it returns an Accelerator (only a function's
return makes one), and a config call is spelled with its package (`hydra` and `call`, not any
`call`). Fooling cases still give the mode they gave: an Accelerator made by a helper two
modules away, through a package re-export, through a method of a helper class, or by a helper
named to look harmless; a class that subclasses Accelerator stays what it was."""

from __future__ import annotations

import os

import pytest

from distlint.analysis.facts import facts_for
from distlint.analysis.project import Project
from distlint.analysis.records import Mode

ROOT = os.path.abspath(os.sep + "proj")

_LOOP = (
    "import torch\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x in range(3):\n"
    "    loss = model(torch.ones(2)).sum()\n"
)


def _facts(project: Project, rel: str):
    path = os.path.join(ROOT, rel)
    info = project.module(path)
    assert info is not None
    return facts_for(info.index, path, project)


def _parsed(project: Project) -> list[str]:
    return sorted(os.path.relpath(p, ROOT) for p in project._modules)


# A model class whose module reads the accelerate state (as diffusers' ComponentsManager reads
# `PartialState().default_device`): its text writes both parts of an Accelerate spelling, so
# the name search says it may; what a class's summary holds never includes a returned
# Accelerator, so its module is not parsed for that.
_STATE_READING_CLASS = {
    "train.py": "from models import Net\nnet = Net()\n" + _LOOP,
    "models.py": (
        "from accelerate.state import PartialState\n\n"
        "class Net:\n"
        "    def __init__(self):\n"
        "        self.device = PartialState().device\n"
    ),
}


def test_a_class_is_not_parsed_to_learn_whether_it_returns_an_accelerator():
    project = Project.from_sources(ROOT, _STATE_READING_CLASS)
    facts = _facts(project, "train.py")
    assert not facts.processes.creates_accelerator
    assert facts.mode is Mode.NONE
    assert _parsed(project) == ["train.py"]  # models.py: outlined only
    # ... and still counts as reached by the lint, as its parse made it
    assert os.path.join(ROOT, "models.py") in project._loaded


@pytest.mark.parametrize(
    "sources",
    [
        pytest.param(
            {  # two modules away, through a package re-export
                "train.py": "from pkg import setup\naccelerator = setup()\n" + _LOOP,
                "pkg/__init__.py": "from pkg.env import setup\n",
                "pkg/env.py": "from pkg.build import make\n\ndef setup():\n    return make()\n",
                "pkg/build.py": (
                    "from accelerate import Accelerator\n\ndef make():\n    return Accelerator()\n"
                ),
            },
            id="helper-two-modules-away-re-exported",
        ),
        pytest.param(
            {  # a module attribute
                "train.py": "import tools\naccelerator = tools.init_logging()\n" + _LOOP,
                "tools.py": (
                    "from accelerate import Accelerator\n\n"
                    "def init_logging():\n    return Accelerator(log_with='wandb')\n"
                ),
            },
            id="harmless-name",
        ),
        pytest.param(
            {  # a method of a helper class
                "train.py": (
                    "from env import Env\nenv = Env()\naccelerator = env.accelerator()\n" + _LOOP
                ),
                "env.py": (
                    "from accelerate import Accelerator\n\n"
                    "class Env:\n    def accelerator(self):\n        return Accelerator()\n"
                ),
            },
            id="class-method",
        ),
    ],
)
def test_an_accelerator_made_elsewhere_still_sets_the_mode(sources):
    project = Project.from_sources(ROOT, sources)
    facts = _facts(project, "train.py")
    assert facts.processes.creates_accelerator
    assert facts.mode is Mode.ACCELERATE


def test_a_subclass_of_accelerator_of_another_module_is_what_it_was():
    # its summary is a class's: no returned Accelerator, with or without the parse; the
    # script is then judged by use (`prepare` and `backward` on what the project resolves)
    sources = {
        "train.py": (
            "from acc import MyAccelerator\naccelerator = MyAccelerator()\n"
            "model, opt = accelerator.prepare(model, opt)\naccelerator.backward(loss)\n"
        ),
        "acc.py": "from accelerate import Accelerator\n\nclass MyAccelerator(Accelerator):\n    pass\n",
    }
    project = Project.from_sources(ROOT, sources)
    facts = _facts(project, "train.py")
    assert not facts.processes.creates_accelerator
    assert facts.mode is Mode.NONE


_CALLING_HELPER = {
    "train.py": (
        "import torch\nfrom helpers import run\nmodel = torch.nn.Linear(2, 2)\nopt = run(model)\n"
    ),
    "helpers.py": "def run(model):\n    return model.call()\n",
}


def test_a_helper_calling_something_named_call_is_not_parsed_for_optimizers():
    project = Project.from_sources(ROOT, _CALLING_HELPER)
    facts = _facts(project, "train.py")
    assert facts.optimization.optimizers == []
    assert _parsed(project) == ["train.py"]


def test_a_hydra_call_building_the_optimizer_in_a_helper_is_still_found():
    sources = {
        "train.py": (
            "import torch\nfrom helpers import make_optimizer\n"
            "model = torch.nn.Linear(2, 2)\nopt = make_optimizer(cfg, model)\n"
        ),
        "helpers.py": (
            "from hydra.utils import call\n\n"
            "def make_optimizer(cfg, model):\n"
            "    return call(cfg.optimizer, params=model.parameters(), lr=cfg.lr)\n"
        ),
    }
    project = Project.from_sources(ROOT, sources)
    facts = _facts(project, "train.py")
    assert len(facts.optimization.optimizers) == 1
    assert _parsed(project) == ["helpers.py", "train.py"]
