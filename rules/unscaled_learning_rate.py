"""DL201 unscaled-learning-rate."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index, string_value
from distlint.fixes import Fix, import_name
from distlint.model import Applicability
from distlint.rule import Invalid, Option, Rule, RuleContext, Valid
from distlint.rules._common import (
    accelerator_expr,
    creates_accelerator,
    is_prepare_call,
    reads_world_size,
    scaled_expression,
    split_batches_effective,
)

# Optimizer internals and helpers that live under the optimizer packages but are not optimizers.
_NOT_OPTIMIZERS = frozenset(
    {"Optimizer", "GlobalOptimManager", "Optimizer8bit", "Optimizer1State", "Optimizer2State"}
)
# Schedulers whose `max_lr` is the learning rate the run actually peaks at.
PEAK_LR_SCHEDULERS = frozenset(
    {"torch.optim.lr_scheduler.OneCycleLR", "torch.optim.lr_scheduler.CyclicLR"}
)
DDP_WRAPPERS = (
    "torch.nn.parallel.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
)
XLA_MULTIPROCESS = (
    "torch_xla.distributed.xla_multiprocessing.spawn",
    "torch_xla.launch",
    "torch_xla.distributed.parallel_loader.MpDeviceLoader",
    "torch_xla.distributed.parallel_loader.ParallelLoader",
)
XLA_SPMD = ("torch_xla.runtime.use_spmd", "torch_xla.distributed.spmd.*")
FABRIC = ("lightning.Fabric",)
# Tensor / context parallelism: the process count is not the data-parallel size.
MODEL_PARALLEL = (
    "accelerate.ParallelismConfig",
    "accelerate.parallelism_config.ParallelismConfig",
    "accelerate.utils.ParallelismConfig",
    "accelerate.utils.TorchTensorParallelPlugin",
    "accelerate.utils.MegatronLMPlugin",
    "torch.distributed.tensor.parallel.*",
    "torch.distributed.device_mesh.init_device_mesh",
)


def is_optimizer_class(qualname: str | None) -> bool:
    if not qualname:
        return False
    parts = qualname.split(".")
    if qualname.startswith("torch.optim."):
        if parts[2] in ("lr_scheduler", "swa_utils"):
            return False
    elif qualname.startswith("bitsandbytes.optim."):
        pass
    else:
        return qualname == "transformers.AdamW"
    name = parts[-1]
    return name[:1].isupper() and name not in _NOT_OPTIMIZERS


def optimizer_calls(index: Index) -> list[cst.Call]:
    """Optimizer constructions, also through `optimizer_cls = bnb.optim.AdamW8bit if ... else ...`."""
    out = []
    for call in index.calls:
        q = index.qualname(call.func)
        if is_optimizer_class(q):
            out.append(call)
        elif q is None and isinstance(call.func, cst.Name):
            bindings = index.bindings_of(call.func)
            values = [b.value for b in bindings if b.op == "=" and b.value is not None]
            if (
                values
                and len(values) == len(bindings)
                and all(_all_optimizer_classes(index, v) for v in values)
            ):
                out.append(call)
    return out


def _all_optimizer_classes(index: Index, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.IfExp):
        return _all_optimizer_classes(index, value.body) and _all_optimizer_classes(
            index, value.orelse
        )
    return is_optimizer_class(index.qualname(value))


def data_parallel_kind(index: Index) -> str | None:
    """How the script runs data-parallel: accelerate | fabric | xla | ddp, or None."""
    if creates_accelerator(index):
        return "accelerate"
    if index.calls_to(*FABRIC):
        return "fabric"
    if index.calls_to(*XLA_SPMD):
        return None  # SPMD: one process, the DataLoader batch is the global batch
    if index.calls_to(*XLA_MULTIPROCESS):
        return "xla"
    if index.calls_to(*DDP_WRAPPERS):
        return "ddp"
    return None


def divides_by_world_size(index: Index, node: cst.CSTNode) -> bool:
    """``x // world_size``, ``x / (bs * accelerator.num_processes)``, ``x //= world_size``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, (cst.Divide, cst.FloorDivide)
    ):
        return index.reaches(node.right, reads_world_size)
    parent = index.parent(node)
    if isinstance(parent, cst.AugAssign) and parent.value is node:
        if isinstance(parent.operator, (cst.DivideAssign, cst.FloorDivideAssign)):
            return index.reaches(node, reads_world_size)
    return False


