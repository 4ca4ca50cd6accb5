"""The runtime confirmation of DL204, DL205, DL304, DL401 and DL402 (distlint.verify.confirm),
from records built by hand: each check's verdict both ways, its reason, and when it is shown."""

import json
from pathlib import Path

import pytest
from records_by_hand import summarize

from distlint.model import Finding, Range
from distlint.verify import confirm
from distlint.verify.core import VerifyResult, _many_env, compare_runs
from distlint.verify.probe import distlint_probe_schema as schema
from distlint.verify.report import render_json, render_text


def step(n, loaders=(1,)):
    return {
        "kind": "step",
        "n": n,
        "opt": 0,
        "lrs": [0.1],
        "samples": 8,
        "numel": 80,
        "checksum": [float(n), float(n * n)],
        "forwards": 1,
        "untrained": 0,
        "loaders": list(loaders),
    }


def loss(source="accelerator.backward"):
    return {"kind": "loss", "value": 1.0, "factor": 1.0, "source": source}


def batch(loader, size=8):
    return {"kind": "batch", "loader": loader, "size": size, "checksum": [1.0, 1.0]}


def a_pass(loader, n=1, dataset=64, batches=4):
    return {
        "kind": "pass",
        "loader": loader,
        "n": n,
        "dataset": dataset,
        "batches": batches,
        "grad": True,
        "updates": 0,
    }


def order(n, prefix, sampler=1, cls="DistributedSampler", shuffle=True, epoch=0, updates=0):
    return {
        "kind": "order",
        "sampler": sampler,
        "cls": cls,
        "n": n,
        "shuffle": shuffle,
        "epoch": epoch,
        "prefix": prefix,
        "updates": updates,
    }


def collective(api, out, where="train.py:40", offset=10):
    return {
        "kind": "collective",
        "api": api,
        "given": out,
        "out": out,
        "where": where,
        "offset": offset,
        "updates": 4,
    }


def write(folder, rank, world, events, *, source="accelerate", gas=1):
    lines = [
        {
            "kind": "header",
            "schema": schema.SCHEMA_VERSION,
            "pid": 100 + rank,
            "ppid": 1,
            "argv": ["train.py"],
            "env": {"RANK": str(rank), "WORLD_SIZE": str(world)},
        },
        {
            "kind": "config",
            "source": source,
            "num_processes": world,
            "process_index": rank,
            "mixed_precision": "no",
            "gradient_accumulation_steps": gas,
        },
        *events,
        {"kind": "stop", "updates": 0, "reason": "max_steps"},
    ]
    with open(folder / f"{100 + rank}.jsonl", "w", encoding="utf-8") as f:
        for i, line in enumerate(lines):
            f.write(json.dumps({"t": 1000.0 + i * 0.01, **line}) + "\n")


def runs(tmp_path, events_of, **kw):
    """(1-process run, 2-process run); events_of(rank, world) -> that rank's records."""
    out = []
    for world in (1, 2):
        folder = tmp_path / f"run{world}"
        folder.mkdir(parents=True)
        for rank in range(world):
            write(folder, rank, world, events_of(rank, world), **kw)
        out.append(summarize(folder, world))
    return out


def training(updates, backwards_per_update=1, source="accelerator.backward", extra=()):
    events = [a_pass(1)]
    for n in range(1, updates + 1):
        events += [batch(1), loss(source)] * backwards_per_update + list(extra) + [step(n)]
    return events


# -- DL204 -------------------------------------------------------------------------------------


