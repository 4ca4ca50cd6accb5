"""Judge the two runs from their records: did each run form, and are the setups comparable?

Each check says which static rule it confirms or refutes:
  DL101 seed-only-torch         generators that differ across ranks or runs were not seeded
  DL201 unscaled-learning-rate  global batch grew ×N but the LR did not
  DL301 per-device-batch-as-global  the DataLoader's batch_size is per device: the global batch is ×N
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distlint.verify.launch import RunOutcome
from distlint.verify.records import RankRecord, RunRecords

RULES = {
    "DL101": "seed-only-torch",
    "DL201": "unscaled-learning-rate",
    "DL301": "per-device-batch-as-global",
}

# Which generators each seeding call seeds (set_seed seeds them all).
SEEDS = {
    "accelerate.utils.set_seed": {"python", "numpy", "torch", "cuda", "xla"},
    "random.seed": {"python"},
    "numpy.random.seed": {"numpy"},
    "torch.manual_seed": {"torch", "cuda"},
    "torch.seed": {"torch", "cuda"},
    "torch.cuda.manual_seed_all": {"cuda"},
    "torch.cuda.manual_seed": {"cuda"},
    "xm.set_rng_state": {"xla"},
}
GENERATORS = ("python", "numpy", "torch", "cuda", "xla")
RNG_POINTS = ("prepare", "ready", "first_step", "end")


@dataclass
class Check:
    id: str
    title: str
    status: str  # pass | warn | fail | skip
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
            "rule_name": RULES.get(self.rule) if self.rule else None,
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
    samples: int  # samples seen so far, all ranks together
    batch: int  # global samples of this update
    loss: float | None
    lrs: list[float]
    checksum: tuple[float, float] | None


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
    def global_batch(self) -> int | None:
        return self.curve[0].batch if self.curve else None

    @property
    def samples_seen(self) -> int:
        return self.curve[-1].samples if self.curve else 0

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
            "gradient_accumulation_steps": self.config("gradient_accumulation_steps"),
            "split_batches": self.config("split_batches"),
            "ranks": [
                {
                    "rank": r.rank,
                    "pid": r.pid,
                    "num_processes": r.num_processes,
                    "updates": len(r.updates),
                    "finished": r.finished,
                    "exception": (r.exception or {}).get("message"),
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


def summarize_run(
    outcome: RunOutcome, records: RunRecords, expected: int, max_steps: int
) -> RunSummary:
    plan = outcome.plan
    run = RunSummary(plan.label, plan.nprocs, plan.launcher, plan.argv, outcome, records)
    ranks = records.ranks
    tails = outcome.rank_stderr_tails()

    def tail_for(rank: int | None) -> str:
        if rank is not None and rank in tails and tails[rank].strip():
            return tails[rank]
        return outcome.output_tail(20)

    # Did the N processes form ONE group of N? (Judged from what each rank recorded.)
    if not ranks:
        exc = next((o for o in records.others if o.exception), None)
        reason = "no process of the script got as far as creating an Accelerator, a process group or a training step"
        if outcome.timed_out:
            reason = (
                f"timed out after {outcome.wall_s:.0f} s before any rank started training (slow start-up "
                "or a hang before the first Accelerator / process group): raise --timeout if it was slow"
            )
        run.problems.append(reason)
        detail = (exc.exception or {}).get("traceback", "") if exc else ""
        run.failures.append(
            Failure(
                None, _exception_text(exc) if exc else reason, detail or outcome.output_tail(25)
            )
        )
    else:
        reported = sorted({r.num_processes for r in ranks if r.num_processes is not None})
        indices = [r.rank for r in ranks]
        if expected > 1 and len(ranks) > 1 and reported == [1]:
            run.problems.append(
                f"{len(ranks)} processes started but each trained alone (each reports num_processes=1, "
                f"process_index {indices}): they never formed a group. On a CPU machine Accelerate forms a "
                "gloo group only with ACCELERATE_USE_CPU=1 (and without it torchrun still exits 0)."
            )
        elif expected > 1 and len(ranks) < expected:
            hint = ""
            if "--cpu" in plan.argv:
                hint = (
                    " `accelerate launch --cpu` starts ONE process whatever --num_processes says; "
                    "use torchrun, or --multi_gpu with ACCELERATE_USE_CPU=1."
                )
            run.problems.append(
                f"expected {expected} ranks, but only {len(ranks)} process(es) recorded a rank "
                f"(num_processes={reported or '?'}).{hint}"
            )
        elif expected == 1:
            if len(ranks) > 1 or any(n != 1 for n in reported):
                run.problems.append(
                    f"the 1-process run recorded {len(ranks)} ranks (num_processes={reported}): the script started "
                    "a distributed group of its own"
                )
        elif any(n != expected for n in reported) or sorted(
            i for i in indices if i is not None
        ) != list(range(expected)):
            run.problems.append(
                f"the ranks did not form one group of {expected}: num_processes={reported}, process indices {indices}"
            )

        # Did every rank finish? Judge by the records, not the exit code.
        unfinished = [r for r in ranks if not r.finished]
        if outcome.timed_out:
            least = min(ranks, key=lambda r: r.progress)
            stuck = [r for r in ranks if r.progress == least.progress]
            if len(stuck) < len(ranks):
                for r in stuck:
                    run.failures.append(
                        Failure(
                            r.rank,
                            f"hung: no progress after update {len(r.updates)} while the other ranks waited for it",
                            tail_for(r.rank),
                        )
                    )
            else:
                stuck_at = f"all ranks stuck at update {len(least.updates)}"
                run.failures.append(Failure(None, stuck_at, outcome.output_tail(20)))
            run.problems.append(
                f"timed out after {outcome.wall_s:.0f} s: the processes were killed"
            )
            for pid, info in outcome.killed_after_timeout.items():
                rank = info.get("RANK", "?")
                run.notes.append(
                    f"pid {pid} (rank {rank}) ignored SIGTERM and was killed with SIGKILL"
                )
        elif unfinished or any(r.exception for r in ranks):
            explicit = []
            for r in ranks:
                if r.exception:
                    explicit.append(
                        (
                            r.exception["t"],
                            r.rank,
                            _exception_text(r),
                            r.exception.get("traceback", ""),
                        )
                    )
                elif r.exited and not r.stopped:
                    explicit.append(
                        (
                            r.last_t,
                            r.rank,
                            f"exited (sys.exit or end of script) after {len(r.updates)} of {max_steps} updates, "
                            "while other ranks still needed it",
                            "",
                        )
                    )
            explicit.sort(key=lambda e: e[0])
            for _, rank, reason, tb in explicit:
                run.failures.append(Failure(rank, reason, tb or tail_for(rank)))
            for r in unfinished:
                if r.exception or any(f.rank == r.rank for f in run.failures):
                    continue
                run.failures.append(
                    Failure(
                        r.rank,
                        f"stopped after {len(r.updates)} updates without an exception (killed, crashed in native code, "
                        "or terminated by the launcher after another rank failed)",
                        tail_for(r.rank),
                    )
                )
            if run.failures:
                first = run.failures[0]
                who = f"rank {first.rank}" if first.rank is not None else "a process"
                run.problems.append(f"{who} failed: {first.reason}")
        if not run.problems and not any(r.updates for r in ranks):
            run.problems.append("no optimizer update was recorded: nothing to compare")
        if (
            not run.problems
            and outcome.returncode not in (0, None)
            and not outcome.launcher_stopped
        ):
            run.notes.append(
                f"the launcher exited with status {outcome.returncode} after every rank had finished "
                "(judged by the records: gloo sometimes aborts a rank during interpreter teardown)"
            )
    for pid, info in outcome.leftovers.items():
        run.notes.append(
            f"killed pid {pid} left behind by the script (rank {info.get('RANK', '?')}): {info.get('cmdline', '')}"
        )
    run.curve = build_curve(ranks)
    return run


def build_curve(ranks: Sequence[RankRecord]) -> list[CurvePoint]:
    """Per update, all ranks together: global batch, samples seen, mean loss, rank 0's LRs."""
    if not ranks:
        return []
    count = min(len(r.updates) for r in ranks)
    curve, seen = [], 0
    for i in range(count):
        ups = [r.updates[i] for r in ranks]
        batch = sum(u.samples for u in ups)
        seen += batch
        losses = [u.loss for u in ups if u.loss is not None]
        checks = [u.checksum for u in ups]
        checksum = None
        if all(c is not None for c in checks):
            checksum = (sum(c[0] for c in checks), sum(c[1] for c in checks))
        curve.append(
            CurvePoint(
                update=i + 1,
                samples=seen,
                batch=batch,
                loss=sum(losses) / len(losses) if len(losses) == len(ups) else None,
                lrs=ups[0].lrs,
                checksum=checksum,
            )
        )
    return curve


