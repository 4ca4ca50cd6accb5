"""Judge each run from its records: did it form one group of N, did every rank finish, and what
did it train on (the curve: per update, samples seen, loss, LR). The comparisons of the two runs
are in distlint.verify.checks.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distlint.verify.launch import RunOutcome
from distlint.verify.records import RankRecord, RunRecords


def rule_name(code: str | None) -> str | None:
    """The kebab-case name of a rule code, from the one registry (no copied names)."""
    if not code:
        return None
    from distlint.registry import by_code

    rule = by_code().get(code)
    return rule.NAME if rule else None


@dataclass
class Check:
    id: str
    title: str
    status: str  # pass | info | warn | fail | skip
    detail: str
    rule: str | None = None
    confirms: bool | None = None  # True: what the rule warns about happened at run time
    data: dict[str, Any] = field(default_factory=dict)
    # False when the run can confirm the rule's premise but not see the hazard itself (DL301: how
    # the script *uses* batch_size is not observable), so "not reported statically" means nothing.
    observes_hazard: bool = True
    static: str | None = None  # filled by join_static: confirmed | refuted | missed | None
    static_where: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "rule": self.rule,
            "rule_name": rule_name(self.rule),
            "confirms": self.confirms,
            "static": self.static,
            "static_where": self.static_where,
            "data": self.data,
        }


@dataclass
class Failure:
    rank: int | None
    reason: str
    detail: str = ""  # traceback or stderr tail

    def to_json(self) -> dict:
        return {"rank": self.rank, "reason": self.reason, "detail": self.detail}


@dataclass
class CurvePoint:
    update: int
    samples: int | None  # samples seen so far, all ranks together (None: unknown)
    batch: int | None  # global samples of this update (None: unknown)
    loss: float | None
    lrs: list[float]
    checksum: tuple[float, float] | None
    rank_checksums: list[tuple[float, float] | None] = field(default_factory=list)
    tokens: int | None = None  # elements of the inputs (tokens for token streams)

    def to_json(self) -> dict:
        return {
            "update": self.update,
            "samples_seen": self.samples,
            "batch": self.batch,
            "tokens": self.tokens,
            "loss": self.loss,
            "lrs": self.lrs,
        }


SETTING_OF = {"accelerate": "Accelerator mixed_precision", "fabric": "Fabric precision"}


def setting_kind(setting: Any) -> str:
    """fp32 | bf16 | fp16: the precision an Accelerate (`"bf16"`, `"fp16"`, `"fp8"`, `"no"`)
    or Fabric (`"bf16-mixed"`, `"16-mixed"`, `"bf16-true"`, `"32-true"`, ...) setting applies.
    fp8 is counted with bf16 (the loosest tolerance there is)."""
    text = str(setting or "").lower()
    if "bf16" in text or "fp8" in text or "transformer-engine" in text:
        return "bf16"
    if text in ("fp16", "16", "16-mixed", "16-true"):
        return "fp16"
    return "fp32"


@dataclass
class RunSummary:
    label: str
    nprocs: int
    launcher: str
    command: list[str]
    outcome: RunOutcome
    records: RunRecords
    problems: list[str] = field(default_factory=list)  # why the run could not be made
    failures: list[Failure] = field(default_factory=list)  # per rank, first failure first
    notes: list[str] = field(default_factory=list)
    curve: list[CurvePoint] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def rank0(self) -> RankRecord | None:
        return self.records.ranks[0] if self.records.ranks else None

    def config(self, key: str, default=None):
        r = self.rank0
        return r.config.get(key, default) if r and r.config else default

    @property
    def device(self) -> str:
        return str(self.config("device") or self.outcome.plan.device)

    @property
    def per_device_batch(self) -> int | None:
        return self.rank0.per_device_batch if self.rank0 else None

    @property
    def accumulation(self) -> int | None:
        """Forwards per update on rank 0 (what accumulation really did), else the config's."""
        r = self.rank0
        if r:
            for u in r.updates:
                if u.forwards:
                    return u.forwards
        value = self.config("gradient_accumulation_steps")
        return int(value) if value else None

    @property
    def precision(self) -> dict[str, Any]:
        """The precision that really ran (rank 0, over its updates): autocast dtypes, parameter
        and gradient dtypes, GradScaler use; `kind` is fp32, bf16 or fp16 (the lowest that ran)."""
        ups = [u.precision for u in (self.rank0.updates if self.rank0 else []) if u.precision]
        casts: dict[str, int] = {}
        for p in ups:
            for dtype in p.get("autocast") or []:
                if dtype != "off":
                    casts[dtype] = casts.get(dtype, 0) + 1
        params = sorted({str(p.get("param")) for p in ups if p.get("param")})
        grads = sorted({str(p.get("grad")) for p in ups if p.get("grad")})
        scaled = sum(1 for p in ups if p.get("scaler"))
        opaque = sum(1 for p in ups if p.get("opaque"))
        dtypes = set(casts) | set(params) | set(grads)
        kind = "fp16" if "float16" in dtypes else "bf16" if "bfloat16" in dtypes else "fp32"
        setting = self.config("mixed_precision")
        if not ups:
            kind = setting_kind(setting)
        return {
            "kind": kind,
            "observed": bool(ups),
            "updates": len(ups),
            "autocast": casts,
            "params": params,
            "grads": grads,
            "scaler_updates": scaled,
            "opaque_updates": opaque,  # a forward with no module inside: autocast unseen
            # what the Accelerator / Fabric that trained was set to apply
            "setting": setting,
            "setting_of": SETTING_OF.get(str(self.config("source"))),
        }

    def precision_mismatch(self) -> str | None:
        """The framework was set to a lower precision than what ran (the forward did not go
        through what it wrapped): said as a note, with the fix in its words."""
        p = self.precision
        want = setting_kind(p["setting"])
        if not p["observed"] or want == "fp32" or p["kind"] != "fp32" or not p["setting_of"]:
            return None
        if p["opaque_updates"]:
            return None  # autocast entered inside a module with no submodule cannot be seen
        through = {
            "Fabric precision": "the module fabric.setup() returned",
            "Accelerator mixed_precision": "the model accelerator.prepare() returned",
        }[p["setting_of"]]
        return (
            f"{self.label}: {p['setting_of']} is {p['setting']}, but every update ran in fp32 "
            f"(no {want} autocast or {want} parameters observed): forward through {through}, "
            "which applies it"
        )

    def precision_text(self) -> str:
        p = self.precision
        setting = p["setting"]
        who = p["setting_of"] or "setting"
        if not p["observed"]:
            return f"{setting} ({who}; not observed)" if setting else "-"
        parts = []
        for dtype, count in sorted(p["autocast"].items()):
            parts.append(f"{dtype} autocast in {count}/{p['updates']} updates")
        if not parts:
            parts.append("no autocast")
        parts.append(f"params {'/'.join(p['params']) or '?'}, grads {'/'.join(p['grads']) or '?'}")
        if p["scaler_updates"]:
            parts.append(f"GradScaler in {p['scaler_updates']}/{p['updates']} updates")
        if p["setting_of"] == "Fabric precision" and setting:
            parts.append(f"Fabric {setting}")
        return "; ".join(parts)

    @property
    def global_batch(self) -> int | None:
        return self.curve[0].batch if self.curve else None

    @property
    def samples_seen(self) -> int | None:
        return self.curve[-1].samples if self.curve else None

    @property
    def samples_known(self) -> bool:
        return bool(self.curve) and all(p.samples is not None for p in self.curve)

    def to_json(self) -> dict:
        r0 = self.rank0
        return {
            "label": self.label,
            "nprocs": self.nprocs,
            "launcher": self.launcher,
            "command": self.command,
            "device": self.device,
            "distributed_type": self.config("distributed_type"),
            "backend": self.config("backend"),
            "mixed_precision": self.config("mixed_precision"),
            "precision": self.precision,
            "gradient_accumulation_steps": self.config("gradient_accumulation_steps"),
            "forwards_per_update": self.accumulation,
            "split_batches": self.config("split_batches"),
            "ranks": [
                {
                    "rank": r.rank,
                    "pid": r.pid,
                    "num_processes": r.num_processes,
                    "updates": len(r.updates),
                    "finished": r.finished,
                    "exception": (r.exception or {}).get("message"),
                    "fatal_signal": r.fatal_signal,
                }
                for r in self.records.ranks
            ],
            "per_device_batch": self.per_device_batch,
            "global_batch": self.global_batch,
            "updates": len(self.curve),
            "samples_seen": self.samples_seen,
            "lrs_first_update": self.curve[0].lrs if self.curve else None,
            "native_lrs": r0.native_lrs() if r0 else None,
            "seeding_calls": [
                {"name": s["name"], "args": s.get("args"), "where": s.get("where")}
                for s in (r0.seeds if r0 else [])
            ],
            "per_update": [p.to_json() for p in self.curve],
            "loss_curve": [[p.samples, p.loss] for p in self.curve],
            "wall_s": round(self.outcome.wall_s, 3),
            "returncode": self.outcome.returncode,
            "timed_out": self.outcome.timed_out,
            "ok": self.ok,
            "problems": self.problems,
            "failures": [f.to_json() for f in self.failures],
            "notes": self.notes,
            "leftover_processes": {str(k): v for k, v in self.outcome.leftovers.items()},
            "tag": self.outcome.tag,
        }