def test_accumulation_configured_but_every_backward_steps_fails(tmp_path):
    one, many = runs(tmp_path, lambda r, w: training(8 // w), gas=4)
    check = confirm.check_accumulation(one, many)
    assert (check.status, check.rule, check.confirms) == ("fail", "DL204", True)
    assert "gradient_accumulation_steps=4" in check.detail
    assert "2 processes: 4 updates for 4 backward calls on each rank" in check.detail
    assert "1 process: 8 updates for 8 backward calls" in check.detail
    assert "never entered" in check.detail and "accelerator.accumulate(model)" in check.detail


def test_accumulation_done_passes(tmp_path):
    enter = {"kind": "accumulate", "updates": 0}
    one, many = runs(
        tmp_path, lambda r, w: training(4 // w, backwards_per_update=4, extra=[enter]), gas=4
    )
    check = confirm.check_accumulation(one, many)
    assert (check.status, check.confirms) == ("pass", False)
    assert check.data["runs"]["2 processes"]["accumulate"] == [2, 2]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"gas": 1}, "gradient_accumulation_steps=1"),
        ({"source": "torch.distributed"}, "no Accelerator"),
    ],
)
def test_accumulation_not_judged_without_its_ingredients(tmp_path, kw, why):
    one, many = runs(tmp_path, lambda r, w: training(4), **kw)
    check = confirm.check_accumulation(one, many)
    assert check.status == "skip" and why in check.detail


# -- DL205 -------------------------------------------------------------------------------------


def test_loss_backward_with_accumulation_fails(tmp_path):
    one, many = runs(tmp_path, lambda r, w: training(2, 2, source="Tensor.backward"), gas=2)
    check = confirm.check_backward(one, many)
    assert (check.status, check.rule, check.confirms) == ("fail", "DL205", True)
    assert "12 of 12 backward calls in both runs were loss.backward()" in check.detail
    assert "division by gradient_accumulation_steps=2" in check.detail
    assert "`accelerator.backward(loss)`" in check.detail


def test_loss_backward_with_a_grad_scaler_fails(tmp_path):
    amp = {"kind": "amp", "scaler": True}
    one, many = runs(tmp_path, lambda r, w: [amp] + training(2, source="Tensor.backward"))
    check = confirm.check_backward(one, many)
    assert check.status == "fail" and "fp16 gradient scaler" in check.detail


def test_loss_backward_without_accumulation_or_fp16_warns(tmp_path):
    one, many = runs(tmp_path, lambda r, w: training(2, source="Tensor.backward"))
    check = confirm.check_backward(one, many)
    assert (check.status, check.confirms) == ("warn", True)
    assert "the gradients are the same in this setup" in check.detail


def test_torch_clipping_of_a_prepared_model_is_reported(tmp_path):
    clip = {"kind": "clip", "api": "torch.nn.utils.clip_grad_norm_", "where": "train.py:28"}
    one, many = runs(tmp_path, lambda r, w: training(2, extra=[clip]))
    check = confirm.check_backward(one, many)
    assert check.status == "warn"
    assert "torch.nn.utils' own (at train.py:28)" in check.detail
    assert "`accelerator.clip_grad_norm_`" in check.detail


def test_backward_through_the_framework_passes_and_plain_torch_is_not_judged(tmp_path):
    one, many = runs(tmp_path, lambda r, w: training(2))
    assert confirm.check_backward(one, many).status == "pass"
    one, many = runs(
        tmp_path / "t",
        lambda r, w: training(2, source="Tensor.backward"),
        source="torch.distributed",
    )
    assert confirm.check_backward(one, many).status == "skip"


# -- DL304 -------------------------------------------------------------------------------------


def epochs(prefixes, **kw):
    events = []
    for n, prefix in enumerate(prefixes, start=1):
        events += [a_pass(1, n), order(n, prefix, updates=n - 1, **kw), batch(1), loss(), step(n)]
    return events


def peeked_epochs(first, second):
    """pytorch/examples' multigpu_torchrun: each epoch peeks at a batch (`next(iter(loader))`)
    before `set_epoch`, so the peek repeats the order of the epoch before it."""
    events, n = [], 0
    for epoch, prefix in enumerate((first, second)):
        events += [a_pass(1, 2 * epoch + 1), order(2 * epoch + 1, first, updates=n), batch(1)]
        events += [a_pass(1, 2 * epoch + 2), order(2 * epoch + 2, prefix, updates=n)]
        for _ in range(3):
            n += 1
            events += [batch(1), loss(), step(n)]
    return events


