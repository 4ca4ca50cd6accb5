"""Real 1- and 2-process CPU runs of the fixture scripts, and the verdicts `verify` gives them.

Each scenario runs once (module-scoped fixtures) and several tests read its result. Every test
also checks the process table: nothing a run started may outlive `verify`.
"""

import json
import shutil
import subprocess
import sys
import time

import pytest
from verify_helpers import ROOT, fixture_script, processes_with_env

from distlint.model import Finding, Range
from distlint.verify.core import verify

pytestmark = [pytest.mark.verify, pytest.mark.usefixtures("linux_proc")]


def run(tmp_path_factory, name, *args, **kwargs):
    """verify() with records kept under a temp dir, so the test can look for leftover processes."""
    keep = tmp_path_factory.mktemp(name)
    kwargs.setdefault("device", "cpu")
    result = verify(
        fixture_script(name.split("-")[0] + ".py"), list(args), keep_dir=str(keep), **kwargs
    )
    result.keep_dir = str(keep)
    return result


def assert_nothing_left(result):
    assert processes_with_env(f"DISTLINT_VERIFY_OUT={result.keep_dir}") == []


def finding(code, line=10):
    return Finding(fixture_script("x.py"), Range(line, 1, line, 20), code, "rule", "message")


# -- the correct script, through `python -m distlint.verify` (JSON and --plot) -----------------


