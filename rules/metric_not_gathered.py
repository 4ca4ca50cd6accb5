"""DL401 metric-not-gathered."""

from __future__ import annotations

import libcst as cst

from distlint.analysis.facts import Facts, Mode
from distlint.rule import Invalid, Rule, RuleContext, Valid


class MetricNotGathered(Rule):
    """
    ## What it does
    Flags a metric computed in an evaluation loop over a sharded loader (prepared by Accelerate,
    set up by Fabric, or given a `DistributedSampler`) when the script never combines values
    across processes: an `evaluate` metric's `add_batch` / `add`, an `sklearn.metrics` function
    after the loop, a count of matches (`correct += (pred == y).sum()`), a running total
    divided by the whole dataset's size (`total / len(loader.dataset)`), or an average of the
    values the loop collected (`np.mean(losses)`, `statistics.mean(accs)`,
    `torch.stack(losses).mean()`, `sum(losses) / len(losses)` after the loop), with no
    `gather_for_metrics`, `gather`, `reduce`, `all_reduce`, `all_gather` (or a helper of another
    package whose name says it gathers, reduces or synchronises) anywhere in the module.

    Not reported: torchmetrics metrics (they synchronise themselves in `compute()`), a loop over
    a loader that is not sharded, a script that combines any value across processes (it may well
    combine this one; the rule stays silent rather than guess).

    ## Why is this bad?
    Each process iterates only its shard of the evaluation set, so a metric built from the
    loop's values is one shard's: every process prints a different accuracy, computed on
    1/N of the data, and none of them is the number the one-process run prints.

    ## Fix safety
    This rule has no fix: where to gather (predictions and labels with `gather_for_metrics`, or
    the counts with a reduce) depends on the metric.

    ## References
    - Accelerate, `Accelerator.gather_for_metrics`; PyTorch, `torch.distributed.all_reduce`.
    """

    CODE = "DL401"
    NAME = "metric-not-gathered"
    MESSAGE = "an evaluation metric over a sharded loader is computed from one process's shard"
    TRIGGERS = (
        "add_batch",
        ".add(",
        "sklearn",
        "==",
        ".eq(",
        ".dataset",
        "mean",
        "median",
        "average",
        "sum(",
    )

    VALID = (
        Valid(
            "import evaluate\nfrom accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
            "    accelerator = Accelerator()\n    metric = evaluate.load('accuracy')\n"
            "    model, loader = accelerator.prepare(model, loader)\n"
            "    for batch in loader:\n        preds = model(batch['x']).argmax(-1)\n"
            "        preds, refs = accelerator.gather_for_metrics((preds, batch['y']))\n"
            "        metric.add_batch(predictions=preds, references=refs)\n    return metric.compute()\n"
        ),
        # torchmetrics synchronises itself
        Valid(
            "import torchmetrics\nfrom accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
            "    accelerator = Accelerator()\n    acc = torchmetrics.Accuracy(task='multiclass', num_classes=3)\n"
            "    model, loader = accelerator.prepare(model, loader)\n"
            "    for x, y in loader:\n        acc.update(model(x).argmax(-1), y)\n    return acc.compute()\n"
        ),
        # counts reduced across ranks
        Valid(
            "import torch\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def test(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
            "    correct = torch.zeros(1)\n    for x, y in loader:\n        correct += (model(x).argmax(-1) == y).sum()\n"
            "    dist.all_reduce(correct)\n    return correct.item() / len(data)\n"
        ),
        # per-batch losses gathered before they are averaged
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    losses = []\n    for batch in loader:\n        loss = model(**batch).loss\n"
            "        losses.append(accelerator.gather_for_metrics(loss.repeat(len(batch))))\n"
            "    return torch.cat(losses).mean().item()\n"
        ),
    )
    INVALID = (
        Invalid(
            "import evaluate\nfrom accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
            "    accelerator = Accelerator()\n    metric = evaluate.load('accuracy')\n"
            "    model, loader = accelerator.prepare(model, loader)\n"
            "    for batch in loader:\n        preds = model(batch['x']).argmax(-1)\n"
            "        metric.add_batch(predictions=preds, references=batch['y'])\n    return metric.compute()\n",
            range="11:9-11:25",
        ),
        Invalid(
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def test(model, data):\n    dist.init_process_group('nccl')\n"
            "    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
            "    correct = 0\n    for x, y in loader:\n        correct += (model(x).argmax(-1) == y).sum().item()\n"
            "    print(correct / len(data))\n",
            range="10:9-10:59",
        ),
        # a local running total divided by the size of the whole dataset
        Invalid(
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def validate(model, data, loss_fn):\n    dist.init_process_group('nccl')\n"
            "    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
            "    total = 0.0\n    for x, y in loader:\n        total += loss_fn(model(x), y).item() * len(y)\n"
            "    return total / len(loader.dataset)\n",
            range="11:12-11:39",
        ),
        # predictions collected and scored with scikit-learn after the loop
        Invalid(
            "from sklearn.metrics import f1_score\nfrom accelerate import Accelerator\n\n\ndef test(model, loader):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    preds, labels = [], []\n    for x, y in loader:\n"
            "        preds += model(x).argmax(-1).tolist()\n        labels += y.tolist()\n"
            "    return f1_score(labels, preds)\n",
            range="12:12-12:20",
        ),
        # per-batch losses averaged after the loop: one shard's mean
        Invalid(
            "import numpy as np\nfrom accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
            "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
            "    losses = []\n    for batch in loader:\n        losses.append(model(**batch).loss.item())\n"
            "    return np.mean(losses)\n",
            range="11:12-11:19",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        if not any(isinstance(loop, cst.For) for loop in ctx.index.loops):
            return  # no `for` loop: no evaluation loop (before the module's calls are judged)
        facts = ctx.facts
        metrics = facts.metrics
        if not metrics.may_have_sinks:
            return  # no metric computed anywhere: which loops are sharded need not be known
        if metrics.combines_across_processes:
            return
        reported: set[int] = set()
        for loop in metrics.sharded_evaluation_loops:
            if not _runs_data_parallel(facts, loop):
                continue
            sinks = [s for s in metrics.sinks(loop) if id(s) not in reported]
            if not sinks:
                continue
            sink = sinks[0]
            reported.add(id(sink))
            code = ctx.index.module.code_for_node(sink.func if isinstance(sink, cst.Call) else sink)
            message = (
                f"`{code.strip()}` computes a metric from this process's shard only; gather or reduce "
                "it across processes"
            )
            ctx.report(sink.func if isinstance(sink, cst.Call) else sink, message)


_DATA_PARALLEL = (Mode.ACCELERATE, Mode.FABRIC, Mode.DDP, Mode.XLA_MULTIPROCESS)


def _runs_data_parallel(facts: Facts, loop: cst.For) -> bool:
    """``loop`` runs on several processes: its module trains data-parallel, or, in a helper
    module that sets nothing up, every file whose calls pass the loop its loader does."""
    if facts.mode in _DATA_PARALLEL:
        return True
    callers = facts.loops.callers_of_loader(loop)
    return bool(callers) and all(c.mode in _DATA_PARALLEL for c in callers)
