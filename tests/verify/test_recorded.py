"""Every fixture case, replayed from its recorded run (tests/verify/data, see record_runs.py):
the verdict and the key numbers of the report, without starting a process."""

import json
import shlex

import pytest
from verify_helpers import load_case

from distlint.model import Finding, Range
from distlint.verify.report import render_json, render_text


def finding(code, line=10):
    return Finding("fixtures/verify/x.py", Range(line, 1, line, 20), code, "rule", "message")


def by_id(result):
    return {c.id: c for c in result.checks}


def test_correct_script_is_comparable():
    r = load_case("correct")
    assert r.exit_code == 0
    c = by_id(r)
    assert {k: v.status for k, v in c.items()} == {
        "batch": "warn",
        "sharding": "pass",
        "ranks": "skip",  # recorded before the probe fingerprinted parameters
        "lr": "pass",
        "schedule": "skip",
        "seeding": "pass",
        "data": "pass",
        "loss": "pass",
    }
    assert (r.one.global_batch, r.many.global_batch) == (8, 16)
    assert (len(r.one.curve), len(r.many.curve)) == (20, 10)  # planned from the samples seen
    assert r.one.samples_seen == r.many.samples_seen == 160
    assert r.one.launcher == r.many.launcher == "torchrun"  # the same launcher, 1 process
    assert c["lr"].data["scaling"] == "linear"
    assert [x.rank for x in r.many.records.ranks] == [0, 1]


def test_json_has_per_update_lrs_batches_and_losses():
    report = json.loads(render_json(load_case("correct")))
    per_update = report["runs"]["many"]["per_update"]
    assert len(per_update) == 10
    assert per_update[0]["batch"] == 16 and per_update[-1]["samples_seen"] == 160
    assert per_update[0]["lrs"] == [0.1] and per_update[0]["loss"] > per_update[-1]["loss"]


def test_exact_matches_step_by_step_and_labels_the_scaled_batch():
    r = load_case("correct_exact")
    assert r.exit_code == 0
    loss = by_id(r)["loss"]
    assert loss.data["compared_updates"] == 10 and loss.data["max_rel_diff"] <= 1e-5
    assert r.one.global_batch == r.many.global_batch == 16
    assert by_id(r)["lr"].data["scaling"] == "linear"  # judged on the script's own LRs
    assert "(x N, --exact)" in render_text(r)


def test_exact_does_not_say_x_n_when_nothing_was_scaled():
    r = load_case("correct")  # not --exact
    assert "x N" not in render_text(r)


def test_the_report_shows_each_runs_exact_command_in_the_order_made():
    r = load_case("correct")
    text = render_text(r)
    lines = text.splitlines()
    at = lines.index("Commands (each run in its own scratch copy of your working directory)")
    assert lines[at + 1] == "  2 processes: " + shlex.join(r.many.command)
    assert lines[at + 2] == "  1 process:   " + shlex.join(r.one.command)


def test_unscaled_lr_confirms_the_static_dl201():
    r = load_case("unscaled_lr", static_findings=[finding("DL201", 30)])
    assert r.exit_code == 1
    lr = by_id(r)["lr"]
    assert lr.status == "fail" and lr.static == "confirmed"
    assert lr.detail.startswith("global batch ×2, peak LR unchanged (0.05)")
    assert by_id(r)["loss"].status == "fail"  # the 2-process curve lags at equal samples
    text = render_text(r)
    assert "Static findings cited" in text and "x.py:30: DL201" in text


def test_seed_only_torch_confirms_dl101():
    r = load_case("seed_only_torch", static_findings=[finding("DL101")])
    seeding = by_id(r)["seeding"]
    assert r.exit_code == 1 and seeding.status == "fail" and seeding.static == "confirmed"
    assert seeding.data["unseeded_used"] == ["numpy"] and "torch" not in seeding.data["unseeded"]
    assert by_id(r)["data"].status == "warn"


def test_batch_logged_as_total_confirms_dl301():
    r = load_case("batch_logged_as_total", static_findings=[finding("DL301")])
    batch = by_id(r)["batch"]
    assert batch.status == "warn" and batch.static == "confirmed"
    assert batch.data["script_batch_size"] == 8 and batch.data["global_n"] == 16


def test_gradient_accumulation_through_accelerate():
    r = load_case("grad_accum")
    assert r.exit_code == 0
    assert r.one.launcher == r.many.launcher == "accelerate"
    assert (r.one.accumulation, r.many.accumulation) == (2, 2)
    assert (r.one.global_batch, r.many.global_batch) == (8, 16)  # 4 per device × 2 forwards