@pytest.fixture(scope="module")
def correct_cli(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    plot = out / "loss.png"
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distlint.verify",
            "--device",
            "cpu",
            "--format",
            "json",
            "--plot",
            str(plot),
            fixture_script("correct.py"),
            "--lr",
            "0.05",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    return proc, json.loads(proc.stdout), plot, time.monotonic() - started


def test_correct_script_is_comparable(correct_cli):
    proc, report, _, _ = correct_cli
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["verdict"] == "comparable" and report["exit_code"] == 0
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert status == {
        "batch": "warn",
        "lr": "pass",
        "seeding": "pass",
        "data": "pass",
        "loss": "pass",
    }


def test_correct_script_formed_one_group_of_two(correct_cli):
    _, report, _, _ = correct_cli
    many = report["runs"]["many"]
    assert many["distributed_type"] == "MULTI_CPU" and many["backend"] == "gloo"
    assert sorted(r["rank"] for r in many["ranks"]) == [0, 1]
    assert {r["num_processes"] for r in many["ranks"]} == {2}
    assert report["runs"]["one"]["ranks"][0]["num_processes"] == 1


def test_correct_script_batches_lrs_and_samples(correct_cli):
    _, report, _, _ = correct_cli
    one, many = report["runs"]["one"], report["runs"]["many"]
    assert (one["per_device_batch"], one["global_batch"]) == (8, 8)
    assert (many["per_device_batch"], many["global_batch"]) == (8, 16)
    assert one["lrs_first_update"] == [0.05] and many["lrs_first_update"] == [0.1]
    lr = next(c for c in report["checks"] if c["id"] == "lr")
    assert lr["data"]["scaling"] == "linear"
    # --max-steps 20: the 2-process run stops after 20 updates, the 1-process run after 40: same samples.
    assert (many["updates"], one["updates"]) == (20, 40)
    assert one["samples_seen"] == many["samples_seen"] == 320
    assert [s["name"] for s in one["seeding_calls"]] == ["accelerate.utils.set_seed"]


def test_correct_script_table_plot_and_progress(correct_cli):
    proc, report, plot, _ = correct_cli
    rows = {r["setup"]: r["per_device_batch"] for r in report["equivalence"]["rows"]}
    assert rows == {"1 GPU": 16, "2 GPUs": 8, "TPU pod, 8 workers": 2}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 5000
    assert (
        "running 2 processes (torchrun)" in proc.stderr
    )  # progress goes to stderr, the report to stdout
    assert report["static_findings"] is None  # python -m distlint.verify runs no static check


def test_correct_script_leaves_no_process(correct_cli):
    _, report, _, _ = correct_cli
    for run_ in report["runs"].values():
        assert processes_with_env("DISTLINT_VERIFY_TAG=" + run_["tag"]) == []


# -- --exact: Accelerate's equivalence test on the user's script ----------------------------------


@pytest.fixture(scope="module")
def exact(tmp_path_factory):
    return run(tmp_path_factory, "correct-exact", exact=True)


def test_exact_losses_match_step_by_step(exact):
    assert exact.exit_code == 0, [c.detail for c in exact.checks] + exact.problems
    assert exact.one.global_batch == exact.many.global_batch == 16
    assert exact.one.curve[0].lrs == exact.many.curve[0].lrs == [0.1]
    loss = exact.check("loss")
    assert loss.status == "pass" and loss.data["compared_updates"] == 20
    assert loss.data["max_rel_diff"] <= 1e-5
    assert exact.check("data").status == "pass"
    # The LR check still judges the script's own LRs (0.05 on 1 process), not the borrowed ones.
    assert exact.check("lr").data["scaling"] == "linear"
    assert_nothing_left(exact)


# -- the rule-confirming fixtures ----------------------------------------------------------------


@pytest.fixture(scope="module")
def unscaled():
    """Through the installed command, as users run it: the static check, then the runs."""
    exe = shutil.which("distlint")
    argv = [exe] if exe else [sys.executable, "-m", "distlint"]
    proc = subprocess.run(
        argv
        + [
            "check",
            "--verify",
            "--device",
            "cpu",
            "--format",
            "json",
            "fixtures/verify/unscaled_lr.py",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    return proc, json.loads(proc.stdout)


def test_unscaled_lr_confirms_the_static_dl201(unscaled):
    proc, report = unscaled
    assert proc.returncode == 1, proc.stderr
    checks = {c["id"]: c for c in report["checks"]}
    lr = checks["lr"]
    assert lr["status"] == "fail" and lr["confirms"] and lr["static"] == "confirmed"
    assert lr["detail"].startswith("global batch ×2, LR unchanged")
    assert [w.rsplit(":", 1)[0] for w in lr["static_where"]] == ["fixtures/verify/unscaled_lr.py"]
    assert {f["code"] for f in report["static_findings"]} == {"DL201"}
    assert checks["loss"]["status"] == "fail"  # the 2-process run falls behind
    assert checks["seeding"]["status"] == "pass" and checks["seeding"]["static"] is None
    for run_ in report["runs"].values():
        assert processes_with_env("DISTLINT_VERIFY_TAG=" + run_["tag"]) == []


@pytest.fixture(scope="module")
def seed_only_torch(tmp_path_factory):
    return run(
        tmp_path_factory, "seed_only_torch", static_findings=[finding("DL101"), finding("DL201")]
    )


def test_seed_only_torch_confirms_dl101(seed_only_torch):
    r = seed_only_torch
    assert r.exit_code == 1
    seeding = r.check("seeding")
    assert seeding.status == "fail" and seeding.static == "confirmed"
    assert seeding.detail.startswith(
        "numpy and python RNG differ across ranks: seed them with set_seed"
    )
    assert seeding.data["unseeded_used"] == ["numpy"] and "torch" not in seeding.data["unseeded"]
    assert seeding.data["seeding_calls"] == ["torch.manual_seed"]
    assert r.check("lr").static == "refuted"  # the LR is scaled in this script
    assert r.check("data").status == "warn"  # every rank drew its own numpy permutation
    assert_nothing_left(r)


@pytest.fixture(scope="module")
def batch_as_total(tmp_path_factory):
    return run(tmp_path_factory, "batch_logged_as_total", static_findings=[finding("DL301")])


def test_per_device_batch_logged_as_total_confirms_dl301(batch_as_total):
    r = batch_as_total
    assert r.exit_code == 0
    batch = r.check("batch")
    assert batch.status == "warn" and batch.static == "confirmed"
    assert batch.data["script_batch_size"] == 8 and batch.data["global_n"] == 16
    assert r.table["global_batch"] == 16
    assert_nothing_left(r)


@pytest.fixture(scope="module")
def accum(tmp_path_factory):
    # Also the `accelerate launch` path (--multi_gpu with ACCELERATE_USE_CPU=1 on CPU).
    return run(tmp_path_factory, "grad_accum", launcher="accelerate")


def test_gradient_accumulation_through_accelerate_launch(accum):
    assert accum.exit_code == 0, [c.detail for c in accum.checks] + accum.problems
    assert (
        accum.many.launcher == "accelerate"
        and accum.many.config("gradient_accumulation_steps") == 2
    )
    assert [r.rank for r in accum.many.records.ranks] == [0, 1]
    assert (
        accum.many.global_batch == 16 and accum.one.global_batch == 8
    )  # 4 per device x 2 micro-batches
    loss = accum.check("loss")
    assert loss.status == "pass" and "gradient accumulation" in loss.data["tolerance_for"]
    assert_nothing_left(accum)


@pytest.fixture(scope="module")
def plain_ddp(tmp_path_factory):
    return run(tmp_path_factory, "plain_ddp")


def test_plain_torch_ddp_script_is_recorded_too(plain_ddp):
    r = plain_ddp
    assert r.exit_code == 0, [c.detail for c in r.checks] + [p for x in r.runs for p in x.problems]
    assert r.many.config("source") == "torch.distributed" and r.many.config("backend") == "gloo"
    assert r.one.config("source") is None  # no process group on 1 process: still a run
    assert (r.one.global_batch, r.many.global_batch) == (8, 16)
    assert r.check("lr").data["scaling"] == "linear"
    assert r.check("seeding").data["seeding_calls"] == [
        "numpy.random.seed",
        "random.seed",
        "torch.manual_seed",
    ]
    assert r.check("data").status == "pass" and r.check("loss").status == "pass"
    assert_nothing_left(r)


# -- the two launcher pitfalls -------------------------------------------------------------------


@pytest.fixture(scope="module")
def accelerate_cpu_flag(tmp_path_factory):
    return run(tmp_path_factory, "correct-cpuflag", launcher="accelerate", launcher_args=["--cpu"])


def test_accelerate_launch_cpu_starts_one_process_and_verify_says_so(accelerate_cpu_flag):
    r = accelerate_cpu_flag
    assert r.exit_code == 2 and not r.many.ok and not r.checks
    assert len(r.many.records.ranks) == 1 and r.many.records.ranks[0].num_processes == 1
    assert "expected 2 ranks" in r.many.problems[0] and "--cpu" in r.many.problems[0]
    assert_nothing_left(r)


@pytest.fixture(scope="module")
def torchrun_without_cpu_env(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ACCELERATE_USE_CPU", "0")
    try:
        return run(tmp_path_factory, "correct-nocpuenv")
    finally:
        mp.undo()


def test_torchrun_without_accelerate_use_cpu_trains_twice_alone(torchrun_without_cpu_env):
    r = torchrun_without_cpu_env
    assert r.exit_code == 2
    ranks = r.many.records.ranks
    # Both processes trained to the end without an error (torchrun would exit 0): judged by the records.
    assert len(ranks) == 2 and all(x.finished and x.exception is None for x in ranks)
    assert {x.num_processes for x in ranks} == {1} and {x.rank for x in ranks} == {0}
    assert (
        "each trained alone" in r.many.problems[0] and "ACCELERATE_USE_CPU=1" in r.many.problems[0]
    )
    assert_nothing_left(r)


# -- faults: crash, early exit, fork, hang while ignoring SIGTERM ---------------------------------


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    return run(tmp_path_factory, "faults-crash", "--fault", "crash")


def test_crash_on_rank_1_is_reported_with_its_error(crash):
    assert crash.exit_code == 2 and crash.one.ok and not crash.many.ok
    first = crash.many.failures[0]
    assert (
        first.rank == 1 and first.reason == "RuntimeError: injected crash on rank 1 after update 3"
    )
    assert "faults.py" in first.detail  # the script's own traceback
    assert_nothing_left(crash)


@pytest.fixture(scope="module")
def early_exit(tmp_path_factory):
    return run(tmp_path_factory, "faults-exit", "--fault", "exit")


def test_sys_exit_on_rank_1_is_named_first(early_exit):
    assert early_exit.exit_code == 2
    first = early_exit.many.failures[0]
    assert first.rank == 1 and "exited" in first.reason and "after 3 of 20 updates" in first.reason
    assert_nothing_left(early_exit)


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    return run(tmp_path_factory, "faults-fork", "--fault", "fork")


def test_forked_child_in_its_own_session_is_killed(forks):
    assert forks.exit_code == 0, forks.problems + [p for r in forks.runs for p in r.problems]
    leftovers = forks.many.outcome.leftovers
    assert len(leftovers) == 1 and next(iter(leftovers.values())).get("RANK") == "1"
    assert any("left behind by the script" in n for n in forks.many.notes)
    assert_nothing_left(forks)


@pytest.fixture(scope="module")
def hang_ignoring_sigterm(tmp_path_factory, correct_cli):
    # Long enough for the runs to reach the hang on a loaded machine, short enough for CI.
    timeout = max(20.0, 2.0 * correct_cli[3])
    started = time.monotonic()
    result = run(tmp_path_factory, "faults-sigterm", "--fault", "sigterm", timeout=timeout)
    return result, timeout, time.monotonic() - started


def test_hang_on_rank_1_ignoring_sigterm_ends_within_the_timeout(hang_ignoring_sigterm):
    r, timeout, took = hang_ignoring_sigterm
    assert took <= timeout + 10
    assert r.exit_code == 2 and r.many.outcome.timed_out
    hung = [f for f in r.many.failures if f.reason.startswith("hung")]
    assert [f.rank for f in hung] == [1]
    assert any("ignored SIGTERM" in n for n in r.many.notes)
    assert_nothing_left(r)
