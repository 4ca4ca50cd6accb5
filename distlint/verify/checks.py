"""Compare the 1-process run with the N-process run. Each check names the rule it bears on (by
code; the name comes from distlint.registry):

  batch     DL301  the global batch per update, 1 vs N (per-device batch x N x accumulation)
  sharding  DL302  did the ranks train on different inputs? identical inputs: the loader is not
                   sharded, and nothing about the global batch can be confirmed
  lr        DL201  LR ratio against the global-batch ratio
  schedule  DL202  the LR against samples seen: does the schedule advance alike on 1 and N?
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
    sharding = check_sharding(many)
    identical = sharding.status == "fail"
    return [
        check_batch(one, many, exact, identical),
        sharding,
        check_lr(one, many, exact, identical),
        check_schedule(one, many),
        check_seeding(one, many),
        check_data_order(one, many, exact),
        check_loss(one, many, exact, loss_rtol),
    ]


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
        loaders = {lid for u in r0.updates for lid in u.loaders}
        where = sorted({w for lid in loaders if (w := r0.loader_where(lid))})
        data["loaders"] = where
        source = (
            f"the DataLoader built at {', '.join(where)}"
            if where
            else "the batches the script builds itself (no DataLoader fed the model)"
        )
        return Check(
            "sharding",
            "sharding",
            "fail",
            f"every rank trained on identical inputs in all {len(points)} updates compared: "
            f"{source} is not sharded across processes. Pass it through accelerator.prepare "
            "(or give it a DistributedSampler; for hand-built batches, offset the seed or the "
            "index by the rank).",
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


def check_lr(one: RunSummary, many: RunSummary, exact: bool, identical: bool = False) -> Check:
    # Without --exact: the LRs of the first update in both runs (a scheduler may have changed
    # the optimizer's LR since it was built). With --exact the 1-process run was given the
    # N-process LRs, so both runs' own LRs at prepare time are compared.
    if exact:
        lr1 = one.rank0.native_lrs() if one.rank0 else None
        lrn = many.rank0.native_lrs() if many.rank0 else None
    else:
        lr1 = one.curve[0].lrs if one.curve else None
        lrn = many.curve[0].lrs if many.curve else None
    if exact and one.rank0 is not None:
        native1 = one.rank0.native_per_device_batch
        accum1 = one.accumulation or 1
        g1 = native1 * accum1 if native1 else one.global_batch  # the script's own 1-process batch
    else:
        g1 = one.global_batch
    gn = many.global_batch
    data: dict[str, Any] = {
        "lr_1": lr1,
        "lr_n": lrn,
        "batch_ratio": None,
        "lr_ratio": None,
        "scaling": None,
    }
    if not lr1 or not lrn or not lr1[0]:
        return Check(
            "lr",
            "learning rate",
            "skip",
            "no optimizer update with an LR was recorded",
            "DL201",
            data=data,
        )
    if not g1 or not gn:
        return Check(
            "lr",
            "learning rate",
            "skip",
            f"LR {lr1[0]:g} on 1 process, {lrn[0]:g} on {many.nprocs}; the global batch of an "
            "update is unknown (see observed batch), so the ratio cannot be judged",
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
    if identical:
        return Check(
            "lr",
            "learning rate",
            "skip",
            head + " The ranks trained on identical inputs (see sharding): the distinct batch "
            "did not grow, so the LR scaling cannot be judged.",
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
            f"global batch ×{batch_ratio:g}, LR unchanged ({lr1[0]:g}). Scale it with the number "
            "of processes: `lr * accelerator.num_processes` (linear scaling, Goyal et al. 2017).",
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


def check_schedule(one: RunSummary, many: RunSummary) -> Check:
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
    lrs1 = [p.lrs[0] for p in one.curve if p.lrs and p.samples is not None and p.samples <= seen]
    lrsn = [p.lrs[0] for p in many.curve if p.lrs and p.samples is not None and p.samples <= seen]
    if not lrs1 or not lrsn:
        return Check("schedule", "LR schedule", "skip", "no LRs recorded", "DL202", data=data)
    top1, topn = max(lrs1), max(lrsn)
    if top1 <= 0 or topn <= 0:
        return Check("schedule", "LR schedule", "skip", "the LR is never positive", "DL202")
    const1 = _close(min(lrs1), top1, 1e-9)
    constn = _close(min(lrsn), topn, 1e-9)
    if const1 and constn:
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
    last = max((st for st, _ in _starts(many.curve, seen)), default=0)
    end1 = (_lr_at(one.curve, last) or 0.0) / top1
    endn = (_lr_at(many.curve, last) or 0.0) / topn
    data.update(max_diff=worst, at_samples=worst_at, end_1=end1, end_n=endn, samples=last)
    head = (
        f"LR relative to its peak at sample {last}: {end1:.3g} on 1 process, {endn:.3g} on "
        f"{many.nprocs}"
    )
    if worst <= 0.15:
        status = "pass" if worst <= 0.05 else "warn"
        tail = (
            "; the schedule follows the samples seen alike in both runs."
            if status == "pass"
            else f"; they differ slightly (largest gap {worst:.2g} of the peak, at sample "
            f"{worst_at}): a warmup counted in updates lasts N times more samples on N processes."
        )
        return Check(
            "schedule",
            "LR schedule",
            status,
            head + tail,
            "DL202",
            False,
            data,
        )
    faster = (1 - endn) > (1 - end1)
    # How much faster per sample: the schedules' progress (1 - LR / peak) compared where the
    # N-process schedule has not yet run out.
    pairs = []
    for start, lr in _starts(many.curve, seen):
        pn = 1 - lr / topn
        p1 = 1 - (_lr_at(one.curve, start) or 0.0) / top1
        if pn < 0.95 and p1 > 1e-9:
            pairs.append((p1, pn))
    ratio = sum(b for _, b in pairs) / sum(a for a, _ in pairs) if pairs else None
    data["speed_ratio"] = ratio
    how = f" (about ×{ratio:.2g} as fast per sample)" if ratio and faster else ""
    return Check(
        "schedule",
        "LR schedule",
        "fail",
        head
        + f": the {many.nprocs}-process schedule "
        + (f"runs ahead{how}" if faster else "lags behind")
        + f" (largest gap {worst:.2g} of the peak, at sample {worst_at}). A prepared scheduler is "
        "stepped once per process for each update, so count its length in single-process steps "
        "(len(train_dataloader) before prepare, × epochs), not from the prepared loader.",
        "DL202",
        faster,
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
    differ_where = (
        "across ranks" if any("across ranks" in unseeded[g] for g in names) else "between the runs"
    )
    advice = (
        "seed them with set_seed (accelerate.utils.set_seed seeds python, numpy, torch and the "
        "accelerators)"
    )
    if differ_where == "across ranks" and not _fed_by_loader(many):
        # No DataLoader fed the model: the script draws its batches from these generators, and
        # the same seed on every rank would make every rank draw the same batches (DL302).
        advice = (
            "seed them per rank, set_seed(seed + accelerator.process_index) or "
            "torch.manual_seed(seed + rank): no DataLoader fed the model, so the script draws its "
            "batches from them, and one seed on every rank would give every rank the same batches"
        )
        data["advice"] = "per-rank"
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


def order_fix(run: RunSummary) -> str:
    """How to make the data order reproducible, in the terms of the script's own setup."""
    return SEEDABLE_FIX if run.config("source") == "accelerate" else PLAIN_ORDER_FIX


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
                f"the runs saw different samples: {agree}. To compare the runs step by step, "
                f"{order_fix(many)}.",
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
    """The samples range (lo, hi] both the check and the table use: the last quarter in common."""
    if not (one.samples_known and many.samples_known):
        return None
    seen = min(one.samples_seen or 0, many.samples_seen or 0)
    if seen <= 0:
        return None
    return int(0.75 * seen), seen