def test_plain_ddp_recorded_through_its_process_group():
    r = load_case("plain_ddp")
    assert r.exit_code == 0 and r.many.config("source") == "torch.distributed"
    assert by_id(r)["seeding"].data["seeding_calls"] == [
        "numpy.random.seed",
        "random.seed",
        "torch.manual_seed",
    ]


def test_token_stream_without_a_dataloader():
    """nanoGPT-style: batches built by hand, accumulation divided by the world size, loss / accum,
    per-rank seeds, an evaluation under no_grad before training."""
    r = load_case("token_stream")
    assert r.exit_code == 0
    c = by_id(r)
    # the global batch is held constant: 4 × 4 forwards on 1 process, 4 × 2 × 2 on 2
    assert (r.one.global_batch, r.many.global_batch) == (16, 16)
    assert (r.one.accumulation, r.many.accumulation) == (4, 2)
    assert r.one.samples_seen == r.many.samples_seen == 160
    assert (len(r.one.curve), len(r.many.curve)) == (10, 10)
    assert c["batch"].status == "pass" and c["lr"].status == "pass"
    assert c["lr"].data["batch_ratio"] == 1
    # the loss divided by 4 (1 process) and by 2 (2 processes) reads as the same loss
    f1 = {f for u in r.one.rank0.updates for f in u.factors}
    fn = {f for u in r.many.rank0.updates for f in u.factors}
    assert f1 == {0.25} and fn == {0.5}
    assert c["loss"].status == "pass" and 2.0 < c["loss"].data["end_loss_1"] < 4.5
    assert c["seeding"].status == "info" and "torch" in c["seeding"].data["per_rank"]
    assert c["sharding"].status == "pass" and c["schedule"].status == "pass"
    assert c["data"].status == "info"  # different windows per rank, as intended


def test_torchrun_only_script_runs_through_torchrun_in_scratch_folders():
    """Reads LOCAL_RANK unconditionally, writes and resumes snapshot.pt in its working folder."""
    r = load_case("torchrun_only")
    assert r.exit_code == 0
    assert r.one.launcher == "torchrun" and r.one.rank0.env_rank == 0
    # each run started from scratch: no run resumed from the other's snapshot
    for run in r.runs:
        assert "Resuming" not in run.outcome.output_tail(400)
    assert r.one.samples_seen == r.many.samples_seen == 160


def test_peek_and_evaluation_before_training_are_not_counted():
    r = load_case("peek_and_eval")
    assert r.exit_code == 0
    assert r.many.per_device_batch == 8 and r.many.global_batch == 16 and r.one.global_batch == 8
    assert by_id(r)["lr"].status == "pass" and by_id(r)["lr"].data["batch_ratio"] == 2
    assert any("not counted as trained" in n for n in r.many.notes)
    # cross-checked with the DataLoader batches: the peek and the evaluations were handed out
    assert any("handed out 312 samples" in n and "80 were trained on" in n for n in r.many.notes)


def test_unsharded_loader_is_a_dl302_fail_and_confirms_nothing_else():
    r = load_case("unsharded_loader", static_findings=[finding("DL201"), finding("DL302")])
    c = by_id(r)
    assert r.exit_code == 1
    assert c["sharding"].status == "fail" and c["sharding"].static == "confirmed"
    assert "unsharded_loader.py:19" in c["sharding"].detail
    assert c["sharding"].data["identical_updates"] == 10
    assert c["lr"].status == "skip" and c["lr"].static is None  # DL201 not confirmed
    assert c["batch"].status == "skip"


def test_lone_processes_are_refused():
    r = load_case("lone_processes")
    assert r.exit_code == 2 and r.one is None
    assert "each trained alone" in r.many.problems[0]
    assert "init_process_group" in r.many.problems[0]


def test_scheduler_counted_per_process_fails_dl202():
    r = load_case("scheduler_per_process", static_findings=[finding("DL202")])
    schedule = by_id(r)["schedule"]
    assert r.exit_code == 1 and schedule.status == "fail" and schedule.static == "confirmed"
    assert "the decay runs ×2 as fast per sample" in schedule.detail
    assert "len(train_dataloader) before prepare" in schedule.detail  # a prepared scheduler
    assert schedule.data["speed_ratio"] == pytest.approx(2, rel=0.15)
    # the source agrees: the lambda's length is the prepared (per-process) loader's
    assert schedule.data["static"]["agrees"] is True
    assert "Static facts: the scheduler at line 26 agrees" in schedule.detail


