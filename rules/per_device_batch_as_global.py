"""DL301 per-device-batch-as-global."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Union

import libcst as cst

from distlint.analysis import Assignment, Index, string_value, target_key, walk
from distlint.fixes import Fix
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid
from distlint.rules._common import (
    accelerator_expr,
    creates_accelerator,
    split_batches_effective,
    world_size_reader,
)

DATALOADERS = (
    "torch.utils.data.DataLoader",
    "torchdata.stateful_dataloader.StatefulDataLoader",
)

# One process per device through torch.distributed: DDP / FSDP under torchrun or mp.spawn.
DDP_CALLS = (
    "torch.distributed.init_process_group",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.utils.data.DistributedSampler",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.multiprocessing.spawn",
)
# torch_xla multiprocessing: one process per core, each DataLoader yields a per-core batch.
XLA_MULTIPROCESSING_CALLS = (
    "torch_xla.distributed.xla_multiprocessing.spawn",
    "torch_xla.launch",
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
)
FABRIC = "lightning.Fabric"
# Tensor / context parallelism: ranks of one model replica share a batch, so only the
# data-parallel size multiplies it.
MODEL_PARALLEL_CALLS = (
    "torch.distributed.device_mesh.init_device_mesh",
    "torch.distributed.tensor.parallel.parallelize_module",
    "torch.distributed.tensor.experimental.context_parallel",
    "accelerate.ParallelismConfig",
    "accelerate.parallelism_config.ParallelismConfig",
    "accelerate.utils.TorchTensorParallelPlugin",
)

# Identifiers that by convention hold the number of (data-parallel) processes; they count where
# the value cannot be traced (a `world_size` parameter of an mp.spawn worker, tuple unpacking).
PROCESS_COUNT_NAMES = frozenset(
    {
        "world_size",
        "num_processes",
        "num_procs",
        "nprocs",
        "n_procs",
        "num_replicas",
        "n_gpu",
        "n_gpus",
        "ngpus",
        "ngpu",
        "num_gpus",
        "ngpus_per_node",
        "num_devices",
        "n_devices",
        "num_cores",
        "dp_size",
        "dp_world_size",
        "data_parallel_size",
        "data_parallel_world_size",
        "dp_degree",
        "num_workers_dp",
    }
)
DEVICE_COUNTS = frozenset(
    {
        "torch.cuda.device_count()",
        "torch.xpu.device_count()",
        "torch_xla.runtime.addressable_device_count()",
    }
)

_GLOBAL_WORDS = {"total", "global", "effective", "observed", "overall"}
_BATCH_WORDS = {"batch", "bs", "bsz", "batchsize"}
_SAMPLE_WORDS = {
    "sample",
    "samples",
    "example",
    "examples",
    "image",
    "images",
    "img",
    "imgs",
    "token",
    "tokens",
    "tok",
    "toks",
    "sequence",
    "sequences",
    "seq",
    "seqs",
    "throughput",
}
_LOCAL_WORDS = {
    "local",
    "micro",
    "rank",
    "device",
    "gpu",
    "replica",
    "core",
    "proc",
    "process",
    "worker",
    "instantaneous",
}

_WORD_RE = re.compile(r"[a-z]+|[A-Z][a-z]*|\d+")
_PERCENT_RE = re.compile(
    r"%(?:\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]"
)
# "Total train batch size", "global batch", "batch size (effective)": the global word is close to
# the batch word, so "global step 3, batch size" does not count.
_MESSAGE_GLOBAL_BATCH_RE = re.compile(
    r"\b(total|global|effective|observed|overall)\W+(?:\w+\W+)?(batch|bs\b|bsz\b)"
    r"|\b(batch|bs|bsz)\b[\w\s]{0,6}\W+(total|global|effective|observed|overall)\b"
)
_MESSAGE_LOCAL_RE = re.compile(
    r"per[\s_-]*(device|gpu|process|proc|rank|core|replica|worker|tpu)|\blocal\b|\bmicro"
)
_MESSAGE_RATE_RE = re.compile(
    r"^\W*(samples|sample|examples|images|imgs|img|tokens|toks|seqs|sequences)\s*(/|per\b)"
)
_MESSAGE_SEEN_RE = re.compile(
    r"\b(samples|examples|images|tokens|sequences)\b.*\b(seen|processed|consumed)\b|throughput"
)

_NUMERIC_WRAPPERS = {"int", "float", "round"}
_MATH_WRAPPERS = {"math.ceil", "math.floor"}

GLOBAL, SAMPLES = "global", "samples"


@dataclass
class _Use:
    node: cst.BaseExpression  # the per-device batch as written at the use
    expr: cst.BaseExpression  # the whole arithmetic expression it is part of
    others: list[cst.BaseExpression]  # the other operands multiplied/added along the way


def _words(identifier: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(identifier)]


def name_role(identifier: str) -> str | None:
    """GLOBAL for `total_batch_size`, SAMPLES for `samples_per_sec` / `tokens_seen`, else None."""
    words = _words(identifier)
    if any(w in _LOCAL_WORDS for w in words):
        return None
    if any(w in _GLOBAL_WORDS for w in words) and any(w in _BATCH_WORDS for w in words):
        return GLOBAL
    if any(w in _SAMPLE_WORDS for w in words) and "batch" not in words and "batches" not in words:
        return SAMPLES
    return None


def message_role(before: str, after: str, multiplied: bool) -> str | None:
    """Role of a value in a log message, from the text around its placeholder."""
    before, after = before.lower(), after.lower()
    if _MESSAGE_LOCAL_RE.search(before) or _MESSAGE_LOCAL_RE.search(after.split("\n")[0][:20]):
        return None
    if after.strip().startswith(("x", "*", "\u00d7", "times")):
        return None  # "{bs} x {world_size} = ...": the factor is shown next to it
    if _MESSAGE_GLOBAL_BATCH_RE.search(before):
        return GLOBAL
    if multiplied and (_MESSAGE_RATE_RE.search(after) or _MESSAGE_SEEN_RE.search(before)):
        return SAMPLES
    return None


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
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator()\nbatch_size = 16\nloader = DataLoader(range(64), batch_size=batch_size)\n"
            "accelerator.print(f'Global batch size: {batch_size}')\n",
            fixed=(
                "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n\n"
                "accelerator = Accelerator()\nbatch_size = 16\nloader = DataLoader(range(64), batch_size=batch_size)\n"
                "accelerator.print(f'Global batch size: {batch_size * accelerator.num_processes}')\n"
            ),
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
        ),
        # DDP without a torch.distributed binding in scope: report only
        Invalid(
            "from torch.distributed import init_process_group\nfrom torch.utils.data import DataLoader\n\n"
            "init_process_group('nccl')\nBATCH = 32\nloader = DataLoader(range(64), batch_size=BATCH)\n"
            "print('Global batch size: {}'.format(BATCH))\n"
        ),
        # tensor parallelism: the data-parallel size is the factor; report only
        Invalid(
            "from accelerate import Accelerator, ParallelismConfig\nfrom torch.utils.data import DataLoader\n\n"
            "accelerator = Accelerator(parallelism_config=ParallelismConfig(tp_size=2))\nbs = 4\n"
            "loader = DataLoader(range(64), batch_size=bs)\nprint('total batch size %d' % bs)\n"
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index = ctx.index
        mode = _distributed_mode(index)
        if mode is None:
            return
        model_parallel = bool(index.calls_to(*MODEL_PARALLEL_CALLS)) or any(
            a.keyword is not None and a.keyword.value in ("parallelism_config", "torch_tp_plugin")
            for call in index.calls_to("accelerate.Accelerator")
            for a in call.args
        )
        places = _per_device_places(index)
        if not places:
            return
        reported: set[int] = set()
        for use in _uses(index, places):
            if id(use.expr) in reported:
                continue
            role = _role(index, use)
            if role is None or _has_process_factor(index, use):
                continue
            reported.add(id(use.expr))
            factor = None if model_parallel else _factor_text(index, use.node, mode)
            ctx.report(
                use.expr,
                _message(index, use, role, factor, model_parallel),
                _fix(index, use, factor),
            )


# ------------------------------------------------------------------------------------------
# Where the batch is per device
# ------------------------------------------------------------------------------------------


def _distributed_mode(index: Index) -> str | None:
    if uses_xla_spmd(index):
        return None  # one process drives every device: the DataLoader batch is global
    if creates_accelerator(index):
        return None if split_batches_effective(index) else "accelerate"
    if index.calls_to(*DDP_CALLS):
        return "ddp"
    if index.calls_to(*XLA_MULTIPROCESSING_CALLS):
        return "xla"
    if index.calls_to(FABRIC):
        return "fabric"
    return None


def uses_xla_spmd(index: Index) -> bool:
    if index.calls_to("torch_xla.runtime.use_spmd"):
        return True
    return any(
        a.op == "import" and (a.qualname or "").startswith("torch_xla.distributed.spmd")
        for scope in index.scopes
        for assigns in scope.bindings.values()
        for a in assigns
    )


# A "place" is what holds the per-device batch: ("name", assignment ids) for a local name, or
# ("attr", key) for `args.batch_size`, `self.bs@Trainer`, `config[batch_size]`.
Place = tuple[str, Union[str, frozenset]]


def _place(index: Index, node: cst.CSTNode) -> Place | None:
    if isinstance(node, cst.Name):
        bindings = index.bindings_of(node)
        ids = frozenset(id(b) for b in bindings) if bindings else frozenset({f"free:{node.value}"})
        return ("name", ids)
    if isinstance(node, (cst.Attribute, cst.Subscript)):
        key = target_key(node)
        if key is None:
            return None
        if key.startswith(("self.", "cls.")):
            cls = index.enclosing_class_name(node)
            if cls is not None:
                key = f"{key}@{cls}"
        return ("attr", key)
    return None


def _matches(place: Place | None, places: Sequence[Place]) -> bool:
    if place is None:
        return False
    for kind, value in places:
        if kind == place[0] and (value == place[1] if kind == "attr" else value & place[1]):  # type: ignore[operator]
            return True
    return False


def _copied_value(index: Index, value: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The place a value is a plain copy of (`x`, `args.bs`, `int(cfg["bs"])`), else None."""
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        return value
    if isinstance(value, cst.Call) and len(value.args) == 1 and _is_numeric_wrapper(index, value):
        return _copied_value(index, value.args[0].value)
    return None


