"""Runtime confirmation of the accumulation, backward, epoch-order and evaluation rules.

Each check reads what the probe recorded (``distlint_probe_confirm``: loader passes, sampler
orders, gathers and reduces, clipping calls, accumulate entries; the recorder's losses with who
called backward, and its updates) and confirms or refutes the static finding of its rule:

  accumulation  DL204  optimizer updates against backward calls per rank, with accumulation set
  backward      DL205  backward (and clipping) through the framework, or around it
  epoch order   DL304  the first indices of a shuffling sampler's second pass against its first
  evaluation    DL401  whether an evaluation over a sharded loader was gathered or reduced
  gathered      DL402  samples gathered in an evaluation against the evaluation set's size

A check is shown when the static check reported its rule, or when the hazard happened at run
time (the report then says the static check missed it); otherwise it has nothing to say.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from distlint.verify.checks import feeding_loaders, framework
from distlint.verify.compare import Check, RunSummary
from distlint.verify.records import RankRecord

KINDS = ("pass", "order", "collective", "clip", "accumulate", "amp", "loss", "batch", "step")
GATHERS = (
    "accelerator.gather",
    "accelerator.gather_for_metrics",
    "dist.all_gather",
    "dist.all_gather_into_tensor",
    "fabric.all_gather",
)
# The rules whose check needs the run to reach a second pass of its training data.
NEEDS_EPOCHS = ("DL304", "DL401", "DL402")


def events(rank: RankRecord) -> list[dict[str, Any]]:
    """The records of `rank` these checks read, in the order written (updates of the first
    optimizer only)."""
    out: list[dict[str, Any]] = []
    try:
        with open(rank.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                kind = record.get("kind")
                if kind in KINDS and not (kind == "step" and record.get("opt", 0) != 0):
                    out.append(record)
    except OSError:
        pass
    return out


def _of(evs: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in evs if e.get("kind") == kind]


def _stopped_early(run: RunSummary) -> str:
    """How the run ended, for a SKIP that needed more of it."""
    r0 = run.rank0
    updates = len(r0.updates) if r0 else 0
    if r0 is not None and r0.stop_reason == "epochs":
        return f"the {run.label} run stopped at the start of the epoch --epochs asked for"
    if r0 is not None and r0.stopped:
        return (
            f"verify stopped the {run.label} run after {updates} updates; `--epochs 2` runs it "
            "into its second pass over the training data"
        )
    return f"the {run.label} run ended after {updates} updates"


# -- DL204: accumulation ---------------------------------------------------------------------


@dataclass
class Accumulation:
    label: str
    gas: int
    steps: list[int] = field(default_factory=list)  # per rank
    backwards: list[int] = field(default_factory=list)
    entered: list[int] = field(default_factory=list)  # accelerator.accumulate entries

    @classmethod
    def of(cls, run: RunSummary) -> Accumulation:
        gas = int(run.config("gradient_accumulation_steps") or 1)
        acc = cls(run.label, gas)
        for r in run.records.ranks:
            acc.steps.append(len(r.updates))
            acc.backwards.append(sum(len(u.raw_losses) for u in r.updates))
            acc.entered.append(len(_of(events(r), "accumulate")))
        return acc

    def text(self) -> str:
        pairs = sorted(set(zip(self.steps, self.backwards)))
        counts = ", ".join(f"{s} updates for {b} backward calls" for s, b in pairs)
        each = " on each rank" if len(self.steps) > 1 and len(pairs) == 1 else ""
        return f"{self.label}: {counts}{each}"

    def every_backward(self) -> bool:
        """The optimizer stepped after every backward call (no accumulation happened)."""
        return all(s and b <= s for s, b in zip(self.steps, self.backwards))

    def accumulated(self) -> bool:
        return all(s and b >= s * self.gas for s, b in zip(self.steps, self.backwards))


def check_accumulation(one: RunSummary, many: RunSummary) -> Check:
    runs = [Accumulation.of(run) for run in (many, one)]
    gas = runs[0].gas
    data: dict[str, Any] = {
        "gradient_accumulation_steps": gas,
        "runs": {
            a.label: {"updates": a.steps, "backwards": a.backwards, "accumulate": a.entered}
            for a in runs
        },
    }
    if framework(many) != "accelerate":
        return Check(
            "accumulation",
            "gradient accumulation",
            "skip",
            "no Accelerator trained: accumulation is the script's own loop",
            "DL204",
            data=data,
        )
    if gas <= 1:
        return Check(
            "accumulation",
            "gradient accumulation",
            "skip",
            "the Accelerator that trained has gradient_accumulation_steps=1: nothing to accumulate",
            "DL204",
            data=data,
        )
    if not all(a.steps and all(a.steps) for a in runs):
        return Check(
            "accumulation",
            "gradient accumulation",
            "skip",
            "a rank made no optimizer update",
            "DL204",
            data=data,
        )
    seen = "; ".join(a.text() for a in runs)
    if all(a.every_backward() for a in runs):
        never = (
            ""
            if any(sum(a.entered) for a in runs)
            else ", and accelerator.accumulate() was never entered"
        )
        return Check(
            "accumulation",
            "gradient accumulation",
            "fail",
            f"gradient_accumulation_steps={gas}, but the optimizer stepped after every backward "
            f"call ({seen}){never}: each update used one micro-batch with its loss divided by "
            f"{gas} (accelerator.backward always divides). Wrap the loop body in `with "
            "accelerator.accumulate(model):`.",
            "DL204",
            True,
            data,
        )
    if all(a.accumulated() for a in runs):
        return Check(
            "accumulation",
            "gradient accumulation",
            "pass",
            f"one update per {gas} backward calls, as gradient_accumulation_steps={gas} asks ({seen}).",
            "DL204",
            False,
            data,
        )
    return Check(
        "accumulation",
        "gradient accumulation",
        "warn",
        f"gradient_accumulation_steps={gas}, but the updates came after fewer backward calls "
        f"than that ({seen}): accumulation happened only in part.",
        "DL204",
        True,
        data,
    )


# -- DL205: backward through the framework ---------------------------------------------------


FRAMEWORK_CALLS = {
    "accelerate": ("accelerator.backward(loss)", "accelerator.clip_grad_norm_"),
    "fabric": ("fabric.backward(loss)", "fabric.clip_gradients"),
}


def _bypass(run: RunSummary) -> tuple[int, int, int, list[str]]:
    """(backward calls, of which around the framework, clip calls around it, where)."""
    total = bypassed = clipped = 0
    where: list[str] = []
    for r in run.records.ranks:
        evs = events(r)
        for e in _of(evs, "loss"):
            total += 1
            if e.get("source") == "Tensor.backward":
                bypassed += 1
        for e in _of(evs, "clip"):
            if str(e.get("api", "")).startswith("torch."):
                clipped += 1
                if e.get("where") and e["where"] not in where:
                    where.append(str(e["where"]))
    return total, bypassed, clipped, where


def check_backward(one: RunSummary, many: RunSummary) -> Check:
    source = framework(many)
    if source not in FRAMEWORK_CALLS:
        return Check(
            "backward",
            "backward",
            "skip",
            "no Accelerator or Fabric trained: loss.backward() is the script's own call",
            "DL205",
        )
    backward_call, clip_call = FRAMEWORK_CALLS[source]
    counts = {run.label: _bypass(run) for run in (many, one)}
    data: dict[str, Any] = {
        label: {"backward": t, "around_framework": b, "torch_clip": c}
        for label, (t, b, c, _) in counts.items()
    }
    total = sum(t for t, _, _, _ in counts.values())
    bypassed = sum(b for _, b, _, _ in counts.values())
    clipped = sum(c for _, _, c, _ in counts.values())
    if not total:
        return Check(
            "backward", "backward", "skip", "no backward call was recorded", "DL205", data=data
        )
    if not bypassed and not clipped:
        return Check(
            "backward",
            "backward",
            "pass",
            f"every backward call went through {backward_call.split('(')[0]} ({total} calls in "
            "both runs).",
            "DL205",
            False,
            data,
        )
    gas = int(many.config("gradient_accumulation_steps") or 1)
    # an fp16 GradScaler that accelerator.backward would have applied (none on CPU)
    fp16 = any(e.get("scaler") for r in many.records.ranks for e in _of(events(r), "amp"))
    skipped = []
    if gas > 1:
        skipped.append(
            f"the division by gradient_accumulation_steps={gas} was skipped (gradients ×{gas})"
        )
    if fp16:
        skipped.append("the fp16 gradient scaler was skipped")
    parts = []
    if bypassed:
        parts.append(f"{bypassed} of {total} backward calls in both runs were loss.backward()")
    if clipped:
        where = counts[many.label][3] or counts[one.label][3]
        parts.append(
            f"{clipped} clipping calls were torch.nn.utils' own"
            + (f" (at {where[0]})" if where else "")
        )
    asked = str(many.config("mixed_precision") or "").endswith("fp16") and not fp16
    effect = (
        "so " + " and ".join(skipped)
        if skipped
        else "the gradients are the same in this setup (no accumulation, no fp16 scaler"
        + (f": mixed_precision='fp16' runs without one on {many.device}" if asked else "")
        + "), but not under accumulation, an fp16 scaler, DeepSpeed or FSDP"
    )
    sep = ", " if skipped else ": "
    return Check(
        "backward",
        "backward",
        "fail" if skipped else "warn",
        f"{'; '.join(parts)} with a model the framework prepared{sep}{effect}. Use "
        f"`{backward_call}`" + (f" and `{clip_call}`" if clipped else "") + ".",
        "DL205",
        True,
        data,
    )


# -- DL304: the sampler's order from one epoch to the next ------------------------------------


def sampler_passes(rank: RankRecord) -> dict[int, dict[int, dict[str, Any]]]:
    """sampler -> pass -> its longest `order` record (shuffling samplers only)."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for e in _of(events(rank), "order"):
        if not e.get("shuffle"):
            continue
        passes = out.setdefault(int(e["sampler"]), {})
        kept = passes.get(int(e["n"]))
        if kept is None or len(e.get("prefix") or []) > len(kept.get("prefix") or []):
            passes[int(e["n"])] = e
    return out