def test_constant_loss_is_a_skip():
    r = load_case("constant_loss")
    loss = by_id(r)["loss"]
    assert loss.status == "skip" and loss.data["constant"] == 1.0


def test_accelerate_launch_cpu_starts_one_process():
    r = load_case("accelerate_cpu_flag")
    assert r.exit_code == 2 and len(r.many.records.ranks) == 1
    assert "expected 2 ranks" in r.many.problems[0] and "--cpu" in r.many.problems[0]


def test_torchrun_without_accelerate_use_cpu_trains_twice_alone():
    r = load_case("torchrun_without_cpu_env")
    ranks = r.many.records.ranks
    assert r.exit_code == 2 and len(ranks) == 2 and {x.num_processes for x in ranks} == {1}
    assert "each trained alone" in r.many.problems[0]
    assert "ACCELERATE_USE_CPU=1" in r.many.problems[0]


def test_crash_on_rank_1_is_reported_with_its_error():
    r = load_case("faults_crash")
    first = r.many.failures[0]
    assert r.exit_code == 2 and first.rank == 1
    assert first.reason == "RuntimeError: injected crash on rank 1 after update 3"
    assert "faults.py" in first.detail


def test_sys_exit_on_rank_1_is_named_first():
    first = load_case("faults_exit").many.failures[0]
    assert first.rank == 1 and "exited" in first.reason and "after 3 of 10 updates" in first.reason


def test_segfault_names_the_rank_and_its_signal_first():
    r = load_case("faults_segv")
    first = r.many.failures[0]
    assert r.exit_code == 2 and first.rank == 1 and "SIGSEGV" in first.reason


def test_forked_child_in_its_own_session_is_killed_and_reported():
    r = load_case("faults_fork")
    assert r.exit_code == 0
    assert len(r.many.outcome.leftovers) == 1
    assert any("left behind by the script" in n for n in r.many.notes)


def test_helper_with_a_clean_environment_is_found_by_the_process_tree():
    r = load_case("faults_helper")
    assert r.exit_code == 0
    helpers = [i for i in r.many.outcome.leftovers.values() if "sleep" in i.get("cmdline", "")]
    assert len(helpers) == 1 and helpers[0]["found_by"] == "process tree"
    assert any("found by process tree" in n for n in r.many.notes)


def test_hang_ignoring_sigterm_is_named_and_killed():
    r = load_case("faults_sigterm")
    assert r.exit_code == 2 and r.many.outcome.timed_out
    assert [f.rank for f in r.many.failures if f.reason.startswith("hung")] == [1]
    assert any("ignored verify's SIGTERM; verify killed it with SIGKILL" in n for n in r.many.notes)
    assert "verify sent SIGTERM" in r.many.problems[-1]


def test_nlp_example_style_script():
    """accelerate's nlp_example shape: dict batches into model(**batch) returning an object,
    a scheduler after prepare, evaluation with grad enabled; its LR is not scaled."""
    r = load_case("accelerate_nlp_style", static_findings=[finding("DL201")])
    c = by_id(r)
    assert r.one.samples_seen == r.many.samples_seen == 160
    assert c["lr"].status == "fail" and c["lr"].static == "confirmed"
    assert c["sharding"].status == "pass"  # the dict inputs were checksummed
    assert c["schedule"].status == "warn"  # a 2-update warmup lasts twice the samples on 2
    assert any("not counted as trained" in n for n in r.many.notes + r.one.notes)


def test_exact_header_says_what_was_given_to_the_1_process_run():
    text = render_text(load_case("correct_exact"))
    assert (
        "(--exact: the 1-process run with the 2-process run's LR and per-device batch × 2)" in text
    )


def test_every_recorded_record_fits_the_shared_schema_and_the_probe_raised_nothing():
    """The probe wrote, and the reader accepted, every record of every recorded run: no record
    broke the schema (it would be dropped silently), no patch was skipped, no probe error."""
    from verify_helpers import DATA

    from distlint.verify.records import read_run

    ranks = 0
    for folder in sorted(DATA.glob("*/*/records")):
        run = read_run(str(folder))
        assert run.problems == [], folder
        for rank in run.ranks + run.others:
            ranks += 1
            assert rank.invalid == [], (folder, rank.invalid)
            assert not [n for n in rank.notes if n.startswith("probe error")], (folder, rank.notes)
            if rank.patches is not None:
                assert rank.patches["skipped"] == {}, (folder, rank.patches["skipped"])
    assert ranks >= 40


