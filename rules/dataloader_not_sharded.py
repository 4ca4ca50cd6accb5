"""DL302 dataloader-not-sharded."""

from __future__ import annotations

import libcst as cst

from distlint.analysis.facts import Facts, Mode, Origin
from distlint.analysis.loops import iterators_drawn_in
from distlint.analysis.prepared import rebound_by_prepare_after
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, fix_statement


class DataloaderNotSharded(Rule):
    """
    ## What it does
    Flags a `DataLoader` that is iterated in a training loop (a loop that calls `backward`) but
    is never sharded across processes: in a script that creates an Accelerate `Accelerator`, a
    loader that never went through `accelerator.prepare`; in a torch DDP script
    (`init_process_group`, `DistributedDataParallel`, ...) or a torch_xla multiprocessing script,
    a loader without a `DistributedSampler`.

    The loader is followed through assignments, tuple unpacking, helper functions that build or
    prepare it (in the same module or in another module of the project), `enumerate` / `tqdm`,
    and torch_xla's `MpDeviceLoader`. Batches drawn with `next(it)` in a training loop are
    followed to the `iter(loader)` that made `it`, and the loader is judged as it was there: an
    iterator taken before `accelerator.prepare` keeps drawing from the unprepared loader (no fix:
    take the iterator after preparing). A loader whose origin cannot be seen (a module outside the
    project, a custom sampler, a dataset that shards itself by rank such as
    `split_dataset_by_node`, an `IterableDataset` class of the script, whose own `__iter__` decides
    what each process reads, a helper given data this script split by rank) is not reported.

    ## Why is this bad?
    Every process then iterates the whole dataset, usually in the same order: N processes do N
    times the work on duplicate batches, an epoch takes as long as on one device, and the
    gradients averaged across processes are those of the same samples. The learning rate and the
    schedule, scaled for N distinct batches per step, no longer match what is trained.

    ## Fix safety
    In an Accelerate script whose loader is a local name and whose accelerator is visible, the fix
    inserts `<loader> = <accelerator>.prepare(<loader>)` before the training loop (before the
    outermost enclosing loop that does not also rebuild the loader). It is unsafe: each process
    then sees only its shard, so the number of steps per epoch, the batches each process draws and
    the device placement of the batches change. Under DDP no fix is offered: a `DistributedSampler`
    also needs `sampler.set_epoch(epoch)` every epoch and replaces `shuffle=True`, which is a
    decision for the author.

    ## References
    - Accelerate, "Comparing performance across distributed setups" and `Accelerator.prepare`.
    - PyTorch, `torch.utils.data.distributed.DistributedSampler`.
    """

    CODE = "DL302"
    NAME = "dataloader-not-sharded"
    MESSAGE = "a DataLoader iterated in the training loop is not sharded across processes"
    FIX_TITLE = "Prepare the DataLoader with the accelerator"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("DataLoader",)

    VALID = (
        # the iterator is taken from the prepared loader
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nloader = DataLoader(range(8), batch_size=2, shuffle=True)\n"
            "model, loader = accelerator.prepare(object(), loader)\nbatches = iter(loader)\n"
            "for step in range(100):\n    accelerator.backward(model(next(batches)))\n"
        ),
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nloader = DataLoader(range(8), batch_size=2)\n"
            "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "for batch in loader:\n    accelerator.backward(model(batch))\n"
        ),
        # built and prepared inside a helper, returned through a tuple
        Valid(
            "import accelerate\nfrom torch.utils.data import DataLoader as DL\n\n"
            "def loaders(acc):\n    train = DL(range(8), batch_size=2)\n    train = acc.prepare(train)\n"
            "    return train, acc.prepare(DL(range(4)))\n\n"
            "acc = accelerate.Accelerator()\ntrain, valid = loaders(acc)\n"
            "for step, batch in enumerate(train):\n    acc.backward(batch)\n"
        ),
        # DDP with a DistributedSampler
        Valid(
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n\n"
            "dist.init_process_group('gloo')\ndata = list(range(8))\nsampler = DistributedSampler(data)\n"
            "loader = DataLoader(data, batch_size=2, sampler=sampler)\n"
            "for x in loader:\n    loss = x.sum()\n    loss.backward()\n"
        ),
        # an unprepared eval loader (no backward in its loop) and a single-process script
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\neval_loader = DataLoader(range(8))\n"
            "for batch in eval_loader:\n    print(batch)\n"
        ),
        Valid(
            "from torch.utils.data import DataLoader\n\nloader = DataLoader(range(8))\n"
            "for batch in loader:\n    batch.backward()\n"
        ),
        # a streaming dataset split by rank, and a loader from another module
        Valid(
            "import torch.distributed as dist\nfrom datasets.distributed import split_dataset_by_node\n"
            "from torch.utils.data import DataLoader\nfrom mydata import make_loader\n\n"
            "dist.init_process_group('nccl')\n"
            "ds = split_dataset_by_node(stream, rank=dist.get_rank(), world_size=dist.get_world_size())\n"
            "loader = DataLoader(ds, batch_size=4)\nother = make_loader()\n"
            "for x in loader:\n    x.backward()\nfor x in other:\n    x.backward()\n"
        ),
        # torch_xla: the per-core device loader wraps a loader with a DistributedSampler
        Valid(
            "import torch_xla.distributed.parallel_loader as pl\nimport torch_xla.runtime as xr\n"
            "from torch.utils.data import DataLoader, DistributedSampler\n\n"
            "data = list(range(8))\nsampler = DistributedSampler(data, num_replicas=xr.world_size(), rank=xr.global_ordinal())\n"
            "device_loader = pl.MpDeviceLoader(DataLoader(data, sampler=sampler), 'xla')\n"
            "for step, x in enumerate(device_loader):\n    x.backward()\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nloader = DataLoader(range(8), batch_size=2)\n"
            "model, optimizer = accelerator.prepare(object(), object())\n"
            "for epoch in range(2):\n    for batch in loader:\n        accelerator.backward(model(batch))\n",
            fixed=(
                "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
                "accelerator = Accelerator()\nloader = DataLoader(range(8), batch_size=2)\n"
                "model, optimizer = accelerator.prepare(object(), object())\n"
                "loader = accelerator.prepare(loader)\n"
                "for epoch in range(2):\n    for batch in loader:\n        accelerator.backward(model(batch))\n"
            ),
            range="8:18-8:24",
        ),
        # built in a helper, unpacked, iterated through tqdm(enumerate(...))
        Invalid(
            "import accelerate\nfrom tqdm.auto import tqdm\nimport torch.utils.data as tud\n\n"
            "def get_loaders():\n    train = tud.DataLoader(range(8), batch_size=2, shuffle=True)\n"
            "    return train, tud.DataLoader(range(4))\n\n"
            "def main():\n    acc = accelerate.Accelerator()\n    train_dl, eval_dl = get_loaders()\n"
            "    eval_dl = acc.prepare(eval_dl)\n"
            "    for step, batch in tqdm(enumerate(train_dl)):\n        acc.backward(batch)\n",
            fixed=(
                "import accelerate\nfrom tqdm.auto import tqdm\nimport torch.utils.data as tud\n\n"
                "def get_loaders():\n    train = tud.DataLoader(range(8), batch_size=2, shuffle=True)\n"
                "    return train, tud.DataLoader(range(4))\n\n"
                "def main():\n    acc = accelerate.Accelerator()\n    train_dl, eval_dl = get_loaders()\n"
                "    eval_dl = acc.prepare(eval_dl)\n"
                "    train_dl = acc.prepare(train_dl)\n"
                "    for step, batch in tqdm(enumerate(train_dl)):\n        acc.backward(batch)\n"
            ),
            range="13:39-13:47",
        ),
        # DDP without a sampler: report only
        Invalid(
            "import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "from torch.utils.data import DataLoader\n\n"
            "dist.init_process_group('nccl')\nmodel = DDP(net)\nloader = DataLoader(data, batch_size=8, shuffle=True)\n"
            "for x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n",
            range="8:13-8:19",
        ),
        # batches drawn with next() from an iterator taken before the loader was prepared
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nloader = DataLoader(range(8), batch_size=2, shuffle=True)\n"
            "batches = iter(loader)\nmodel, loader = accelerator.prepare(object(), loader)\n"
            "for step in range(100):\n    accelerator.backward(model(next(batches)))\n",
            range="6:16-6:22",
        ),
        # ... or from a loader never prepared, taken again when it runs out
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nmodel = accelerator.prepare(object())\n"
            "loader = DataLoader(range(8), batch_size=2)\nbatches = iter(loader)\nstep = 0\n"
            "while step < 100:\n    try:\n        batch = next(batches)\n    except StopIteration:\n"
            "        batches = iter(loader)\n        batch = next(batches)\n"
            "    accelerator.backward(model(batch))\n    step += 1\n",
            range="7:16-7:22",
        ),
        # a whole-dataset sampler under DDP, in a trainer class
        Invalid(
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, RandomSampler\n\n"
            "class Trainer:\n    def __init__(self, data):\n        dist.init_process_group('gloo')\n"
            "        self.loader = DataLoader(data, sampler=RandomSampler(data))\n\n"
            "    def fit(self):\n        for batch in self.loader:\n            batch.sum().backward()\n",
            range="10:22-10:33",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        # one process per device; under torch_xla SPMD one process feeds every device and the
        # compiler shards each batch
        if facts.mode not in (Mode.ACCELERATE, Mode.DDP, Mode.XLA_MULTIPROCESS):
            return
        accelerate = facts.mode is Mode.ACCELERATE
        reported: set[tuple[int, str]] = set()  # (function, loader)
        for loop in index.loops:
            if not isinstance(loop, cst.For) or not facts.loops.runs_backward_directly(loop):
                continue
            loader = _unwrap(facts, loop.iter)
            if not isinstance(loader, (cst.Name, cst.Attribute)):
                continue
            origins = facts.loader_origins(loader, 6)
            if not origins or any(o is not Origin.UNSHARDED for o in origins):
                continue
            code = index.module.code_for_node(loader)
            if accelerate:
                message = (
                    f"`{code}` is iterated in the training loop but never prepared: every process "
                    "trains on the whole dataset"
                )
            else:
                message = (
                    f"`{code}` is iterated in the training loop without a `DistributedSampler`: "
                    "every rank trains on the whole dataset"
                )
            ctx.report(loader, message, _fix(facts, loop, loader) if accelerate else None)
            reported.add((id(index.enclosing_function(loop)), code))
        self._check_iterators(ctx, accelerate, reported)

    def _check_iterators(
        self, ctx: RuleContext, accelerate: bool, done: set[tuple[int, str]]
    ) -> None:
        """Batches drawn with `next(it)` in a training loop, `it = iter(loader)`: the loader as
        it was when the iterator was taken (an iterator taken before `prepare` keeps drawing
        from the unprepared loader). ``done``: (function, loader) already reported; an iterator
        taken again on StopIteration is the same hazard, reported once."""
        index, facts = ctx.index, ctx.facts
        for loop in index.loops:
            if not isinstance(loop, (cst.For, cst.While)) or not facts.loops.runs_backward_directly(
                loop
            ):
                continue
            for site in sorted(iterators_drawn_in(facts, loop), key=index.order):
                loader = _unwrap(facts, facts.iterator_of(site) or site)
                if not isinstance(loader, (cst.Name, cst.Attribute)):
                    continue
                code = index.module.code_for_node(loader)
                key = (id(index.enclosing_function(site)), code)
                if key in done:
                    continue
                done.add(key)
                origins = facts.loader_origins(loader, 6)
                if not origins or any(o is not Origin.UNSHARDED for o in origins):
                    continue
                if not accelerate:
                    message = (
                        f"the training loop draws from `iter({code})` without a `DistributedSampler`: "
                        "every rank trains on the whole dataset"
                    )
                elif rebound_by_prepare_after(facts, loader, site):
                    message = (
                        f"`iter({code})` is taken before `{code}` is prepared: every process trains "
                        "on the whole dataset"
                    )
                else:
                    message = (
                        f"the training loop draws from `iter({code})` but `{code}` is never "
                        "prepared: every process trains on the whole dataset"
                    )
                ctx.report(loader, message, None)


def _unwrap(facts: Facts, expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None:
        if not facts.passes_batches_through(expr.func):
            break
        expr = expr.args[0].value
    return expr


def _fix(facts: Facts, loop: cst.For, loader: cst.BaseExpression) -> FixPlan | None:
    index = facts.index
    if not isinstance(loader, cst.Name):
        return None
    bindings = index.bindings_of(loader)
    if not bindings or any(b.scope is not index.scope(loop) for b in bindings):
        return None
    # Prepare once, before the outermost enclosing loop that does not rebuild the loader
    # (re-preparing every epoch would wrap the loader again and again).
    anchor: cst.CSTNode = loop
    function = index.enclosing_function(loop)
    for ancestor in index.ancestors(loop):
        if ancestor is function:
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            if any(index.is_inside(b.node, ancestor) for b in bindings):
                break
            anchor = ancestor
    accelerator = facts.accelerator_expr(anchor)
    if accelerator is None:
        return None
    statement = fix_statement(f"{loader.value} = {accelerator}.prepare({loader.value})\n")
    discarded = _discarded_prepare(facts, loader, anchor)
    if discarded is not None:
        # `accelerator.prepare(loader)` whose result was thrown away: keep it, assigned
        assert isinstance(statement, cst.SimpleStatementLine)
        return FixPlan(replace={discarded: discarded.with_changes(body=statement.body)})
    return FixPlan(insert_before={anchor: [statement]})


def _discarded_prepare(
    facts: Facts, loader: cst.Name, anchor: cst.CSTNode
) -> cst.SimpleStatementLine | None:
    """A statement line ``<accelerator>.prepare(<loader>)`` alone, in the scope of ``anchor``
    and before it, whose result nobody kept."""
    index = facts.index
    scope = index.scope(anchor)
    for call in facts.prepare_calls:
        line = index.statement(call)
        if (
            isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(line.body[0], cst.Expr)
            and line.body[0].value is call
            and len(call.args) == 1
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == loader.value
            and index.scope(call) is scope
            and index.order(call) < index.order(anchor)
        ):
            return line
    return None