# -- the comparisons ------------------------------------------------------------------------


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def check_batch(one: RunSummary, many: RunSummary, exact: bool) -> Check:
    n = many.nprocs
    per_device = many.per_device_batch
    native = many.rank0.native_per_device_batch if many.rank0 else None
    g1, gn = one.global_batch, many.global_batch
    accum = many.config("gradient_accumulation_steps") or 1
    data = {
        "per_device": per_device,
        "script_batch_size": native,
        "global_1": g1,
        "global_n": gn,
        "accumulation": accum,
    }
    if not g1 or not gn:
        return Check(
            "batch", "observed batch", "skip", "no batches were recorded", "DL301", data=data
        )
    accum_txt = f" × {accum} accumulation steps" if accum > 1 else ""
    detail = (
        f"{many.label}: {per_device} per device × {n}{accum_txt} = {gn} samples per update; "
        f"{one.label}: {g1}{' (per-device batch × N, --exact)' if exact else ''}."
    )
    # DL301's claim: the DataLoader's batch_size is per device, so the global batch is batch_size × N.
    confirms = bool(native) and gn == native * n * accum and n > 1
    if many.config("split_batches"):
        detail += (
            f" split_batches=True: the DataLoader's batch_size ({native}) is the global batch here."
        )
        confirms = False
    if g1 == gn:
        return Check(
            "batch",
            "observed batch",
            "pass",
            detail + " Same observed batch in both runs.",
            "DL301",
            confirms,
            data,
            observes_hazard=False,
        )
    ratio = gn / g1
    detail += (
        f" The {many.label.split()[0]}-process run sees ×{ratio:g} more samples per update: compare the runs at equal "
        "samples seen (as below), or size the batches with the table."
    )
    return Check(
        "batch", "observed batch", "warn", detail, "DL301", confirms, data, observes_hazard=False
    )