def test_every_check_names_a_rule_of_the_registry():
    """The checks' rule codes are the registry's (a renamed or removed rule would show as '?')."""
    from distlint.registry import by_code

    rules = by_code()
    seen = set()
    for case in ("correct", "unsharded_loader", "scheduler_per_process", "token_stream"):
        result = load_case(case)
        for check in result.checks:
            if check.rule is not None:
                assert check.rule in rules, check
                seen.add(check.rule)
        assert " ?]" not in render_text(result)
    assert seen == {"DL101", "DL201", "DL202", "DL301", "DL302"}


def test_the_table_counts_accumulation_and_its_lr_advice_follows_the_runs():
    """The table's rows are per forward; the LR advice depends on whether the script already
    keeps the global batch (token stream: accumulation divided by the world size) or grows it."""
    held = load_case("token_stream").table
    assert held["forwards_per_update"] == 2 and "global batch of 16 per update" in held["what"]
    assert held["lr_advice"].endswith("keep the LR")
    grown = load_case("unscaled_lr").table
    assert grown["what"] == "a DataLoader batch of 16 in all"
    assert grown["lr_advice"].endswith("then scale the LR, lr * accelerator.num_processes")
    plain = load_case("plain_ddp").table  # plain torch DDP: no Accelerator to name
    assert (
        "accelerator" not in plain["lr_advice"]
        and "lr * dist.get_world_size()" in plain["lr_advice"]
    )


def test_imagenet_example_style_divides_the_batch_by_the_world_size():
    """pytorch/examples imagenet/main.py shape: plain DDP, DistributedSampler, batch_size /
    world size (the global batch is kept), loss * loss_scale before backward, no seeding."""
    r = load_case("imagenet_ddp")
    c = by_id(r)
    assert r.exit_code == 1  # only the seeding fails: nothing is seeded
    assert (r.one.per_device_batch, r.many.per_device_batch) == (16, 8)
    assert (r.one.global_batch, r.many.global_batch) == (16, 16)
    assert (len(r.one.curve), len(r.many.curve)) == (10, 10)  # the same global batch: K updates
    assert c["batch"].status == "pass" and c["lr"].status == "pass"
    assert c["lr"].data["batch_ratio"] == 1 and c["sharding"].status == "pass"
    assert {f for u in r.many.rank0.updates for f in u.factors} == {128.0}  # the loss scale
    # Unseeded: the runs start from different weights, and the 2-process curve is below in
    # every window (a few %): said as a WARN that names the seeding as a possible cause.
    assert c["loss"].status == "warn" and 1.0 < c["loss"].data["end_loss_n"] < 2.5
    assert "see seeding" in c["loss"].detail
    assert c["seeding"].status == "fail" and c["seeding"].data["unseeded_used"] == ["torch"]
    assert c["data"].status == "warn" and "DistributedSampler" in c["data"].detail
    assert "Accelerator(" not in c["data"].detail  # plain DDP: no Accelerator to configure
    assert r.table["lr_advice"].endswith("keep the LR")


def test_timm_style_sqrt_lr_scaling_grad_scaler_and_per_rank_seeds():
    """huggingface/pytorch-image-models train.py shape: LR from lr_base and the global batch
    (sqrt for AdamW), a GradScaler, loss /= accum_steps with no_sync, seed + rank everywhere."""
    r = load_case("timm_style")
    c = by_id(r)
    assert r.exit_code == 0
    assert (r.one.global_batch, r.many.global_batch) == (16, 32)
    assert (r.one.accumulation, r.many.accumulation) == (2, 2)
    assert r.one.samples_seen == r.many.samples_seen == 320
    assert c["lr"].status == "pass" and c["lr"].data["scaling"] == "sqrt"
    # the scaler's 65536 and the division by 2 accumulation steps are undone
    assert {f for u in r.many.rank0.updates for f in u.factors} == {32768.0}
    assert c["loss"].status == "pass"
    assert c["seeding"].status == "info"
    assert set(c["seeding"].data["per_rank"]) == {"python", "numpy", "torch"}
    assert c["sharding"].status == "pass"


