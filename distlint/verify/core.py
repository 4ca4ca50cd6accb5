"""`verify()`: run a script on 1 process and on N processes, then compare what each rank recorded."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from distlint.verify import checks as checks_mod
from distlint.verify import compare, confirm, launch, scratch, static
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
    node_rank: int | None = None  # several nodes: this machine's node rank
    interrupted: int | None = None  # the signal that stopped verify (SIGTERM, SIGHUP, SIGINT)
    script_facts: static.ScriptFacts | None = None  # what the lint path's analysis read

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 128 + self.interrupted
        if self.node_rank:  # a follower node: its own ranks ran (node 0 compares)
            return 0 if self.many and self.many.ok else 2
        if self.problems or not self.one or not self.many or not all(r.ok for r in self.runs):
            return 2
        return 1 if any(c.status == "fail" for c in self.checks) else 0

    @property
    def runs(self) -> list[RunSummary]:
        return [r for r in (self.one, self.many) if r is not None]

    @property
    def verdict(self) -> str:
        if self.interrupted:
            return f"interrupted by {signal.Signals(self.interrupted).name}"
        if self.node_rank:
            return "node ran its ranks" if self.exit_code == 0 else "run failed"
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
            "node_rank": self.node_rank,
            "interrupted": self.interrupted,
            "script_facts": self.script_facts.to_json() if self.script_facts else None,
        }


ProgressFn = Callable[[str, Any], None]


class Interrupted(BaseException):
    """SIGTERM / SIGHUP reached verify: stop the runs like a timeout, then exit 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _install_signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}

    def handler(signum, frame):
        raise Interrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    return previous


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
    env: dict[str, str] | None = None,
    nodes: launch.Nodes | None = None,
    single_launcher: str | None = None,
    cwd: str | None = None,
    epochs: int | None = None,
) -> VerifyResult:
    """Run `script` on N processes, then on 1 (never more than `timeout` seconds in all), compare.

    The N-process run goes first: its samples per update are measured, and the 1-process run is
    stopped once it has trained on as many samples (whether the script grows the global batch
    with N or holds it constant). With `epochs` E (by default 2 when a static finding needs it,
    see confirm.epochs_for) the N-process run goes on, past `max_steps`, to the first update of
    its training data's E-th pass. `progress(event, payload)` is called with ("start", (plan,
    {"updates": planned, "samples": planned or 0})), ("poll", (plan, record_dir, elapsed)) and
    ("end", summary) for each run, then ("compare", None) and ("done", None).
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
        node_rank=nodes.node_rank if nodes else None,
    )
    if not os.path.isfile(path):
        result.problems.append(f"{script}: no such file")
        return result
    user_cwd = os.path.abspath(cwd or os.getcwd())
    result.script_facts = static.script_facts(path)
    if keep_dir is not None:
        keep_dir = os.path.join(user_cwd, os.path.expanduser(keep_dir))  # relative: to the user's
    launcher_args = launch.with_absolute_config_file(launcher_args, user_cwd)
    devices = _plan_devices(result, launcher, launcher_args, nprocs, device, nodes)
    if devices is None:
        return result
    n = devices.nprocs
    work = keep_dir or tempfile.mkdtemp(prefix="distlint-verify-")
    os.makedirs(work, exist_ok=True)
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="distlint-verify-scratch")
    previous_handlers = _install_signal_handlers()
    subreaper = launch.set_child_subreaper(True)
    try:
        plans = _make_plans(
            result,
            path,
            script_args,
            devices,
            launcher,
            launcher_args,
            work,
            nodes,
            single_launcher,
        )
        if plans is None:
            return result
        many_plan, one_plan = plans
        base_env = {
            launch.schema.ENV_SCRIPT: path,
            launch.schema.ENV_USER_DIR: user_cwd,
            **(env or {}),
        }
        runs = _Runs(result, work, user_cwd, keep_dir, nodes, progress, timeout, started)
        runs.background, runs.base_env = background, base_env
        result.many = runs.run(many_plan, "many", _many_env(result, max_steps, epochs))
        if nodes and nodes.node_rank:
            return result  # a follower node: node 0 makes the 1-process run and compares
        made = len(result.many.curve) if result.many else 0
        one_env = _plan_single(result, max(max_steps, made), n, exact)
        if one_env is not None:
            result.one = runs.run(one_plan, "one", one_env)
        if progress:
            progress("compare", None)
        _conclude(result, runs.changed, user_cwd, loss_rtol, runs.who)
    except Interrupted as exc:
        result.interrupted = exc.signum
        result.problems.append(
            f"stopped by {signal.Signals(exc.signum).name}: every process of the runs was "
            "killed and the temporary folder removed"
        )
    except KeyboardInterrupt:
        result.interrupted = int(signal.SIGINT)
        result.problems.append("stopped by SIGINT (Ctrl-C): every process of the runs was killed")
    finally:
        if progress:
            progress("done", None)
        result.wall_s = time.monotonic() - started
        _restore_process_state(subreaper, previous_handlers)
        background.shutdown(wait=True)
        if keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return result


def _plan_devices(
    result: VerifyResult,
    launcher: str,
    launcher_args: Sequence[str],
    nprocs: int | None,
    device: str,
    nodes: launch.Nodes | None,
) -> launch.DevicePlan | None:
    """The devices of both runs (None, with the problem told, when there are none to use)."""
    if launcher == "accelerate" and nprocs is None:
        nprocs = launch.accelerate_config_processes(launcher_args)
    try:
        devices = launch.plan_devices(device, nprocs, minimum=1 if nodes else 2)
    except launch.LaunchError as exc:
        result.problems.append(str(exc))
        return None
    result.nprocs = devices.nprocs * (nodes.nnodes if nodes else 1)
    result.notes.extend(devices.notes)
    return devices


def _make_plans(
    result: VerifyResult,
    path: str,
    script_args: Sequence[str],
    devices: launch.DevicePlan,
    launcher: str,
    launcher_args: Sequence[str],
    work: str,
    nodes: launch.Nodes | None,
    single_launcher: str | None,
) -> tuple[launch.LaunchPlan, launch.LaunchPlan] | None:
    """The N-process and the 1-process launch plans (None, with the problem told, when the
    N-process run cannot be made here)."""
    try:
        many_plan = launch.multi_plan(
            path,
            script_args,
            devices.nprocs,
            devices.multi,
            launcher,
            launcher_args,
            log_dir=os.path.join(work, "many", "logs"),
            main_function=launch.main_function_of(path) if devices.multi == "xla" else None,
            nodes=nodes,
        )
    except launch.LaunchError as exc:
        result.problems.append(str(exc))
        return None
    result.notes.extend(many_plan.notes)
    if devices.multi == "xla" and not launch.tpu_available():
        result.problems.append(launch.XLA_ON_CPU)
        result.notes.append("the command on a TPU host would be: " + " ".join(many_plan.argv))
        return None
    one_launcher = single_launcher or _single_launcher(result, launcher)
    one_plan = launch.single_plan(
        path,
        script_args,
        devices.single,
        one_launcher,
        launcher_args,
        log_dir=os.path.join(work, "one", "logs"),
    )
    return many_plan, one_plan


def _single_launcher(result: VerifyResult, launcher: str) -> str:
    chosen, note = one_process_launcher(result.script_facts, launcher)
    if note:
        result.notes.append(note)
    return chosen


def one_process_launcher(facts: static.ScriptFacts | None, launcher: str) -> tuple[str, str | None]:
    """How the 1-process run is launched, as the user would run the script alone, and why (a
    note, when it differs from the N-process run's launcher or could have). A script that forms
    its processes through Accelerate or Fabric and reads none of torchrun's environment runs as
    plain `python` (under `torchrun --nproc_per_node 1` Accelerate would form a process group
    of one, a setup nobody trains in); one written for torchrun runs under it."""
    if launcher not in ("torchrun", "accelerate", "fabric"):
        return "python", None
    if launcher != "torchrun" or facts is None or facts.mode not in ("accelerate", "fabric"):
        return launcher, None
    framework = {"accelerate": "Accelerate", "fabric": "Lightning Fabric"}[facts.mode]
    if facts.needs_launcher:
        return launcher, (
            f"the 1-process run goes through torchrun with one process: the script reads "
            f"torchrun's environment itself ({', '.join(facts.launcher_reads[:3])})"
        )
    return "python", (
        f"the 1-process run is plain `python`, as the script runs alone: it forms its "
        f"processes through {framework} and reads none of torchrun's environment (under "
        "torchrun with one process it would train in a process group of one)"
    )


class _Runs:
    """Makes each run in its own copy of the user's folder and watches that folder for writes."""

    def __init__(
        self,
        result: VerifyResult,
        work: str,
        user_cwd: str,
        keep_dir: str | None,
        nodes: launch.Nodes | None,
        progress: ProgressFn | None,
        timeout: float,
        started: float,
    ) -> None:
        self.result = result
        self.work = work
        self.user_cwd = user_cwd
        self.keep_dir = keep_dir
        self.nodes = nodes
        self.progress = progress
        self.timeout = timeout
        self.started = started
        self.background: ThreadPoolExecutor | None = None
        self.base_env: dict[str, str] = {}
        self.copies: dict[str, Future] = {}
        self.own = scratch.own_outputs()
        self.watched = scratch.snapshot(user_cwd, skip=[work], ignore=self.own)
        self.changed: list[str] = []
        self.who: dict[str, str] = {}  # a change -> which run made it, as far as can be told

    def run(self, plan: launch.LaunchPlan, name: str, run_env: dict[str, str]) -> RunSummary | None:
        remaining = self.timeout - (time.monotonic() - self.started)
        if remaining <= 1:
            self.result.problems.append(
                f"no time left for the {plan.label} run (--timeout {self.timeout:g} s)"
            )
            return None
        run_dir = os.path.join(self.work, name)
        scratch_dir = os.path.join(run_dir, "cwd")
        self._copy_folder(name, scratch_dir)
        progress = self.progress
        if progress:
            env = launch.schema
            target = {
                "updates": int(run_env.get(env.ENV_MAX_STEPS) or 0),
                "samples": int(run_env.get(env.ENV_MAX_SAMPLES) or 0),
            }
            progress("start", (plan, target))
        record_dir = os.path.join(run_dir, "records")
        poll = (lambda elapsed: progress("poll", (plan, record_dir, elapsed))) if progress else None
        scratch_env = {launch.schema.ENV_SCRATCH: os.path.abspath(scratch_dir)}
        began = time.time_ns()
        outcome = launch.run_plan(
            plan,
            run_dir,
            remaining,
            {**self.base_env, **run_env, **scratch_env},
            poll,
            cwd=scratch_dir,
        )
        ended = time.time_ns()
        new = self._note_changes(scratch_dir)
        records = read_run(outcome.record_dir, single_pid=None)
        follower = bool(self.nodes and self.nodes.node_rank) and name == "many"
        summary = compare.summarize_run(
            outcome,
            records,
            plan.local if follower else plan.nprocs,
            int(run_env[launch.schema.ENV_MAX_STEPS]),
            world=plan.nprocs,
        )
        if new:
            self.who.update(attribute_changes(new, summary, began, ended))
        if progress:
            progress("end", summary)
        return summary

    def _copy_folder(self, name: str, scratch_dir: str) -> None:
        assert self.background is not None
        work = self.work
        if name in self.copies:
            self.copies.pop(name).result()  # copied while the other run went
        else:
            scratch.mirror_tree(self.user_cwd, scratch_dir, skip=[work])
        if name == "many" and not (self.nodes and self.nodes.node_rank):
            # The 1-process run's copy is made while the N-process run goes (I/O beside
            # CPU-bound ranks), so it costs the runs little wall time.
            self.copies["one"] = self.background.submit(
                scratch.mirror_tree, self.user_cwd, os.path.join(work, "one", "cwd"), [work]
            )

    def _note_changes(self, scratch_dir: str) -> dict[str, int | None]:
        """The changes of the user's tree first seen after this run, with their mtimes (ns)."""
        assert self.background is not None
        now = scratch.snapshot(self.user_cwd, skip=[self.work], ignore=self.own)
        new = [c for c in scratch.changes(self.watched, now) if c not in self.changed]
        self.changed.extend(new)
        if self.keep_dir is None:  # removed while the next run goes
            self.background.submit(shutil.rmtree, scratch_dir, True)
        entries = now.entries
        return {c: entries[c.rsplit(" (", 1)[0]][2] if c.rsplit(" (", 1)[0] in entries else None
                for c in new}  # fmt: skip


def _writes(record_dir: str) -> list[dict[str, Any]]:
    """What the probe noted of writes aimed into the user's folder (`<pid>.writes`)."""
    out = []
    for path in sorted(glob.glob(os.path.join(record_dir, "*" + launch.schema.WRITES_SUFFIX))):
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for text in lines:
            try:
                out.append(json.loads(text))
            except ValueError:
                continue  # a line cut short by a killed process
    return out


MTIME_SLACK_NS = 2_000_000_000  # filesystems with coarse timestamps (FAT: 2 s)


def attribute_changes(
    new: dict[str, int | None], run: RunSummary, began: int, ended: int
) -> dict[str, str]:
    """Who made each change first seen after `run`, as far as can honestly be told: a rank of
    the run noted it opened the path to write (the probe sees open(), torch.save, safetensors);
    else its modification time falls within the run (a write the probe does not see, or
    another program working at the same time) or outside it (while no process of the runs was
    alive: another program). A removed file has no time to tell."""
    opened: dict[str, str] = {}
    for line in _writes(run.outcome.record_dir):
        path, rank = str(line.get("path")), line.get("rank")
        who = f"rank {rank}" if rank is not None else f"a process (pid {line.get('pid')})"
        opened.setdefault(path, f"{who} of the {run.label} run opened it to write")
    out = {}
    for change, mtime in new.items():
        path = change.rsplit(" (", 1)[0]
        if path in opened:
            out[change] = opened[path]
        elif mtime is None:
            out[change] = f"seen after the {run.label} run; no time to place it"
        elif began - MTIME_SLACK_NS <= mtime <= ended + MTIME_SLACK_NS:
            out[change] = (
                f"written during the {run.label} run, not through open(): the script "
                "(os.open, native code) or another program at the same time"
            )
        else:
            out[change] = "written while no run was going: another program, not the script"
    return out


def _conclude(
    result: VerifyResult,
    changed: list[str],
    user_cwd: str,
    loss_rtol: float | None,
    who: dict[str, str] | None = None,
) -> None:
    """Both runs went: compare them, and tell which files the script wrote in the user's folder."""
    compared = bool(result.one and result.many and result.one.ok and result.many.ok)
    if compared:
        compare_runs(result, loss_rtol)
    if changed:
        result.checks.append(files_check(changed, user_cwd, who))
    if compared or changed:  # once, whatever else the runs gave to say
        _note_gpu_runs(result)


def _note_gpu_runs(result: VerifyResult) -> None:
    for run_summary in result.runs:
        if run_summary.device.startswith("cuda"):
            result.notes.append(
                f"the {run_summary.label} run ran on the GPU ({run_summary.device})"
            )


def _restore_process_state(subreaper: bool, previous_handlers: dict[int, Any]) -> None:
    if subreaper:
        launch.set_child_subreaper(False)
    for sig, handler in previous_handlers.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def compare_runs(result: VerifyResult, loss_rtol: float | None = None) -> None:
    """Both runs were made: the checks, the static findings they bear on, the table."""
    one, many = result.one, result.many
    assert one is not None and many is not None
    result.checks = checks_mod.run_all(one, many, result.exact, loss_rtol)
    schedule = result.check("schedule")
    if schedule is not None:
        static.cross_check_schedule(schedule, result.script_facts, many)
    codes = None if result.static_findings is None else {f.code for f in result.static_findings}
    result.checks.extend(confirm.run_all(one, many, codes))
    checks_mod.join_static(result.checks, result.static_findings)
    if checks_mod.duplicated(result.checks):
        result.notes.append(
            "no equivalence table: every rank trained on the same inputs, so the "
            f"{many.label} run has no global batch of distinct samples to size"
        )
    else:
        result.table = checks_mod.equivalence_table(many, one)
    ranks = result.check("ranks")
    if ranks is not None and ranks.status == "fail":
        result.notes.append(
            f"the ranks' parameters drifted apart (see ranks agree): the {many.nprocs}-process run "
            f"was {many.nprocs} separate trainings, and the table sizes one training: fix that first"
        )


def files_check(changed: Sequence[str], user_cwd: str, who: dict[str, str] | None = None) -> Check:
    """The user's own tree changed while verify ran (a write that bypassed the scratch copy):
    a failure, each path with who made it as far as can be told (see `attribute_changes`); a
    warning when every change was made while no run was going (another program's)."""
    who = who or {}
    listed = [f"{c}: {who[c]}" if c in who else c for c in changed[:10]]
    shown = "; ".join(listed) + (f"; and {len(changed) - 10} more" if len(changed) > 10 else "")
    others = [c for c in changed if who.get(c, "").startswith("written while no run was going")]
    if len(others) == len(changed):
        return Check(
            "files",
            "your files",
            "warn",
            f"{len(changed)} path(s) of your working directory ({user_cwd}) changed while "
            f"verify ran, all at times no process of the runs was alive: {shown}. Not the "
            "script's writes; check what else works in this folder.",
            data={"changed": list(changed), "who": who},
        )
    return Check(
        "files",
        "your files",
        "fail",
        f"the runs changed {len(changed)} path(s) in your working directory ({user_cwd}), "
        f"outside verify's scratch copy: {shown}. The script wrote there by an absolute path, "
        "a link, or a write the probe does not see (os.open on a linked file over the copy "
        "budget); restore these from version control or a backup.",
        data={"changed": list(changed), "who": who},
    )


def _many_env(result: VerifyResult, max_steps: int, epochs: int | None) -> dict[str, str]:
    """How the N-process run ends: after `max_steps` updates, or with --epochs at the first
    update of its training data's E-th pass (by default E = 2 when a static finding needs it)."""
    env = launch.schema
    if epochs is None:
        epochs, why = confirm.epochs_for(result.static_findings)
        if why:
            result.notes.append(why)
    if epochs:
        return {env.ENV_MAX_STEPS: "0", env.ENV_EPOCHS: str(epochs)}
    return {env.ENV_MAX_STEPS: str(max_steps)}


def _plan_single(result: VerifyResult, max_steps: int, n: int, exact: bool) -> dict | None:
    """The 1-process run's stop, planned from what the N-process run really trained on."""
    many = result.many
    env = launch.schema
    if many is None or not many.ok:
        result.notes.append(
            f"the 1-process run needs a successful {result.nprocs}-process run first; skipped"
        )
        return None
    if exact:
        one_env = {env.ENV_MAX_STEPS: str(max_steps), env.ENV_BATCH_SCALE: str(result.nprocs)}
        lrs = _prepared_lrs(many)
        if lrs:
            one_env[env.ENV_LRS] = json.dumps(lrs)
        else:
            result.notes.append(
                "--exact: the N-process run prepared no optimizer; LRs left as they are"
            )
        return one_env
    samples = many.samples_seen if many.samples_known else None
    if samples:
        # Stop once as many samples were trained on; the step cap only guards a runaway run.
        return {
            env.ENV_MAX_STEPS: str(max_steps * result.nprocs * 4),
            env.ENV_MAX_SAMPLES: str(samples),
        }
    result.notes.append(
        f"the {many.label} run's samples per update are unknown: the 1-process run makes "
        f"{max_steps} × {result.nprocs} updates"
    )
    return {env.ENV_MAX_STEPS: str(max_steps * result.nprocs)}


def _prepared_lrs(run: RunSummary | None) -> list[list[float]] | None:
    """Rank 0's LRs of each optimizer as it was prepared (what --exact gives the 1-process run)."""
    if run is None or run.rank0 is None:
        return None
    opts = sorted(run.rank0.optimizers, key=lambda o: o.get("index", 0))
    lrs = [list(o["native_lrs"]) for o in opts if o.get("native_lrs")]
    bases = next((u.base_lrs for u in run.rank0.updates if u.base_lrs), None)
    if lrs and bases and not all(lrs[0]) and all(b for b in bases):
        # A warmup from 0 (LR 0 at prepare): the scheduler's base LRs are what to transfer.
        lrs[0] = [float(b) for b in bases]  # type: ignore[arg-type]
    return lrs or None