def check_lr(one: RunSummary, many: RunSummary, exact: bool) -> Check:
    lr1 = one.rank0.native_lrs() if one.rank0 else None
    lrn = many.curve[0].lrs if many.curve else None
    native1 = one.rank0.native_per_device_batch if one.rank0 else None
    accum1 = one.config("gradient_accumulation_steps") or 1
    g1 = native1 * accum1 if native1 else one.global_batch  # the script's own 1-process batch
    gn = many.global_batch
    data = {"lr_1": lr1, "lr_n": lrn, "batch_ratio": None, "lr_ratio": None, "scaling": None}
    if not lr1 or not lrn or not g1 or not gn or not lr1[0]:
        return Check(
            "lr",
            "learning rate",
            "skip",
            "no optimizer update with an LR was recorded",
            "DL201",
            data=data,
        )
    batch_ratio = gn / g1
    lr_ratio = lrn[0] / lr1[0]
    data.update(batch_ratio=batch_ratio, lr_ratio=lr_ratio)
    head = (
        f"LR {lr1[0]:g} on 1 process, {lrn[0]:g} on {many.nprocs}: ×{lr_ratio:.3g} "
        f"for a global batch ×{batch_ratio:g}."
    )
    if _close(batch_ratio, 1.0, 1e-9):
        status = "pass" if _close(lr_ratio, 1.0, 1e-6) else "warn"
        return Check(
            "lr", "learning rate", status, head + " Same global batch.", "DL201", False, data
        )
    if _close(lr_ratio, 1.0, 1e-6):
        data["scaling"] = "none"
        return Check(
            "lr",
            "learning rate",
            "fail",
            f"global batch ×{batch_ratio:g}, LR unchanged ({lr1[0]:g}). Scale it with the number of processes: "
            "`lr * accelerator.num_processes` (linear scaling, Goyal et al. 2017).",
            "DL201",
            True,
            data,
        )
    if _close(lr_ratio, batch_ratio, 1e-6):
        data["scaling"] = "linear"
        return Check("lr", "learning rate", "pass", head + " Linear scaling.", "DL201", False, data)
    if _close(lr_ratio, math.sqrt(batch_ratio), 1e-6):
        data["scaling"] = "sqrt"
        return Check(
            "lr", "learning rate", "pass", head + " Square-root scaling.", "DL201", False, data
        )
    data["scaling"] = "other"
    return Check(
        "lr",
        "learning rate",
        "warn",
        head + " Neither linear nor square-root scaling.",
        "DL201",
        False,
        data,
    )