@pytest.mark.parametrize("case", ["correct", "unscaled_lr", "token_stream"])
def test_the_table_and_the_loss_check_use_the_same_window(case):
    import re

    r = load_case(case)
    loss = by_id(r)["loss"]
    lo, hi = loss.data["window"]
    text = render_text(r)
    row = re.search(rf"^  mean loss, samples {lo}-{hi} +(\S+) +(\S+)$", text, re.M)
    assert row, text
    assert float(row.group(1)) == pytest.approx(loss.data["end_loss_1"], rel=1e-3)
    assert float(row.group(2)) == pytest.approx(loss.data["end_loss_n"], rel=1e-3)
    assert f"mean loss over samples {lo}-{hi}:" in loss.detail


# -- the script's own failure first ------------------------------------------------------------


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_a_script_failing_at_import_shows_its_own_error_first_and_no_group_verdict():
    r = load_case("import_error")
    assert r.exit_code == 2
    text = render_text(r)
    lines = _lines(text)
    assert lines[2] == "The script failed in the 2 processes run (rank 0 first):"
    assert lines[3].strip() == (
        "ModuleNotFoundError: No module named 'a_module_this_environment_lacks'"
    )
    assert 'import_error.py", line 6' in lines[5]
    assert "never formed a group" not in text and "trained alone" not in text
    assert "SIGTERM" not in text  # the launcher's teardown is not a failure of rank 0
    assert "ranks in the group     -   -" in text  # no group row for a failed run


def test_an_argparse_error_shows_the_scripts_usage_message_before_the_launchers_view():
    r = load_case("argparse_error")
    text = render_text(r)
    head = text.split("The 2 processes run could not be made")[0]
    assert "(rank 1 first)" in head and "exited with status 2 before training" in head
    assert "faults.py: error: argument --fault: invalid choice: 'no-such-fault'" in head
    assert "error_file" not in head  # torchrun's summary is not the headline
    launcher_view = text.split("(the launcher's view):")[1]
    assert "the launcher exited with status 1" in launcher_view


def test_a_crash_is_first_and_the_other_rank_is_not_reported_as_terminated():
    r = load_case("faults_crash")
    head = render_text(r).split("could not be made")[0]
    assert "(rank 1 first)" in head and "RuntimeError: injected crash on rank 1" in head
    assert [f.rank for f in r.many.failures] == [1, 0]
    assert "Connection closed by peer" in r.many.failures[1].reason  # its own error, second


def test_workers_of_ranks_that_verify_stopped_are_not_blamed_on_the_script():
    from verify_helpers import load_case as load

    r = load("correct")
    rank0 = r.many.records.ranks[0]
    rank0.stop_children = [4242]
    r.many.outcome.leftovers = {4242: {"cmdline": "python correct.py", "found_by": "process tree"}}
    from distlint.verify import compare

    again = compare.summarize_run(r.many.outcome, r.many.records, 2, 10)
    assert not any("left behind by the script" in n for n in again.notes)
    assert any("verify ended 1 worker process(es)" in n for n in again.notes)


def test_command_lines_are_shortened_on_word_boundaries():
    from distlint.verify.launch import short_command

    argv = [b"python", b"train.py"] + [b"--option-%d=value" % i for i in range(40)]
    text = short_command(argv, limit=80)
    assert len(text) <= 80 and text.endswith(" ...")
    assert all(w in {a.decode() for a in argv} for w in text[: -len(" ...")].split())