# -- one run --------------------------------------------------------------------------------


def _exception_text(rank: RankRecord) -> str:
    exc = rank.exception or {}
    return f"{exc.get('type', 'Exception')}: {exc.get('message', '')}".strip()


_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
_ROOT_CAUSE = re.compile(
    r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL | re.IGNORECASE
)
TAIL_LINES = 20  # lines of a failed rank's own output shown first


def first_failed_rank(outcome: RunOutcome, tails: dict[int, str]) -> tuple[int | None, int | None]:
    """(rank, exit status) of the first rank that failed, as the launcher saw it (torchrun's
    "Root Cause" block), else the lowest rank that wrote to stderr; (None, status) when the
    launcher is the script's only process (the 1-process run without a launcher)."""
    found = _ROOT_CAUSE.search(outcome.output_tail(400))
    if found:
        return int(found.group(1)), int(found.group(2))
    written = sorted(r for r, text in tails.items() if text.strip())
    if written:
        return written[0], None
    code = outcome.returncode
    return None, code if code and code > 0 else None


def signal_deaths(records: RunRecords, output: str) -> dict[int, str]:
    """pid -> signal name, for the ranks that died of a signal (faulthandler, launcher summary)."""
    found: dict[int, str] = {}
    names = {
        "Segmentation fault": "SIGSEGV",
        "Aborted": "SIGABRT",
        "Bus error": "SIGBUS",
        "Floating point exception": "SIGFPE",
        "Illegal instruction": "SIGILL",
    }
    for r in records.ranks:
        if r.fatal_signal:
            found[r.pid] = names.get(r.fatal_signal, r.fatal_signal)
    for code, pid in _EXITCODE.findall(output):
        if int(code) < 0 and int(pid) not in found:
            try:
                found[int(pid)] = signal.Signals(-int(code)).name
            except ValueError:
                found[int(pid)] = f"signal {-int(code)}"
    return found