def _seed_point(rank: RankRecord, gen: str) -> tuple[str | None, str | None]:
    """The fingerprint to compare for `gen`: right after the last call that seeded it, else at "ready"."""
    for seed in reversed(rank.seeds):
        if gen in SEEDS.get(seed["name"], ()) and gen in (seed.get("fp") or {}):
            return seed["fp"][gen], seed["name"]
    for point in ("ready", "first_step", "prepare"):
        if gen in rank.rng.get(point, {}):
            return rank.rng[point][gen], None
    return None, None


def _used(rank: RankRecord, gen: str) -> bool:
    """Did the script draw from an unseeded generator (its state changed after import)?"""
    states = [fp[gen] for point, fp in rank.rng.items() if gen in fp]
    return len(set(states)) > 1


def check_seeding(one: RunSummary, many: RunSummary) -> Check:
    ranks = many.records.ranks
    r1 = one.rank0
    unseeded: dict[str, list[str]] = {}
    used: dict[str, bool] = {}
    seeded_by: dict[str, str] = {}
    for gen in GENERATORS:
        points = [(r, _seed_point(r, gen)) for r in ranks]
        points = [(r, fp, by) for r, (fp, by) in points if fp is not None]
        if not points:
            continue
        where = []
        if len({fp for _, fp, _ in points}) > 1:
            where.append("across ranks")
        if r1 is not None:
            fp1, _ = _seed_point(r1, gen)
            if fp1 is not None and fp1 != points[0][1]:
                where.append("between the runs")
        if where:
            unseeded[gen] = where
            used[gen] = any(_used(r, gen) for r, _, _ in points) or (
                r1 is not None and _used(r1, gen)
            )
        else:
            seeded_by[gen] = points[0][2] or "-"
    calls = sorted(
        {s["name"] for s in (r1.seeds if r1 else [])} | {s["name"] for r in ranks for s in r.seeds}
    )
    device_specific = any(
        "device_specific" in s.get("kwargs", {}) and "True" in s["kwargs"]["device_specific"]
        for r in ranks
        for s in r.seeds
    )
    data = {
        "unseeded": sorted(unseeded),
        "unseeded_used": sorted(g for g in unseeded if used[g]),
        "differs": unseeded,
        "seeding_calls": calls,
        "seeded_by": seeded_by,
    }
    calls_txt = ", ".join(calls) if calls else "no seeding call"
    if not unseeded:
        return Check(
            "seeding",
            "seeding",
            "pass",
            f"every generator has the same state on every rank and in both runs ({calls_txt}).",
            "DL101",
            False,
            data,
        )
    names = sorted(
        unseeded, key=lambda g: (not used[g], GENERATORS.index(g))
    )  # the ones drawn from first
    parts = [
        f"{g} ({' and '.join(unseeded[g])}{'' if used[g] else ', never drawn from'})" for g in names
    ]
    differ_where = (
        "across ranks" if any("across ranks" in unseeded[g] for g in names) else "between the runs"
    )
    detail = (
        f"{' and '.join(names)} RNG differ {differ_where}: seed them with set_seed "
        "(accelerate.utils.set_seed seeds python, numpy, torch and the accelerators). "
        f"Differences: {'; '.join(parts)}. "
        f"Seeding calls that ran: {calls_txt}."
    )
    if device_specific:
        detail += " (set_seed(..., device_specific=True) seeds each rank differently on purpose.)"
    status = "fail" if any(used.values()) else "warn"
    confirms = "torch" not in unseeded and bool({"python", "numpy"} & set(unseeded))
    return Check("seeding", "seeding", status, detail, "DL101", confirms, data)