def global_batch_held_constant(index: Index) -> bool:
    """The per-device batch or the accumulation steps are divided by the world size somewhere:
    the batch per optimizer step is the same on 1 or N processes, so the LR must not be scaled."""
    candidates: list[cst.CSTNode] = []
    for call in index.calls:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in (
                "batch_size",
                "gradient_accumulation_steps",
                "num_steps",
            ):
                candidates.append(arg.value)
    for scope in index.scopes:
        for name, assigns in scope.bindings.items():
            if "accum" in name.lower() or "batch" in name.lower():
                candidates.extend(
                    a.value for a in assigns if a.value is not None and a.op not in ("param",)
                )
    for key, assigns in index.attr_assignments.items():
        last = key.split("@")[0].rsplit(".", 1)[-1].rsplit("[", 1)[-1].lower()
        if "accum" in last or "batch" in last:
            candidates.extend(a.value for a in assigns if a.value is not None)
            # `args.batch_size //= world_size`: the divisor is the recorded value
    predicate = lambda node, _q: divides_by_world_size(index, node)  # noqa: E731
    return any(index.reaches(c, predicate) for c in candidates)


def uses_model_parallelism(index: Index) -> bool:
    return bool(index.calls_to(*MODEL_PARALLEL))


def peak_lr_schedulers(index: Index) -> list[cst.Call]:
    return [
        c for c in index.calls_to(*PEAK_LR_SCHEDULERS) if Index.argument(c, "max_lr", 1) is not None
    ]


def world_size_text(index: Index, kind: str, at: cst.CSTNode) -> tuple | None:
    """(expression text for the number of processes at ``at``, import needed or None)."""
    if kind == "accelerate":
        acc = accelerator_expr(index, at)
        return (f"{acc}.num_processes", None) if acc else None
    if kind == "ddp":
        name, spec = import_name(index, "torch.distributed.get_world_size", at)
        return f"{name}()", spec
    if kind == "xla":
        name, spec = import_name(index, "torch_xla.runtime.world_size", at)
        return f"{name}()", spec
    if kind == "fabric":
        scope = index.scope(at)
        while scope is not None:
            for name, assigns in scope.bindings.items():
                if assigns and all(
                    a.op == "="
                    and a.value is not None
                    and index.qualname(a.value) == "lightning.Fabric()"
                    for a in assigns
                ):
                    if index.lookup(name, index.scope(at)) == assigns:
                        return f"{name}.world_size", None
            scope = scope.parent
    return None


