"""Issue #29 item 4, scope: what a module's run reaches is what it reports; a run that refuses
several processes trains on one. Each question is asked on small modules here; the whole
shapes (entry + modules) are fixture projects (tests/test_projects.py)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from helpers import FIXTURES
from test_facts import facts_of

from distlint.analysis.facts import Mode
from distlint.api import LintOptions, lint_paths
from distlint.config import Config
from distlint.runner import lint_source

UNUSED_TRAINER = """
import torch
from accelerate import Accelerator


class Trainer:
    def __init__(self, model, lr):
        self.accelerator = Accelerator()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr){noqa}


def main():
    accelerator = Accelerator()
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 * accelerator.num_processes)
    accelerator.prepare(model, optimizer)
{tail}
"""
MAIN_BLOCK = 'if __name__ == "__main__":\n    main()\n'


def _findings(code: str, select: tuple[str, ...] = ("DL201",)) -> list[tuple[int, str]]:
    config = Config(select=select)
    result = lint_source(textwrap.dedent(code), "train.py", config)
    return [(f.line, f.code) for f in result.findings]


def test_a_class_the_run_never_uses_is_not_reported():
    assert _findings(UNUSED_TRAINER.format(noqa="", tail=MAIN_BLOCK)) == []


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("", id="no-run-a-library-module"),
        pytest.param('if __name__ == "__main__":\n    print(Trainer)\n', id="main-block-names-it"),
        pytest.param('TRAINERS = {"default": Trainer}\n' + MAIN_BLOCK, id="registered-in-a-dict"),
        pytest.param(
            'if __name__ == "__main__":\n    globals()["Trainer"](None, 0.1)\n    main()\n',
            id="looked-up-at-run-time",
        ),
        pytest.param(
            'if __name__ == "__main__":\n    torch.nn.Linear(2, 2)\n',
            id="main-block-runs-no-function",
        ),
        pytest.param(
            "import unittest\n\n\ndef _mp_fn(index):\n    unittest.main()\n\n\n"
            'if __name__ == "__main__":\n    torch.multiprocessing.spawn(_mp_fn)\n',
            id="a-test-runner-finds-the-classes",
        ),
    ],
)
def test_the_class_is_reported_where_the_run_may_use_it(tail):
    assert _findings(UNUSED_TRAINER.format(noqa="", tail=tail)) == [(9, "DL201")]


def test_reached_through_the_function_the_run_calls():
    code = UNUSED_TRAINER.format(noqa="", tail=MAIN_BLOCK).replace(
        "    accelerator.prepare(model, optimizer)\n",
        "    accelerator.prepare(model, optimizer)\n    return build(model)\n\n\n"
        "def build(model):\n    return Trainer(model, 0.1)\n",
    )
    assert _findings(code) == [(9, "DL201")]


def test_a_decorated_class_is_reached():
    code = UNUSED_TRAINER.format(noqa="", tail=MAIN_BLOCK).replace(
        "class Trainer:", "@register\nclass Trainer:"
    )
    assert _findings(code) == [(10, "DL201")]


def test_a_noqa_in_unreached_code_is_not_called_unused():
    code = UNUSED_TRAINER.format(noqa="  # noqa: DL201", tail=MAIN_BLOCK)
    assert _findings(code, ("DL201", "DL001")) == []


def test_module_level_training_is_a_run():
    facts = facts_of(
        """
        import torch

        def unused():
            pass

        model = torch.nn.Linear(2, 2)
        model(torch.randn(1, 2)).sum().backward()
        """
    )
    assert facts.reach.has_run
    unused = facts.index.module.body[1]
    assert not facts.reach.reached(unused)


# ------------------------------------------------------------------ one process only
GUARDED = """
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(args):
    world_size = int(os.environ.get("WORLD_SIZE", 1))
{guard}
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


if __name__ == "__main__":
    main(None)