def test_same_order_every_epoch_fails(tmp_path):
    one, many = runs(tmp_path, lambda r, w: epochs([[r, 5, 2, 9], [r, 5, 2, 9]]))
    check = confirm.check_epoch_order(one, many)
    assert (check.status, check.rule, check.confirms) == ("fail", "DL304", True)
    assert (
        "rank 0: the DistributedSampler's epoch 2 began with the same 4 indices as epoch 1"
        in check.detail
    )
    assert "its `epoch` stayed 0" in check.detail and "(and 1 more rank)" in check.detail
    assert "The 1-process run repeated its order too" in check.detail
    assert "`sampler.set_epoch(epoch)`" in check.detail


def test_reshuffled_epochs_pass(tmp_path):
    one, many = runs(tmp_path, lambda r, w: epochs([[r, 5, 2, 9], [7, r, 1, 3]]))
    check = confirm.check_epoch_order(one, many)
    assert (check.status, check.confirms) == ("pass", False)


def test_a_peek_at_the_next_epoch_is_not_an_epoch(tmp_path):
    one, many = runs(tmp_path, lambda r, w: peeked_epochs([r, 5, 2, 9], [7, r, 1, 3]))
    assert confirm.check_epoch_order(one, many).status == "pass"
    one, many = runs(tmp_path / "bad", lambda r, w: peeked_epochs([r, 5, 2, 9], [r, 5, 2, 9]))
    check = confirm.check_epoch_order(one, many)
    assert (
        check.status == "fail"
        and "epoch 2 began with the same 4 indices as epoch 1" in check.detail
    )


def test_epoch_order_says_skip_when_the_run_stopped_in_epoch_one(tmp_path):
    one, many = runs(tmp_path, lambda r, w: epochs([[r, 5, 2, 9]]))
    check = confirm.check_epoch_order(one, many)
    assert check.status == "skip" and "`--epochs 2`" in check.detail
    # a sampler that does not shuffle repeats its order by design: not judged
    one, many = runs(tmp_path / "s", lambda r, w: epochs([[0, 1], [0, 1]], shuffle=False))
    assert confirm.check_epoch_order(one, many).status == "skip"


# -- DL401 / DL402 -----------------------------------------------------------------------------


def with_evaluation(rank, world, gathers=()):
    events = training(2)
    events += [a_pass(2, dataset=30, batches=2), batch(2), batch(2, 8 if world == 2 else 8)]
    if world == 1:
        events += [batch(2, 8), batch(2, 6)]
    return events + list(gathers)


def test_evaluation_without_gather_or_reduce_fails(tmp_path):
    one, many = runs(tmp_path, with_evaluation)
    local, dup = confirm.check_evaluation(one, many)
    assert (local.status, local.rule, local.confirms) == ("fail", "DL401", True)
    assert "rank 0 evaluated 16 of the 30 samples (1 process: 30 of 30)" in local.detail
    assert "`accelerator.gather_for_metrics(...)`" in local.detail
    assert dup.status == "skip" and "nothing was gathered" in dup.detail


def test_gather_keeps_the_padding_and_fails(tmp_path):
    def events_of(rank, world):
        n = 16 if world == 2 else 8
        return with_evaluation(rank, world, [collective("accelerator.gather", n)] * 2)

    one, many = runs(tmp_path, events_of)
    local, dup = confirm.check_evaluation(one, many)
    assert local.status == "pass" and "accelerator.gather" in local.detail
    assert (dup.status, dup.rule, dup.confirms) == ("fail", "DL402", True)
    assert (
        "accelerator.gather at train.py:40 returned 32 samples for an evaluation set of 30"
        in dup.detail
    )
    assert "2 were the padding" in dup.detail and "gather_for_metrics" in dup.detail


def test_gather_for_metrics_passes_both(tmp_path):
    def events_of(rank, world):
        return with_evaluation(
            rank,
            world,
            [
                collective("accelerator.gather_for_metrics", 16),
                collective("accelerator.gather_for_metrics", 14),
            ],
        )

    one, many = runs(tmp_path, events_of)
    local, dup = confirm.check_evaluation(one, many)
    assert (local.status, dup.status) == ("pass", "pass")
    assert "returned 30 samples for an evaluation set of 30: no duplicates" in dup.detail


