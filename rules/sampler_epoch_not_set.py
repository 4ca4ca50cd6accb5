"""DL304 sampler-epoch-not-set."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, fix_statement


class SamplerEpochNotSet(Rule):
    """
    ## What it does
    Flags a shuffling `DistributedSampler` (or timm's `RepeatAugSampler`, which shuffles the
    same way) whose DataLoader is iterated by a training loop that an epoch loop repeats, in a
    script that never calls `set_epoch` with a value that changes per epoch.

    The loader is followed from the sampler through `sampler=` / `batch_sampler=`, assignments
    and helpers of the module; the epoch loop is the loop around the training loop, or around a
    call of the function that holds it, or the training loop itself when it starts the loader
    over with `iter(loader)` once it runs out (a step loop drawing batches with `next`). Not reported: a sampler with `shuffle=False`, a loader
    prepared by Accelerate or set up by Lightning Fabric (both call `set_epoch` each time the
    loader is iterated), a script that calls `set_epoch` on anything with a per-epoch value (it
    may reach the sampler through `loader.sampler`), a loader iterated in another module.

    ## Why is this bad?
    A `DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and the epoch is
    whatever `set_epoch` last set: without it every epoch is drawn in the same order on every
    process. A one-process run with `shuffle=True` reshuffles each epoch, so the N-process run
    sees less varied batches than the run it is compared with, and its loss curve and final
    metric differ for a reason unrelated to the number of devices.

    ## Fix safety
    The fix inserts `sampler.set_epoch(epoch)` as the first statement of the epoch loop, when
    the sampler is a name visible there and the epoch loop is `for <name> in ...`. It is unsafe:
    the order of the batches changes from the second epoch on (which is the intent).

    ## References
    - PyTorch, `torch.utils.data.distributed.DistributedSampler` ("In distributed mode, calling
      the set_epoch() method at the beginning of each epoch ... is necessary").
    - Lightning Fabric, `setup_dataloaders`; Accelerate, `DataLoaderShard`.
    """

    CODE = "DL304"
    NAME = "sampler-epoch-not-set"
    MESSAGE = "a shuffling DistributedSampler is iterated over several epochs without `set_epoch`"
    FIX_TITLE = "Call `sampler.set_epoch(epoch)` at the top of the epoch loop"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("Sampler",)

    VALID = (
        Valid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data, epochs):\n    sampler = DistributedSampler(data)\n"
            "    loader = DataLoader(data, sampler=sampler)\n    for epoch in range(epochs):\n"
            "        sampler.set_epoch(epoch)\n        for batch in loader:\n            model(batch).backward()\n"
        ),
        # through the loader's sampler attribute, in the epoch loop around a helper
        Valid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def one_epoch(model, loader):\n    for batch in loader:\n        model(batch).backward()\n\n\n"
            "def main(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
            "    for epoch in range(10):\n        loader.sampler.set_epoch(epoch)\n        one_epoch(model, loader)\n"
        ),
        # no shuffling, and an evaluation loader
        Valid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
            "    for epoch in range(3):\n        for batch in loader:\n            model(batch).backward()\n"
        ),
        # Accelerate sets the epoch of the loaders it prepares
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data):\n    accelerator = Accelerator()\n"
            "    loader = accelerator.prepare(DataLoader(data, sampler=DistributedSampler(data)))\n"
            "    for epoch in range(3):\n        for batch in loader:\n            accelerator.backward(model(batch))\n"
        ),
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data, epochs):\n    sampler = DistributedSampler(data)\n"
            "    loader = DataLoader(data, batch_size=8, sampler=sampler)\n    for epoch in range(epochs):\n"
            "        for batch in loader:\n            model(batch).backward()\n",
            fixed=(
                "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
                "def train(model, data, epochs):\n    sampler = DistributedSampler(data)\n"
                "    loader = DataLoader(data, batch_size=8, sampler=sampler)\n    for epoch in range(epochs):\n"
                "        sampler.set_epoch(epoch)\n"
                "        for batch in loader:\n            model(batch).backward()\n"
            ),
            range="5:15-5:33",
        ),
        # the epoch loop calls a helper that iterates the loader; set_epoch with a constant
        Invalid(
            "import torch.utils.data as tud\n\n\ndef one_epoch(model, loader):\n"
            "    for x, y in loader:\n        model(x, y).backward()\n\n\n"
            "def main(model, data):\n    sampler = tud.distributed.DistributedSampler(data, shuffle=True)\n"
            "    sampler.set_epoch(0)\n    loader = tud.DataLoader(data, sampler=sampler)\n"
            "    for epoch in range(10):\n        one_epoch(model, loader)\n",
            fixed=(
                "import torch.utils.data as tud\n\n\ndef one_epoch(model, loader):\n"
                "    for x, y in loader:\n        model(x, y).backward()\n\n\n"
                "def main(model, data):\n    sampler = tud.distributed.DistributedSampler(data, shuffle=True)\n"
                "    sampler.set_epoch(0)\n    loader = tud.DataLoader(data, sampler=sampler)\n"
                "    for epoch in range(10):\n        sampler.set_epoch(epoch)\n        one_epoch(model, loader)\n"
            ),
            range="10:15-10:49",
        ),
        # a while loop over epochs: report only
        Invalid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
            "    step = 0\n    while step < 1000:\n        for batch in loader:\n"
            "            model(batch).backward()\n            step += 1\n",
            range="5:39-5:57",
        ),
        # a step loop that restarts the loader's iterator when it runs out: report only
        Invalid(
            "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "def train(model, data, max_steps):\n    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
            "    it = iter(loader)\n    for step in range(max_steps):\n        try:\n"
            "            batch = next(it)\n        except StopIteration:\n"
            "            it = iter(loader)\n            batch = next(it)\n"
            "        model(batch).backward()\n",
            range="5:39-5:57",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        samplers = [
            s for s in facts.calls_to(frozenset(K.EPOCH_SEEDED_SAMPLERS)) if _shuffles(ctx, s)
        ]
        if not samplers or _sets_epoch_per_epoch(ctx):
            return
        loops = facts.loops
        for sampler in samplers:
            for loader in _loaders_given(ctx, sampler):
                if facts.is_prepared(loader):
                    continue  # Accelerate / Fabric set the epoch of what they prepare
                epoch_loop = None
                made_here = _is_node(loader)
                for loop in loops.training_loops:
                    if isinstance(loop, cst.For) and facts.flow.reaches(
                        loops.iterated(loop), made_here, depth=6
                    ):
                        epoch_loop = loops.epoch_loop(loop)
                        if epoch_loop is not None:
                            break
                restarted = epoch_loop is None and _restarted_in_training_loop(ctx, made_here)
                if epoch_loop is None and not restarted:
                    continue
                text = index.module.code_for_node(sampler.func)
                message = (
                    f"`{text}` shuffles by epoch, but `set_epoch` is never called: every epoch "
                    "repeats the same order"
                )
                fix = None if epoch_loop is None else _fix(ctx, sampler, epoch_loop)
                ctx.report(sampler.func, message, fix)
                break


def _restarted_in_training_loop(
    ctx: RuleContext, made_here: Callable[[cst.CSTNode, str | None], bool]
) -> bool:
    """A step loop that draws batches with `next(...)` and, when the loader runs out, starts
    the next epoch with `iter(loader)` inside the loop (torchprime's `train_loop`): each restart
    is an epoch. No fix: the loop counts steps, not epochs."""
    index, facts = ctx.index, ctx.facts
    for loop in facts.loops.training_loops:
        for call in index.calls:
            if (
                isinstance(call.func, cst.Name)
                and call.func.value == "iter"
                and len(call.args) == 1
                and index.is_inside(call, loop)
                and not index.bindings_of(call.func)
                and facts.flow.reaches(call.args[0].value, made_here, depth=6)
            ):
                return True
    return False


def _is_node(wanted: cst.CSTNode) -> Callable[[cst.CSTNode, str | None], bool]:
    return lambda node, _q: node is wanted


def _shuffles(ctx: RuleContext, sampler: cst.Call) -> bool:
    position = K.EPOCH_SEEDED_SAMPLERS[ctx.index.qualname(sampler.func) or ""]
    arg = ctx.index.argument(sampler, "shuffle", position)
    return arg is None or ctx.index.constant_value(arg.value) is not False


def _sets_epoch_per_epoch(ctx: RuleContext) -> bool:
    """Some `x.set_epoch(value)` with a value that is not a constant."""
    for call in ctx.index.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == K.SET_EPOCH and call.args:
            if ctx.index.constant_value(call.args[0].value) is None:
                return True
    return False


def _loaders_given(ctx: RuleContext, sampler: cst.Call) -> list[cst.Call]:
    """DataLoaders that ``sampler`` flows into as `sampler=` / `batch_sampler=`."""
    index, facts = ctx.index, ctx.facts
    out = []
    for loader in facts.loaders:
        for keyword in ("sampler", "batch_sampler"):
            arg = index.argument(loader, keyword)
            if arg is not None and facts.flow.reaches(arg.value, _is_node(sampler), depth=6):
                out.append(loader)
                break
    return out


def _fix(ctx: RuleContext, sampler: cst.Call, epoch_loop: cst.For | cst.While) -> FixPlan | None:
    index = ctx.index
    if not isinstance(epoch_loop, cst.For) or not isinstance(epoch_loop.target, cst.Name):
        return None
    if not isinstance(epoch_loop.body, cst.IndentedBlock) or not epoch_loop.body.body:
        return None
    assign = index.parent(sampler)
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        return None
    name = assign.targets[0].target.value
    if index.scope(assign) is not index.scope(epoch_loop) or index.order(assign) > index.order(
        epoch_loop
    ):
        return None
    statement = fix_statement(f"{name}.set_epoch({epoch_loop.target.value})\n")
    return FixPlan(insert_before={epoch_loop.body.body[0]: [statement]})
