"""Facts about distributed training that several rules share.

What counts as "the number of processes", which objects are Accelerators, whether the observed
batch is global (effective ``split_batches``), and how to refer to the accelerator at a node.
"""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index, call_keyword, string_value, target_key

ACCELERATOR = "accelerate.Accelerator"
STATE_CLASSES = (
    "accelerate.PartialState",
    "accelerate.AcceleratorState",
    "accelerate.state.GradientState",
)

# Callables / attributes whose value is the number of (data-parallel) processes.
WORLD_SIZE_QUALNAMES = frozenset(
    {
        "accelerate.Accelerator().num_processes",
        "accelerate.PartialState().num_processes",
        "accelerate.AcceleratorState().num_processes",
        "accelerate.Accelerator().state.num_processes",
        "torch.distributed.get_world_size()",
        "torch.distributed.distributed_c10d.get_world_size()",
        "torch_xla.runtime.world_size()",
        "torch_xla.runtime.global_runtime_device_count()",
        "torch_xla.core.xla_model.xrt_world_size()",
        "torch_xla.core.xla_model.get_world_size()",
        "lightning.Fabric().world_size",
        "os.environ[WORLD_SIZE]",
        "horovod.torch.size()",
        "deepspeed.comm.get_world_size()",
    }
)


def is_world_size(node: cst.CSTNode, qualname: str | None) -> bool:
    """Predicate for :meth:`Index.reaches`: ``node`` reads the number of processes."""
    if qualname is not None:
        if qualname in WORLD_SIZE_QUALNAMES:
            return True
        if qualname.endswith(".num_processes") and "Accelerator" in qualname:
            return True
        # os.environ.get("WORLD_SIZE") / os.getenv("WORLD_SIZE")
        if (
            qualname in ("os.environ.get()", "os.getenv()")
            and isinstance(node, cst.Call)
            and node.args
        ):
            return string_value(node.args[0].value) == "WORLD_SIZE"
    # `accelerator.num_processes` where `accelerator` could not be resolved (e.g. a parameter)
    if isinstance(node, cst.Attribute) and node.attr.value in ("num_processes", "world_size"):
        base = node.value
        text = (
            base.value
            if isinstance(base, cst.Name)
            else (base.attr.value if isinstance(base, cst.Attribute) else "")
        )
        if any(
            word in text.lower()
            for word in ("accelerator", "acc", "state", "fabric", "trainer", "dist")
        ):
            return True
    return False


def accelerator_calls(index: Index) -> list[cst.Call]:
    return index.calls_to(ACCELERATOR)


def creates_accelerator(index: Index) -> bool:
    return bool(accelerator_calls(index))


def split_batches_effective(index: Index) -> bool:
    """True when an Accelerator is built with ``DataLoaderConfiguration(split_batches=True)``.

    The legacy ``Accelerator(split_batches=True)`` keyword is accepted but ignored by
    Accelerate >= 1.0 (``accelerator.split_batches`` stays False), so it does not count.
    """
    for call in accelerator_calls(index):
        config = call_keyword(call, "dataloader_config")
        if config is None:
            continue
        for value in [config] + [v for v in index.values_of(config) if v is not None]:
            if (
                isinstance(value, cst.Call)
                and index.qualname(value.func) == "accelerate.utils.DataLoaderConfiguration"
            ):
                flag = call_keyword(value, "split_batches")
                if flag is not None and index.constant_value(flag) is True:
                    return True
    return False


def accelerator_expr(index: Index, at: cst.CSTNode) -> str | None:
    """Source text of an Accelerator visible at ``at`` (``accelerator``, ``self.accelerator``)."""
    scope = index.scope(at)
    # names bound to Accelerator(...) in visible scopes
    for name in _visible_names(index, at):
        bindings = index.lookup(name, scope)
        if bindings and all(
            b.op in ("=", "with")
            and b.value is not None
            and index.qualname(b.value) == ACCELERATOR + "()"
            for b in bindings
        ):
            return name
    cls = index.enclosing_class_name(at)
    if cls is not None:
        for key, assigns in index.attr_assignments.items():
            if (
                key.endswith(f"@{cls}")
                and assigns
                and all(
                    a.value is not None and index.qualname(a.value) == ACCELERATOR + "()"
                    for a in assigns
                )
            ):
                return key.split("@", 1)[0]
    # a parameter named like an accelerator (helper functions get it passed in)
    for name in _visible_names(index, at):
        if name in ("accelerator", "acc"):
            return name
    return None