def training_passes(passes: dict[int, dict[str, Any]], updates: int) -> list[int]:
    """The passes an update was made on (the next pass began after more updates, or the rank
    updated after the last one began): a `next(iter(loader))` peek is a pass of the sampler
    too, and repeats the order of the epoch it peeks into."""
    ns = sorted(passes)
    starts = [int(passes[n].get("updates") or 0) for n in ns] + [updates]
    return [n for n, a, b in zip(ns, starts, starts[1:]) if b > a]


def repeated_orders(run: RunSummary) -> tuple[list[str], list[str]]:
    """(ranks whose sampler began a training pass in the same order as the training pass
    before, ranks whose sampler reshuffled), each as a short description."""
    same: list[str] = []
    reshuffled: list[str] = []
    for r in run.records.ranks:
        for passes in sampler_passes(r).values():
            ns = training_passes(passes, len(r.updates))
            for i, (a, b) in enumerate(zip(ns, ns[1:]), start=2):
                pa, pb = passes[a].get("prefix") or [], passes[b].get("prefix") or []
                k = min(len(pa), len(pb))
                if k < 2:
                    continue
                cls = passes[b]["cls"]
                if pa[:k] == pb[:k]:
                    epoch = passes[b].get("epoch")
                    same.append(
                        f"rank {r.rank}: the {cls}'s epoch {i} began with the same {k} indices "
                        f"as epoch {i - 1}"
                        + (f" (its `epoch` stayed {epoch})" if epoch is not None else "")
                    )
                else:
                    reshuffled.append(f"rank {r.rank}: the {cls}'s epoch {i} in a new order")
                break
    return same, reshuffled


