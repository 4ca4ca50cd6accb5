"""DL301 per-device-batch-as-global."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index, string_value
from distlint.analysis.batch import (
    GLOBAL,
    SAMPLES,
    Use,
    is_target,
    message_context,
    message_role,
    name_role,
    per_device_places,
    target_role,
    uses_of,
)
from distlint.analysis.facts import Facts, Mode
from distlint.analysis.index import Op
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, factor_expression

__all__ = ["GLOBAL", "SAMPLES", "PerDeviceBatchAsGlobal", "message_role", "name_role"]


class PerDeviceBatchAsGlobal(Rule):
    """
    ## What it does
    In a script that runs one process per device (it creates an Accelerate `Accelerator`, starts
    torch DDP/FSDP with `init_process_group` / `DistributedDataParallel` / `DistributedSampler`,
    uses torch_xla multiprocessing or Lightning Fabric), the `batch_size` given to a `DataLoader`
    is the batch of *one* process. The rule follows that value (the same name or attribute such as
    `args.per_device_train_batch_size`, names copied from it, and the arguments passed to a local
    helper that builds the loader) and flags where it is used as the global batch without a factor
    that depends on the number of processes:

    - assigned to a name that calls it total / global / effective / observed batch;
    - printed or logged (`print`, `logger.info`, `accelerator.print`, f-strings, `%` and
      `.format`) in a message that calls it the total / global / effective / observed batch size;
    - multiplied into a count of samples seen or a throughput (samples/s, images/s, tokens).

    Not reported: values multiplied by a process count (`accelerator.num_processes`,
    `dist.get_world_size()`, `WORLD_SIZE`, `xr.world_size()`, a name such as `world_size`), a
    global batch held constant by dividing it by the world size to get the per-device batch
    (the global name is then really global), `DataLoaderConfiguration(split_batches=True)` (the
    DataLoader's batch is then global) and torch_xla SPMD scripts (one process, global batch).

    ## Why is this bad?
    With N processes each one draws its own `batch_size` samples, so the observed batch per
    optimizer step is `batch_size * N` (times the gradient accumulation steps). A log line or a
    config value that reports `batch_size` as the total understates the real batch N times; a
    step budget computed from it is N times too long; a throughput computed from it is N times
    too low. Comparing runs across device counts, or tuning the learning rate for the "global"
    batch, then goes wrong silently. With tensor or context parallelism the ranks of one model
    replica share a batch, and the data-parallel size, not the process count, is the factor.

    ## Fix safety
    The fix multiplies the per-device value by `<accelerator>.num_processes` (the accelerator
    visible at that point: `accelerator`, `self.accelerator`, ...), or by `dist.get_world_size()`
    in a DDP script that already imports `torch.distributed` (the existing binding is reused).
    It is unsafe: the corrected value can feed a step count or a schedule, so the run's length
    changes on more than one process. No fix is offered when no accelerator or
    `torch.distributed` binding is visible, for torch_xla and Fabric scripts, and with tensor or
    context parallelism (the data-parallel size must be chosen by hand).

    ## References
    - Accelerate, "Comparing performance across distributed setups": observed batch size.
    - PyTorch, `torch.nn.parallel.DistributedDataParallel`: each process loads its own batch.
    """

    CODE = "DL301"
    NAME = "per-device-batch-as-global"
    MESSAGE = "the DataLoader's per-device `batch_size` is used as the global batch: multiply by the number of processes"
    FIX_TITLE = "Multiply by the number of processes"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("DataLoader",)

    VALID = (
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nbatch_size = 16\nloader = DataLoader([1, 2], batch_size=batch_size)\n"
            "total_batch_size = batch_size * accelerator.num_processes\n"
            "accelerator.print(f'Total batch size: {total_batch_size}')\n"
        ),
        # global batch held constant: the per-device batch is derived from it
        Valid(
            "import accelerate\nimport torch\n\nacc = accelerate.Accelerator()\nglobal_batch_size = 64\n"
            "per_device = global_batch_size // acc.num_processes\n"
            "loader = torch.utils.data.DataLoader(range(8), batch_size=per_device)\n"
            "print(f'Global batch size: {global_batch_size}, per device: {per_device}')\n"
        ),
        # split_batches in effect: the DataLoader batch is the global batch
        Valid(
            "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n"
            "from torch.utils.data import DataLoader as DL\n\n"
            "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))\n"
            "BS = 32\nloader = DL(range(64), batch_size=BS)\nprint(f'Total batch size = {BS}')\n"
        ),
        # DDP: world size from a tuple-unpacked helper result, by name
        Valid(
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n\n"
            "def setup():\n    dist.init_process_group('gloo')\n    return dist.get_rank(), dist.get_world_size()\n\n"
            "rank, world_size = setup()\nbs = 8\nloader = DataLoader(range(8), batch_size=bs)\n"
            "global_batch = bs * world_size\nimages_per_sec = bs * world_size * 10 / 2.0\n"
        ),
        # the per-device batch logged as such, and a single-process script
        Valid(
            "import logging\nfrom accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "logger = logging.getLogger(__name__)\naccelerator = Accelerator()\nbatch_size = 4\n"
            "loader = DataLoader(range(8), batch_size=batch_size)\n"
            "logger.info('Instantaneous batch size per device = %d', batch_size)\n"
            "logger.info(f'Total batch size = {batch_size * accelerator.num_processes}')\n"
        ),
        Valid(
            "from torch.utils.data import DataLoader\n\nbatch_size = 32\nloader = DataLoader(range(64), batch_size=batch_size)\n"
            "print(f'Total batch size: {batch_size}')\n"
        ),
        # torch_xla SPMD: one process, the DataLoader batch is global
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader\n\nxr.use_spmd()\nglobal_batch_size = 128\n"
            "loader = DataLoader(range(256), batch_size=global_batch_size)\n"
            "device_loader = pl.MpDeviceLoader(loader, 'xla')\nprint(f'global batch size {global_batch_size}')\n"
        ),
        # the total is scaled by a later augmented assignment
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nbs = 8\nloader = DataLoader(range(8), batch_size=bs)\n"
            "total_batch_size = bs * 2\ntotal_batch_size *= accelerator.num_processes\n"
        ),
        # yolov7: the total is taken from the attribute before it is divided in place
        Valid(
            'import argparse\n\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--batch-size", type=int, default=64, help="total batch size for all GPUs")\nopt = parser.parse_args()\ndist.init_process_group("nccl")\nopt.world_size = dist.get_world_size()\nopt.total_batch_size = opt.batch_size\nopt.batch_size = opt.total_batch_size // opt.world_size\nloader = DataLoader(range(64), batch_size=opt.batch_size)\n'
        ),
    )
    INVALID = (
        # ... but the attribute read after the division is the per-device batch
        Invalid(
            'import argparse\n\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--batch-size", type=int, default=64, help="total batch size for all GPUs")\nopt = parser.parse_args()\ndist.init_process_group("nccl")\nopt.world_size = dist.get_world_size()\nopt.total_batch_size = opt.batch_size\nopt.batch_size = opt.total_batch_size // opt.world_size\nloader = DataLoader(range(64), batch_size=opt.batch_size)\nprint(f"Global batch size: {opt.batch_size}")\n',
            fixed='import argparse\n\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--batch-size", type=int, default=64, help="total batch size for all GPUs")\nopt = parser.parse_args()\ndist.init_process_group("nccl")\nopt.world_size = dist.get_world_size()\nopt.total_batch_size = opt.batch_size\nopt.batch_size = opt.total_batch_size // opt.world_size\nloader = DataLoader(range(64), batch_size=opt.batch_size)\nprint(f"Global batch size: {opt.batch_size * dist.get_world_size()}")\n',
            range="14:29-14:43",
        ),
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nbatch_size = 16\nloader = DataLoader(range(64), batch_size=batch_size)\n"
            "accelerator.print(f'Global batch size: {batch_size}')\n",
            fixed=(
                "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
                "accelerator = Accelerator()\nbatch_size = 16\nloader = DataLoader(range(64), batch_size=batch_size)\n"
                "accelerator.print(f'Global batch size: {batch_size * accelerator.num_processes}')\n"
            ),
            range="7:41-7:51",
        ),
        Invalid(
            "import argparse\nimport accelerate\nimport torch.utils.data as tud\n\n"
            "args = argparse.Namespace(per_device_train_batch_size=8, gradient_accumulation_steps=2)\n"
            "acc = accelerate.Accelerator()\n"
            "loader = tud.DataLoader(range(64), batch_size=args.per_device_train_batch_size)\n"
            "total_batch_size = args.per_device_train_batch_size * args.gradient_accumulation_steps\n",
            fixed=(
                "import argparse\nimport accelerate\nimport torch.utils.data as tud\n\n"
                "args = argparse.Namespace(per_device_train_batch_size=8, gradient_accumulation_steps=2)\n"
                "acc = accelerate.Accelerator()\n"
                "loader = tud.DataLoader(range(64), batch_size=args.per_device_train_batch_size)\n"
                "total_batch_size = args.per_device_train_batch_size * acc.num_processes * args.gradient_accumulation_steps\n"
            ),
            range="8:20-8:87",
        ),
        # DDP, %-style logging, dist imported under a name
        Invalid(
            "import logging\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
            "dist.init_process_group('gloo')\nbatch_size = 8\ndata = list(range(64))\n"
            "loader = DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data))\n"
            "logging.info('effective batch size: %d', batch_size)\n",
            fixed=(
                "import logging\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
                "dist.init_process_group('gloo')\nbatch_size = 8\ndata = list(range(64))\n"
                "loader = DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data))\n"
                "logging.info('effective batch size: %d', batch_size * dist.get_world_size())\n"
            ),
            range="9:42-9:52",
        ),
        # throughput from a helper-built loader, in a trainer class
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "def make_loader(bs):\n    return DataLoader(range(64), batch_size=bs)\n\n"
            "class Trainer:\n    def __init__(self, bs):\n        self.accelerator = Accelerator()\n"
            "        self.bs = bs\n        self.loader = make_loader(self.bs)\n\n"
            "    def report(self, steps, seconds):\n        samples_per_sec = steps * self.bs / seconds\n"
            "        return samples_per_sec\n",
            fixed=(
                "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
                "def make_loader(bs):\n    return DataLoader(range(64), batch_size=bs)\n\n"
                "class Trainer:\n    def __init__(self, bs):\n        self.accelerator = Accelerator()\n"
                "        self.bs = bs\n        self.loader = make_loader(self.bs)\n\n"
                "    def report(self, steps, seconds):\n        samples_per_sec = steps * self.bs * self.accelerator.num_processes / seconds\n"
                "        return samples_per_sec\n"
            ),
            range="14:27-14:52",
        ),
        # DDP without a torch.distributed binding in scope: report only
        Invalid(
            "from torch.distributed import init_process_group\nfrom torch.utils.data import DataLoader\n\n"
            "init_process_group('nccl')\nBATCH = 32\nloader = DataLoader(range(64), batch_size=BATCH)\n"
            "print('Global batch size: {}'.format(BATCH))\n",
            range="7:38-7:43",
        ),
        # tensor parallelism: the data-parallel size is the factor; report only
        Invalid(
            "from accelerate import Accelerator, ParallelismConfig\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator(parallelism_config=ParallelismConfig(tp_size=2))\nbs = 4\n"
            "loader = DataLoader(range(64), batch_size=bs)\nprint('total batch size %d' % bs)\n",
            range="7:31-7:33",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        mode = facts.mode
        # SPMD: one process drives every device; split_batches: the DataLoader batch is global
        if not mode.per_process_batches or (mode is Mode.ACCELERATE and facts.split_batches):
            return
        places = per_device_places(index, facts.data.batch.per_device_values)
        if not places:
            return
        reported: set[int] = set()
        for use in uses_of(index, places):
            if id(use.expr) in reported:
                continue
            role = _role(index, use)
            if role is None or _has_process_factor(facts, use) or _read_before_share(facts, use):
                continue
            reported.add(id(use.expr))
            factor = None if facts.model_parallel else _factor_text(facts, use.node)
            ctx.report(
                use.expr,
                _message(index, use, role, _shown(factor, mode, facts.model_parallel)),
                _fix(index, use, factor),
            )


# ------------------------------------------------------------------------------------------
# How the per-device value is used
# ------------------------------------------------------------------------------------------


_SEQUENCES = (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString)


def _role(index: Index, use: Use) -> str | None:
    expr = use.expr
    if any(isinstance(other, _SEQUENCES) for other in use.others):
        return None  # `[""] * batch_size` repeats a sequence: a list, not a count of samples
    multiplied = expr is not use.node
    parent = index.parent(expr)
    # assigned to / passed as / stored under a name that says what it is
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and parent.value is expr:
        return _assigned_role(index, parent, multiplied)
    if isinstance(parent, cst.AugAssign) and parent.value is expr:
        return _augmented_role(parent)
    if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.value is expr:
        role = _named_role(parent.keyword.value, multiplied)
        if role == SAMPLES and _configures(index, index.parent(parent)):
            return None  # `Dataset(num_of_sequences=bs * 4)`: the size of what is built
        if role is not None:
            return role
    if isinstance(parent, cst.DictElement) and parent.value is expr:
        role = _key_role(parent, multiplied)
        if role is not None:
            return role
    return _logged_role(index, expr, multiplied)


def _logged_role(index: Index, expr: cst.BaseExpression, multiplied: bool) -> str | None:
    """A log message that calls it the global batch / a throughput."""
    around = message_context(index, expr)
    if around is not None:
        return message_role(around[0], around[1], multiplied)
    return None


def _augmented_role(parent: cst.AugAssign) -> str | None:
    """`total_samples += bs * n`: the role of the target the product is added to."""
    role = target_role(parent.target)
    if role == GLOBAL and isinstance(parent.operator, cst.AddAssign):
        return None  # accumulating per-device batches into a "total": a sum, not a batch size
    return role if role == SAMPLES or role == GLOBAL else None


def _key_role(parent: cst.DictElement, multiplied: bool) -> str | None:
    """`{"global_batch_size": bs * n}`: the role the string key names."""
    key = string_value(parent.key)
    return _named_role(key, multiplied) if key else None


def _named_role(name: str, multiplied: bool) -> str | None:
    """GLOBAL for a name of the global batch; SAMPLES for a count of samples, if multiplied."""
    role = name_role(name)
    return role if role == GLOBAL or (role == SAMPLES and multiplied) else None


def _assigned_role(
    index: Index, assign: cst.Assign | cst.AnnAssign | cst.NamedExpr, multiplied: bool
) -> str | None:
    targets = (
        [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
    )
    for target in targets:
        role = target_role(target)
        role = role if role == GLOBAL or (role == SAMPLES and multiplied) else None
        if role == SAMPLES and isinstance(target, cst.Name) and _only_configures(index, target):
            return None  # `num_of_sequences = bs * 4` then handed to a dataset: a buffer size
        if role is not None:
            return role
    return None


def _configures(index: Index, call: cst.CSTNode | None) -> bool:
    """``call`` builds something the script keeps (its result is assigned, returned or passed
    on): what it is given configures that object (a buffer length, a dataset size), unlike
    a call made for its effect, such as logging."""
    if not isinstance(call, cst.Call):
        return False
    func = call.func
    if isinstance(func, cst.Name) and func.value == "dict" and not index.bindings_of(func):
        return False  # `dict(samples_seen=...)`: a record of values, as a dict display is
    return not isinstance(index.parent(call), cst.Expr)


def _only_configures(index: Index, target: cst.Name) -> bool:
    """Every read of the name ``target`` binds is an argument of a call that builds something."""
    reads = [
        node
        for node in index.nodes_of(cst.Name)
        if isinstance(node, cst.Name)
        and node.value == target.value
        and node is not target
        and not is_target(index, node)
        and any(b.target is target for b in index.bindings_of(node))
    ]
    args = [index.parent(n) for n in reads]
    return bool(reads) and all(
        isinstance(a, cst.Arg) and a.value is n and _configures(index, index.parent(a))
        for a, n in zip(args, reads)
    )


# ------------------------------------------------------------------------------------------
# Process-count factors, messages, fixes
# ------------------------------------------------------------------------------------------


def _has_process_factor(facts: Facts, use: Use) -> bool:
    index = facts.index
    if any(facts.reads_process_count(other) for other in use.others):
        return True
    # `total_batch_size = bs * accum` followed by `total_batch_size *= accelerator.num_processes`
    parent = index.parent(use.expr)
    target = None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
    elif isinstance(parent, cst.AnnAssign):
        target = parent.target
    if isinstance(target, cst.Name):
        later = index.lookup(target.value, index.scope(target))
    elif target is not None:
        later = index.attribute_assignments(target)
    else:
        return False
    return any(
        a.node is not parent and a.value is not None and facts.reads_process_count(a.value)
        for a in later
    )


def _read_before_share(facts: Facts, use: Use) -> bool:
    """An attribute read before its function sets it to a share of itself by the process count
    (yolov7: `opt.total_batch_size = opt.batch_size`, then `opt.batch_size =
    opt.total_batch_size // opt.world_size`): until then it holds the global batch it was
    given, outside any loop that would bring the read round again."""
    index, node = facts.index, use.node
    if not isinstance(node, (cst.Attribute, cst.Subscript)):
        return False
    here, order = index.enclosing_function(node), index.order(node)
    for a in index.attribute_assignments(node):
        if (
            a.op is not Op.ASSIGN
            or a.order <= order
            or index.enclosing_function(a.node) is not here
            or a.value is None
            or not facts.processes.divided_by_process_count(a.value)
        ):
            continue
        loops = (cst.For, cst.While)
        if not any(
            index.is_inside(node, loop)
            for loop in index.ancestors(a.node)
            if isinstance(loop, loops)
        ):
            return True
    return False


def _factor_text(facts: Facts, at: cst.CSTNode) -> str | None:
    if facts.mode is Mode.ACCELERATE:
        accelerator = facts.accelerator_expr(at)
        return None if accelerator is None else f"{accelerator}.num_processes"
    if facts.mode is Mode.DDP:
        existing = facts.index.binding_for("torch.distributed.get_world_size", at)
        return None if existing is None else f"{existing}()"
    return None


def _message(index: Index, use: Use, role: str, factor: str | None) -> str:
    """``factor``: the process count visible at the use, else the framework's spelling of it;
    None with tensor / context parallelism (the data-parallel size is the factor)."""
    code = index.module.code_for_node(use.node)
    what = "the global batch size" if role == GLOBAL else "the samples of a step"
    if factor is None:
        advice = "multiply by the data-parallel size (tensor/context parallelism)"
    else:
        advice = f"multiply by {factor}"
    return f"per-device batch `{code}` is used as {what}: {advice}"


def _shown(factor: str | None, mode: Mode, model_parallel: bool) -> str | None:
    if model_parallel:
        return None
    return f"`{factor}`" if factor else mode.process_count_text


def _fix(index: Index, use: Use, factor: str | None) -> FixPlan | None:
    if factor is None:
        return None
    node = use.node
    product: cst.BaseExpression = cst.BinaryOperation(
        left=node,
        operator=cst.Multiply(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=factor_expression(factor),
    )
    if _needs_parentheses(index, node):
        product = product.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return FixPlan(replace={node: product})


def _needs_parentheses(index: Index, node: cst.CSTNode) -> bool:
    """`x * n` in place of `x`: parenthesise where the surrounding operator would regroup it."""
    parent = index.parent(node)
    if isinstance(parent, cst.BinaryOperation):
        if parent.left is node:
            return isinstance(parent.operator, cst.Power)
        # `a - x` / `a * x` stay equal as `a - x * n` / `a * x * n`; `a / x`, `a % x` do not
        return not isinstance(parent.operator, (cst.Add, cst.Subtract, cst.Multiply))
    return isinstance(parent, (cst.UnaryOperation, cst.Await))