def _visible_names(index: Index, at: cst.CSTNode) -> list[str]:
    names: list[str] = []
    scope = index.scope(at)
    first = True
    while scope is not None:
        if scope.kind != "class" or first:
            for name, assigns in scope.bindings.items():
                if first and not any(a.order < index.order(at) for a in assigns):
                    continue
                names.append(name)
        scope = scope.parent
        first = False
    return names


# ---------------------------------------------------------------------------------------------
# Learning-rate family helpers (DL201 / DL202 / DL203)
# ---------------------------------------------------------------------------------------------

# Identifiers that, by near-universal convention, hold the number of data-parallel processes.
# They matter where the value cannot be traced (a `world_size` parameter of an `mp.spawn`
# worker, `args.world_size` set by a launcher, `ngpus_per_node = torch.cuda.device_count()`).
WORLD_SIZE_NAMES = frozenset(
    {
        "world_size",
        "worldsize",
        "world",
        "num_processes",
        "num_procs",
        "n_procs",
        "nprocs",
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
        "num_data_parallel",
        "dp_degree",
    }
)


def world_size_reader(names: frozenset[str], qualnames: frozenset[str] = frozenset()):
    """A predicate for :meth:`Index.reaches`: :func:`is_world_size`, one of ``qualnames``, or a
    name / attribute / string subscript called like the process count (one of ``names``)."""

    def reads(node: cst.CSTNode, qualname: str | None) -> bool:
        if is_world_size(node, qualname) or qualname in qualnames:
            return True
        if isinstance(node, cst.Name):
            return node.value.lower() in names
        if isinstance(node, cst.Attribute):
            return node.attr.value.lower() in names
        if isinstance(node, cst.Subscript):
            # config["world_size"], os.environ["WORLD_SIZE"] read through an alias
            key = target_key(node)
            return (
                key is not None
                and key.endswith("]")
                and key.rsplit("[", 1)[1][:-1].lower() in names
            )
        return False

    return reads


reads_world_size = world_size_reader(WORLD_SIZE_NAMES)


def is_prepare_call(index: Index, node: cst.CSTNode) -> bool:
    """``accelerator.prepare(...)`` / ``fabric.setup_dataloaders(...)``-style wrapping."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    if node.func.attr.value not in ("prepare", "prepare_data_loader", "prepare_scheduler"):
        return False
    q = index.qualname(node.func)
    if q is not None:
        return q.startswith(ACCELERATOR + "()") or q.startswith("accelerate.")
    # `self.accelerator.prepare(...)` / an accelerator passed in as a parameter
    return accelerator_expr(index, node) is not None


def assigned_from(index: Index, assignment) -> cst.BaseExpression | None:
    """The right-hand side of the statement that made ``assignment`` (also for tuple unpacking)."""
    if assignment.value is not None:
        return assignment.value
    stmt = assignment.node
    if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
        return stmt.value
    return None


_MULTIPLY_SAFE = (
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.MatrixMultiply,
    cst.Power,
)


def scaled_expression(expr: cst.BaseExpression, factor: str) -> cst.BaseExpression:
    """``expr * <factor>``, parenthesising ``expr`` where ``*`` would bind tighter than it."""
    needs_parens = (
        isinstance(
            expr,
            (cst.IfExp, cst.Lambda, cst.BooleanOperation, cst.Comparison, cst.NamedExpr, cst.Yield),
        )
        or (isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, _MULTIPLY_SAFE))
        or (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not))
    )
    if needs_parens and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(
        left=expr,
        operator=cst.Multiply(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=cst.parse_expression(factor),
    )