def _is_numeric_wrapper(index: Index, call: cst.Call) -> bool:
    func = call.func
    if (
        isinstance(func, cst.Name)
        and func.value in _NUMERIC_WRAPPERS
        and not index.bindings_of(func)
    ):
        return True
    return index.qualname(func) in _MATH_WRAPPERS


def _per_device_places(index: Index) -> list[Place]:
    places: list[Place] = []
    pending: list[cst.CSTNode] = []
    for call in index.calls_to(*DATALOADERS):
        arg = index.argument(call, "batch_size", 1)
        if arg is not None:
            pending.append(arg.value)
    seen: set[int] = set()
    # backwards: plain copies the DataLoader's value was taken from, helper-function arguments
    while pending:
        node = pending.pop()
        if id(node) in seen or len(seen) > 200:
            continue
        seen.add(id(node))
        copied = _copied_value(index, node)
        if copied is None:
            continue  # a literal or an expression (e.g. global // world_size): nothing to follow
        place = _place(index, copied)
        if place is None:
            continue
        places.append(place)
        if isinstance(copied, cst.Name):
            bindings = index.bindings_of(copied)
            if all(b.op == "param" for b in bindings):
                pending.extend(v for v in index.values_of(copied) if v is not None)
            elif len(bindings) == 1 and bindings[0].op == "=":
                pending.extend(v for v in [bindings[0].value] if v is not None)
        else:
            assigns = index.attribute_assignments(copied)
            if len(assigns) == 1 and assigns[0].op == "=" and assigns[0].value is not None:
                pending.append(assigns[0].value)
    # forwards: names and attributes that are plain copies of a per-device place
    changed = True
    while changed:
        changed = False
        for assignment in _all_assignments(index):
            if assignment.op != "=" or assignment.target is None:
                continue
            copied = _copied_value(index, assignment.value)
            if copied is None or not _matches(_place(index, copied), places):
                continue
            target = assignment.target
            new: Place | None
            if isinstance(target, cst.Name):
                new = ("name", frozenset({id(assignment)}))
            else:
                new = _place(index, target)
            if new is not None and not _matches(new, places):
                places.append(new)
                changed = True
    return places