EPOCH_FIX = {
    "accelerate": "pass the DataLoader through accelerator.prepare (it sets the epoch itself), "
    "or call `sampler.set_epoch(epoch)` at the top of the epoch loop",
    "fabric": "let fabric.setup_dataloaders add the sampler (its loader sets the epoch), or call "
    "`sampler.set_epoch(epoch)` at the top of the epoch loop",
}


def check_epoch_order(one: RunSummary, many: RunSummary) -> Check:
    same, reshuffled = repeated_orders(many)
    same1, reshuffled1 = repeated_orders(one)
    data = {"repeated": same, "reshuffled": reshuffled, "one_repeated": same1}
    if not same and not reshuffled:
        return Check(
            "epoch_order",
            "epoch order",
            "skip",
            "no shuffling sampler began a second pass: " + _stopped_early(many),
            "DL304",
            data=data,
        )
    if same:
        one_text = (
            " The 1-process run repeated its order too."
            if same1
            else " The 1-process run reshuffled."
            if reshuffled1
            else ""
        )
        fix = EPOCH_FIX.get(
            framework(many), "call `sampler.set_epoch(epoch)` at the top of the epoch loop"
        )
        return Check(
            "epoch_order",
            "epoch order",
            "fail",
            f"every epoch in the same order on {many.label}: {same[0]}"
            + (
                f" (and {len(same) - 1} more rank{'s' if len(same) > 2 else ''})"
                if len(same) > 1
                else ""
            )
            + f".{one_text} {fix[0].upper() + fix[1:]}.",
            "DL304",
            True,
            data,
        )
    return Check(
        "epoch_order",
        "epoch order",
        "pass",
        f"the samplers reshuffled from one pass to the next on {many.label} ({reshuffled[0]}"
        + (
            f", and {len(reshuffled) - 1} more rank{'s' if len(reshuffled) > 2 else ''}"
            if len(reshuffled) > 1
            else ""
        )
        + ").",
        "DL304",
        False,
        data,
    )