def test_a_second_training_loader_is_not_an_evaluation(tmp_path):
    def events_of(rank, world):
        events = training(3)  # loader 1 feeds 3 updates, loader 2 one: both are trained on
        return events + [a_pass(2, dataset=30), batch(2), loss(), step(4)]

    one, many = runs(tmp_path, events_of)
    assert [c.status for c in confirm.check_evaluation(one, many)] == ["skip", "skip"]


def test_two_gathers_on_one_line_are_two_call_sites(tmp_path):
    """accelerate's old nlp_example: `gather(predictions) == gather(labels)` on one line, 32
    samples over 2 processes: no padding, and no duplicates to report."""

    def events_of(rank, world):
        events = training(2) + [a_pass(2, dataset=32, batches=2)]
        for _ in range(2 if world == 2 else 4):
            events += [batch(2)]
            events += [collective("accelerator.gather", 8 * world, offset=o) for o in (10, 24)]
        return events

    one, many = runs(tmp_path, events_of)
    dup = confirm.check_evaluation(one, many)[1]
    assert (
        dup.status == "warn" and "returned 32 samples, as many as the evaluation set" in dup.detail
    )


def test_plain_all_gather_of_padded_shards_fails_with_torch_advice(tmp_path):
    def events_of(rank, world):
        return with_evaluation(rank, world, [collective("dist.all_gather", 8 * world)] * 2)

    one, many = runs(tmp_path, events_of, source="torch.distributed")
    local, dup = confirm.check_evaluation(one, many)
    assert local.status == "pass" and dup.status == "fail"
    assert "dist.all_gather at train.py:40 returned 32 samples" in dup.detail
    assert "DistributedSampler pads" in dup.detail


def test_reduced_counts_pass_and_no_evaluation_is_a_skip(tmp_path):
    one, many = runs(
        tmp_path, lambda r, w: with_evaluation(r, w, [collective("dist.all_reduce", 1)])
    )
    local, dup = confirm.check_evaluation(one, many)
    assert local.status == "pass" and "dist.all_reduce" in local.detail
    assert dup.status == "skip"
    one, many = runs(tmp_path / "n", lambda r, w: training(2))
    local, dup = confirm.check_evaluation(one, many)
    assert local.status == dup.status == "skip"
    assert (
        "no evaluation pass ran: verify stopped the 2 processes run after 2 updates" in local.detail
    )


# -- shown when there is something to say; joined with the static findings --------------------


def finding(code, line=28):
    return Finding("train.py", Range(line, 1, line, 20), code, "rule", "message")


def test_checks_are_shown_for_a_static_finding_or_a_hazard_seen(tmp_path):
    one, many = runs(tmp_path, lambda r, w: epochs([[r, 5, 2, 9], [7, r, 1, 3]]))
    assert confirm.run_all(one, many, None) == []  # all well, nothing asked
    shown = confirm.run_all(one, many, {"DL304", "DL401"})
    assert [(c.rule, c.status) for c in shown] == [("DL304", "pass"), ("DL401", "skip")]
    one, many = runs(tmp_path / "bad", lambda r, w: epochs([[r, 5, 2, 9], [r, 5, 2, 9]]))
    assert [c.rule for c in confirm.run_all(one, many, None)] == ["DL304"]


def test_report_confirms_the_static_finding_in_text_and_json(tmp_path):
    one, many = runs(tmp_path, lambda r, w: epochs([[r, 5, 2, 9], [r, 5, 2, 9]]))
    result = VerifyResult("train.py", [], 2, 20, False, one=one, many=many)
    result.static_findings = [finding("DL304")]
    compare_runs(result)
    text = render_text(result)
    assert (
        "FAIL  epoch order  [DL304 sampler-epoch-not-set: confirms the static finding at train.py:28]"
        in text
    )
    check = next(c for c in json.loads(render_json(result))["checks"] if c["rule"] == "DL304")
    assert (check["status"], check["static"], check["rule_name"]) == (
        "fail",
        "confirmed",
        "sampler-epoch-not-set",
    )
    assert result.exit_code == 1


