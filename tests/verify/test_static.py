"""What verify reads from the script's source with the lint path's analysis: the scheduler's
arguments set against the recorded schedules (DL202), and how the 1-process run is launched."""

import textwrap

import pytest
from records_by_hand import make_run, ups

from distlint.verify import checks, static

SCRIPT = """\
import torch
from accelerate import Accelerator
from transformers import get_linear_schedule_with_warmup

accelerator = Accelerator()
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1 * accelerator.num_processes)
loader = torch.utils.data.DataLoader(range(64), batch_size=8)
sched = get_linear_schedule_with_warmup(opt, num_warmup_steps={warmup}, num_training_steps=30)
model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
"""

PREPARED = {"kind": "note", "t": 1000.0, "message": "scheduler prepared: LambdaLR"}


def _warmup_twice_as_long(tmp_path):
    """1 process: a 4-update warmup to 0.1 (32 samples); 2 processes: to 0.2 over 4 updates of
    16 samples (64 samples): the warmup lasts twice the samples, the rest alike."""
    one = make_run(
        tmp_path, "one", 1, [ups([1.0] * 12, lr=[0.025, 0.05, 0.075] + [0.1] * 9)],
        rank_kw={0: {"extra": [PREPARED]}},
    )  # fmt: skip
    lrs = [0.05, 0.1, 0.15, 0.2, 0.2, 0.2]
    many = make_run(
        tmp_path, "many", 2, [ups([1.0] * 6, lr=lrs, checksums=[[float(r), float(i)] for i in range(6)]) for r in range(2)],
        rank_kw={r: {"extra": [PREPARED]} for r in range(2)},
    )  # fmt: skip
    return one, many


@pytest.mark.parametrize(
    "warmup, agrees",
    [("8 * accelerator.num_processes", True), ("8", False)],
    ids=["static-agrees", "static-disagrees"],
)
def test_schedule_quantity_is_set_against_the_schedulers_arguments(tmp_path, warmup, agrees):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(warmup=warmup), encoding="utf-8")
    facts = static.script_facts(str(script))
    assert facts is not None and facts.mode == "accelerate"
    [sched] = facts.schedulers
    assert sched.prepared and sched.line == 9
    counts = {a.role: a.counts for a in sched.arguments}
    expected = "times-processes" if agrees else "single-process"
    assert counts == {"warmup": expected, "total": "single-process"}

    one, many = _warmup_twice_as_long(tmp_path)
    check = checks.check_schedule(one, many)
    assert check.status == "fail" and check.data["counted_per_process"] == "warmup"
    static.cross_check_schedule(check, facts, many)
    assert check.data["static"]["agrees"] is agrees
    if agrees:
        assert (
            "the scheduler at line 9 agrees: `8 * accelerator.num_processes` (line 9) is a "
            "count multiplied by the process count" in check.detail
        )
    else:
        assert (
            "the scheduler at line 9 disagrees: `8` (line 9) counts single-process steps"
            in check.detail
        )
        assert "would not make the warmup differ ×2" in check.detail


def test_no_static_claim_when_the_source_cannot_say(tmp_path):
    """Two prepared schedulers, or none: the recorded schedules alone speak."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(warmup="8") + textwrap.dedent("""\
        other = get_linear_schedule_with_warmup(opt, 4, 30)
        other = accelerator.prepare(other)
        """), encoding="utf-8")  # fmt: skip
    one, many = _warmup_twice_as_long(tmp_path)
    check = checks.check_schedule(one, many)
    detail = check.detail
    static.cross_check_schedule(check, static.script_facts(str(script)), many)
    static.cross_check_schedule(check, None, many)
    assert check.detail == detail and "static" not in check.data


def test_an_unreadable_script_gives_no_facts(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n", encoding="utf-8")
    assert static.script_facts(str(bad)) is None
    assert static.script_facts(str(tmp_path / "missing.py")) is None


ACCELERATE_ALONE = """\
from accelerate import Accelerator

accelerator = Accelerator()
"""
READS_LOCAL_RANK = ACCELERATE_ALONE + 'import os\nlocal = int(os.environ["LOCAL_RANK"])\n'
PLAIN_DDP = """\
import os
import torch.distributed as dist

dist.init_process_group("gloo")
rank = int(os.getenv("RANK", "0"))
"""


@pytest.mark.parametrize(
    "source, launcher, expected, note",
    [
        (ACCELERATE_ALONE, "torchrun", "python", "plain `python`, as the script runs alone"),
        (READS_LOCAL_RANK, "torchrun", "torchrun", "(LOCAL_RANK at line 5)"),
        (PLAIN_DDP, "torchrun", "torchrun", None),
        (ACCELERATE_ALONE, "accelerate", "accelerate", None),
    ],
    ids=["accelerate-alone", "accelerate-reads-torchrun-env", "plain-ddp", "accelerate-launch"],
)
def test_the_one_process_run_is_launched_as_the_script_runs_alone(
    tmp_path, source, launcher, expected, note
):
    from distlint.verify import launch
    from distlint.verify.core import VerifyResult, _make_plans

    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    result = VerifyResult(
        str(script), [], 2, 3, False, script_facts=static.script_facts(str(script))
    )
    devices = launch.DevicePlan("cpu", "cpu", 2, [])
    plans = _make_plans(
        result, str(script), ["--x"], devices, launcher, [], str(tmp_path), None, None
    )
    assert plans is not None
    one = plans[1]
    assert one.launcher == expected
    if expected == "python":
        assert one.argv[1:] == [str(script), "--x"]  # no launcher: no group of one
    notes = [n for n in result.notes if "1-process run" in n]
    assert (note in notes[0]) if note else not notes