def _all_assignments(index: Index) -> Iterator[Assignment]:
    for scope in index.scopes:
        for assigns in scope.bindings.values():
            yield from assigns
    for assigns in index.attr_assignments.values():
        yield from assigns


# ------------------------------------------------------------------------------------------
# How the per-device value is used
# ------------------------------------------------------------------------------------------


def _uses(index: Index, places: Sequence[Place]) -> Iterator[_Use]:
    for node in walk(index.module):
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            continue
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
            continue  # part of a longer place (`args` in `args.batch_size`)
        if _is_target(index, node) or not _matches(_place(index, node), places):
            continue
        yield _extend(index, node)


def _is_target(index: Index, node: cst.CSTNode) -> bool:
    parent = index.parent(node)
    if (
        isinstance(parent, cst.AssignTarget)
        or isinstance(parent, (cst.Param, cst.Arg))
        and getattr(parent, "keyword", None) is node
    ):
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and parent.target is node:
        return True
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node:
        return True
    return isinstance(parent, (cst.Tuple, cst.List)) and _is_target(index, parent)


def _extend(index: Index, node: cst.BaseExpression) -> _Use:
    """Grow the use through the arithmetic it takes part in, as a count (not as a divisor)."""
    expr = node
    others: list[cst.BaseExpression] = []
    while True:
        parent = index.parent(expr)
        if isinstance(parent, cst.BinaryOperation):
            op = type(parent.operator).__name__
            if op == "Power" or (
                parent.right is expr and op in ("Divide", "FloorDivide", "Modulo")
            ):
                break
            if op not in ("Multiply", "Divide", "FloorDivide", "Add", "Subtract"):
                break
            others.append(parent.right if parent.left is expr else parent.left)
            expr = parent
            continue
        if isinstance(parent, cst.Arg):
            call = index.parent(parent)
            if (
                isinstance(call, cst.Call)
                and len(call.args) == 1
                and _is_numeric_wrapper(index, call)
            ):
                expr = call
                continue
        break
    return _Use(node, expr, others)