def summarize_run(
    outcome: RunOutcome,
    records: RunRecords,
    expected: int,
    max_steps: int,
    world: int | None = None,
) -> RunSummary:
    """expected: the ranks whose records should be here; world: the group size each should
    report (more than expected on a follower node, which sees only its own ranks)."""
    plan = outcome.plan
    run = RunSummary(plan.label, plan.nprocs, plan.launcher, plan.argv, outcome, records)
    run.problems.extend(records.problems)
    ranks = records.ranks
    tails = outcome.rank_stderr_tails()

    def tail_for(rank: int | None) -> str:
        if rank is not None and rank in tails and tails[rank].strip():
            return tails[rank]
        return outcome.output_tail(TAIL_LINES)

    if not ranks:
        exc = next((o for o in records.others if o.exception), None)
        reason = (
            "no process of the script got as far as creating an Accelerator, a process group "
            "or a training step"
        )
        if outcome.returncode not in (0, None) or any(t.strip() for t in tails.values()):
            reason = (
                "the script failed before it created an Accelerator or a process group (its "
                "own error is above)"
            )
        if outcome.timed_out:
            reason = (
                f"timed out after {outcome.wall_s:.0f} s before any rank started training (slow "
                "start-up or a hang before the first Accelerator / process group): raise --timeout "
                "if it was slow"
            )
        run.problems.append(reason)
        spawned = sum(1 for c in outcome.at_timeout if "spawn_main" in c or "forkserver" in c)
        if spawned:
            run.problems.append(
                f"{spawned} process(es) started by the script itself (multiprocessing spawn) were "
                "alive: a script that starts its own group (torch.multiprocessing.spawn with its "
                "own MASTER_PORT) is its own launcher, and under a launcher each rank starts a "
                "group of its own. verify needs a script that a launcher starts (torchrun, "
                "accelerate launch, fabric run)."
            )
        if exc:
            detail = (exc.exception or {}).get("traceback", "")
            run.failures.append(Failure(None, _exception_text(exc), detail or tail_for(None)))
        else:
            rank, code = first_failed_rank(outcome, tails)
            if code:
                status = f"exited with status {code} before training"
            elif outcome.returncode == 0:
                status = "exited (status 0) without training"
            else:
                status = "failed before training"
            run.failures.append(Failure(rank, f"{status} (its own output below)", tail_for(rank)))
        run.curve = []
        return run

    _check_group(run, ranks, expected, plan.argv, world or expected)
    _check_finished(run, ranks, outcome, max_steps, tail_for)
    if not run.problems and not any(r.updates for r in ranks):
        run.problems.append("no optimizer update was recorded: nothing to compare")
    if not run.problems and outcome.returncode not in (0, None) and not outcome.launcher_stopped:
        run.notes.append(
            f"the launcher exited with status {outcome.returncode} after every rank had finished "
            "(judged by the records: gloo sometimes aborts a rank during interpreter teardown)"
        )
    # Children of ranks that verify stopped (DataLoader workers) are verify's to end, not the
    # script's leftovers.
    stopped_children = {p for r in ranks for p in r.stop_children}
    ours = sorted(p for p in outcome.leftovers if p in stopped_children)
    if ours:
        run.notes.append(
            f"verify ended {len(ours)} worker process(es) of the ranks it stopped at the step "
            f"limit (DataLoader workers; pids {', '.join(map(str, ours))})"
        )
    for pid, info in outcome.leftovers.items():
        if pid in stopped_children:
            continue
        how = info.get("found_by", "environment tag")
        run.notes.append(
            f"killed pid {pid} left behind by the script (found by {how}; rank "
            f"{info.get('RANK', '?')}): {info.get('cmdline', '')}"
        )
    copied = sorted(
        {
            n.split(":", 1)[1].split(" (", 1)[0].strip()
            for r in ranks + records.others
            for n in r.notes
            if n.startswith("copy on write:")
        }
    )
    if copied:
        run.notes.append(
            f"{run.label}: the script wrote to {len(copied)} file(s) that exist in your working "
            "directory; the run wrote them in its scratch folder instead (copy on write), yours "
            "are untouched: " + ", ".join(copied[:5]) + (" ..." if len(copied) > 5 else "")
        )
    mismatch = run.precision_mismatch()
    if mismatch:
        run.notes.append(mismatch)
    untrained = sum(u.untrained for r in ranks[:1] for u in r.updates)
    if untrained:
        run.notes.append(
            f"{run.label}: {untrained} forward(s) of the model with grad enabled that no backward "
            "reached (evaluation or a sanity check) were not counted as trained samples"
        )
    r0 = ranks[0]
    trained = [u.samples for u in r0.updates]
    handed = [u.loader_samples for u in r0.updates]
    if r0.updates and all(t is not None for t in trained) and any(handed):
        total_t, total_h = sum(trained), sum(h or 0 for h in handed)  # type: ignore[arg-type]
        if total_h > total_t:
            run.notes.append(
                f"{run.label}: rank 0's DataLoaders handed out {total_h} samples during its "
                f"{len(r0.updates)} updates, {total_t} were trained on (the rest: peeks, "
                "evaluation, or batches the script skipped)"
            )
        elif total_h < total_t:
            run.notes.append(
                f"{run.label}: rank 0 trained on {total_t} samples during its {len(r0.updates)} "
                f"updates, its DataLoaders handed out {total_h} (the script also forwards inputs "
                "it builds itself, or forwards a batch more than once)"
            )
    run.curve = build_curve(ranks)
    return run