def _cumulative(curve: Sequence[CurvePoint]) -> dict[int, tuple[float, float]]:
    out, s1, s2 = {}, 0.0, 0.0
    for p in curve:
        if p.checksum is None:
            return out
        s1 += p.checksum[0]
        s2 += p.checksum[1]
        out[p.samples] = (s1, s2)
    return out


def _same_sum(a: tuple[float, float], b: tuple[float, float]) -> bool:
    scale = 1.0 + abs(a[1]) + abs(b[1])
    return abs(a[0] - b[0]) <= 1e-9 * scale and abs(a[1] - b[1]) <= 1e-9 * scale


SEEDABLE_FIX = (
    "make the shuffling reproducible: Accelerator(dataloader_config=DataLoaderConfiguration("
    "use_seedable_sampler=True)), or give the DataLoader a seeded generator (torch.Generator().manual_seed(seed)); "
    "seed numpy/python with set_seed if they order the data"
)


def check_data_order(one: RunSummary, many: RunSummary, exact: bool) -> Check:
    c1, cn = _cumulative(one.curve), _cumulative(many.curve)
    common = sorted(set(c1) & set(cn))
    data = {"compared_samples": common[-1] if common else 0, "first_difference_at": None}
    if not common:
        return Check(
            "data",
            "data order",
            "skip",
            "no common sample counts with input checksums to compare",
            data=data,
        )
    for s in common:
        if not _same_sum(c1[s], cn[s]):
            data["first_difference_at"] = s
            before = max([x for x in common if x < s], default=0)
            return Check(
                "data",
                "data order",
                "fail" if exact else "warn",
                f"the runs saw different samples: the inputs agree for the first {before} samples and differ by "
                f"sample {s}. To compare the runs step by step, {SEEDABLE_FIX}.",
                data=data,
            )
    return Check(
        "data",
        "data order",
        "pass",
        f"both runs saw the same samples in the same order (first {common[-1]} samples compared).",
        data=data,
    )


def loss_tolerance(one: RunSummary, many: RunSummary, exact: bool) -> tuple[float, str]:
    mixed = any(str(r.config("mixed_precision") or "no") not in ("no", "None") for r in (one, many))
    accum = max(int(r.config("gradient_accumulation_steps") or 1) for r in (one, many))
    if exact:
        return (1e-2, "mixed precision") if mixed else (1e-5, "fp32")
    rtol, why = 0.25, ["fp32"]
    if mixed:
        rtol += 0.15
        why = ["mixed precision"]
    if accum > 1:
        rtol += 0.15
        why.append(f"gradient accumulation ×{accum}")
    return rtol, ", ".join(why)


def _window_mean(curve: Sequence[CurvePoint], lo: float, hi: float) -> float | None:
    values = [p.loss for p in curve if lo < p.samples <= hi and p.loss is not None]
    return sum(values) / len(values) if values else None


