"""The "ranks agree" check: every rank holds the same parameters after each update (the probe's
parameter fingerprints), on hand-built records, and on one real 2-process DDP run that forwards
`model.module` (no gradient all-reduce: the ranks drift apart)."""

import json
import os
import subprocess
import sys

import pytest
from records_by_hand import make_run, ups
from verify_helpers import ROOT

from distlint.verify import checks
from distlint.verify.checks import RANKS_RTOL, check_ranks
from distlint.verify.core import VerifyResult, compare_runs
from distlint.verify.report import render_text


def fp(total, numel=9, sample=None, **extra):
    """A fingerprint as the probe writes it (sum, sum of squares, sampled values)."""
    sample = sample if sample is not None else [total / numel] * 4
    return {"sum": total, "sq": total * total / numel + 1.0, "sample": sample, "numel": numel,
            "counted": numel, "stride": 1, "tensors": 2, "shapes": 7, "sharded": False,
            **extra}  # fmt: skip


def with_params(updates, prints, before=None):
    for u, p in zip(updates, prints):
        u["params"] = p
    if before is not None:
        updates[0]["params_before"] = before
    return updates


def run_of(tmp_path, per_rank_prints, befores=(None, None), name="many", **kw):
    per_rank = [  # each rank its own inputs (distinct checksums): a sharded loader
        with_params(
            ups([1.0, 0.9, 0.8, 0.7], checksums=[[10.0 * r + i, i * i] for i in range(4)]),
            prints,
            before,
        )
        for r, (prints, before) in enumerate(zip(per_rank_prints, befores))
    ]
    return make_run(tmp_path, name, len(per_rank), per_rank, **kw)


def test_equal_fingerprints_pass(tmp_path):
    prints = [fp(1.0 + i) for i in range(4)]
    c = check_ranks(run_of(tmp_path, [prints, [dict(p) for p in prints]]))
    assert c.status == "pass" and c.data["compared_updates"] == 4
    assert "2 ranks hold the same parameters after each of 4 updates" in c.detail


def test_a_difference_within_the_tolerance_passes(tmp_path):
    a = [fp(1.0 + i) for i in range(4)]
    b = [fp((1.0 + i) * (1 + RANKS_RTOL / 10)) for i in range(4)]
    assert check_ranks(run_of(tmp_path, [a, b])).status == "pass"


def test_drift_fails_at_the_first_update_naming_rank_and_amount(tmp_path):
    a = [fp(1.0 + i) for i in range(4)]
    b = [fp(1.0), fp(2.0), fp(3.01), fp(4.05)]  # drifts from update 3
    c = check_ranks(run_of(tmp_path, [a, b], befores=(fp(0.5), fp(0.5))))
    assert c.status == "fail"
    assert c.data["first_update"] == 3 and c.data["ranks"] == [1]
    assert c.data["before_first_update"] is False
    assert 0.01 / 3.01 <= c.data["rel_diff"] < 0.01  # at least a sampled value's difference
    assert "after update 3 the ranks hold different parameters: rank 1 by 0.00" in c.detail
    assert "2 separate trainings" in c.detail
    # Accelerate (records_by_hand's default source): its own words
    assert "accelerator.prepare" in c.detail and "accelerator.backward(loss)" in c.detail


def test_advice_in_the_scripts_framework(tmp_path):
    a, b = [fp(1.0)] * 4, [fp(2.0)] * 4
    ddp = run_of(tmp_path, [a, b], name="ddp", rank_kw={0: {"source": "init_process_group"}})
    assert "not model.module" in check_ranks(ddp).detail
    assert "accelerator" not in check_ranks(ddp).detail
    fabric = run_of(
        tmp_path,
        [a, b],
        name="fabric",
        rank_kw={0: {"modules": ["lightning.fabric"], "source": "fabric"}},  # fmt: skip
    )
    assert "fabric.setup" in check_ranks(fabric).detail


def test_different_before_the_first_update_blames_the_initialization(tmp_path):
    a, b = [fp(1.0)] * 4, [fp(2.0)] * 4
    c = check_ranks(run_of(tmp_path, [a, b], befores=(fp(0.5), fp(0.7))))
    assert c.status == "fail" and c.data["first_update"] == 1
    assert c.data["before_first_update"] is True
    assert "already differed before the first update" in c.detail


def test_skips(tmp_path):
    no_prints = make_run(tmp_path, "old", 2, [ups([1.0, 0.9]), ups([1.0, 0.9])])
    assert check_ranks(no_prints).status == "skip"
    assert "no parameter fingerprints" in check_ranks(no_prints).detail
    one = make_run(tmp_path, "one", 1, [with_params(ups([1.0, 0.9]), [fp(1.0), fp(2.0)])])
    assert check_ranks(one).status == "skip"
    sharded = run_of(tmp_path, [[fp(1.0, sharded=True)] * 4, [fp(2.0, sharded=True)] * 4], name="s")
    assert "sharded" in check_ranks(sharded).detail and check_ranks(sharded).status == "skip"
    shapes = run_of(tmp_path, [[fp(1.0)] * 4, [fp(2.0, numel=5)] * 4], name="mp")
    assert (
        check_ranks(shapes).status == "skip"
        and "different parameters" in check_ranks(shapes).detail
    )


def test_drifted_ranks_leave_the_loss_unjudged(tmp_path):
    one = make_run(tmp_path, "one", 1, [ups([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])])
    a, b = [fp(1.0 + i) for i in range(4)], [fp(1.0 + 2 * i) for i in range(4)]
    many = run_of(tmp_path, [a, b])
    by_id = {c.id: c for c in checks.run_all(one, many, exact=False)}
    assert by_id["ranks"].status == "fail"
    assert by_id["loss"].status == "skip"
    assert "2 separate trainings" in by_id["loss"].detail
    result = VerifyResult("train.py", [], 2, 20, False, one=one, many=many)
    compare_runs(result)
    assert any("2 separate trainings, and the table sizes one" in n for n in result.notes)
    assert "FAIL  ranks agree" in render_text(result)
    agree = run_of(tmp_path, [a, [dict(p) for p in a]], name="agree")
    assert (
        "separate trainings"
        not in {c.id: c for c in checks.run_all(one, agree, False)}["loss"].detail
    )


@pytest.mark.verify
@pytest.mark.slow
@pytest.mark.usefixtures("linux_proc")
def test_a_real_ddp_run_through_model_module_drifts_apart():
    """The real probe on a real 2-process DDP run: `model.module(x)` skips the all-reduce."""
    script = os.path.join(os.path.dirname(__file__), "ddp_module_forward.py")
    done = subprocess.run(
        [sys.executable, "-m", "distlint.verify", "--device", "cpu", "--format", "json", script],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    report = json.loads(done.stdout)
    ranks = {c["id"]: c for c in report["checks"]}["ranks"]
    assert ranks["status"] == "fail", ranks
    assert ranks["data"]["first_update"] == 1 and ranks["data"]["ranks"] == [1]
    assert ranks["data"]["before_first_update"] is False  # DDP broadcast rank 0's init
    assert "not model.module" in ranks["detail"]
    assert done.returncode == 1