def _check_group(run: RunSummary, ranks: list[RankRecord], expected: int, argv, world: int) -> None:
    """Did the N processes form ONE group of N? (Judged from what each rank recorded.)"""
    reported = sorted({r.num_processes for r in ranks if r.num_processes is not None})
    indices = [r.rank for r in ranks]
    if world == 1:
        if len(ranks) > 1 or any(n != 1 for n in reported):
            run.problems.append(
                f"the 1-process run recorded {len(ranks)} ranks (num_processes={reported}): the "
                "script started a distributed group of its own"
            )
        return
    lone = [r for r in ranks if r.config is None or r.num_processes == 1]
    failed_early = [r for r in lone if r.config is None and not r.updates and not r.finished]
    if failed_early and len(lone) == len(ranks):
        return  # the script failed before it could form a group: its error says why (below)
    if len(ranks) > 1 and len(lone) == len(ranks) and world > 1:
        no_group = [r for r in ranks if r.config is None]
        if no_group:
            why = (
                "no rank created an Accelerator or called init_process_group, so each trained "
                "its own copy of the model on its own: a launcher alone does not make a group"
            )
        elif all((r.config or {}).get("source") == "fabric" for r in ranks):
            strategy = (ranks[0].config or {}).get("distributed_type") or "?"
            why = (
                f"each Fabric reports world_size=1 (strategy {strategy}): Fabric forms a group "
                "when its devices (and num_nodes) ask for one; run it with --launcher fabric "
                "(`fabric run --devices N`) or give Fabric(devices=...) the process count"
            )
        else:
            why = (
                "each reports num_processes=1. On a CPU machine Accelerate forms a gloo group "
                "only with ACCELERATE_USE_CPU=1 (and without it torchrun still exits 0)"
            )
        run.problems.append(
            f"{len(ranks)} processes started but each trained alone (process indices {indices}):"
            f" they never formed a group; {why}. Verify compares a real group of {expected} only."
        )
    elif len(ranks) < expected:
        hint = ""
        if "--cpu" in argv:
            hint = (
                " `accelerate launch --cpu` starts ONE process whatever --num_processes says; "
                "use torchrun, or --multi_gpu with ACCELERATE_USE_CPU=1."
            )
        run.problems.append(
            f"expected {expected} ranks, but only {len(ranks)} process(es) recorded a rank "
            f"(num_processes={reported or '?'}).{hint}"
        )
    elif any(n != world for n in reported) or (
        world == expected and sorted(i for i in indices if i is not None) != list(range(world))
    ):
        run.problems.append(
            f"the ranks did not form one group of {world}: num_processes={reported}, "
            f"process indices {indices}"
        )


