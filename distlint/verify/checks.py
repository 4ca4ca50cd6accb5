"""Compare the 1-process run with the N-process run. Each check names the rule it bears on (by
code; the name comes from distlint.registry):

  batch     DL301  the global batch per update, 1 vs N (per-device batch x N x accumulation)
  sharding  DL302  did the ranks train on different inputs? identical inputs: the loader is not
                   sharded, and nothing about the global batch can be confirmed
  lr        DL201  LR ratio against the global-batch ratio
  schedule  DL202  the LR against samples seen: does the schedule advance alike on 1 and N?
  ranks            every rank holds the same parameters after each update (fingerprints)
  seeding   DL101  generator fingerprints across ranks and between the runs
  data             cumulative input checksums at equal samples seen
  loss             the loss at equal samples seen, with a tolerance from the runs' own noise
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from distlint.verify.compare import Check, CurvePoint, RunSummary

# Which generators each seeding call seeds (set_seed seeds them all).
SEEDS = {
    "accelerate.utils.set_seed": {"python", "numpy", "torch", "cuda", "xla"},
    "random.seed": {"python"},
    "numpy.random.seed": {"numpy"},
    "torch.manual_seed": {"torch", "cuda"},
    "torch.random.manual_seed": {"torch", "cuda"},
    "torch.seed": {"torch", "cuda"},
    "torch.cuda.manual_seed_all": {"cuda"},
    "torch.cuda.manual_seed": {"cuda"},
    "xm.set_rng_state": {"xla"},
}
GENERATORS = ("python", "numpy", "torch", "cuda", "xla")


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def _same_sum(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    if a is None or b is None:
        return False
    scale = 1.0 + abs(a[1]) + abs(b[1])
    return abs(a[0] - b[0]) <= 1e-9 * scale and abs(a[1] - b[1]) <= 1e-9 * scale


def run_all(
    one: RunSummary, many: RunSummary, exact: bool, loss_rtol: float | None = None
) -> list[Check]:
    sharding, ranks = check_sharding(many), check_ranks(many)
    if sharding.status == "fail":
        # Every rank trained the same inputs: the N-process run is one run repeated N times.
        # That is the verdict, said first; what depends on the distinct samples is not judged.
        why = (
            "not judged: every rank trained on the same inputs (see sharding), so the "
            f"{many.label} run's samples seen count each input {many.nprocs} times"
        )
        return [
            sharding,
            ranks,
            check_batch(one, many, exact, identical=True),
            check_lr(one, many, exact, identical=True),
            Check("schedule", "LR schedule", "skip", why, "DL202"),
            check_seeding(one, many),
            Check("data", "data order", "skip", why),
            Check("loss", "loss", "skip", why + " (the curves cannot be set at equal samples)"),
        ]
    checks = [
        check_batch(one, many, exact),
        sharding,
        ranks,
        check_lr(one, many, exact),
        check_schedule(one, many),
        check_seeding(one, many),
        check_data_order(one, many, exact),
        check_loss(one, many, exact, loss_rtol),
    ]
    return drifted(checks, many)


def duplicated(checks: Sequence[Check]) -> bool:
    """The ranks trained on identical inputs (the sharding check failed)."""
    return any(c.id == "sharding" and c.status == "fail" for c in checks)


def feeding_loaders(run: RunSummary) -> list[int]:
    """The loaders that fed the trained model: those that yielded batches before the most
    updates (a training loader yields before every update; evaluation loaders now and then)."""
    r0 = run.rank0
    if r0 is None:
        return []
    counts: dict[int, int] = {}
    for u in r0.updates:
        for lid in set(u.loaders):
            counts[lid] = counts.get(lid, 0) + 1
    if not counts:
        return []
    most = max(counts.values())
    return sorted(lid for lid, c in counts.items() if c == most)


def shard_fix(run: RunSummary, built_by_hand: bool) -> str:
    """How to shard the inputs, in the words of the script's own framework."""
    source = framework(run)
    if built_by_hand:
        return f"offset the seed or the index of the batches by the rank ({_words(run)['rank']})"
    return {
        "accelerate": "pass it through accelerator.prepare (it adds the sharding sampler)",
        "fabric": "pass it through fabric.setup_dataloaders (it adds a DistributedSampler)",
        "xla": "give it a DistributedSampler(dataset, num_replicas=xr.world_size(), "
        "rank=xr.global_ordinal())",
    }.get(
        source,
        "give it a DistributedSampler(dataset) (and call sampler.set_epoch(epoch) each epoch)",
    )


# -- batch ----------------------------------------------------------------------------------


def check_batch(one: RunSummary, many: RunSummary, exact: bool, identical: bool = False) -> Check:
    n = many.nprocs
    per_device = many.per_device_batch
    native = many.rank0.native_per_device_batch if many.rank0 else None
    g1, gn = one.global_batch, many.global_batch
    accum = many.accumulation or 1
    data = {
        "per_device": per_device,
        "script_batch_size": native,
        "global_1": g1,
        "global_n": gn,
        "accumulation": accum,
    }
    if not g1 or not gn:
        return Check(
            "batch",
            "observed batch",
            "skip",
            "the samples of an update are unknown: no forward through the trained model and no "
            "DataLoader batch was recorded",
            "DL301",
            data=data,
        )
    accum_txt = f" × {accum} forwards (accumulation)" if accum > 1 else ""
    scaled = exact and one.rank0 is not None and one.rank0.batch_scaled
    detail = (
        f"{many.label}: {per_device} per device × {n}{accum_txt} = {gn} samples per update; "
        f"{one.label}: {g1}{' (per-device batch × N, --exact)' if scaled else ''}."
    )
    if identical:
        return Check(
            "batch",
            "observed batch",
            "skip",
            detail + " Every rank trained on the same inputs (see sharding): the distinct samples"
            " per update did not grow with N, so DL301 cannot be confirmed.",
            "DL301",
            data=data,
        )
    # DL301's claim: the DataLoader's batch_size is per device, so the global batch is batch_size × N.
    confirms = bool(native) and native is not None and gn == native * n * accum and n > 1
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
        f" The {n}-process run sees ×{ratio:g} more samples per update: compare the runs at "
        "equal samples seen (as below), or size the batches with the table."
    )
    return Check(
        "batch", "observed batch", "warn", detail, "DL301", confirms, data, observes_hazard=False
    )


# -- sharding (DL302) -----------------------------------------------------------------------