def test_epochs_bound_follows_the_static_findings():
    result = VerifyResult("train.py", [], 2, 20, False, static_findings=[finding("DL401", 40)])
    env = _many_env(result, 20, None)
    assert env == {schema.ENV_MAX_STEPS: "0", schema.ENV_EPOCHS: "2"}
    assert "DL401 at train.py:40" in result.notes[0]
    assert _many_env(result, 20, 0) == {schema.ENV_MAX_STEPS: "20"}  # --epochs 0: off
    plain = VerifyResult("train.py", [], 2, 20, False, static_findings=[finding("DL201")])
    assert _many_env(plain, 20, None) == {schema.ENV_MAX_STEPS: "20"} and not plain.notes


# -- recorded runs of the rule fixtures (tests/verify/record_runs.py): each verdict both ways ---


def replay(case):
    """The recorded case with the static findings `distlint check` gives its script."""
    from verify_helpers import VERIFY_FIXTURES, load_case

    from distlint.api import Config, lint_text

    meta = json.loads((Path(__file__).parent / "data" / case / "meta.json").read_text())
    path = VERIFY_FIXTURES / meta["script"]
    findings = lint_text(path.read_bytes(), str(path), Config(select=("ALL",))).findings
    return load_case(case, static_findings=list(findings))


def verdicts(result, rules):
    one, many = result.one, result.many
    every = [
        confirm.check_accumulation(one, many),
        confirm.check_backward(one, many),
        confirm.check_epoch_order(one, many),
        *confirm.check_evaluation(one, many),
    ]
    return {c.rule: c.status for c in every if c.rule in rules}


@pytest.mark.parametrize(
    ("case", "rule", "status", "static"),
    [
        ("dl204_bad", "DL204", "fail", "confirmed"),  # fixtures/DL204/bad.py
        ("dl205_bad", "DL205", "warn", "confirmed"),  # fp16 asked, but no scaler on CPU
        ("dl205_accumulation", "DL205", "fail", "confirmed"),  # the division by 2 skipped
        ("dl304_bad", "DL304", "fail", "confirmed"),
        ("eval_local_metric", "DL401", "fail", "confirmed"),
        ("eval_gather", "DL402", "fail", "confirmed"),
    ],
)
def test_recorded_mistake_is_confirmed(case, rule, status, static):
    result = replay(case)
    shown = {c.rule: c for c in result.checks}
    assert shown[rule].status == status and shown[rule].static == static
    assert result.exit_code == (1 if status == "fail" else 0)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("dl204_fixed", {"DL204": "pass", "DL205": "pass"}),
        ("dl205_fixed", {"DL205": "pass"}),
        ("dl304_fixed", {"DL304": "pass"}),
        ("eval_gather", {"DL401": "pass"}),  # gathered, with duplicates: DL402's, not DL401's
        ("eval_gather_for_metrics", {"DL401": "pass", "DL402": "pass", "DL304": "pass"}),
    ],
)
def test_recorded_fixed_twin_passes_and_says_nothing_unasked(case, expected):
    result = replay(case)
    assert verdicts(result, set(expected)) == expected
    if case != "eval_gather":
        assert not [c for c in result.checks if c.rule in confirm_rules()]
        assert result.exit_code == 0


def confirm_rules():
    return {"DL204", "DL205", "DL304", "DL401", "DL402"}


def test_recorded_numbers_of_the_evaluation_and_epoch_runs():
    local = replay("eval_local_metric")
    evaluation = next(c for c in local.checks if c.rule == "DL401")
    assert "rank 0 evaluated 16 of the 30 samples (1 process: 30 of 30)" in evaluation.detail
    gather = next(c for c in replay("eval_gather").checks if c.rule == "DL402")
    assert "returned 32 samples for an evaluation set of 30: 2 were the padding" in gather.detail
    order = next(c for c in replay("dl304_bad").checks if c.rule == "DL304")
    assert "its `epoch` stayed 0" in order.detail
    backward = next(c for c in replay("dl205_accumulation").checks if c.rule == "DL205")
    assert "the division by gradient_accumulation_steps=2 was skipped (gradients ×2)" in (
        backward.detail
    )
    accumulation = next(c for c in replay("dl204_bad").checks if c.rule == "DL204")
    assert "2 processes: 8 updates for 8 backward calls on each rank" in accumulation.detail