def window_losses(curve: Sequence[CurvePoint], lo: int, hi: int) -> list[float]:
    return [
        p.loss
        for p in curve
        if p.samples is not None and lo < p.samples <= hi and p.loss is not None
    ]


def _mixed(run: RunSummary) -> bool:
    return str(run.config("mixed_precision") or "no") not in ("no", "None")


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
    data.update(samples=seen, window=[lo, seen])
    if len(v1) < 2 or len(vn) < 2:
        return Check(
            "loss",
            "loss",
            "skip",
            f"too few updates in samples {lo}-{seen} to compare the end of the runs",
            data=data,
        )
    m1, mn = statistics.fmean(v1), statistics.fmean(vn)
    # The runs' own noise: the spread of each curve's losses within the window, as the
    # uncertainty of its mean; 3 standard errors of the difference, plus a small floor.
    se = math.sqrt(statistics.variance(v1) / len(v1) + statistics.variance(vn) / len(vn))
    floor = 0.05 if (_mixed(one) or _mixed(many)) else 0.02
    if rtol is not None:
        tol, why = rtol * max(abs(m1), abs(mn)), f"--loss-rtol {rtol:g}"
    else:
        tol = 3.0 * se + floor * max(abs(m1), abs(mn))
        why = f"3 × the runs' noise ({se:.2g}) + {floor:g} × the loss"
    diff = abs(m1 - mn)
    rel = diff / max(abs(m1), abs(mn), 1e-12)
    data.update(end_loss_1=m1, end_loss_n=mn, diff=diff, tolerance=tol, rel_diff=rel, noise=se)
    status = "pass" if diff <= tol else "fail"
    verdict = "agree" if status == "pass" else "disagree"
    return Check(
        "loss",
        "loss",
        status,
        f"mean loss over samples {lo}-{seen}: {m1:.4g} ({one.label}) vs {mn:.4g} ({many.label}); "
        f"they {verdict} (difference {diff:.2g}, tolerance {tol:.2g} = {why}). Per-batch losses "
        "may differ between setups; the end of training should not.",
        data=data,
    )


def _exact_loss(one: RunSummary, many: RunSummary, rtol: float | None, data: dict) -> Check:
    mixed = _mixed(one) or _mixed(many)
    tol, why = (1e-2, "mixed precision") if mixed else (1e-5, "fp32")
    if rtol is not None:
        tol, why = rtol, "--loss-rtol"
    data.update(rtol=tol, tolerance_for=why)
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
                f"update {p1.update}: the inputs differ between the runs, so the losses cannot "
                f"match (agreed for {compared} updates). To compare step by step, {order_fix(many)}.",
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
    count = (
        "accelerator.num_processes" if many.config("source") == "accelerate" else "the world size"
    )
    g1, gn = (one.global_batch if one else None), many.global_batch
    if g1 and gn and g1 == gn:
        lr_advice = (
            f"the script already keeps the global batch ({gn}) on 1 and {n} processes: keep the LR"
        )
    else:
        lr_advice = (
            "keep the LR with these sizes (the same global batch); keeping the per-device batch "
            f"instead multiplies the global batch by {n}: then scale the LR, lr * {count}"
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