def _role(index: Index, use: _Use) -> str | None:
    expr = use.expr
    multiplied = expr is not use.node
    parent = index.parent(expr)
    # assigned to / passed as / stored under a name that says what it is
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and parent.value is expr:
        targets = (
            [t.target for t in parent.targets]
            if isinstance(parent, cst.Assign)
            else [parent.target]
        )
        for target in targets:
            role = _target_role(target)
            if role == GLOBAL or (role == SAMPLES and multiplied):
                return role
        return None
    if isinstance(parent, cst.AugAssign) and parent.value is expr:
        role = _target_role(parent.target)
        if role == GLOBAL and isinstance(parent.operator, cst.AddAssign):
            return None  # accumulating per-device batches into a "total": a sum, not a batch size
        return role if role == SAMPLES or role == GLOBAL else None
    if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.value is expr:
        role = name_role(parent.keyword.value)
        if role == GLOBAL or (role == SAMPLES and multiplied):
            return role
    if isinstance(parent, cst.DictElement) and parent.value is expr:
        key = string_value(parent.key)
        role = name_role(key) if key else None
        if role == GLOBAL or (role == SAMPLES and multiplied):
            return role
    # a log message that calls it the global batch / a throughput
    around = _message_context(index, expr)
    if around is not None:
        return message_role(around[0], around[1], multiplied)
    return None