def _check_finished(run, ranks, outcome, max_steps, tail_for) -> None:
    """Did every rank finish? Judge by the records, not the exit code."""
    deaths = signal_deaths(run.records, outcome.output_tail(400))
    unfinished = [r for r in ranks if not r.finished]
    if outcome.timed_out:
        least = min(ranks, key=lambda r: r.progress)
        stuck = [r for r in ranks if r.progress == least.progress]
        end_t = outcome.end_t or max(r.last_t for r in ranks)
        recent = all(end_t - r.last_t < max(5.0, 0.1 * outcome.wall_s) for r in ranks)
        if len(stuck) < len(ranks):
            for r in stuck:
                run.failures.append(
                    Failure(
                        r.rank,
                        f"hung: no progress after update {len(r.updates)} while the other ranks "
                        "waited for it",
                        tail_for(r.rank),
                    )
                )
        elif recent and least.updates:
            run.failures.append(
                Failure(
                    None,
                    f"still training when the timeout hit (update {len(least.updates)} on every "
                    "rank, records written until the end): the run is slow, not stuck; raise "
                    "--timeout or lower --max-steps",
                    outcome.output_tail(10),
                )
            )
        else:
            run.failures.append(
                Failure(
                    None,
                    f"all ranks stuck at update {len(least.updates)}",
                    outcome.output_tail(20),
                )
            )
        run.problems.append(
            f"timed out after {outcome.wall_s:.0f} s: verify sent SIGTERM to every process of "
            "the run, then SIGKILL to those still alive"
        )
        for pid, info in outcome.killed_after_timeout.items():
            rank = info.get("RANK", "?")
            run.notes.append(
                f"pid {pid} (rank {rank}) ignored verify's SIGTERM; verify killed it with SIGKILL"
            )
        return
    if not unfinished and not any(r.exception for r in ranks):
        return
    # (order, time, rank, reason, detail): a rank that died of a fatal signal first, then
    # exceptions and early exits in the order they happened, then ranks that the launcher
    # terminated (SIGTERM after another rank failed). A rank's own exception is its failure even
    # when the launcher's SIGTERM reached it afterwards.
    explicit = []
    for r in ranks:
        signal_name = deaths.get(r.pid) if not r.finished else None
        polite = signal_name in ("SIGTERM", "SIGINT", "SIGHUP")
        if signal_name and not polite:
            # A fatal signal: a native crash, or SIGKILL from outside (the OOM killer).
            who = (
                " (not sent by verify: the OOM killer or a user)"
                if signal_name == "SIGKILL"
                else ""
            )
            reason = f"died of {signal_name}{who} after {len(r.updates)} updates"
            explicit.append((0, r.last_t, r.rank, reason, ""))
        elif r.exception:
            explicit.append(
                (1, r.exception["t"], r.rank, _exception_text(r), r.exception.get("traceback", ""))
            )
        elif r.exited and not r.stopped:
            explicit.append(
                (
                    1,
                    r.last_t,
                    r.rank,
                    f"exited (sys.exit or end of script) after {len(r.updates)} of {max_steps} "
                    "updates, while other ranks still needed it",
                    "",
                )
            )
        elif polite:
            explicit.append((2, r.last_t, r.rank, f"{signal_name}|{len(r.updates)}", ""))
    explicit.sort(key=lambda e: (e[0], e[1]))
    first_rank = explicit[0][2] if explicit and explicit[0][0] < 2 else None
    for order, _, rank, reason, tb in explicit:
        if order == 2:  # verify sends no signal to a run that has not timed out
            name, _, updates = reason.partition("|")
            after = f", after rank {first_rank} failed" if first_rank is not None else ""
            reason = (
                f"terminated by {name} from the launcher{after} (not sent by verify), after "
                f"{updates} updates"
            )
        run.failures.append(Failure(rank, reason, tb or tail_for(rank)))
    for r in unfinished:
        if any(f.rank == r.rank for f in run.failures):
            continue
        run.failures.append(
            Failure(
                r.rank,
                f"stopped after {len(r.updates)} updates without an exception (killed, crashed in "
                "native code, or terminated by the launcher after another rank failed)",
                tail_for(r.rank),
            )
        )
    if run.failures:
        first = run.failures[0]
        who = f"rank {first.rank}" if first.rank is not None else "a process"
        run.problems.append(f"{who} failed: {first.reason}")