def test_a_rank_output_without_newlines_is_read_within_a_bound(tmp_path):
    import tracemalloc

    from distlint.verify.launch import TAIL_BYTES, tail_text

    log = tmp_path / "stderr.log"
    with open(log, "wb") as f:
        for _ in range(16):
            f.write(b"x" * (1 << 20))  # MiB, no newline
        f.write(b"\nlast line\n")
    tracemalloc.start()
    tail = tail_text(str(log), 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tail.endswith("last line\n") and len(tail) < 3000
    assert peak < 4 * TAIL_BYTES


def test_identical_ranks_are_their_own_verdict_and_nothing_is_computed_from_them():
    r = load_case("unsharded_loader")
    assert r.exit_code == 1 and r.checks[0].id == "sharding" and r.checks[0].status == "fail"
    assert "unsharded_loader.py:19 (the one that fed the model)" in r.checks[0].detail
    assert "accelerator.prepare" in r.checks[0].detail
    statuses = {c.id: c.status for c in r.checks}
    assert [statuses[k] for k in ("batch", "lr", "schedule", "data", "loss")] == ["skip"] * 5
    assert r.table is None
    text = render_text(r)
    assert "- (every rank the same inputs)" in text and "global batch / update  8" in text
    assert "80 distinct" in text.splitlines()[1]
    assert "scale the LR" not in text and "Equivalent setups" not in text
    assert "mean loss, samples" not in text


def test_a_refused_run_has_no_group_row_no_global_batch_and_no_plot(tmp_path, monkeypatch, capsys):
    from distlint.verify import cli, core

    r = load_case("lone_processes")
    assert r.exit_code == 2
    monkeypatch.setattr(core, "verify", lambda *a, **k: r)
    plot = tmp_path / "loss.png"
    code = cli.run_verify_command("x.py", [], "text", None, plot_path=str(plot))
    text = capsys.readouterr().out
    assert code == 2 and not plot.exists() and "no plot: the runs could not be compared" in text
    assert "ranks in the group     -" in text and "global batch / update  -" in text


def test_header_numbers_follow_the_order_of_the_runs():
    r = load_case("batch_logged_as_total")
    head = render_text(r).splitlines()[1]
    if r.one.samples_seen != r.many.samples_seen:
        assert f"trained on {r.many.samples_seen} and {r.one.samples_seen}" in head
    assert head.index("2 processes") < head.index("1 process")


# -- the LR over the whole run, precision as observed ---------------------------------------------


def test_a_warmup_from_zero_is_judged_at_its_peak():
    """LR 0 at the first update (0 -> peak): judged on each run's peak, not skipped."""
    c = by_id(load_case("warmup_schedule"))
    assert c["lr"].status == "pass" and c["lr"].data["scaling"] == "linear"
    assert (c["lr"].data["peak_1"], c["lr"].data["peak_n"]) == (0.05, 0.1)
    assert c["schedule"].status == "pass"
    assert "warmup 64 samples" in c["schedule"].detail  # the same warmup in samples on 1 and 2
    unscaled = by_id(load_case("warmup_unscaled_lr"))["lr"]
    assert unscaled.status == "fail" and "peak LR unchanged (0.05)" in unscaled.detail


def test_a_warmup_multiplied_by_the_process_count_is_named():
    schedule = by_id(load_case("warmup_times_processes", static_findings=[finding("DL202")]))[
        "schedule"
    ]
    assert schedule.status == "fail" and schedule.data["counted_per_process"] == "warmup"
    assert schedule.data["warmup_ratio"] == pytest.approx(2)
    assert "warmup 64 samples" in schedule.detail and "warmup 128 samples" in schedule.detail
    assert "num_warmup_steps was multiplied by the process count" in schedule.detail
    assert "len(train_dataloader)" not in schedule.detail  # not the length's advice
    assert schedule.data["static"]["agrees"] is True  # the closure's warmup × num_processes


def test_bf16_autocast_is_observed_and_sets_the_exact_tolerance():
    r = load_case("autocast_bf16_exact")
    loss = by_id(r)["loss"]
    assert r.many.precision["kind"] == "bf16" and r.many.precision["autocast"] == {"bfloat16": 30}
    assert (
        loss.status == "pass" and loss.data["rtol"] == 5e-2 and loss.data["compared_updates"] == 30
    )
    assert loss.data["max_rel_diff"] > 1e-5  # would have failed fp32's tolerance
    assert "bfloat16 autocast in 30/30 updates" in render_text(r)
    fp32 = load_case("fp32_exact")
    assert fp32.many.precision["kind"] == "fp32" and by_id(fp32)["loss"].data["rtol"] == 1e-5
    assert by_id(fp32)["loss"].data["max_rel_diff"] < 1e-5


def test_exact_with_a_warmup_transfers_the_peak_and_steps_the_scheduler_as_on_n():
    r = load_case("warmup_exact")
    assert r.exit_code == 0
    assert [p.lrs for p in r.one.curve] == [p.lrs for p in r.many.curve]
    assert "the per-update LRs were equal over 10 updates" in render_text(r).splitlines()[1]
    assert by_id(r)["lr"].data["scaling"] == "linear"  # the script's own peaks, 0.05 and 0.1


def test_a_launcher_killed_from_outside_is_named_with_its_signal():
    r = load_case("faults_crash")
    r.many.outcome.returncode = -9
    r.many.outcome.launcher_stopped = False
    text = render_text(r)
    assert "the launcher ended by SIGKILL (sent by outside verify)" in text