"""


@pytest.mark.parametrize(
    "guard, single",
    [
        pytest.param(
            "    if world_size > 1:\n        raise SystemExit('one GPU')", True, id="raise"
        ),
        pytest.param("    if 1 < world_size:\n        sys.exit(1)", True, id="mirrored-exit"),
        pytest.param(
            "    if args.debug or world_size != 1:\n        raise ValueError", True, id="or"
        ),
        pytest.param("    assert world_size == 1, 'one process'", True, id="assert"),
        pytest.param("    assert torch.cuda.device_count() < 2", True, id="assert-devices"),
        pytest.param(
            "    if args.fp8 and world_size > 1:\n        raise ValueError",
            False,
            id="under-a-condition",
        ),
        pytest.param("    if world_size > 1:\n        print('untested')", False, id="warns-only"),
        pytest.param("    if args.check:\n        assert world_size == 1", False, id="in-a-branch"),
        pytest.param("    if world_size > 2:\n        raise ValueError", False, id="allows-two"),
    ],
)
def test_a_run_that_refuses_several_processes_trains_on_one(guard, single):
    facts = facts_of(GUARDED.format(guard=guard))
    assert facts.reach.one_process_only is single
    assert facts.mode is (Mode.NONE if single else Mode.DDP)


def test_a_refusal_in_a_function_the_run_never_calls_does_not_count():
    code = GUARDED.format(guard="    pass") + (
        "\n\ndef evaluate_only():\n"
        "    if int(os.environ['WORLD_SIZE']) > 1:\n        raise ValueError('one process')\n"
    )
    facts = facts_of(code)
    assert not facts.reach.one_process_only
    assert facts.mode is Mode.DDP


def test_a_refusal_in_a_helper_the_run_calls_counts():
    code = GUARDED.format(guard="    ensure_single_process()") + (
        "\n\ndef ensure_single_process():\n"
        "    raw = os.environ.get('WORLD_SIZE', '1')\n"
        "    try:\n        world_size = int(raw)\n    except ValueError:\n        world_size = 1\n"
        "    if world_size > 1:\n        raise RuntimeError('single-process only')\n"
    )
    facts = facts_of(code)
    assert facts.reach.one_process_only
    assert facts.mode is Mode.NONE


@pytest.mark.parametrize(
    "setup, guard",
    [
        pytest.param(
            "from accelerate import Accelerator\n",
            "    accelerator = Accelerator()\n"
            "    if accelerator.num_processes > 1:\n        raise ValueError('one GPU')\n",
            id="accelerate",
        ),
        pytest.param(
            "import lightning as L\n",
            "    fabric = L.Fabric(devices=devices)\n"
            "    assert devices == 1, 'only one device is supported'\n",
            id="fabric-devices",
        ),
    ],
)
def test_the_framework_s_own_process_count_refused_above_one(setup, guard):
    facts = facts_of(
        f"import torch\n{setup}\n\ndef main(devices=2):\n{guard}"
        "    model = torch.nn.Linear(2, 2)\n"
        "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    assert facts.reach.one_process_only
    assert facts.mode is Mode.NONE


# ------------------------------------------------------------------ the files of the run
def _codes(paths, cache):
    results = lint_paths(list(paths), LintOptions(select=("DL201",), cache=cache, jobs=1))
    return sorted((Path(r.path).as_posix(), f.line, f.code) for r in results for f in r.findings)


def _orders_answer_as_without_the_cache(runs):
    for paths in [*runs, *runs]:  # the second time, answered from the cache
        assert _codes(paths, cache=True) == _codes(paths, cache=False), paths


def test_a_script_another_file_of_the_run_imports_reports_all_it_holds(tmp_path, monkeypatch):
    """`LegacyTrainer` is unused by train.py's own run, but run.py imports it: in a run with
    run.py it is reported; the cache answers each run as that run is answered without it."""
    shutil.copy(FIXTURES / "projects" / "accelerate_unused_trainer_class" / "train.py", tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "run.py").write_text("from train import LegacyTrainer\n")
    monkeypatch.chdir(tmp_path)
    assert _codes(["train.py"], cache=False) == []
    assert _codes(["train.py", "run.py"], cache=False) == [("train.py", 25, "DL201")]
    _orders_answer_as_without_the_cache([["train.py"], ["train.py", "run.py"]])


def test_a_helper_s_optimizer_is_decided_by_the_callers_in_the_run(tmp_path, monkeypatch):
    """utils/torch_utils.py linted alone reports its optimizers (a library's API); with the
    caller that holds its global batch constant, it does not."""
    shutil.copytree(FIXTURES / "projects" / "ddp_helper_optimizer_caller_exempt", tmp_path / "p")
    monkeypatch.chdir(tmp_path / "p")
    helper = "utils/torch_utils.py"
    assert [c for _p, _l, c in _codes([helper], cache=False)] == ["DL201", "DL201"]
    assert _codes(["train.py", helper], cache=False) == []
    _orders_answer_as_without_the_cache([[helper], ["train.py", helper]])