# -- DL401 / DL402: evaluation ----------------------------------------------------------------


@dataclass
class Evaluation:
    """One pass of a loader that did not feed the trained model, up to the next update or the
    next batch of the training loader, and the gathers and reduces made meanwhile."""

    loader: int
    dataset: int | None
    samples: int = 0
    batches: int = 0
    collectives: list[dict[str, Any]] = field(default_factory=list)
    trained: bool = False  # a backward ran in the span: a second training loader, not evaluation


def evaluations(rank: RankRecord, feeding: Sequence[int]) -> list[Evaluation]:
    found: list[Evaluation] = []
    current: Evaluation | None = None
    for e in events(rank):
        kind = e.get("kind")
        ends = kind in ("pass", "batch") and e.get("loader") in feeding
        if kind == "step" or ends:
            current = None
        elif kind == "pass":
            current = Evaluation(int(e["loader"]), e.get("dataset"))
            found.append(current)
        elif current is None:
            continue
        elif kind == "batch" and e.get("loader") == current.loader:
            current.batches += 1
            current.samples += int(e.get("size") or 0)
        elif kind == "loss":
            current.trained = True
        elif kind == "collective":
            current.collectives.append(e)
    return [ev for ev in found if ev.batches and not ev.trained]


def _gathered(ev: Evaluation) -> list[tuple[str, str, int]]:
    """(api, where, samples returned) per gathering call site of the evaluation (a site is a
    call expression: two gathers on one line are two)."""
    sites: dict[tuple[str, str, Any], int] = {}
    for c in ev.collectives:
        if c.get("api") in GATHERS and c.get("out") is not None:
            key = (str(c["api"]), str(c.get("where") or "?"), c.get("offset"))
            sites[key] = sites.get(key, 0) + int(c["out"])
    return [(api, where, n) for (api, where, _), n in sites.items()]


REDUCE_FIX = {
    "accelerate": "gather what the metric reads with `accelerator.gather_for_metrics(...)` "
    "before it (or reduce the counts with `accelerator.reduce(correct, 'sum')`)",
    "fabric": "gather what the metric reads with `fabric.all_gather(...)` (or reduce the counts "
    "with `fabric.all_reduce(correct, reduce_op='sum')`), or use a torchmetrics metric",
    "xla": "reduce the counts with `xm.mesh_reduce(...)` or `xm.all_reduce(...)`",
}


def check_evaluation(one: RunSummary, many: RunSummary) -> tuple[Check, Check]:
    feeding = feeding_loaders(many)
    r0 = many.rank0
    evals = evaluations(r0, feeding) if r0 else []
    one_evals = evaluations(one.rank0, feeding_loaders(one)) if one.rank0 else []
    data: dict[str, Any] = {
        "evaluations": [
            {
                "loader": ev.loader,
                "dataset": ev.dataset,
                "samples": ev.samples,
                "gathered": _gathered(ev),
                "collectives": len(ev.collectives),
            }
            for ev in evals
        ]
    }
    if not evals:
        why = "no evaluation pass ran: " + _stopped_early(many)
        return (
            Check("evaluation", "evaluation metric", "skip", why, "DL401", data=data),
            Check("gathered", "gathered samples", "skip", why, "DL402", data=data),
        )
    one_text = (
        f" (1 process: {one_evals[0].samples} of {one_evals[0].dataset})" if one_evals else ""
    )
    return _check_sharded_metric(many, evals, one_text, data), _check_duplicates(many, evals, data)


