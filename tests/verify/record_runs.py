"""Record real verify runs of the fixtures as test data (tests/verify/data/<case>/).

    python tests/verify/record_runs.py [CASE ...]     # all cases when none is named

Each case keeps what the probe wrote for both runs (one/records, many/records), the launcher's
output and a meta.json with what verify knew about each launch. tests/verify/test_recorded.py
replays them in-process through the same summarize / check / report code, so the comparisons
are tested without starting processes. Re-record after a change to the probe or its schema
(the schema version is checked), and review the diff of the tests' expectations.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA = HERE / "data"
FIXTURES = ROOT / "fixtures" / "verify"

# case -> (script, script args, verify() keyword arguments)
CASES: dict[str, tuple[str, list[str], dict]] = {
    "correct": ("correct.py", [], {}),
    "correct_exact": ("correct.py", [], {"exact": True}),
    "unscaled_lr": ("unscaled_lr.py", [], {}),
    "seed_only_torch": ("seed_only_torch.py", [], {}),
    "batch_logged_as_total": ("batch_logged_as_total.py", [], {}),
    "grad_accum": ("grad_accum.py", [], {"launcher": "accelerate"}),
    "plain_ddp": ("plain_ddp.py", [], {}),
    "token_stream": ("token_stream.py", [], {}),
    "torchrun_only": ("torchrun_only.py", [], {}),
    "peek_and_eval": ("peek_and_eval.py", [], {}),
    "unsharded_loader": ("unsharded_loader.py", [], {}),
    "lone_processes": ("lone_processes.py", [], {}),
    "scheduler_per_process": ("scheduler_per_process.py", [], {}),
    "constant_loss": ("constant_loss.py", [], {}),
    "accelerate_nlp_style": ("accelerate_nlp_style.py", [], {}),
    "imagenet_ddp": ("imagenet_ddp.py", [], {}),
    "timm_style": ("timm_style.py", [], {}),
    "accelerate_cpu_flag": (
        "correct.py",
        [],
        {"launcher": "accelerate", "launcher_args": ["--cpu"]},
    ),
    "torchrun_without_cpu_env": ("correct.py", [], {"env": {"ACCELERATE_USE_CPU": "0"}}),
    "faults_crash": ("faults.py", ["--fault", "crash"], {}),
    "faults_exit": ("faults.py", ["--fault", "exit"], {}),
    "faults_segv": ("faults.py", ["--fault", "segv"], {}),
    "faults_fork": ("faults.py", ["--fault", "fork"], {}),
    "faults_helper": ("faults.py", ["--fault", "helper"], {}),
    "faults_sigterm": ("faults.py", ["--fault", "sigterm"], {"timeout": 40}),
    "import_error": ("import_error.py", [], {}),
    "argparse_error": ("faults.py", ["--fault", "no-such-fault"], {}),
    "warmup_schedule": ("warmup_schedule.py", [], {}),
    "warmup_times_processes": ("warmup_schedule.py", ["--warmup-times-processes"], {}),
    "warmup_unscaled_lr": ("warmup_schedule.py", ["--no-lr-scaling"], {}),
    "autocast_bf16_exact": (
        "warmup_schedule.py",
        ["--autocast", "bf16", "--constant-lr"],
        {"exact": True, "max_steps": 30},
    ),
    "fp32_exact": ("warmup_schedule.py", ["--constant-lr"], {"exact": True, "max_steps": 30}),
    "warmup_exact": ("warmup_schedule.py", [], {"exact": True}),
    # the runtime confirmation of DL204, DL205, DL304, DL401, DL402 (distlint.verify.confirm)
    "dl204_bad": ("../DL204/bad.py", [], {}),
    "dl204_fixed": ("../DL204/bad.fixed.py", [], {}),
    "dl205_bad": ("../DL205/bad.py", [], {}),
    "dl205_fixed": ("../DL205/bad.fixed.py", [], {}),
    "dl205_accumulation": ("backward_bypass_accumulation.py", [], {}),
    "dl304_bad": ("../DL304/bad.py", [], {"epochs": 2}),
    "dl304_fixed": ("../DL304/bad.fixed.py", [], {"epochs": 2}),
    "eval_local_metric": ("eval_local_metric.py", [], {"epochs": 2}),
    "eval_gather": ("eval_gather.py", [], {"epochs": 2}),
    "eval_gather_for_metrics": ("eval_gather_for_metrics.py", [], {"epochs": 2}),
}
MAX_STEPS = 10


def _outcome_meta(outcome) -> dict:
    plan = outcome.plan
    return {
        "label": plan.label,
        "nprocs": plan.nprocs,
        "launcher": plan.launcher,
        "device": plan.device,
        "argv": [os.path.basename(a) if os.path.isabs(a) else a for a in plan.argv],
        "returncode": outcome.returncode,
        "wall_s": outcome.wall_s,
        "timed_out": outcome.timed_out,
        "launcher_stopped": outcome.launcher_stopped,
        "killed_after_timeout": {str(k): v for k, v in outcome.killed_after_timeout.items()},
        "leftovers": {str(k): v for k, v in outcome.leftovers.items()},
        "end_t": outcome.end_t,
        "tag": outcome.tag,
    }


def record(case: str) -> None:
    from distlint.verify.core import verify

    script, args, kwargs = CASES[case]
    kwargs = {"device": "cpu", "max_steps": MAX_STEPS, **kwargs}
    max_steps = kwargs["max_steps"]
    keep = tempfile.mkdtemp(prefix=f"record-{case}-")
    try:
        result = verify(str(FIXTURES / script), args, keep_dir=keep, **kwargs)
        target = DATA / case
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        meta = {
            "script": script,
            "script_args": args,
            "kwargs": {k: v for k, v in kwargs.items()},
            "nprocs": result.nprocs,
            "max_steps": max_steps,
            "exit_code": result.exit_code,
            "runs": {},
        }
        for name, run in (("one", result.one), ("many", result.many)):
            if run is None:
                continue
            meta["runs"][name] = _outcome_meta(run.outcome)
            out = target / name
            (out / "records").mkdir(parents=True)
            src = Path(run.outcome.record_dir)
            for f in sorted(src.iterdir()):
                keep_it = f.suffix == ".jsonl" or (f.suffix == ".fault" and f.stat().st_size)
                if keep_it:
                    shutil.copy(f, out / "records" / f.name)
            lines = run.outcome.output_tail(400)
            (out / "output.log").write_text(lines, encoding="utf-8")
            tails = run.outcome.rank_stderr_tails()
            for rank, text in tails.items():
                (out / f"rank{rank}.stderr.log").write_text(text, encoding="utf-8")
        (target / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        print(f"{case}: exit {result.exit_code} ({result.verdict}) in {result.wall_s:.1f} s")
    finally:
        shutil.rmtree(keep, ignore_errors=True)


if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        record(name)