def check_loss(one: RunSummary, many: RunSummary, exact: bool, rtol: float | None = None) -> Check:
    tol, why = loss_tolerance(one, many, exact)
    if rtol is not None:
        tol, why = rtol, "--loss-rtol"
    data: dict[str, Any] = {"rtol": tol, "tolerance_for": why}
    if not one.curve or not many.curve:
        return Check("loss", "loss", "skip", "no losses were recorded", data=data)
    if exact:
        worst, worst_at, compared = 0.0, None, 0
        for p1, pn in zip(one.curve, many.curve):
            if p1.batch != pn.batch or p1.loss is None or pn.loss is None:
                break
            if p1.checksum and pn.checksum and not _same_sum(p1.checksum, pn.checksum):
                data.update(compared_updates=compared, inputs_differ_at=p1.update)
                return Check(
                    "loss",
                    "loss (exact)",
                    "fail",
                    f"update {p1.update}: the inputs differ between the runs, so the losses cannot match "
                    f"(agreed for {compared} updates). To compare step by step, {SEEDABLE_FIX}.",
                    data=data,
                )
            rel = abs(p1.loss - pn.loss) / max(abs(p1.loss), abs(pn.loss), 1e-12)
            if rel > worst:
                worst, worst_at = rel, p1.update
            compared += 1
        data.update(compared_updates=compared, max_rel_diff=worst, worst_update=worst_at)
        if compared == 0:
            return Check(
                "loss",
                "loss (exact)",
                "skip",
                "no update with the same global batch to compare (--exact scales the batch through "
                "Accelerator.prepare; a script without it keeps its own batch size)",
                data=data,
            )
        status = "pass" if worst <= tol else "fail"
        return Check(
            "loss",
            "loss (exact)",
            status,
            f"per-update losses over {compared} updates: largest relative difference {worst:.2g} "
            f"(update {worst_at}); tolerance {tol:g} ({why}).",
            data=data,
        )
    seen = min(one.samples_seen, many.samples_seen)
    lo = 0.75 * seen
    end1, endn = _window_mean(one.curve, lo, seen), _window_mean(many.curve, lo, seen)
    data.update(samples=seen, end_loss_1=end1, end_loss_n=endn)
    if end1 is None or endn is None:
        return Check(
            "loss", "loss", "skip", "too few updates to compare the end of the runs", data=data
        )
    rel = abs(end1 - endn) / max(abs(end1), abs(endn), 1e-12)
    data["rel_diff"] = rel
    status = "pass" if rel <= tol else "fail"
    verdict = "agree" if status == "pass" else "disagree"
    return Check(
        "loss",
        "loss",
        status,
        f"mean loss over samples {int(lo)}-{seen}: {end1:.4g} ({one.label}) vs {endn:.4g} ({many.label}); "
        f"they {verdict} (relative difference {rel:.2g}, tolerance {tol:g} for {why}). Per-batch losses may "
        "differ between setups; the end of training should not.",
        data=data,
    )


def equivalence_table(many: RunSummary) -> dict[str, Any] | None:
    """The guide's table, for this script: per-device batch sizes that give the same observed batch."""
    per_device = many.per_device_batch
    if not per_device:
        return None
    n = many.nprocs
    global_batch = per_device * n
    tpu = global_batch / 8
    return {
        "global_batch": global_batch,
        "rows": [
            {"setup": "1 GPU", "per_device_batch": global_batch},
            {"setup": f"{n} GPUs", "per_device_batch": per_device},
            {
                "setup": "TPU pod, 8 workers",
                "per_device_batch": int(tpu) if tpu == int(tpu) else None,
            },
        ],
        "note": None
        if tpu == int(tpu)
        else f"a global batch of {global_batch} does not split over 8 TPU workers",
    }


def join_static(checks: Sequence[Check], findings: Sequence[Any] | None) -> None:
    """Say which static findings each check confirms or refutes (None: the static check did not run)."""
    if findings is None:
        return
    by_code: dict[str, list[str]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f"{f.path}:{f.line}")
    for check in checks:
        if not check.rule or check.confirms is None or check.status == "skip":
            continue
        where = by_code.get(check.rule, [])
        check.static_where = where
        if where:
            check.static = "confirmed" if check.confirms else "refuted"
        elif check.confirms and check.observes_hazard:
            check.static = "missed"