def _target_role(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return name_role(target.value)
    if isinstance(target, cst.Attribute):
        return name_role(target.attr.value)
    if isinstance(target, cst.Subscript):
        key = target_key(target)
        if key and key.endswith("]"):
            return name_role(key.rsplit("[", 1)[1][:-1])
    return None


# ------------------------------------------------------------------------------------------
# Log messages: the text before and after the value's placeholder
# ------------------------------------------------------------------------------------------


def _message_context(index: Index, expr: cst.BaseExpression) -> tuple[str, str] | None:
    parent = index.parent(expr)
    if isinstance(parent, cst.FormattedStringExpression):
        fstring = index.parent(parent)
        return _around(_pieces(_outermost_string(index, fstring)), parent)
    # "... %d" % value  /  "... %d %d" % (a, value)
    container = parent
    position = 0
    if isinstance(parent, cst.Element) and isinstance(index.parent(parent), cst.Tuple):
        tup = index.parent(parent)
        position = [e.value for e in tup.elements].index(expr)  # type: ignore[union-attr]
        container = index.parent(tup)
        expr = tup  # type: ignore[assignment]
    if (
        isinstance(container, cst.BinaryOperation)
        and isinstance(container.operator, cst.Modulo)
        and container.right is expr
    ):
        text = _literal_text(container.left)
        return None if text is None else _percent_around(text, position)
    if isinstance(parent, cst.Arg) and parent.value is expr:
        call = index.parent(parent)
        if not isinstance(call, cst.Call):
            return None
        func = call.func
        # "...{}...".format(value)
        if isinstance(func, cst.Attribute) and func.attr.value == "format":
            text = _literal_text(func.value)
            if text is None:
                return None
            return _format_around(text, call, parent)
        args = list(call.args)
        position = args.index(parent)
        first = _literal_text(args[0].value) if args and args[0].keyword is None else None
        # logger.info("... %d", value)
        if first is not None and position > 0 and _PERCENT_RE.search(first.replace("%%", "")):
            return _percent_around(first, position - 1)
        # print("Total batch size:", value)
        before = ""
        for arg in reversed(args[:position]):
            text = _literal_text(arg.value) if arg.keyword is None else None
            if text is None:
                break
            before = text + " " + before
        after = ""
        if position + 1 < len(args) and args[position + 1].keyword is None:
            after = _literal_text(args[position + 1].value) or ""
        if before or after:
            return before, after
    return None


def _outermost_string(index: Index, node: cst.CSTNode | None) -> cst.CSTNode | None:
    while isinstance(index.parent(node), cst.ConcatenatedString):  # type: ignore[arg-type]
        node = index.parent(node)  # type: ignore[arg-type]
    return node


def _pieces(node: cst.CSTNode | None) -> list[str | cst.CSTNode]:
    """A string literal as a sequence of literal text and placeholders (f-string expressions)."""
    if isinstance(node, cst.ConcatenatedString):
        return _pieces(node.left) + _pieces(node.right)
    if isinstance(node, cst.FormattedString):
        return [p.value if isinstance(p, cst.FormattedStringText) else p for p in node.parts]
    if isinstance(node, cst.SimpleString):
        text = string_value(node)
        return [text] if text is not None else []
    return []


def _around(pieces: list[str | cst.CSTNode], placeholder: cst.CSTNode) -> tuple[str, str] | None:
    for i, piece in enumerate(pieces):
        if piece is placeholder:
            before, after = "", ""
            for p in reversed(pieces[:i]):
                if not isinstance(p, str):
                    break
                before = p + before
            for p in pieces[i + 1 :]:
                if not isinstance(p, str):
                    break
                after += p
            return before, after
    return None


def _literal_text(node: cst.CSTNode) -> str | None:
    """Text of a string literal; an f-string's placeholders become `{}`."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        pieces = _pieces(node)
        return "".join(p if isinstance(p, str) else "{}" for p in pieces) if pieces else None
    return None


def _percent_around(text: str, position: int) -> tuple[str, str] | None:
    segments = _PERCENT_RE.split(text.replace("%%", "%"))
    if position + 1 >= len(segments):
        return None
    return segments[position], segments[position + 1]


def _format_around(text: str, call: cst.Call, arg: cst.Arg) -> tuple[str, str] | None:
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return None
    positional = [a for a in call.args if a.keyword is None]
    automatic = 0
    for i, (literal, field_name, _spec, _conv) in enumerate(fields):
        if field_name is None:
            continue
        if field_name == "":
            index_ = automatic
            automatic += 1
            hit = arg.keyword is None and positional.index(arg) == index_
        elif field_name.isdigit():
            hit = arg.keyword is None and positional.index(arg) == int(field_name)
        else:
            hit = (
                arg.keyword is not None
                and arg.keyword.value == field_name.split(".")[0].split("[")[0]
            )
        if hit:
            after = fields[i + 1][0] if i + 1 < len(fields) else ""
            return literal, after
    return None


# ------------------------------------------------------------------------------------------
# Process-count factors, messages, fixes
# ------------------------------------------------------------------------------------------


# the number of (data-parallel) processes, device counts included
is_process_count = world_size_reader(PROCESS_COUNT_NAMES, DEVICE_COUNTS)


def _has_process_factor(index: Index, use: _Use) -> bool:
    if any(index.reaches(other, is_process_count) for other in use.others):
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
        a.node is not parent and a.value is not None and index.reaches(a.value, is_process_count)
        for a in later
    )


def _factor_text(index: Index, at: cst.CSTNode, mode: str) -> str | None:
    if mode == "accelerate":
        accelerator = accelerator_expr(index, at)
        return None if accelerator is None else f"{accelerator}.num_processes"
    if mode == "ddp":
        existing = index.binding_for("torch.distributed.get_world_size", at)
        return None if existing is None else f"{existing}()"
    return None


def _message(index: Index, use: _Use, role: str, factor: str | None, model_parallel: bool) -> str:
    code = index.module.code_for_node(use.node)
    if role == GLOBAL:
        what = "used as the global batch size: on N processes the observed batch is N times larger"
    else:
        what = "counted as all the samples processed: on N processes N times as many samples go through each step"
    if model_parallel:
        advice = (
            "with tensor/context parallelism, multiply by the data-parallel size "
            "(not the process count: ranks of one model replica share a batch)"
        )
    else:
        advice = f"multiply by `{factor}`" if factor else "multiply by the number of processes"
    return f"`{code}` is the per-device batch (a DataLoader's `batch_size`) but is {what}; {advice}"


def _fix(index: Index, use: _Use, factor: str | None) -> Fix | None:
    if factor is None:
        return None
    node = use.node
    product: cst.BaseExpression = cst.BinaryOperation(
        left=node,
        operator=cst.Multiply(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=cst.parse_expression(factor),
    )
    if _needs_parentheses(index, node):
        product = product.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return Fix(replace={node: product})


def _needs_parentheses(index: Index, node: cst.CSTNode) -> bool:
    """`x * n` in place of `x`: parenthesise where the surrounding operator would regroup it."""
    parent = index.parent(node)
    if isinstance(parent, cst.BinaryOperation):
        if parent.left is node:
            return isinstance(parent.operator, cst.Power)
        # `a - x` / `a * x` stay equal as `a - x * n` / `a * x * n`; `a / x`, `a % x` do not
        return not isinstance(parent.operator, (cst.Add, cst.Subtract, cst.Multiply))
    return isinstance(parent, (cst.UnaryOperation, cst.Await))