def _check_sharded_metric(
    many: RunSummary, evals: list[Evaluation], one_text: str, data: dict[str, Any]
) -> Check:
    for ev in evals:
        if ev.dataset and ev.samples < ev.dataset and not ev.collectives:
            fix = REDUCE_FIX.get(
                framework(many),
                "reduce the counts with `dist.all_reduce(correct)` (or dist.all_gather the "
                "predictions) before computing the metric",
            )
            return Check(
                "evaluation",
                "evaluation metric",
                "fail",
                f"rank 0 evaluated {ev.samples} of the {ev.dataset} samples{one_text}, and no "
                "gather or reduce across processes followed before the next update: a metric "
                f"computed from them is one shard's. {fix[0].upper() + fix[1:]}.",
                "DL401",
                True,
                data,
            )
    ev = evals[0]
    if ev.dataset and ev.samples >= ev.dataset:
        how = (
            f"every rank evaluated all {ev.dataset} samples (the evaluation loader is not sharded)"
        )
    else:
        apis = sorted({str(c.get("api")) for c in ev.collectives})
        how = (
            f"rank 0 evaluated {ev.samples} of {ev.dataset or 'unknown'} samples{one_text}, and "
            f"the evaluation gathered or reduced across processes ({', '.join(apis)})"
        )
    return Check("evaluation", "evaluation metric", "pass", how + ".", "DL401", False, data)


def _check_duplicates(many: RunSummary, evals: list[Evaluation], data: dict[str, Any]) -> Check:
    sites = [(ev, site) for ev in evals for site in _gathered(ev)]
    if not sites:
        return Check(
            "gathered",
            "gathered samples",
            "skip",
            "nothing was gathered in the evaluation",
            "DL402",
            data=data,
        )
    for ev, (api, where, n) in sites:
        if ev.dataset and n > ev.dataset and not api.endswith("gather_for_metrics"):
            fix = (
                "use `accelerator.gather_for_metrics(...)`, which drops them"
                if framework(many) == "accelerate"
                else "keep only the first len(dataset) gathered samples (a DistributedSampler "
                "pads its shards with repeated samples)"
            )
            return Check(
                "gathered",
                "gathered samples",
                "fail",
                f"{api} at {where} returned {n} samples for an evaluation set of {ev.dataset}: "
                f"{n - ev.dataset} were the padding of the last batch, counted twice by the "
                f"metric. {fix[0].upper() + fix[1:]}.",
                "DL402",
                True,
                data,
            )
    ev, (api, where, n) = sites[0]
    if api.endswith("gather_for_metrics") or not ev.dataset or n < ev.dataset:
        return Check(
            "gathered",
            "gathered samples",
            "pass",
            f"{api} at {where} returned {n} samples for an evaluation set of "
            f"{ev.dataset or 'unknown size'}: no duplicates.",
            "DL402",
            False,
            data,
        )
    return Check(
        "gathered",
        "gathered samples",
        "warn",
        f"{api} at {where} returned {n} samples, as many as the evaluation set: no padding "
        f"with {many.nprocs} processes, but with a count of processes that does not divide "
        "the last batch the padded samples would be counted twice.",
        "DL402",
        None,
        data,
    )


# -- all of them -------------------------------------------------------------------------------


def run_all(one: RunSummary, many: RunSummary, codes: Iterable[str] | None) -> list[Check]:
    """The checks with something to say: those whose rule the static check reported (`codes`;
    None when it did not run), and those whose hazard happened at run time."""
    wanted = set(codes or ())
    checks = [
        check_accumulation(one, many),
        check_backward(one, many),
        check_epoch_order(one, many),
    ]
    checks.extend(check_evaluation(one, many))
    return [c for c in checks if c.rule in wanted or c.status in ("fail", "warn")]


def epochs_for(findings: Sequence[Any] | None) -> tuple[int | None, str | None]:
    """--epochs to use when none was given: 2 when the static check reported a rule whose check
    needs a second pass over the training data (with the reason), else None."""
    for f in findings or ():
        if f.code in NEEDS_EPOCHS:
            return 2, (
                f"the N-process run went on to the start of its second epoch (--epochs 2), "
                f"since {f.code} at {f.path}:{f.line} is judged from it; --epochs 0 stops "
                "after --max-steps updates instead"
            )
    return None, None
