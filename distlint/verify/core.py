"""`verify()`: run a script on 1 process and on N processes, then compare what each rank recorded."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from distlint.verify import compare, launch
from distlint.verify.compare import Check, RunSummary
from distlint.verify.records import read_run

DEFAULT_MAX_STEPS = 20
DEFAULT_TIMEOUT = 300.0


@dataclass
class VerifyResult:
    script: str
    script_args: list[str]
    nprocs: int
    max_steps: int
    exact: bool
    one: RunSummary | None = None
    many: RunSummary | None = None
    checks: list[Check] = field(default_factory=list)
    table: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)  # the runs could not be made at all
    notes: list[str] = field(default_factory=list)
    static_findings: list[Any] | None = None  # None: the static check did not run
    wall_s: float = 0.0

    @property
    def runs(self) -> list[RunSummary]:
        return [r for r in (self.one, self.many) if r is not None]

    @property
    def exit_code(self) -> int:
        if self.problems or not self.one or not self.many or not all(r.ok for r in self.runs):
            return 2
        return 1 if any(c.status == "fail" for c in self.checks) else 0

    @property
    def verdict(self) -> str:
        return {0: "comparable", 1: "check failed", 2: "run failed"}[self.exit_code]

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def to_json(self) -> dict:
        return {
            "script": self.script,
            "script_args": self.script_args,
            "nprocs": self.nprocs,
            "max_steps": self.max_steps,
            "exact": self.exact,
            "exit_code": self.exit_code,
            "verdict": self.verdict,
            "problems": self.problems,
            "notes": self.notes,
            "runs": {
                "one": self.one.to_json() if self.one else None,
                "many": self.many.to_json() if self.many else None,
            },
            "checks": [c.to_json() for c in self.checks],
            "equivalence": self.table,
            "static_findings": None
            if self.static_findings is None
            else [f.to_json() for f in self.static_findings],
            "wall_s": round(self.wall_s, 3),
        }


ProgressFn = Callable[[str, Any], None]


def verify(
    script: str,
    script_args: Sequence[str] = (),
    *,
    nprocs: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    timeout: float = DEFAULT_TIMEOUT,
    launcher: str = "torchrun",
    launcher_args: Sequence[str] = (),
    exact: bool = False,
    device: str = "auto",
    loss_rtol: float | None = None,
    static_findings: Sequence[Any] | None = None,
    progress: ProgressFn | None = None,
    keep_dir: str | None = None,
) -> VerifyResult:
    """Run `script` on 1 and N processes (never more than `timeout` seconds in all) and compare.

    `progress(event, payload)` is called with ("start", plan), ("poll", (plan, record_dir, elapsed))
    and ("end", summary) for each run.
    """
    started = time.monotonic()
    path = os.path.abspath(script)
    result = VerifyResult(
        path,
        list(script_args),
        nprocs or 0,
        max_steps,
        exact,
        static_findings=None if static_findings is None else list(static_findings),
    )
    if not os.path.isfile(path):
        result.problems.append(f"{script}: no such file")
        return result
    try:
        devices = launch.plan_devices(device, nprocs)
    except launch.LaunchError as exc:
        result.problems.append(str(exc))
        return result
    n = result.nprocs = devices.nprocs
    result.notes.extend(devices.notes)
    work = keep_dir or tempfile.mkdtemp(prefix="distlint-verify-")
    os.makedirs(work, exist_ok=True)
    try:
        many_plan = launch.multi_plan(
            path,
            script_args,
            n,
            devices.multi,
            launcher,
            launcher_args,
            log_dir=os.path.join(work, "many", "logs"),
        )
        if devices.multi == "xla" and not launch.tpu_available():
            result.problems.append(launch.XLA_ON_CPU)
            result.notes.append("the command on a TPU host would be: " + " ".join(many_plan.argv))
            return result
        one_plan = launch.single_plan(path, script_args, devices.single)
        base_env = {"DISTLINT_VERIFY_SCRIPT": path}

        def run(plan: launch.LaunchPlan, name: str, env: dict[str, str]) -> RunSummary | None:
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 1:
                result.problems.append(
                    f"no time left for the {plan.label} run (--timeout {timeout:g} s)"
                )
                return None
            run_dir = os.path.join(work, name)
            if progress:
                progress("start", plan)
            record_dir = os.path.join(run_dir, "records")
            poll = (
                (lambda elapsed: progress("poll", (plan, record_dir, elapsed)))
                if progress
                else None
            )
            outcome = launch.run_plan(plan, run_dir, remaining, {**base_env, **env}, poll)
            records = read_run(outcome.record_dir, single_pid=None)
            summary = compare.summarize_run(
                outcome, records, plan.nprocs, int(env["DISTLINT_VERIFY_MAX_STEPS"])
            )
            if progress:
                progress("end", summary)
            return summary

        # Without --exact the 1-process run makes N times more (N times smaller) updates, so both
        # runs see the same number of samples. With --exact it takes the N-process run's LRs and
        # a batch N times larger, so the N-process run goes first.
        one_env = {"DISTLINT_VERIFY_MAX_STEPS": str(max_steps * (1 if exact else n))}
        if exact:
            result.many = run(many_plan, "many", {"DISTLINT_VERIFY_MAX_STEPS": str(max_steps)})
            lrs = _prepared_lrs(result.many)
            if result.many is not None and result.many.ok:
                one_env["DISTLINT_VERIFY_BATCH_SCALE"] = str(n)
                if lrs:
                    one_env["DISTLINT_VERIFY_LRS"] = json.dumps(lrs)
                else:
                    result.notes.append(
                        "--exact: the N-process run prepared no optimizer; LRs left as they are"
                    )
                result.one = run(one_plan, "one", one_env)
            else:
                result.notes.append(
                    "--exact: the 1-process run needs a successful N-process run first; skipped"
                )
        else:
            result.one = run(one_plan, "one", one_env)
            result.many = run(many_plan, "many", {"DISTLINT_VERIFY_MAX_STEPS": str(max_steps)})
        if result.one and result.many and result.one.ok and result.many.ok:
            one, many = result.one, result.many
            result.checks = [
                compare.check_batch(one, many, exact),
                compare.check_lr(one, many, exact),
                compare.check_seeding(one, many),
                compare.check_data_order(one, many, exact),
                compare.check_loss(one, many, exact, loss_rtol),
            ]
            compare.join_static(result.checks, result.static_findings)
            result.table = compare.equivalence_table(many)
            for run_summary in result.runs:
                if run_summary.device.startswith("cuda"):
                    result.notes.append(
                        f"the {run_summary.label} run ran on the GPU ({run_summary.device})"
                    )
    finally:
        result.wall_s = time.monotonic() - started
        if keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return result


def _prepared_lrs(run: RunSummary | None) -> list[list[float]] | None:
    """Rank 0's LRs of each optimizer as it was prepared (what --exact gives the 1-process run)."""
    if run is None or run.rank0 is None:
        return None
    opts = sorted(run.rank0.optimizers, key=lambda o: o.get("index", 0))
    lrs = [o.get("native_lrs") for o in opts if o.get("native_lrs")]
    return lrs or None
