"""DL402 gather-keeps-duplicates."""

from __future__ import annotations

import libcst as cst

from distlint.analysis.facts import Facts, Mode
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid

_FOR_METRICS = cst.Name("gather_for_metrics")


class GatherKeepsDuplicates(Rule):
    """
    ## What it does
    Flags `accelerator.gather(...)` in an evaluation loop (a loop over a prepared DataLoader that
    runs no backward pass) when nothing cuts the gathered values back to the dataset's length.

    Not reported: `accelerator.gather_for_metrics(...)`; a function that slices what it gathered
    with the dataset's length (`preds[: len(eval_dataloader.dataset) - samples_seen]`, the older
    Accelerate examples' way, or `torch.cat(losses)[: len(eval_dataset)]`); an Accelerator with
    `even_batches=False` (no padding); a gather in a training loop (a loss to log) or over a loader
    that was not prepared.

    ## Why is this bad?
    A prepared loader gives every process the same number of batches: when the dataset does not
    divide evenly, Accelerate pads the last batch with samples from the start of the dataset.
    `accelerator.gather` returns those duplicates with the rest, so the metric counts some
    samples twice and differs from the one-process run (which has no padding), by an amount that
    depends on the number of processes. `gather_for_metrics` drops the padding on the last batch.

    ## Fix safety
    The fix renames the call to `gather_for_metrics` (same arguments). It is unsafe: the printed
    metric changes (to the right value), and code that relies on every process receiving the
    same number of rows from the last batch (a fixed-shape buffer) may need adapting.

    ## References
    - Accelerate, `Accelerator.gather_for_metrics` and "Distributed evaluation" in the quick tour.
    """

    CODE = "DL402"
    NAME = "gather-keeps-duplicates"
    MESSAGE = (
        "`accelerator.gather` in an evaluation loop keeps the padding duplicates of the last batch"
    )
    FIX_TITLE = "Use `accelerator.gather_for_metrics`"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("gather",)

    VALID = (
        Valid(
            "from accelerate import Accelerator\n\n\ndef evaluate(model, loader, metric):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    for batch in loader:\n        preds = model(batch['x']).argmax(-1)\n"
            "        preds, refs = accelerator.gather_for_metrics((preds, batch['y']))\n"
            "        metric.add_batch(predictions=preds, references=refs)\n    return metric.compute()\n"
        ),
        # the older examples drop the duplicates by hand
        Valid(
            "from accelerate import Accelerator\n\n\ndef evaluate(model, loader, metric):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    samples_seen = 0\n    for step, batch in enumerate(loader):\n"
            "        preds, refs = accelerator.gather((model(batch['x']), batch['y']))\n"
            "        if step == len(loader) - 1:\n"
            "            preds = preds[: len(loader.dataset) - samples_seen]\n            refs = refs[: len(loader.dataset) - samples_seen]\n"
            "        else:\n            samples_seen += refs.shape[0]\n"
            "        metric.add_batch(predictions=preds, references=refs)\n"
        ),
        # no padding
        Valid(
            "from accelerate import Accelerator\n\n\ndef evaluate(model, loader):\n"
            "    accelerator = Accelerator(even_batches=False)\n    model, loader = accelerator.prepare(model, loader)\n"
            "    return [accelerator.gather(model(batch)) for batch in loader]\n"
        ),
        # a loss gathered for logging in the training loop
        Valid(
            "from accelerate import Accelerator\n\n\ndef train(model, loader):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    for batch in loader:\n        loss = model(batch)\n        accelerator.backward(loss)\n"
            "        print(accelerator.gather(loss).mean())\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\n\n\ndef evaluate(model, loader, metric):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    for batch in loader:\n        preds = model(batch['x']).argmax(-1)\n"
            "        preds, refs = accelerator.gather((preds, batch['y']))\n"
            "        metric.add_batch(predictions=preds, references=refs)\n    return metric.compute()\n",
            fixed=(
                "from accelerate import Accelerator\n\n\ndef evaluate(model, loader, metric):\n"
                "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
                "    for batch in loader:\n        preds = model(batch['x']).argmax(-1)\n"
                "        preds, refs = accelerator.gather_for_metrics((preds, batch['y']))\n"
                "        metric.add_batch(predictions=preds, references=refs)\n    return metric.compute()\n"
            ),
            range="9:23-9:41",
        ),
        # accelerate.utils.gather: report only (the function has no `_for_metrics` twin)
        Invalid(
            "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import gather\n\n\n"
            "def evaluate(model, loader):\n    accelerator = Accelerator()\n"
            "    model, loader = accelerator.prepare(model, loader)\n    correct = total = 0\n"
            "    for x, y in loader:\n        pred, y = gather((model(x).argmax(-1), y))\n"
            "        correct += (pred == y).sum().item()\n        total += y.numel()\n    return correct / total\n",
            range="11:19-11:25",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        metrics = facts.metrics
        if not metrics.may_keep_duplicates:
            return  # no gather to keep duplicates: which loops are sharded need not be known
        for loop in metrics.sharded_evaluation_loops:
            if not _pads_last_batch(facts, loop):
                continue
            for call in metrics.duplicate_keeping_gathers(loop.body):
                if metrics.deduplicated_by_hand(call):
                    continue
                text = ctx.index.module.code_for_node(call.func)
                message = (
                    f"`{text}` keeps the padding duplicates of the last batch in the metric; use "
                    "`gather_for_metrics`"
                )
                fix = None
                if isinstance(call.func, cst.Attribute):
                    fix = FixPlan(replace={call.func.attr: _FOR_METRICS})
                ctx.report(call.func, message, fix)


def _pads_last_batch(facts: Facts, loop: cst.For) -> bool:
    """The loader of ``loop`` is prepared by an Accelerator that pads the last batch: this
    module's, or, in a helper module that creates none, those of the files whose calls pass
    the loop its loader."""
    if facts.mode is Mode.ACCELERATE:
        return facts.metrics.pads_last_batch
    callers = facts.loops.callers_of_loader(loop)
    return bool(callers) and all(
        c.mode is Mode.ACCELERATE and c.metrics.pads_last_batch for c in callers
    )
