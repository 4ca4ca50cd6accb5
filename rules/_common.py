"""Facts about distributed training that several rules share.

What counts as "the number of processes", which objects are Accelerators, whether the observed
batch is global (effective ``split_batches``), and how to refer to the accelerator at a node.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from distlint.analysis import Index, call_keyword, string_value

ACCELERATOR = "accelerate.Accelerator"
STATE_CLASSES = ("accelerate.PartialState", "accelerate.AcceleratorState", "accelerate.state.GradientState")

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


def is_world_size(node: cst.CSTNode, qualname: Optional[str]) -> bool:
    """Predicate for :meth:`Index.reaches`: ``node`` reads the number of processes."""
    if qualname is not None:
        if qualname in WORLD_SIZE_QUALNAMES:
            return True
        if qualname.endswith(".num_processes") and "Accelerator" in qualname:
            return True
        # os.environ.get("WORLD_SIZE") / os.getenv("WORLD_SIZE")
        if qualname in ("os.environ.get()", "os.getenv()") and isinstance(node, cst.Call) and node.args:
            return string_value(node.args[0].value) == "WORLD_SIZE"
    # `accelerator.num_processes` where `accelerator` could not be resolved (e.g. a parameter)
    if isinstance(node, cst.Attribute) and node.attr.value in ("num_processes", "world_size"):
        base = node.value
        text = base.value if isinstance(base, cst.Name) else (base.attr.value if isinstance(base, cst.Attribute) else "")
        if any(word in text.lower() for word in ("accelerator", "acc", "state", "fabric", "trainer", "dist")):
            return True
    return False


def accelerator_calls(index: Index) -> List[cst.Call]:
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
            if isinstance(value, cst.Call) and index.qualname(value.func) == "accelerate.utils.DataLoaderConfiguration":
                flag = call_keyword(value, "split_batches")
                if flag is not None and index.constant_value(flag) is True:
                    return True
    return False


def accelerator_expr(index: Index, at: cst.CSTNode) -> Optional[str]:
    """Source text of an Accelerator visible at ``at`` (``accelerator``, ``self.accelerator``)."""
    scope = index.scope(at)
    # names bound to Accelerator(...) in visible scopes
    for name in _visible_names(index, at):
        bindings = index.lookup(name, scope)
        if bindings and all(
            b.op in ("=", "with") and b.value is not None and index.qualname(b.value) == ACCELERATOR + "()"
            for b in bindings
        ):
            return name
    cls = index.enclosing_class_name(at)
    if cls is not None:
        for key, assigns in index.attr_assignments.items():
            if key.endswith(f"@{cls}") and assigns and all(
                a.value is not None and index.qualname(a.value) == ACCELERATOR + "()" for a in assigns
            ):
                return key.split("@", 1)[0]
    # a parameter named like an accelerator (helper functions get it passed in)
    for name in _visible_names(index, at):
        if name in ("accelerator", "acc"):
            return name
    return None


def _visible_names(index: Index, at: cst.CSTNode) -> List[str]:
    names: List[str] = []
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