class UnscaledLearningRate(Rule):
    """
    ## What it does
    Flags an optimizer whose learning rate does not depend on the number of processes, in a
    script that trains data-parallel: one that creates an Accelerate `Accelerator`, a Lightning
    `Fabric`, wraps its model in `DistributedDataParallel` / FSDP, or spawns torch_xla processes.
    Optimizers are every `torch.optim` class (any import form), `transformers.AdamW` and
    `bitsandbytes.optim.*`. When a `OneCycleLR`/`CyclicLR` scheduler sets the peak learning rate,
    its `max_lr` is checked instead of the optimizer's `lr`.

    "Depends" is dataflow, not a text search: the `lr` value is followed back through
    assignments, augmented assignments (`lr *= ...`), module constants, `self.` attributes,
    `args.x` reassigned anywhere in the file, both branches of an `if`, config dicts,
    dataclasses, YAML configs and helper function parameters. It is scaled when something that
    reaches it reads the process count: `accelerator.num_processes`,
    `PartialState().num_processes`, `torch.distributed.get_world_size()`, `xr.world_size()`,
    `WORLD_SIZE` from the environment, `fabric.world_size`, or a value named like one
    (`world_size`, `num_processes`, `ngpus_per_node`, `dp_size`, ...). A scaled value that is
    computed but never passed to the optimizer does not count.

    Not reported: when the observed batch does not grow with the processes, i.e. under
    `Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))` (the legacy
    `Accelerator(split_batches=True)` keyword is ignored by Accelerate 1.x and does not count),
    or when the script holds the global batch constant by dividing the per-device batch or the
    gradient accumulation steps by the world size (then the LR must *not* be scaled); torch_xla
    SPMD scripts, which run as one process with a global batch; in an Accelerate script, an
    optimizer of a side model that never goes through `accelerator.prepare` (neither the
    optimizer nor the model it optimizes), which each process trains on its own batch.

    ## Why is this bad?
    Each process draws its own per-device batch and the gradients are averaged across processes,
    so on N processes every optimizer step sees N times the samples of a single-device step. With
    the single-device learning rate the run takes N times fewer steps at the same step size and
    does not match the single-device run. The linear scaling rule (Goyal et al., 2017) multiplies
    the learning rate by the number of processes; Accelerate leaves this to the user.

    In tensor- or context-parallel scripts the batch grows with the *data-parallel* size
    (processes / (tp * cp)), not with the process count: the message says so and no fix is offered.

    ## Fix safety
    The fix is unsafe: it changes the numerics of every run on more than one process, and linear
    scaling is debated for Adam-family optimizers (square-root scaling is an option). When the
    learning rate is a plain local name, `<name> *= <accelerator>.num_processes` is inserted just
    before the optimizer statement; otherwise the argument is multiplied in place. DDP and torch_xla
    scripts use `torch.distributed.get_world_size()` / `torch_xla.runtime.world_size()`, Fabric
    scripts `fabric.world_size`. No fix when
    no accelerator is visible at the optimizer, when the optimizer is given no `lr` at all (its
    default depends on the class and the torch version), and in model-parallel scripts.

    ## Options
    `lr-scaling = "sqrt"` makes the fix multiply by `num_processes ** 0.5`.

    ## References
    - Accelerate, "Comparing performance across distributed setups": learning rates.
    - Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", 2017.
    """

    CODE = "DL201"
    NAME = "unscaled-learning-rate"
    MESSAGE = "learning rate does not depend on the number of processes: scale it by `accelerator.num_processes`"
    FIX_TITLE = "Scale the learning rate by the number of processes"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("optim", "AdamW")
    OPTIONS = {
        "lr-scaling": Option(
            "linear",
            "how the fix scales the learning rate with the process count",
            choices=("linear", "sqrt"),
        )
    }

    VALID = (
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
            "lr = 1e-3\nlr *= accelerator.num_processes\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        ),
        # the global batch is held constant: the per-device batch is divided by the world size
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n\n"
            "GLOBAL_BATCH = 64\naccelerator = Accelerator()\n"
            "loader = DataLoader(range(128), batch_size=GLOBAL_BATCH // accelerator.num_processes)\n"
            "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
            "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))\n"
            "optimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=3e-4)\n"
        ),
        # --scale_lr opt-in branch (diffusers style): one branch of the `if` scales it
        Valid(
            "import argparse\nimport torch\nfrom accelerate import Accelerator\n\n"
            "args = argparse.ArgumentParser().parse_args()\naccelerator = Accelerator()\n"
            "if args.scale_lr:\n    args.learning_rate = args.learning_rate * accelerator.num_processes\n"
            "optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=args.learning_rate)\n"
        ),
        Valid(
            "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "def run(rank, world_size):\n    model = DDP(torch.nn.Linear(2, 2))\n"
            "    return torch.optim.SGD(model.parameters(), lr=0.1 * world_size)\n"
        ),
        # a side model that each process trains on its own: never prepared, never synchronised
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "model, student = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * accelerator.num_processes)\n"
            "model, optimizer = accelerator.prepare(model, optimizer)\n"
            "student_opt = torch.optim.SGD(student.parameters(), lr=0.1)\n"
        ),
        # a single-process script: nothing to scale
        Valid(
            "import torch\n\noptimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\nclass Trainer:\n"
            "    def __init__(self, lr):\n        self.accelerator = Accelerator()\n"
            "        self.lr = lr * self.accelerator.num_processes\n"
            "    def configure(self, model):\n        return torch.optim.AdamW(model.parameters(), lr=self.lr)\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
            "lr = 1e-3\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
                "lr = 1e-3\nlr *= accelerator.num_processes\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
            ),
        ),
        # the scaled value is computed but the optimizer gets the unscaled one
        Invalid(
            "from torch.optim import SGD as Opt\nimport accelerate\n\nBASE_LR = 0.1\n\ndef main(model):\n"
            "    acc = accelerate.Accelerator()\n    scaled = BASE_LR * acc.num_processes\n"
            "    return Opt(model.parameters(), BASE_LR + 0.0)\n",
            fixed=(
                "from torch.optim import SGD as Opt\nimport accelerate\n\nBASE_LR = 0.1\n\ndef main(model):\n"
                "    acc = accelerate.Accelerator()\n    scaled = BASE_LR * acc.num_processes\n"
                "    return Opt(model.parameters(), (BASE_LR + 0.0) * acc.num_processes)\n"
            ),
        ),
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.01)\n"
            "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.4, total_steps=100)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
                "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.01)\n"
                "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.4 * accelerator.num_processes ** 0.5, total_steps=100)\n"
            ),
            options={"lr-scaling": "sqrt"},
        ),
        # legacy split_batches keyword is ignored by Accelerate 1.x: the batch still grows
        Invalid(
            "import bitsandbytes as bnb\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator(split_batches=True)\nconfig = {'lr': 2e-5}\n"
            "optimizer = bnb.optim.AdamW8bit([], lr=config['lr'])\n",
            fixed=(
                "import bitsandbytes as bnb\nfrom accelerate import Accelerator\n\n"
                "accelerator = Accelerator(split_batches=True)\nconfig = {'lr': 2e-5}\n"
                "optimizer = bnb.optim.AdamW8bit([], lr=config['lr'] * accelerator.num_processes)\n"
            ),
        ),
        # no lr at all: the class default is unscaled; reported without a fix
        Invalid(
            "import torch as T\nfrom accelerate import Accelerator\n\nacc = Accelerator()\nopt = T.optim.Adam(T.nn.Linear(2, 2).parameters())\n"
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index = ctx.index
        kind = data_parallel_kind(index)
        if kind is None:
            return
        if kind == "accelerate" and split_batches_effective(index):
            return
        optimizers = optimizer_calls(index)
        if not optimizers:
            return
        if global_batch_held_constant(index):
            return
        model_parallel = uses_model_parallelism(index)
        schedulers = peak_lr_schedulers(index)
        exempt = self._driven_by_peak_lr_scheduler(index, optimizers, schedulers)
        prepared = [arg.value for c in index.calls if is_prepare_call(index, c) for arg in c.args]
        for call in optimizers:
            if call in exempt:
                continue
            if (
                kind == "accelerate"
                and prepared
                and not _trained_data_parallel(index, call, prepared)
            ):
                continue
            lr = Index.argument(call, "lr", 1)
            if lr is None:
                if _has_unpacked_arguments(call) or _param_groups_scaled(index, call):
                    continue
                ctx.report(
                    call,
                    self._message(
                        index, None, "the optimizer's default learning rate", kind, model_parallel
                    ),
                )
                continue
            self._check_value(ctx, call, lr.value, kind, model_parallel, "learning rate")
        for sched in schedulers:
            max_lr = Index.argument(sched, "max_lr", 1)
            assert max_lr is not None
            self._check_value(
                ctx, sched, max_lr.value, kind, model_parallel, "peak learning rate (`max_lr`)"
            )

    # ------------------------------------------------------------------ helpers
    def _check_value(
        self,
        ctx: RuleContext,
        call: cst.Call,
        value: cst.BaseExpression,
        kind: str,
        model_parallel: bool,
        what: str,
    ) -> None:
        index = ctx.index
        if index.reaches(value, reads_world_size):
            return
        text = index.module.code_for_node(value).strip()
        fix = None if model_parallel else self._fix(index, call, value, kind)
        ctx.report(value, self._message(index, text, what, kind, model_parallel), fix)

    def _message(
        self, index: Index, text: str | None, what: str, kind: str, model_parallel: bool
    ) -> str:
        subject = f"{what} `{text}`" if text is not None and len(text) <= 40 else what
        factor = {
            "accelerate": "`accelerator.num_processes`",
            "ddp": "`torch.distributed.get_world_size()`",
            "xla": "`xr.world_size()`",
            "fabric": "`fabric.world_size`",
        }[kind]
        message = (
            f"{subject} does not depend on the number of processes, but the batch of every "
            f"optimizer step grows with them: scale it by {factor}"
        )
        if model_parallel:
            message += (
                " -- this script uses tensor/context parallelism, so scale by the data-parallel size "
                "(processes / (tp * cp)), not by the process count"
            )
        return message

    def _fix(
        self, index: Index, call: cst.Call, value: cst.BaseExpression, kind: str
    ) -> Fix | None:
        found = world_size_text(index, kind, call)
        if found is None:
            return None
        factor, spec = found
        if self.options["lr-scaling"] == "sqrt":
            factor = f"{factor} ** 0.5"
        fix = Fix()
        if spec is not None:
            fix.imports.append(spec)
        stmt = index.statement(call)
        if isinstance(value, cst.Name) and self._can_scale_name_in_place(index, value, stmt):
            assert stmt is not None
            line = cst.parse_statement(f"{value.value} *= {factor}\n")
            fix.insert_before[stmt] = [line]
        else:
            fix.replace[value] = scaled_expression(value, factor)
        return fix

    @staticmethod
    def _can_scale_name_in_place(index: Index, name: cst.Name, stmt: cst.CSTNode | None) -> bool:
        """`lr *= n` before the statement is right when `lr` is a local of the statement's scope
        (not a global: that would make it local and unbound), and the statement is not repeated
        by a loop (the factor would compound)."""
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        if not isinstance(index.parent(stmt), (cst.IndentedBlock, cst.Module)):
            return False
        scope = index.scope(name)
        if (
            scope.kind not in ("function", "module")
            or name.value in scope.globals
            or name.value in scope.nonlocals
        ):
            return False
        if not scope.bindings.get(name.value):
            return False
        for anc in index.ancestors(stmt):
            if anc is scope.node:
                break
            if isinstance(anc, (cst.For, cst.While)):
                return False
        return True

    @staticmethod
    def _driven_by_peak_lr_scheduler(
        index: Index, optimizers: list[cst.Call], schedulers: list[cst.Call]
    ) -> set[cst.Call]:
        """Optimizers whose learning rate a OneCycle-style scheduler overrides."""
        exempt: set[cst.Call] = set()
        for sched in schedulers:
            arg = Index.argument(sched, "optimizer", 0)
            linked = False
            if arg is not None:
                for opt in optimizers:
                    if index.reaches(arg.value, lambda node, _q, opt=opt: node is opt, depth=4):
                        exempt.add(opt)
                        linked = True
            if not linked and len(optimizers) == 1:
                exempt.add(optimizers[0])
        return exempt


def _has_unpacked_arguments(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


def _param_groups_scaled(index: Index, call: cst.Call) -> bool:
    """Per-group learning rates (`[{"params": ..., "lr": base * world}]`) that are scaled."""
    params = Index.argument(call, "params", 0)
    if params is None:
        return False

    def scaled_group_lr(node: cst.CSTNode, _q: str | None) -> bool:
        return (
            isinstance(node, cst.DictElement)
            and string_value(node.key) == "lr"
            and index.reaches(node.value, reads_world_size)
        )

    return index.reaches(params.value, scaled_group_lr, depth=4)


def _trained_data_parallel(
    index: Index, call: cst.Call, prepared: list[cst.BaseExpression]
) -> bool:
    """Does the optimizer (or the model whose parameters it holds) go through `accelerator.prepare`?
    An optimizer of a side model that each process trains on its own (never prepared, so never
    synchronised) does not see a batch that grows with the processes."""
    if any(index.reaches(value, lambda node, _q: node is call, depth=4) for value in prepared):
        return True
    params = Index.argument(call, "params", 0)
    if params is None:
        return True
    prepared_texts = {index.module.code_for_node(v).strip() for v in prepared}

    def is_prepared(node: cst.CSTNode, _q: str | None) -> bool:
        return (
            isinstance(node, (cst.Name, cst.Attribute))
            and index.module.code_for_node(node).strip() in prepared_texts
        )

    # `params = list(model.parameters())`: follow the parameters back to the model they belong to
    return index.reaches(params.value, is_prepared, depth=3)