def check_sharding(many: RunSummary) -> Check:
    ranks = many.records.ranks
    points = [p for p in many.curve if p.rank_checksums and all(p.rank_checksums)]
    data: dict[str, Any] = {"compared_updates": len(points), "identical_updates": 0}
    if len(ranks) < 2 or not points:
        return Check(
            "sharding",
            "sharding",
            "skip",
            "no per-rank input checksums to compare",
            "DL302",
            data=data,
        )
    identical = [
        p for p in points if all(_same_sum(c, p.rank_checksums[0]) for c in p.rank_checksums[1:])
    ]
    data["identical_updates"] = len(identical)
    if len(identical) == len(points):
        r0 = ranks[0]
        where = sorted({w for lid in feeding_loaders(many) if (w := r0.loader_where(lid))})
        data["loaders"] = where
        source = (
            f"the DataLoader built at {', '.join(where)} (the one that fed the model)"
            if where
            else "the batches the script builds itself (no DataLoader fed the model)"
        )
        return Check(
            "sharding",
            "sharding",
            "fail",
            f"every rank trained on identical inputs in all {len(points)} updates compared: "
            f"{source} is not sharded across processes, so the {many.label} run is one run "
            f"repeated {many.nprocs} times. To shard it, {shard_fix(many, not where)}.",
            "DL302",
            True,
            data,
        )
    return Check(
        "sharding",
        "sharding",
        "pass",
        f"the ranks trained on different inputs ({len(points) - len(identical)} of {len(points)} "
        "updates differ across ranks).",
        "DL302",
        False,
        data,
    )


# -- learning rate (DL201) ------------------------------------------------------------------


class Profile:
    """One run's LR schedule against samples seen (rank 0, first param group of the first
    optimizer): its peak, the warmup up to it, the decay after it."""

    def __init__(self, run: RunSummary, upto: int | None = None):
        self.points = [
            (p.samples, p.lrs[0])
            for p in run.curve
            if p.lrs and (upto is None or p.samples is None or p.samples <= upto)
        ]
        known = all(s is not None for s, _ in self.points)
        lrs = [lr for _, lr in self.points]
        self.top = max(lrs) if lrs else 0.0
        base = None
        if run.rank0 is not None:
            for u in run.rank0.updates:
                if u.base_lrs and u.base_lrs[0]:
                    base = float(u.base_lrs[0])
                    break
        self.base = base  # the scheduler's base LR (the peak of a warmup), when recorded
        # The peak: the scheduler's base LR when the schedule never exceeds it, else the most
        # the LR reached in the run.
        self.peak = max(self.top, base or 0.0)
        self.reached = bool(lrs) and self.top >= self.peak * (1 - 1e-6)
        self.start = lrs[0] / self.peak if lrs and self.peak > 0 else None
        self.warmup: int | None = None  # samples before the LR first reached its peak
        if not known:
            pass  # samples unknown: the peak only
        elif self.reached and self.start is not None and self.start < 1 - 1e-6:
            first = next(i for i, lr in enumerate(lrs) if lr >= self.peak * (1 - 1e-6))
            self.warmup = (self.points[first][0] or 0) - self._batch(first)
        elif self.start is not None and self.start >= 1 - 1e-6:
            self.warmup = 0
        self.decay_end: int | None = None  # samples where the LR reached its floor after the peak
        if known and self.reached and lrs and lrs[-1] < self.peak * (1 - 1e-6):
            floor = lrs[-1]
            at = len(lrs) - 1
            while at > 0 and abs(lrs[at - 1] - floor) <= 1e-12 + 1e-9 * self.peak:
                at -= 1
            if at < len(lrs) - 1:  # the floor held for more than one update: the decay ended
                self.decay_end = (self.points[at][0] or 0) - self._batch(at)

    def _batch(self, i: int) -> int:
        here, before = self.points[i][0], self.points[i - 1][0] if i else 0
        return (here or 0) - (before or 0)

    @property
    def constant(self) -> bool:
        lrs = [lr for _, lr in self.points]
        return bool(lrs) and _close(min(lrs), max(lrs), 1e-9)

    def describe(self) -> str:
        parts = [
            f"peak {self.peak:g}" + ("" if self.reached else " (the scheduler's, not reached)")
        ]
        if self.warmup:
            parts.append(f"warmup {self.warmup} samples")
        if self.decay_end is not None:
            parts.append(f"decay ends at sample {self.decay_end}")
        elif self.points and self.reached and self.points[-1][1] < self.peak * (1 - 1e-6):
            parts.append(f"{self.points[-1][1] / self.peak:.2g} of the peak at the end")
        return ", ".join(parts)


def _same_shape_ratio(one: RunSummary, many: RunSummary) -> float | None:
    """LR_N / LR_1 at equal update numbers, when it is the same at every update (the same
    schedule in updates, scaled): the peak ratio of a warmup neither run finished."""
    ratios = [
        pn.lrs[0] / p1.lrs[0]
        for p1, pn in zip(one.curve, many.curve)
        if p1.lrs and pn.lrs and p1.lrs[0] > 0 and pn.lrs[0] > 0
    ]
    if ratios and all(_close(r, ratios[0], 1e-6) for r in ratios):
        return ratios[0]
    return None


def lr_fix(run: RunSummary) -> str:
    """The linear-scaling fix in the words of the script's own framework."""
    source = framework(run)
    return {
        "accelerate": "lr * accelerator.num_processes",
        "fabric": "lr * fabric.world_size",
        "xla": "lr * xr.world_size()",
    }.get(source, "lr * dist.get_world_size()")


def framework(run: RunSummary) -> str:
    """accelerate | fabric | xla | torch.distributed: what formed the script's group (the
    Accelerator, else the modules the rank had loaded, else the launcher)."""
    if str(run.config("source") or "") == "accelerate":
        return "accelerate"
    modules = set(run.config("modules") or [])
    if modules & {"lightning.fabric", "lightning_fabric"} or run.launcher == "fabric":
        return "fabric"
    if "torch_xla" in modules or run.launcher == "accelerate-tpu" or run.device == "xla":
        return "xla"
    return "torch.distributed"


def _words(run: RunSummary) -> dict[str, str]:
    """The script's own names for the rank, the world size and seeding."""
    return {
        "accelerate": {
            "rank": "accelerator.process_index",
            "seed_all": "accelerate.utils.set_seed(seed)",
            "seed_rank": "set_seed(seed + accelerator.process_index)",
        },
        "fabric": {
            "rank": "fabric.global_rank",
            "seed_all": "fabric.seed_everything(seed)",
            "seed_rank": "fabric.seed_everything(seed + fabric.global_rank)",
        },
        "xla": {
            "rank": "xr.global_ordinal()",
            "seed_all": "random.seed(seed); np.random.seed(seed); torch.manual_seed(seed); "
            "xm.set_rng_state(seed)",
            "seed_rank": "torch.manual_seed(seed + xr.global_ordinal())",
        },
    }.get(
        framework(run),
        {
            "rank": "dist.get_rank()",
            "seed_all": "random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)",
            "seed_rank": "torch.manual_seed(seed + dist.get_rank())",
        },
    )