@pytest.mark.slow
@pytest.mark.verify
@pytest.mark.usefixtures("linux_proc")
def test_real_run_confirms_gather_duplicates_after_going_on_to_epoch_two(tmp_path):
    """The whole route: `check --verify` sees DL402 statically, so the 2-process run goes on to
    its second epoch (--epochs 2 by itself), evaluates at the end of the first, and the probe's
    pass, gather and order records confirm the duplicates (about 30 s here)."""
    import shutil
    import subprocess
    import sys

    from verify_helpers import fixture_script

    exe = shutil.which("distlint")
    argv = [exe] if exe else [sys.executable, "-m", "distlint"]
    proc = subprocess.run(
        [*argv, "check", "--verify", "--device", "cpu", "--format", "json"]
        + [fixture_script("eval_gather.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert any("--epochs 2" in n and "DL402" in n for n in report["notes"])
    shown = {c["rule"]: c for c in report["checks"]}
    assert shown["DL402"]["status"] == "fail" and shown["DL402"]["static"] == "confirmed"
    assert "returned 32 samples for an evaluation set of 30" in shown["DL402"]["detail"]
    assert "DL401" not in shown  # gathered: nothing to say unasked
    many = report["runs"]["many"]
    assert len(many["per_update"]) == 5  # 4 updates of epoch 1, stopped at epoch 2's first


# -- the probe's side, in-process (no run) ------------------------------------------------------


@pytest.fixture
def probe_confirm(monkeypatch):
    from distlint.verify import launch

    monkeypatch.syspath_prepend(launch.PROBE_DIR)
    import distlint_probe_confirm

    return distlint_probe_confirm


class FakeRecorder:
    def __init__(self):
        self.records = []
        self.enabled, self.stopping, self.updates = True, False, 0

    def emit(self, kind, **data):
        self.records.append({"kind": kind, **data})

    def note(self, message):
        self.records.append({"kind": "note", "message": message})


def test_samples_returned_by_a_gather(probe_confirm):
    import torch

    t = torch.zeros
    assert probe_confirm.first_dim(t(5, 3)) == 5
    assert probe_confirm.first_dim((t(4), t(4))) == 4  # (predictions, labels)
    assert probe_confirm.first_dim({"logits": t(6, 2)}) == 6
    assert probe_confirm.first_dim([t(2), t(3)], 1) == 5  # all_gather's output list
    assert probe_confirm.first_dim(t(())) == 1 and probe_confirm.first_dim("x") is None


def test_sampler_order_is_recorded_without_changing_it(probe_confirm):
    from distlint_probe_patching import Patcher

    rec = FakeRecorder()
    confirm_ = probe_confirm.Confirm(rec, Patcher(rec.note))
    info = {"sampler": 1, "cls": "RandomSampler", "n": 1, "shuffle": True, "epoch": None}
    indices = list(range(40, 0, -1))
    assert list(probe_confirm._Tap(confirm_, iter(indices), info)) == indices
    prefixes = [r["prefix"] for r in rec.records if r["kind"] == "order"]
    assert [len(p) for p in prefixes] == [4, 8, 16, 32]  # nothing new at the end: 32 kept
    assert prefixes[-1] == indices[:32]
    rec.records.clear()
    assert list(probe_confirm._Tap(confirm_, iter([3, 1, 2]), info)) == [3, 1, 2]
    assert [(r["prefix"], r["finished"]) for r in rec.records] == [([3, 1, 2], True)]


def test_epochs_bound_counts_the_passes_updates_were_made_on(probe_confirm, monkeypatch):
    from distlint_probe_patching import Patcher

    monkeypatch.setenv(schema.ENV_EPOCHS, "2")
    rec = FakeRecorder()
    confirm_ = probe_confirm.Confirm(rec, Patcher(rec.note))
    assert rec.epoch_bound == confirm_.reached_epoch
    confirm_.loader_passes[7] = 2  # a peek, then the first epoch
    assert not confirm_.reached_epoch([7]) and not confirm_.reached_epoch([7])
    confirm_.loader_passes[7] = 4  # the next peek, then the second epoch
    assert confirm_.reached_epoch([7])