def build_curve(ranks: Sequence[RankRecord]) -> list[CurvePoint]:
    """Per update, all ranks together: global batch, samples seen, mean loss, rank 0's LRs.

    An update's samples are the trained forwards' (see the probe); when a rank recorded none,
    the DataLoader batches it was handed; when neither is known, the samples are unknown (None),
    and so is every later "samples seen".
    """
    if not ranks:
        return []
    count = min(len(r.updates) for r in ranks)
    curve: list[CurvePoint] = []
    seen: int | None = 0
    for i in range(count):
        ups = [r.updates[i] for r in ranks]
        sizes = [u.samples if u.samples is not None else u.loader_samples for u in ups]
        known = [s for s in sizes if s is not None]
        batch = sum(known) if len(known) == len(sizes) else None
        seen = None if seen is None or batch is None else seen + batch
        tokens = [u.numel for u in ups]
        losses = [u.loss for u in ups if u.loss is not None]
        checks = [u.checksum for u in ups]
        present = [c for c in checks if c is not None]
        checksum = None
        if len(present) == len(checks):
            checksum = (sum(c[0] for c in present), sum(c[1] for c in present))
        curve.append(
            CurvePoint(
                update=i + 1,
                samples=seen,
                batch=batch,
                loss=sum(losses) / len(losses) if len(losses) == len(ups) else None,
                lrs=ups[0].lrs,
                checksum=checksum,
                rank_checksums=checks,
                tokens=None if any(t is None for t in tokens) else sum(t or 0 for t in tokens),
            )
        )
    return curve