def check_lr(one: RunSummary, many: RunSummary, exact: bool, identical: bool = False) -> Check:
    """DL201 from the peak LR of each run (a warmup from 0 is judged at its peak, not at its
    first update), against the ratio of the global batches."""
    if exact and one.rank0 is not None:
        native1 = one.rank0.native_per_device_batch
        accum1 = one.accumulation or 1
        g1 = native1 * accum1 if native1 else one.global_batch  # the script's own 1-process batch
    else:
        g1 = one.global_batch
    gn = many.global_batch
    p1, pn = Profile(one), Profile(many)
    if exact:
        # --exact gave the 1-process run the N-process LRs: judge the script's own LRs.
        own1 = one.rank0.native_lrs() if one.rank0 else None
        ownn = many.rank0.native_lrs() if many.rank0 else None
        if own1 and ownn and own1[0] and ownn[0]:
            lr1, lrn, how = own1[0], ownn[0], "the script's own LR at prepare"
        else:
            lr1, lrn, how = p1.peak, pn.peak, "peak"
    else:
        lr1, lrn, how = p1.peak, pn.peak, "peak"
    data: dict[str, Any] = {
        "lr_1": [lr1],
        "lr_n": [lrn],
        "peak_1": p1.peak,
        "peak_n": pn.peak,
        "batch_ratio": None,
        "lr_ratio": None,
        "scaling": None,
        "judged_on": how,
    }
    if not lr1 or not lrn:
        return Check(
            "lr",
            "learning rate",
            "skip",
            "no positive LR was recorded in "
            + ("either run" if not lr1 and not lrn else "one run")
            + " (every update's LR was 0)",
            "DL201",
            data=data,
        )
    lr_ratio = lrn / lr1
    if not exact and not (p1.reached and pn.reached) and (p1.base is None or pn.base is None):
        same = _same_shape_ratio(one, many)
        if same is None:
            return Check(
                "lr",
                "learning rate",
                "skip",
                f"the LR was still rising at the end of a run (highest {lr1:g} on 1 process, "
                f"{lrn:g} on {many.nprocs}) and the scheduler's base LR was not recorded: the "
                "peaks are unknown; raise --max-steps past the warmup",
                "DL201",
                data=data,
            )
        lr_ratio, how = same, "the LR at equal update numbers (same schedule shape)"
        data["judged_on"] = how
    if not g1 or not gn:
        return Check(
            "lr",
            "learning rate",
            "skip",
            f"{how}: LR {lr1:g} on 1 process, {lrn:g} on {many.nprocs}; the global batch of an "
            "update is unknown (see observed batch), so the ratio cannot be judged",
            "DL201",
            data=data,
        )
    batch_ratio = gn / g1
    data.update(batch_ratio=batch_ratio, lr_ratio=lr_ratio)
    head = (
        f"{how}: LR {lr1:g} on 1 process, {lrn:g} on {many.nprocs}: ×{lr_ratio:.3g} "
        f"for a global batch ×{batch_ratio:g}."
    )
    if identical:
        return Check(
            "lr",
            "learning rate",
            "skip",
            f"{how} LR {lr1:g} on 1 process, {lrn:g} on {many.nprocs}; not judged: the ranks "
            "trained on identical inputs (see sharding), so no batch of distinct samples grew.",
            "DL201",
            data=data,
        )
    if _close(batch_ratio, 1.0, 1e-9):
        status = "pass" if _close(lr_ratio, 1.0, 1e-6) else "warn"
        return Check(
            "lr",
            "learning rate",
            status,
            head + " Same global batch, so the same LR is right."
            if status == "pass"
            else head + " Same global batch but a different LR.",
            "DL201",
            False,
            data,
        )
    if _close(lr_ratio, 1.0, 1e-6):
        data["scaling"] = "none"
        return Check(
            "lr",
            "learning rate",
            "fail",
            f"global batch ×{batch_ratio:g}, {how} LR unchanged ({lr1:g}). Scale it with the "
            f"number of processes: `{lr_fix(many)}` (linear scaling, Goyal et al. 2017).",
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


# -- LR schedule (DL202) --------------------------------------------------------------------


def _lr_at(curve: Sequence[CurvePoint], start: int) -> float | None:
    """The LR of the update that began at sample `start` (or the last one begun before it)."""
    value = None
    for p in curve:
        if p.samples is None or p.batch is None or not p.lrs:
            return value
        if p.samples - p.batch > start:
            return value
        value = p.lrs[0]
    return value


def _starts(curve: Sequence[CurvePoint], seen: int):
    """(samples before the update, its LR) for the updates that began before `seen`."""
    for p in curve:
        if p.samples is None or p.batch is None or not p.lrs:
            return
        start = p.samples - p.batch
        if start >= seen:
            return
        yield start, p.lrs[0]


def _decay_rate(profile: Profile) -> float | None:
    """The fraction of the peak the LR loses per sample after its own warmup (a fit through
    the peak, over the updates before the floor): the decay's speed, whatever its start."""
    if not profile.reached or profile.warmup is None or profile.peak <= 0:
        return None
    xy = []
    previous = 0
    for samples, lr in profile.points:
        start, previous = previous, samples or 0
        x, y = start - profile.warmup, 1 - lr / profile.peak
        if x > 0 and 1e-9 < y < 0.95:
            xy.append((x, y))
    if not xy:
        return None
    return sum(x * y for x, y in xy) / sum(x * x for x, _ in xy)


def _schedule_advice(quantity: str, ratio: float, many: RunSummary) -> str:
    """What was counted per process, and the fix in the script's own framework."""
    n = many.nprocs
    source = framework(many)
    prepared = source == "accelerate" and many.rank0 is not None and many.rank0.scheduler_prepared
    world = {"accelerate": "accelerator.num_processes", "fabric": "fabric.world_size",
             "xla": "xr.world_size()"}.get(source, "dist.get_world_size()")  # fmt: skip
    more = ratio > 1
    if quantity == "warmup":
        if prepared:
            cause = (
                "num_warmup_steps was multiplied by the process count"
                if more
                else "num_warmup_steps was divided by the process count"
            )
            return (
                f"the warmup lasts ×{ratio:.2g} the samples on {n} processes: {cause}. A "
                "scheduler passed through accelerator.prepare is stepped once per process for "
                "each update, so give it the warmup in single-process steps, unscaled"
            )
        return (
            f"the warmup lasts ×{ratio:.2g} the samples on {n} processes: it is counted in "
            f"updates, and an update of {n} processes holds {n}× the samples; divide "
            f"num_warmup_steps by {world} to keep it in samples"
            if more
            else f"the warmup lasts ×{ratio:.2g} the samples on {n} processes: it was divided "
            f"by {world} more than the batch grew"
        )
    if quantity == "length":
        if prepared:
            return (
                f"the decay runs ×{ratio:.2g} as fast per sample on {n} processes: the "
                "schedule's length (num_training_steps) was counted per process, e.g. from "
                "len(train_dataloader) after prepare. A prepared scheduler is stepped once per "
                "process for each update, so count its length in single-process steps "
                "(len(train_dataloader) before prepare × epochs)"
                if ratio > 1
                else f"the decay runs ×{ratio:.2g} as fast per sample on {n} processes: the "
                "schedule's length was multiplied by the process count; a prepared scheduler "
                "needs it in single-process steps"
            )
        return (
            f"the decay runs ×{ratio:.2g} as fast per sample on {n} processes: the schedule's "
            f"length counts updates, and each holds {n}× the samples; compute num_training_steps"
            f" from the per-process loader (len(loader) with its DistributedSampler) × epochs"
        )
    return (
        f"the whole schedule runs ×{ratio:.2g} as fast per sample on {n} processes: the "
        "scheduler is stepped a different number of times per sample (per process, or per "
        "micro-batch); step it once per optimizer update"
        + (" and let accelerator.prepare scale it" if prepared else "")
    )


def check_schedule(one: RunSummary, many: RunSummary) -> Check:
    """DL202: each run's LR against samples seen over every update (peak, warmup length in
    samples, decay end); where they diverge names what was counted per process."""
    data: dict[str, Any] = {}
    if not (one.samples_known and many.samples_known) or not one.curve or not many.curve:
        return Check(
            "schedule",
            "LR schedule",
            "skip",
            "samples seen are unknown: the schedules cannot be set side by side",
            "DL202",
            data=data,
        )
    seen = min(one.samples_seen or 0, many.samples_seen or 0)
    p1, pn = Profile(one, seen), Profile(many, seen)
    if not p1.points or not pn.points:
        return Check("schedule", "LR schedule", "skip", "no LRs recorded", "DL202", data=data)
    top1, topn = p1.peak, pn.peak
    if top1 <= 0 or topn <= 0:
        return Check("schedule", "LR schedule", "skip", "the LR is never positive", "DL202")
    data.update(
        peak_1=top1, peak_n=topn, warmup_1=p1.warmup, warmup_n=pn.warmup,
        decay_end_1=p1.decay_end, decay_end_n=pn.decay_end,
    )  # fmt: skip
    shapes = f"1 process: {p1.describe()}; {many.nprocs} processes: {pn.describe()}"
    if p1.constant and pn.constant and p1.reached and pn.reached:
        return Check(
            "schedule",
            "LR schedule",
            "skip",
            f"constant LR in both runs (over the first {seen} samples): no schedule to compare",
            "DL202",
            data=data,
        )
    worst, worst_at = 0.0, None
    for start, lr in _starts(many.curve, seen):
        r1 = (_lr_at(one.curve, start) or 0.0) / top1
        rn = lr / topn
        if abs(r1 - rn) > worst:
            worst, worst_at = abs(r1 - rn), start
    data.update(max_diff=worst, at_samples=worst_at)
    if worst <= 0.05:
        return Check(
            "schedule",
            "LR schedule",
            "pass",
            f"over the first {seen} samples ({shapes}): the schedule follows the samples seen "
            "alike in both runs.",
            "DL202",
            False,
            data,
        )
    warm = None
    if p1.warmup and pn.warmup:
        warm = pn.warmup / p1.warmup
    after = max(p1.warmup or 0, pn.warmup or 0)
    rate1, raten = _decay_rate(p1), _decay_rate(pn)
    speed = raten / rate1 if rate1 and raten else None
    if warm is None and (p1.warmup or pn.warmup) and not (p1.reached and pn.reached):
        # A warmup that did not end in one run: the ratio of the rises at equal samples.
        pairs = [
            ((_lr_at(one.curve, st) or 0.0) / top1, lr / topn)
            for st, lr in _starts(many.curve, seen)
            if st < after
        ]
        a, b = sum(x for x, _ in pairs), sum(y for _, y in pairs)
        warm = a / b if b > 0 and a > 0 else None  # rising slower on N: a longer warmup
    if speed is None and not (p1.warmup or pn.warmup):
        # No warmup: the decay from the start, compared at equal samples.
        pairs = [
            (1 - (_lr_at(one.curve, st) or 0.0) / top1, 1 - lr / topn)
            for st, lr in _starts(many.curve, seen)
        ]
        a = sum(x for x, y in pairs if y < 0.95 and x > 1e-9)
        b = sum(y for x, y in pairs if y < 0.95 and x > 1e-9)
        speed = b / a if a > 0 else None
    data.update(warmup_ratio=warm, speed_ratio=speed)
    near = lambda x: x is None or abs(x - 1) <= 0.1  # noqa: E731
    # Named from where the schedules first diverge: in the warmup, or after the peak.
    in_warmup = worst_at is not None and worst_at < after
    if not near(warm) and speed is not None and _close(warm or 1, 1 / speed, 0.15):
        quantity, ratio = "steps", speed  # warmup and decay compressed alike
    elif not near(warm) and (in_warmup or near(speed)):
        quantity, ratio = "warmup", warm or 1.0
    elif not near(speed):
        quantity, ratio = "length", speed or 1.0
    else:
        quantity, ratio = ("warmup", warm or 1.0) if in_warmup else ("length", speed or 1.0)
    data["counted_per_process"] = quantity
    faster = quantity == "length" and ratio > 1 or quantity == "steps" and ratio > 1
    status = "fail" if worst > 0.15 else "warn"
    return Check(
        "schedule",
        "LR schedule",
        status,
        f"the schedules diverge (largest gap {worst:.2g} of the peak, at sample {worst_at}; "
        f"{shapes}): " + _schedule_advice(quantity, ratio, many) + ".",
        "DL202",
        faster or quantity == "warmup",
        data,
    )


# -- seeding (DL101) ------------------------------------------------------------------------


def _seed_point(rank, gen: str) -> tuple[str | None, str | None]:
    """The fingerprint to compare for `gen`: right after the last call that seeded it, else at "ready"."""
    for seed in reversed(rank.seeds):
        if gen in SEEDS.get(seed["name"], ()) and gen in (seed.get("fp") or {}):
            return seed["fp"][gen], seed["name"]
    for point in ("ready", "first_step", "prepare"):
        if gen in rank.rng.get(point, {}):
            return rank.rng[point][gen], None
    return None, None


def _used(rank, gen: str) -> bool:
    """Did the script draw from the generator (its state changed after import)?"""
    states = [fp[gen] for point, fp in rank.rng.items() if gen in fp]
    return len(set(states)) > 1


def per_rank_seeds(ranks) -> dict[str, str]:
    """Seeding calls whose seed differs across ranks by the rank (seed + rank): name -> how."""
    found: dict[str, str] = {}
    if len(ranks) < 2:
        return found
    for r in ranks:
        for s in r.seeds:
            kwargs = s.get("kwargs") or {}
            if "True" in str(kwargs.get("device_specific", "")):
                found[s["name"]] = "set_seed(..., device_specific=True)"
    by_rank = [(r.rank, [s for s in r.seeds]) for r in ranks if r.rank is not None]
    if len(by_rank) < 2:
        return found
    count = min(len(seeds) for _, seeds in by_rank)
    for i in range(count):
        name = by_rank[0][1][i]["name"]
        values = []
        for rank, seeds in by_rank:
            ints = seeds[i].get("ints") or []
            if seeds[i]["name"] != name or not ints:
                break
            values.append((rank, ints[0]))
        else:
            base_rank, base = values[0]
            steps = {(v - base) / (rk - base_rank) for rk, v in values[1:] if rk != base_rank}
            if len(steps) == 1 and 0 not in steps:
                step = steps.pop()
                found[name] = f"{name}(seed + {'' if step == 1 else f'{step:g} × '}rank)"
    return found


def check_seeding(one: RunSummary, many: RunSummary) -> Check:
    ranks = many.records.ranks
    r1 = one.rank0
    deliberate = per_rank_seeds(ranks)
    unseeded: dict[str, list[str]] = {}
    offset: dict[str, str] = {}
    used: dict[str, bool] = {}
    seeded_by: dict[str, str] = {}
    for gen in GENERATORS:
        found = [(r, _seed_point(r, gen)) for r in ranks]
        points = [(r, fp, by) for r, (fp, by) in found if fp is not None]
        if not points:
            continue
        where = []
        if len({fp for _, fp, _ in points}) > 1:
            by = points[0][2]
            if by in deliberate:
                offset[gen] = deliberate[by]
            else:
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
    data = {
        "unseeded": sorted(unseeded),
        "unseeded_used": sorted(g for g in unseeded if used[g]),
        "differs": unseeded,
        "per_rank": offset,
        "seeding_calls": calls,
        "seeded_by": seeded_by,
    }
    calls_txt = ", ".join(calls) if calls else "no seeding call"
    offset_txt = ""
    if offset:
        gens = ", ".join(sorted(offset))
        hows = ", ".join(sorted(set(offset.values())))
        offset_txt = (
            f" The {gens} generator(s) are seeded per rank on purpose ({hows}): each rank draws "
            "different random numbers (dropout, augmentation, sampled batches), which is how "
            "ranks see different data; keep it."
        )
    if not unseeded:
        if offset:
            return Check(
                "seeding",
                "seeding",
                "info",
                f"every generator is seeded ({calls_txt}); rank 0 matches the 1-process run."
                + offset_txt,
                "DL101",
                False,
                data,
            )
        return Check(
            "seeding",
            "seeding",
            "pass",
            f"every generator has the same state on every rank and in both runs ({calls_txt}).",
            "DL101",
            False,
            data,
        )
    names = sorted(unseeded, key=lambda g: (not used[g], GENERATORS.index(g)))
    parts = [
        f"{g} ({' and '.join(unseeded[g])}{'' if used[g] else ', never drawn from'})" for g in names
    ]
    drawn = [g for g in names if used[g]]
    across = [g for g in drawn if "across ranks" in unseeded[g]]
    differ_where = (
        "across ranks" if any("across ranks" in unseeded[g] for g in names) else "between the runs"
    )
    words = _words(many)
    advice = f"seed them the same in both runs: {words['seed_all']}"
    if across and not _fed_by_loader(many):
        # No DataLoader fed the model: the script draws its batches from these generators, and
        # the same seed on every rank would make every rank draw the same batches (DL302).
        advice = (
            f"seed {' and '.join(across)} per rank, {words['seed_rank']}: no DataLoader fed the "
            "model, so the script draws its batches from them, and one seed on every rank would "
            "give every rank the same batches"
        )
        data["advice"] = "per-rank"
    elif not drawn:
        advice = f"harmless while nothing draws from them; to be safe, {words['seed_all']}"
    elif offset:
        advice += ", keeping the per-rank offset where you want ranks to differ"
    detail = (
        f"{' and '.join(names)} RNG differ {differ_where}: {advice}. "
        f"Differences: {'; '.join(parts)}. Seeding calls that ran: {calls_txt}." + offset_txt
    )
    # An unseeded generator the script never drew from is harmless for now: information only.
    status = "fail" if any(used.values()) else "info"
    confirms = "torch" not in unseeded and bool({"python", "numpy"} & set(unseeded))
    return Check("seeding", "seeding", status, detail, "DL101", confirms, data)


# -- data order -----------------------------------------------------------------------------


def _cumulative(curve: Sequence[CurvePoint]) -> dict[int, tuple[float, float]]:
    out: dict[int, tuple[float, float]] = {}
    s1 = s2 = 0.0
    for p in curve:
        if p.checksum is None or p.samples is None:
            return out
        s1 += p.checksum[0]
        s2 += p.checksum[1]
        out[p.samples] = (s1, s2)
    return out


SEEDABLE_FIX = (
    "make the shuffling reproducible: Accelerator(dataloader_config=DataLoaderConfiguration("
    "use_seedable_sampler=True)), or give the DataLoader a seeded generator "
    "(torch.Generator().manual_seed(seed)); seed numpy/python with set_seed if they order the data"
)


PLAIN_ORDER_FIX = (
    "shuffle with the same sampler on 1 process: a DistributedSampler (its seed, set_epoch) "
    "gives the same global order on 1 and N processes, a RandomSampler does not; or give the "
    "DataLoader a seeded generator (torch.Generator().manual_seed(seed))"
)


FABRIC_ORDER_FIX = (
    "on 1 device fabric.setup_dataloaders keeps the loader's own sampler (it puts a "
    "DistributedSampler in only on N processes), so fabric.seed_everything(seed) alone does not "
    "order the data alike; give the DataLoader DistributedSampler(dataset, "
    "num_replicas=fabric.world_size, rank=fabric.global_rank, seed=seed) and call "
    "fabric.setup_dataloaders(loader, use_distributed_sampler=False)"
)


def order_fix(run: RunSummary) -> str:
    """How to make the data order reproducible, in the terms of the script's own setup."""
    return {"accelerate": SEEDABLE_FIX, "fabric": FABRIC_ORDER_FIX}.get(
        framework(run), PLAIN_ORDER_FIX
    )


ITERABLE_SAMPLER = "_InfiniteConstantSampler"  # what a DataLoader over an IterableDataset holds


def _sampler(run: RunSummary) -> str | None:
    """The sampler of the loader that fed the model (as the script built it)."""
    r0 = run.rank0
    for lid in feeding_loaders(run):
        rec = r0.loaders.get(lid) if r0 else None
        if rec is None and r0 is not None:  # a prepared loader: the one it was built from
            origin = next((d.get("origin") for d in r0.dataloaders if d.get("loader") == lid), None)
            rec = r0.loaders.get(origin) if origin is not None else None
        if rec and rec.get("sampler"):
            return str(rec["sampler"])
    return None


def order_cause(one: RunSummary, many: RunSummary) -> str:
    """Why the runs saw the inputs in a different order, as observed, with its fix."""
    if not _fed_by_loader(many):
        return (
            "the script builds its batches itself (no DataLoader fed the model), from its own "
            "random draws: draw them from a generator seeded alike in both runs "
            "(torch.Generator().manual_seed(seed)), or compare at equal samples as the loss "
            "check does"
        )
    s1, sn = _sampler(one), _sampler(many)
    if sn == ITERABLE_SAMPLER:
        return (
            "the DataLoader reads an IterableDataset, which orders its own stream (no sampler "
            "applies): seed its shuffling alike in both runs and shard by the rank inside it"
        )
    if s1 and sn and s1 != sn:
        return (
            f"the 1-process run samples with a {s1}, the {many.label} run with a {sn}, and "
            f"the two order the data differently; {order_fix(many)}"
        )
    seeding = check_seeding(one, many)
    between = [
        g
        for g in seeding.data.get("unseeded_used", [])
        if "between the runs" in seeding.data.get("differs", {}).get(g, [])
    ]
    if between:
        return (
            f"unseeded random draws: the {' and '.join(between)} generator differed between "
            "the runs and the script drew from it (a random_split, torch.rand, a shuffle "
            f"before the loader); seed it alike in both runs: {_words(many)['seed_all']}"
        )
    return order_fix(many)


def _fed_by_loader(run: RunSummary) -> bool:
    r = run.rank0
    return bool(r and any(u.loaders for u in r.updates))


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
            if _sampler(many) == ITERABLE_SAMPLER and not exact:
                # An IterableDataset orders (and here shards) its own stream, per rank: no
                # sampler to align, and nothing to fix for a comparison at equal samples.
                return Check(
                    "data",
                    "data order",
                    "info",
                    f"the runs saw different samples from sample {s} on: the DataLoader reads an "
                    "IterableDataset, which orders (and shards) its own stream on each rank, so "
                    "1 process cannot follow N step by step; the runs are compared at equal "
                    "samples seen.",
                    data=data,
                )
            if not _fed_by_loader(many) and per_rank_seeds(many.records.ranks):
                return Check(
                    "data",
                    "data order",
                    "info",
                    f"the runs saw different samples from sample {s} on, as expected: the script "
                    "draws its batches itself (no DataLoader) from generators seeded per rank, so "
                    "the runs can be compared at equal samples seen, not step by step.",
                    data=data,
                )
            agree = (
                f"the inputs agree for the first {before} samples and differ by sample {s}"
                if before
                else f"the inputs differ from the first update on (sample {s})"
            )
            return Check(
                "data",
                "data order",
                "fail" if exact else "warn",
                f"the runs saw different samples: {agree}. Observed cause and fix: "
                f"{order_cause(one, many)}.",
                data=data,
            )
    return Check(
        "data",
        "data order",
        "pass",
        f"both runs saw the same samples in the same order (first {common[-1]} samples compared).",
        data=data,
    )


# -- loss -----------------------------------------------------------------------------------


def loss_window(one: RunSummary, many: RunSummary) -> tuple[int, int] | None:
    """The samples range (lo, hi] both the check and the table use: every sample both runs
    trained on."""
    if not (one.samples_known and many.samples_known):
        return None
    seen = min(one.samples_seen or 0, many.samples_seen or 0)
    if seen <= 0:
        return None
    return 0, seen


def window_losses(curve: Sequence[CurvePoint], lo: int, hi: int) -> list[float]:
    return [
        p.loss
        for p in curve
        if p.samples is not None and lo < p.samples <= hi and p.loss is not None
    ]


def _noise(values: Sequence[float]) -> float:
    """A curve's own noise per update, from its second differences: a straight trend cancels
    (a falling loss is not noise); what curvature leaves only makes the estimate larger, so a
    verdict errs towards PASS. Var(x[i+1] - 2 x[i] + x[i-1]) = 6 sigma^2 for white noise."""
    if len(values) < 3:
        return 0.0
    second = [a - 2 * b + c for a, b, c in zip(values, values[1:], values[2:])]
    return math.sqrt(sum(d * d for d in second) / (6 * len(second)))


def loss_windows(
    one: RunSummary, many: RunSummary, lo: int, hi: int
) -> list[tuple[int, int, list[float], list[float]]]:
    """(lo, hi, 1-process losses, N-process losses) per window of equal samples: as many
    windows as the N-process run has pairs of updates in the range (2 to 8)."""
    count = len(window_losses(many.curve, lo, hi))
    parts = max(2, min(8, count // 2))
    edges = [lo + (hi - lo) * i // parts for i in range(parts + 1)]
    out = []
    for a, b in zip(edges, edges[1:]):
        v1, vn = window_losses(one.curve, a, b), window_losses(many.curve, a, b)
        if v1 and vn:
            out.append((a, b, v1, vn))
    return out


def _mixed(run: RunSummary) -> bool:
    return run.precision["kind"] != "fp32"


# Relative tolerance of --exact's per-update losses, by the precision that really ran.
EXACT_RTOL = {"fp32": 1e-5, "bf16": 5e-2, "fp16": 1e-2}


def _ran_in(one: RunSummary, many: RunSummary) -> str:
    kinds = {one.precision["kind"], many.precision["kind"]}
    return "bf16" if "bf16" in kinds else "fp16" if "fp16" in kinds else "fp32"


def check_loss(one: RunSummary, many: RunSummary, exact: bool, rtol: float | None = None) -> Check:
    data: dict[str, Any] = {}
    if not one.curve or not many.curve:
        return Check("loss", "loss", "skip", "no losses were recorded", data=data)
    all_losses = [p.loss for r in (one, many) for p in r.curve if p.loss is not None]
    if not all_losses:
        return Check("loss", "loss", "skip", "no loss passed to backward was recorded", data=data)
    lo_all, hi_all = min(all_losses), max(all_losses)
    if hi_all - lo_all <= 1e-12 * max(1.0, abs(hi_all)):
        data["constant"] = lo_all
        return Check(
            "loss",
            "loss",
            "skip",
            f"the loss is constant ({lo_all:g} at every update of both runs): a degenerate loss "
            "says nothing about the setups (is it detached, or zero?)",
            data=data,
        )
    if exact:
        return _exact_loss(one, many, rtol, data)
    window = loss_window(one, many)
    if window is None:
        return Check(
            "loss",
            "loss",
            "skip",
            "samples seen are unknown: the curves cannot be compared at equal samples",
            data=data,
        )
    lo, seen = window
    v1, vn = window_losses(one.curve, lo, seen), window_losses(many.curve, lo, seen)
    windows = loss_windows(one, many, lo, seen)
    data.update(samples=seen, window=[lo, seen])
    if len(windows) < 2 or len(v1) < 3 or len(vn) < 3:
        return Check(
            "loss",
            "loss",
            "skip",
            f"too few updates in samples {lo}-{seen} to compare the curves",
            data=data,
        )
    m1, mn = statistics.fmean(v1), statistics.fmean(vn)
    # At equal samples seen, window by window: the N-process curve minus the 1-process one,
    # against each run's own noise (its update-to-update spread) over the window's updates.
    s1, sn = _noise(v1), _noise(vn)
    diffs, rels, scores = [], [], []
    for _, _, a, b in windows:
        d = statistics.fmean(b) - statistics.fmean(a)
        err = math.sqrt(s1**2 / len(a) + sn**2 / len(b))
        diffs.append(d)
        rels.append(d / max(abs(statistics.fmean(a)), abs(statistics.fmean(b)), 1e-12))
        scores.append(d / err if err > 0 else math.copysign(math.inf, d) if d else 0.0)
    mean_diff = statistics.fmean(diffs)
    z = sum(scores) / math.sqrt(len(scores))  # Stouffer: the windows' evidence together
    rel = statistics.median(rels)  # robust to one early window where the loss falls fast
    same_sign = sum(1 for d in diffs if d * mean_diff > 0) / len(diffs)
    consistent = abs(z) >= 3 and same_sign >= 0.75
    likely = abs(z) >= 2 and same_sign >= 0.75
    data.update(
        end_loss_1=m1, end_loss_n=mn, diff=abs(mean_diff), mean_diff=mean_diff, rel_diff=rel,
        noise=[s1, sn], z=z, same_sign=same_sign, windows=[[a, b] for a, b, _, _ in windows],
        window_diffs=diffs, tolerance=None,
    )  # fmt: skip
    side = "above" if mean_diff > 0 else "below"
    where = (
        f"mean loss over samples {lo}-{seen}: {m1:.4g} ({one.label}) vs {mn:.4g} "
        f"({many.label}). At equal samples, in {len(windows)} windows, the {many.label} curve is "
        f"{side} in {same_sign:.0%} of them, by {abs(rel):.1%} of the loss (median), "
        f"{abs(z):.1f}× the runs' own noise (update-to-update spread {s1:.2g} and {sn:.2g})"
    )
    lag = "learns slower per sample (a lag)" if mean_diff > 0 else "learns faster per sample"
    if rtol is not None:
        data["tolerance"] = rtol
        status = "pass" if abs(rel) <= rtol else "fail"
        tail = f"; --loss-rtol {rtol:g}: they {'agree' if status == 'pass' else 'disagree'}."
    elif (consistent and abs(rel) >= 0.05) or (
        same_sign == 1 and len(windows) >= 4 and abs(z) >= 2 and abs(rel) >= 0.1
    ):
        status = "fail"
        tail = f": a consistent offset, not noise. The {many.label} run {lag}: see the LR and schedule checks."
    elif (likely and abs(rel) >= 0.01) or (
        same_sign == 1 and len(windows) >= 5 and abs(rel) >= 0.05
    ):
        status = "warn"
        tail = (
            f": a consistent offset of {abs(rel):.1%}: the {many.label} run {lag}. Check the LR "
            "scaling and the schedule; runs that start from different random states (see "
            "seeding) can also differ this much."
        )
    else:
        status = "pass"
        tail = ": no consistent offset; the curves agree at equal samples seen."
    return Check("loss", "loss", status, where + tail, data=data)


def _exact_loss(one: RunSummary, many: RunSummary, rtol: float | None, data: dict) -> Check:
    ran = _ran_in(one, many)
    observed = one.precision["observed"] and many.precision["observed"]
    tol = EXACT_RTOL[ran]
    why = f"{ran}, " + ("as observed: " + many.precision_text() if observed else "the setting")
    if rtol is not None:
        tol, why = rtol, "--loss-rtol"
    data.update(rtol=tol, tolerance_for=why)
    worst, worst_at, compared = 0.0, None, 0
    # Relative to the loss, but not to a loss near 0: below 1% of the first loss, the
    # difference is measured against that floor (rounding of a tiny loss is not a divergence).
    first = next((p.loss for p in many.curve if p.loss is not None), 0.0) or 0.0
    floor = 0.01 * abs(first)
    for p1, pn in zip(one.curve, many.curve):
        if p1.batch != pn.batch or p1.loss is None or pn.loss is None:
            break
        if p1.checksum and pn.checksum and not _same_sum(p1.checksum, pn.checksum):
            data.update(compared_updates=compared, inputs_differ_at=p1.update)
            return Check(
                "loss",
                "loss (exact)",
                "fail",
                f"update {p1.update}: the inputs differ between the runs, so the losses cannot "
                f"match (agreed for {compared} updates). Observed cause and fix: "
                f"{order_cause(one, many)}.",
                data=data,
            )
        rel = abs(p1.loss - pn.loss) / max(abs(p1.loss), abs(pn.loss), floor, 1e-12)
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


# -- the guide's table, and the static findings -----------------------------------------------


def equivalence_table(many: RunSummary, one: RunSummary | None = None) -> dict[str, Any] | None:
    """The guide's table, for this script: per-device batch sizes that give the same observed
    batch, and what that means for the LR (from the runs' observed global batches)."""
    per_device = many.per_device_batch
    if not per_device:
        return None
    n = many.nprocs
    accum = many.accumulation or 1
    global_batch = per_device * n  # one forward on every device
    tpu = global_batch / 8
    what = f"a DataLoader batch of {global_batch} in all"
    if accum > 1:  # the rows are per forward; the update is `accum` of them
        what = (
            f"a global batch of {global_batch * accum} per update: {accum} forwards of the "
            "per-device batch on each process, as in the N-process run"
        )
    g1, gn = (one.global_batch if one else None), many.global_batch
    if g1 and gn and g1 == gn:
        lr_advice = (
            f"the script already keeps the global batch ({gn}) on 1 and {n} processes: keep the LR"
        )
    else:
        lr_advice = (
            "keep the LR with these sizes (the same global batch); keeping the per-device batch "
            f"instead multiplies the global batch by {n}: then scale the LR, {lr_fix(many)}"
        )
    return {
        "lr_advice": lr_advice,
        "what": what,
        "forwards_per_update": accum,
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


# -- ranks agree -------------------------------------------------------------------------------

# Data parallelism hands every rank the same averaged gradient (all-reduce reduces each element
# once and sends the result to all), and the optimizer's update is elementwise: replicas stay
# bit-identical. The tolerance is a margin for the fingerprint's own sums on ranks of different
# hardware, far below what one update of a drifted rank moves (an lr-sized step per element).
RANKS_RTOL = 1e-6


def _fingerprint_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far two parameter fingerprints are apart, relative to the parameters' own scale."""
    sq = max(float(a.get("sq") or 0.0), float(b.get("sq") or 0.0), 1e-300)
    counted = max(int(a.get("counted") or a.get("numel") or 1), 1)
    rms = math.sqrt(sq / counted)
    diffs = [
        abs(float(a.get("sq") or 0.0) - float(b.get("sq") or 0.0)) / sq,
        # |sum| <= sqrt(n * sum of squares): the sum's own scale
        abs(float(a.get("sum") or 0.0) - float(b.get("sum") or 0.0)) / math.sqrt(counted * sq),
    ]
    for x, y in zip(a.get("sample") or [], b.get("sample") or []):
        diffs.append(abs(x - y) / max(abs(x), abs(y), rms, 1e-300))
    return max(diffs)


def _ranks_advice(run: RunSummary, before: bool) -> str:
    words = _words(run)
    if before:
        return (
            "they already differed before the first update: each rank built its own initial "
            f"parameters (a per-rank seed before the model was built?) and nothing broadcast "
            f"rank 0's. Seed alike on every rank ({words['seed_all']}) before building the "
            "model, or let the wrapper broadcast them"
            + {
                "accelerate": " (accelerator.prepare(model))",
                "fabric": " (fabric.setup(model))",
                "torch.distributed": " (DistributedDataParallel(model))",
            }.get(framework(run), "")
        )
    fix = {
        "accelerate": "forward the model returned by accelerator.prepare (not the model from "
        "before prepare, nor its .module) and call accelerator.backward(loss)",
        "fabric": "forward the module returned by fabric.setup (not the original model, nor "
        "its .module) and call fabric.backward(loss)",
        "xla": "reduce the gradients before the step: xm.optimizer_step(optimizer)",
    }.get(
        framework(run),
        "call the DDP-wrapped model for the training forward, not model.module (DDP all-reduces "
        "the gradients only for forwards through itself)",
    )
    return (
        "the gradients were not averaged across ranks, or a rank stepped differently: "
        f"{fix}; and keep rank-dependent branches ({words['rank']} == 0) away from the "
        "backward and the step"
    )


def check_ranks(many: RunSummary) -> Check:
    """Every rank holds the same parameters after every update (the probe's fingerprints)."""
    title = "ranks agree"
    ranks = [r for r in many.records.ranks if r.updates]
    if many.nprocs < 2 or len(ranks) < 2:
        return Check("ranks", title, "skip", "fewer than 2 ranks made an update")
    prints = [{u.n: u.params for u in r.updates if u.params} for r in ranks]
    if not all(prints):
        return Check(
            "ranks",
            title,
            "skip",
            "no parameter fingerprints were recorded on every rank (no parameters seen, or "
            "records of an older probe)",
        )
    every = [fp for p in prints for fp in p.values()]
    if any(fp.get("sharded") for fp in every):
        return Check(
            "ranks",
            title,
            "skip",
            "the parameters are sharded (FSDP, DeepSpeed ZeRO): each rank holds its own part",
        )
    shape = {(fp.get("numel"), fp.get("tensors"), fp.get("shapes")) for fp in every}
    if len(shape) > 1:
        return Check(
            "ranks",
            title,
            "skip",
            "the ranks step different parameters (model or pipeline parallel): nothing to compare",
        )
    ref, ref_rank = prints[0], ranks[0].rank
    common = sorted(set(ref).intersection(*prints[1:]))
    data: dict[str, Any] = {"tolerance": RANKS_RTOL, "compared_updates": len(common)}
    before = [r.updates[0].params_before for r in ranks]
    worst_before = 0.0
    if all(before):
        worst_before = max(_fingerprint_diff(before[0], b) for b in before[1:])  # type: ignore[arg-type]
    for n in common:
        off = {
            r.rank: d
            for r, p in zip(ranks[1:], prints[1:])
            if (d := _fingerprint_diff(ref[n], p[n])) > RANKS_RTOL
        }
        if not off:
            continue
        init = worst_before > RANKS_RTOL
        data.update(
            first_update=n, ranks=sorted(off, key=lambda k: -1 if k is None else k),
            rel_diff=max(off.values()), before_first_update=init,
        )  # fmt: skip
        named = ", ".join(f"rank {k} by {d:.2g}" for k, d in off.items())
        return Check(
            "ranks",
            title,
            "fail",
            f"after update {n} the ranks hold different parameters: {named} (relative, "
            f"against rank {ref_rank}; tolerance {RANKS_RTOL:g}). The {many.nprocs}-process run is "
            f"{len(ranks)} separate trainings, not one: {_ranks_advice(many, init)}.",
            data=data,
        )
    return Check(
        "ranks",
        title,
        "pass",
        f"all {len(ranks)} ranks hold the same parameters after each of {len(common)} updates "
        f"(fingerprints within {RANKS_RTOL:g})",
        data=data,
    )


def drifted(checks: Sequence[Check], many: RunSummary) -> list[Check]:
    """When the ranks drifted apart, the comparisons between the runs are of one of the N
    trainings: the loss check says so instead of judging (its measurement is kept)."""
    ranks = next((c for c in checks if c.id == "ranks"), None)
    if ranks is None or ranks.status != "fail":
        return list(checks)
    why = (
        f"not judged: the ranks' parameters differ from update {ranks.data.get('first_update')} "
        f"(see ranks agree), so the {many.nprocs}-process run is {many.nprocs} separate trainings and its "
        "curve is rank 0's alone"
    )
    out = []
    for c in checks:
        if c.id == "loss" and c.status != "skip":
            c = Check(c.id, c.title, "skip", f"{why}. Measured: {c.detail}", c.rule, data=c.data)
        out.append(c)
    return out
