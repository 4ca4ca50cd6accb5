"""One model of the training setup of a module, computed once and queried by every rule.

``facts_for(index, path, project)`` builds it (memoised in ``project.memo`` when a project is
given). What it knows comes from the module's :class:`Index`, its :class:`Flow` and the declared
knowledge base (:mod:`distlint.analysis.knowledge`); what lives in other modules of the project
comes from their own Facts, through :class:`Summary` objects of their functions and classes.

Recognition is by value: an optimizer is a library optimizer class, a class that subclasses
``torch.optim.Optimizer``, a factory returning one, a class picked from candidates, or any call
given the model's parameters and an ``lr``; the process count is whatever reads
``get_world_size()`` / ``WORLD_SIZE`` / ``num_processes`` / ``xr.world_size()`` /
``fabric.world_size``, however it is wrapped (a helper returning it is a process count wherever
it is called). Names are consulted only for values that cannot be traced at all.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.flow import Nodes
from distlint.analysis.index import (
    CANONICAL_PREFIXES,
    Index,
    Scope,
    call_keyword,
    dotted_name,
    string_value,
    target_key,
)

if TYPE_CHECKING:
    from distlint.analysis.accumulation import Accumulation
    from distlint.analysis.loops import Loops
    from distlint.analysis.metrics import Metrics


class Mode(enum.Enum):
    """How the script trains data-parallel."""

    ACCELERATE = "accelerate"
    FABRIC = "fabric"
    DDP = "ddp"
    XLA_MULTIPROCESS = "xla"
    XLA_SPMD = "xla-spmd"
    NONE = "none"

    @property
    def per_process_batches(self) -> bool:
        """Each process draws its own batch (the observed batch grows with the processes)."""
        return self not in (Mode.NONE, Mode.XLA_SPMD)


class Seeds(enum.Flag):
    NONE = 0
    TORCH = enum.auto()
    PYTHON = enum.auto()
    NUMPY = enum.auto()
    XLA = enum.auto()
    ALL = TORCH | PYTHON | NUMPY | XLA


class Made(enum.Enum):
    """What a function's return value (or a class's instance) is."""

    ACCELERATOR = "accelerator"  # accelerate.Accelerator / PartialState / Fabric
    PROCESS_COUNT = "process-count"  # the process count, or a value scaled by it
    OPTIMIZER = "optimizer"
    DATALOADER = "dataloader"
    SHARDED = "sharded"  # a dataset or loader split by process
    WRAPPED_MODEL = "wrapped-model"  # DDP / FSDP


class Origin(enum.Enum):
    """How a DataLoader that is iterated was made, as far as the analysis can see."""

    SHARDED = "sharded"  # prepared, a DistributedSampler, a prepare helper
    UNSHARDED = "unsharded"  # every process iterates the whole dataset
    UNKNOWN = "unknown"  # a custom sampler, a dataset split by rank, an unseen origin


class How(enum.Enum):
    """How an optimizer was recognised."""

    LIBRARY_CLASS = "library class"
    PROJECT_CLASS = "subclass of torch.optim.Optimizer"
    FACTORY = "optimizer factory"
    PICKED = "class picked from candidates"
    PARAMETERS_AND_LR = "receives the parameters and an lr"
    CONFIG_COMPONENT = "instantiated from a config node naming an optimizer class"


class Optimizer:
    __slots__ = (
        "call",
        "how",
        "lr",
        "params",
        "lr_inside",
        "lr_scaled",
        "where",
        "lr_key",
        "lr_config",
    )

    def __init__(
        self,
        call: cst.Call,
        how: How,
        lr: cst.BaseExpression | None,  # where its learning rate is given at this call
        params: cst.BaseExpression | None,
        lr_inside: bool = False,  # a project factory sets the lr itself (scaled or not: lr_scaled)
        lr_scaled: bool = False,
        where: str | None = None,  # where a factory of another module builds it
        lr_key: str | None = None,  # the lr is `<lr>.<path>` (`args.lr` read inside a factory)
        # the lr is written in a configuration file: `configs/x.yaml:14: optimizer.lr = 2e-5`
        lr_config: str | None = None,
    ) -> None:
        self.call = call
        self.how = how
        self.lr = lr
        self.params = params
        self.lr_inside = lr_inside
        self.lr_scaled = lr_scaled
        self.where = where
        self.lr_key = lr_key
        self.lr_config = lr_config

    def __repr__(self) -> str:
        return f"Optimizer({self.how.name}, lr_key={self.lr_key!r}, where={self.where!r})"


class Scheduler(NamedTuple):
    call: cst.Call
    kind: str
    peak_lr: cst.BaseExpression | None  # OneCycleLR / CyclicLR `max_lr`


class Summary:
    """A function's or class's training facts, composed through the calls it makes."""

    __slots__ = ("makes", "seeds", "lrs", "loaders", "trained_there", "trains", "method")

    def __init__(self) -> None:
        self.makes: set[Made] = set()
        self.seeds = Seeds.NONE
        # for an optimizer factory: one entry per optimizer it returns; for a class, per
        # optimizer its instances build from what the constructor is given (a Trainer class)
        self.lrs: list[FactoryLR] = []
        # for a function returning DataLoaders: how each is made, by position in a returned
        # tuple (None: the return value itself)
        self.loaders: dict[int | None, list[Origin]] = {}
        # the defining module trains data-parallel itself (prepares, wraps with DDP): hazards
        # of the optimizers built there are reported in that module, not at its callers
        self.trained_there = False
        # the function or class itself trains data-parallel (creates an Accelerator / Fabric
        # and prepares, or wraps with DDP): the mode it trains in
        self.trains: Mode | None = None
        # for a class: the summary of one of its methods, by name (computed when asked)
        self.method: Callable[[str], Summary | None] | None = None


class ProcessCount(NamedTuple):
    """How to spell the process count at a node: an ``expression`` of names bound there
    (``accelerator.num_processes``), or the qualified name of a ``function`` to call
    (``torch.distributed.get_world_size``), which a fix imports or reuses."""

    expression: str | None = None
    function: str | None = None


class FactoryLR(NamedTuple):
    """Where the LR of an optimizer a factory returns comes from: its parameter ``param``
    (name, position, attribute path read from it such as ".lr" for `args.lr`), or set inside
    (``param`` None; ``scaled`` says whether by the process count). ``where``: for messages."""

    param: tuple[str, int | None, str] | None
    scaled: bool
    where: str


class ProjectLike(Protocol):  # the part of distlint.analysis.project.Project facts use
    memo: dict[Any, Any]

    def resolve_import(self, importer: str, module: str, level: int = 0) -> str | None: ...
    def resolve_from_import(
        self, importer: str, module: str, name: str, level: int = 0
    ) -> str | None: ...
    def module(self, path: str) -> Any: ...


_IN_PROGRESS = object()


class _Spellings(NamedTuple):
    """How the dotted names of some callables can be written: (first, last) part of each name
    and of each alias of it (``CANONICAL_PREFIXES``). A module reaches one of the callables
    only through texts that write both parts (an import, an attribute of one, a re-export),
    in itself or in the project modules it imports."""

    pairs: frozenset[tuple[str, str]]
    words: frozenset[str]

    @classmethod
    def of(cls, names: frozenset[str]) -> _Spellings:
        forms = set(names)
        for alias, to in CANONICAL_PREFIXES.items():
            for name in names:
                if name == to or name.startswith((to + ".", to + "(")):
                    forms.add(alias + name[len(to) :])
        pairs = frozenset((f.split(".")[0], f.rsplit(".", 1)[-1]) for f in forms)
        return cls(pairs, frozenset(word for pair in pairs for word in pair))

    def written_in(self, words: frozenset[str]) -> bool:
        return any(first in words and last in words for first, last in self.pairs)


# What makes a module hold an Accelerator (a state, a Fabric) or train data-parallel (`mode`),
# and what seeds a generator (`seeding`).
_DISTRIBUTED = _Spellings.of(
    frozenset(
        {
            K.ACCELERATOR,
            *K.STATE_CLASSES,
            K.FABRIC,
            *K.DDP_WRAPPERS,
            *K.XLA_MULTIPROCESS,
            "deepspeed.initialize",
        }
    )
)
_SEEDERS = _Spellings.of(
    K.FULL_SEEDERS | K.TORCH_SEEDERS | K.PYTHON_SEEDERS | K.NUMPY_SEEDERS | K.XLA_SEEDERS
)


def facts_for(index: Index, path: str | None = None, project: ProjectLike | None = None) -> Facts:
    """The Facts of a module, built once (per project when one is given)."""
    if project is not None and path is not None:
        key = ("facts", path, id(index))
        found = project.memo.get(key)
        if found is None:
            found = project.memo[key] = Facts(index, path, project)
        return found
    cached = getattr(index, "_facts", None)
    if cached is None:
        cached = Facts(index, path, project)
        index._facts = cached  # type: ignore[attr-defined]
    return cached


class Facts:
    def __init__(
        self, index: Index, path: str | None = None, project: ProjectLike | None = None
    ) -> None:
        self.index = index
        self.flow = index.flow
        self.path = path
        self.project = project
        self._summaries: dict[cst.CSTNode, Summary | object] = {}

    # ============================================================== qualified-name queries
    def release(self) -> None:
        """Drop what these facts hold (they and their parts point at each other, and at the
        index): see :meth:`Index.release`. Unusable afterwards."""
        _release(self)

    def calls_to(self, names: frozenset[str] | set[str]) -> list[cst.Call]:
        return [c for c in self.index.calls if self.index.qualname(c.func) in names]

    def imports_module(self, top: str) -> bool:
        for scope in self.index.scopes:
            for assigns in scope.bindings.values():
                for a in assigns:
                    q = a.qualname if a.op == "import" else None
                    if q and (q == top or q.startswith(top + ".")):
                        return True
        return False

    # ============================================================== setup
    DATALOADER_CONFIGURATION = K.DATALOADER_CONFIGURATION  # for fixes that build one

    def is_dataloader_configuration(self, node: cst.CSTNode | None) -> bool:
        return isinstance(node, cst.Call) and self.index.qualname(node.func) == (
            K.DATALOADER_CONFIGURATION
        )

    @cached_property
    def accelerators(self) -> list[cst.Call]:
        """`Accelerator(...)` constructions of this module."""
        return self.calls_to({K.ACCELERATOR})

    @cached_property
    def creates_accelerator(self) -> bool:
        """An Accelerator is made here, or by a project helper this module calls."""
        if self.accelerators:
            return True
        if not self._imports_may_train:
            return False
        return any(Made.ACCELERATOR in self._external_makes(c) for c in self._external_calls)

    @cached_property
    def _imports_may_train(self) -> bool:
        """Some module this one imports from the project (directly or through others) writes
        the name of a callable that makes an Accelerator or trains data-parallel. When none
        does, no call into them can, and `mode` needs none of their summaries."""
        return self.imports_may_reach(_DISTRIBUTED)

    def imports_may_reach(self, callables: _Spellings, path: str | None = None) -> bool:
        """A call into the project modules this module (or the module ``path``) reaches by
        imports may end in one of ``callables``: a text among them (or its own) writes one of
        their names."""
        path = path if path is not None else self.path
        reached = getattr(self.project, "words_reached", None)
        if reached is None or path is None:
            return self.project is not None
        return callables.written_in(reached(path, callables.words, callables.written_in))

    @cached_property
    def uses_xla(self) -> bool:
        return self.imports_module(K.XLA_MODULE)

    @cached_property
    def xla_spmd(self) -> bool:
        return bool(self.calls_to(K.XLA_SPMD_CALLS)) or self.imports_module(K.XLA_SPMD_MODULE)

    @cached_property
    def mode(self) -> Mode:
        if self.xla_spmd:
            return Mode.XLA_SPMD
        if self.creates_accelerator:
            return Mode.ACCELERATE
        fabrics = self.calls_to({K.FABRIC})
        if fabrics and not all(self._one_process_fabric(call) for call in fabrics):
            return Mode.FABRIC
        if self.calls_to(K.XLA_MULTIPROCESS):
            return Mode.XLA_MULTIPROCESS
        if self.calls_to(K.DDP_CALLS):
            return Mode.DDP
        # the script hands its model / optimizer to a project class or function that trains
        # them data-parallel (a Trainer that creates the Accelerator and prepares what it gets)
        for call in self._training_calls:
            summary = self._external_summary(call)
            if summary is not None and summary.trains is not None:
                return summary.trains
        return Mode.NONE

    @cached_property
    def _training_calls(self) -> list[cst.Call]:
        """Calls of project classes / functions of other modules that train data-parallel
        what they are given: they count as preparing their arguments."""
        out: list[cst.Call] = []
        if not self._imports_may_train:
            return out
        for call in self._external_calls:
            summary = self._external_summary(call)
            if summary is not None and summary.trains is not None and call.args:
                out.append(call)
        return out

    @cached_property
    def trains_data_parallel(self) -> bool:
        """The module itself wraps a model for data-parallel training: it prepares / sets up
        with an Accelerator or Fabric, wraps with DDP / FSDP / deepspeed, or runs torch_xla
        multiprocessing (a Trainer class does; a helper that only returns an Accelerator
        does not)."""
        # direct evidence only: asking for the mode would summarise every call of the module,
        # and so every module it imports
        if self.accelerators or self.calls_to({K.FABRIC}):
            return bool(self._own_prepare_calls)
        return bool(self.calls_to(K.DDP_WRAPPERS | K.XLA_MULTIPROCESS | {"deepspeed.initialize"}))

    def _trains_inside(self, node: cst.CSTNode) -> Mode | None:
        """The mode ``node`` (a function or class of this module) trains in by itself."""
        index = self.index
        inside = [c for c in index.calls if index.is_inside(c, node)]
        quals = {index.qualname(c.func) for c in inside}
        if quals & (K.DDP_WRAPPERS | {"deepspeed.initialize"}):
            return Mode.DDP
        if quals & K.XLA_MULTIPROCESS:
            return Mode.XLA_MULTIPROCESS
        if not any(self.is_prepare_call(c) for c in inside):
            return None
        if K.ACCELERATOR in quals:
            return Mode.ACCELERATE
        return Mode.FABRIC if K.FABRIC in quals else None

    def _one_process_fabric(self, call: cst.Call) -> bool:
        """`Fabric(devices=1)` (or `devices=[0]`) on one node starts exactly one process."""

        def only(expr: cst.BaseExpression | None, accept: Any, depth: int = 3) -> bool:
            if expr is None or depth <= 0:
                return False
            if accept(expr):
                return True
            if not isinstance(expr, (cst.Name, cst.Attribute)):
                return False
            values = self.index.values_of(expr)
            return bool(values) and all(only(v, accept, depth - 1) for v in values)  # type: ignore[arg-type]

        def is_one(expr: cst.CSTNode) -> bool:
            return isinstance(expr, cst.Integer) and expr.evaluated_value == 1

        def one_device(expr: cst.CSTNode) -> bool:
            if is_one(expr):
                return True
            return isinstance(expr, (cst.List, cst.Tuple)) and len(expr.elements) == 1

        nodes = call_keyword(call, "num_nodes")
        return only(call_keyword(call, "devices"), one_device) and (
            nodes is None or only(nodes, is_one)
        )

    def accelerator_keyword(self, call: cst.Call, name: str) -> cst.BaseExpression | None:
        """A keyword given to ``call``, also through ``**{"name": ...}`` or ``**kwargs`` bound to
        a dict literal / ``dict(...)``."""
        found = call_keyword(call, name)
        if found is not None:
            return found
        for arg in call.args:
            if arg.star != "**":
                continue
            for value in [arg.value, *self.index.values_of(arg.value)]:
                got = _dict_entry(self.index, value, name)
                if got is not None:
                    return got
        return None

    @cached_property
    def split_batches(self) -> bool:
        """`DataLoaderConfiguration(split_batches=True)` in effect: the loader batch is global.
        The legacy `Accelerator(split_batches=True)` is ignored by Accelerate >= 1.0."""
        for call in self.accelerators:
            config = self.accelerator_keyword(call, "dataloader_config")
            if config is None:
                continue
            for value in [config, *self.index.values_of(config)]:
                if isinstance(value, cst.Call) and self.index.qualname(value.func) == (
                    K.DATALOADER_CONFIGURATION
                ):
                    flag = call_keyword(value, "split_batches")
                    if flag is not None and self.index.constant_value(flag) is True:
                        return True
        return False

    @cached_property
    def scheduler_stepped_once(self) -> bool:
        """`Accelerator(step_scheduler_with_optimizer=False)`."""
        for call in self.accelerators:
            flag = self.accelerator_keyword(call, "step_scheduler_with_optimizer")
            if flag is not None and self.index.constant_value(flag) is False:
                return True
        return False

    @cached_property
    def model_parallel(self) -> bool:
        """Tensor / context parallelism: only the data-parallel size multiplies the batch."""
        for call in self.index.calls:
            q = self.index.qualname(call.func)
            if q in K.MODEL_PARALLEL_CALLS or (q or "").startswith(K.MODEL_PARALLEL_PREFIXES):
                return True
        return any(
            self.accelerator_keyword(call, kw) is not None
            for call in self.accelerators
            for kw in K.MODEL_PARALLEL_KEYWORDS
        )

    @cached_property
    def accumulation_settings(self) -> list[cst.BaseExpression]:
        """The accumulation-steps values the Accelerator(s) are configured with (not 1)."""
        index = self.index
        out: list[cst.BaseExpression] = []
        for acc in self.accelerators:
            candidates = [self.accelerator_keyword(acc, "gradient_accumulation_steps")]
            for plugin_qual, (keyword, fieldname) in K.ACCUMULATION_PLUGINS.items():
                plugin = self.accelerator_keyword(acc, keyword)
                if plugin is None:
                    continue
                for value in [plugin, *index.values_of(plugin)]:
                    if isinstance(value, cst.Call) and index.qualname(value.func) == plugin_qual:
                        candidates.append(call_keyword(value, fieldname))
            out.extend(v for v in candidates if v is not None and index.constant_value(v) != 1)
        return out

    # ============================================================== the process count
    def is_process_count(self, node: cst.CSTNode, qualname: str | None) -> bool:
        """Predicate: ``node`` IS the number of processes (or a device count)."""
        if qualname is not None:
            if qualname in K.PROCESS_COUNT or qualname in K.DEVICE_COUNTS:
                return True
            if qualname.startswith(K.DEVICE_MESH) and qualname.endswith(".size()"):
                return True
            if qualname in K.ENV_READERS and isinstance(node, cst.Call) and node.args:
                return string_value(node.args[0].value) == K.ENV_WORLD_SIZE
        if isinstance(node, cst.Attribute) and node.attr.value in K.PROCESS_COUNT_ATTRIBUTES:
            # `accelerator.num_processes` / `fabric.world_size` on an instance made anywhere
            # (a parameter fed an Accelerator, `self.accelerator`, a helper's return value)
            if self.is_accelerator(node.value):
                return True
            if not self.traceable(node.value) and not self.traceable(node):
                return True  # an object nothing in the project describes: the API attribute
        if isinstance(node, cst.Call):
            if Made.PROCESS_COUNT in self._external_makes(node):
                return True
            # `utils.get_world_size()` from a module the project does not contain
            name = self._untraced_import_call(node, qualname)
            if name is not None and name.lower().removeprefix("get_") in K.PROCESS_COUNT_NAMES:
                return True
        if isinstance(node, (cst.Name, cst.Attribute)) and self._launch_counts:
            if self._launch_place(node) in self._launch_counts:
                return True
        # Names only for values the analysis cannot trace (see knowledge.PROCESS_COUNT_NAMES).
        if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            last = _last_name(node)
            if last is not None and last.lower() in K.PROCESS_COUNT_NAMES:
                return not self.traceable(node)
        return False

    def _untraced_import_call(self, call: cst.Call, qualname: str | None) -> str | None:
        """The callee's name when ``call`` calls something imported from a module that is
        neither in the project nor a library the knowledge base describes: nothing says what
        it returns, so its name is all the evidence there is."""
        func = call.func
        head = func.value if isinstance(func, cst.Attribute) else func
        if not isinstance(head, cst.Name):
            return None
        if qualname is not None and qualname.split(".", 1)[0] in K.KNOWN_LIBRARIES:
            return None
        bindings = self.index.bindings_of(head)
        if not bindings:
            return None
        for b in bindings:
            if b.op != "import" or b.record is None:
                return None
            record = b.record
            if self.project is not None and self.path is not None:
                if record.name is None or isinstance(func, cst.Name):
                    found = self.project.resolve_import(self.path, record.module, record.level)
                else:
                    found = self.project.resolve_from_import(
                        self.path, record.module, record.name, record.level
                    ) or self.project.resolve_import(self.path, record.module, record.level)
                if found is not None:
                    return None
        return func.attr.value if isinstance(func, cst.Attribute) else head.value

    @cached_property
    def _launch_counts(self) -> frozenset[Any]:
        """The places whose value this module gives a launcher as its number of processes:
        `devices` in `Fabric(devices=devices)`, `world_size` in `mp.spawn(..., nprocs=world_size)`."""
        found = set()
        for call in self.index.calls:
            spec = K.PROCESS_COUNT_ARGUMENTS.get(self.index.qualname(call.func) or "")
            if spec is None:
                continue
            arg = Index.argument(call, *spec)
            if arg is not None and isinstance(arg.value, (cst.Name, cst.Attribute)):
                place = self._launch_place(arg.value)
                if place is not None:
                    found.add(place)
        return frozenset(found)

    def _launch_place(self, node: cst.Name | cst.Attribute) -> Any:
        """A name by the bindings it reads (the same variable, not the same spelling); a
        dotted place (`args.devices`) by its text."""
        if isinstance(node, cst.Name):
            bindings = self.index.bindings_of(node)
            return frozenset(id(b) for b in bindings) if bindings else None
        return target_key(node)

    def key_reads_process_count(self, key: str) -> bool:
        """A dotted place such as `args.lr` is assigned (anywhere in the module) a value that
        reads the process count."""
        assigns = self.index.attr_assignments.get(key, ())
        return any(a.value is not None and self.reads_process_count(a.value) for a in assigns)

    def reads_process_count(self, expr: cst.CSTNode, prune: Any = None, depth: int = 10) -> bool:
        """Something flowing into ``expr`` is the process count."""
        return self.flow.reaches(
            expr, self.is_process_count, key="process-count", prune=prune, depth=depth
        )

    def traceable(self, node: cst.CSTNode) -> bool:
        """Something in the module says what ``node`` holds (an assignment, an import, a call
        site passing the parameter); False for a parameter nobody passes, `args.x` never set."""
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            return True
        if isinstance(node, cst.Name):
            bindings = self.index.bindings_of(node)
            if any(b.op == "import" for b in bindings):
                return True
        return any(v is not None for v in self.index.values_of(node))

    def is_untraced_accumulation(self, node: cst.CSTNode) -> bool:
        """An accumulation-steps value nothing in the module traces (a helper's parameter
        `grad_accum_steps` no call passes): then its name is the only evidence."""
        last = _last_name(node)
        return last is not None and K.ACCUMULATION_WORD in last.lower() and not self.traceable(node)

    def is_accelerator(self, expr: cst.CSTNode) -> bool:
        """``expr`` holds an Accelerator / accelerate state / Fabric (by value)."""
        return self.flow.reaches(expr, self._is_accelerator_value, key="accelerator", depth=6)

    def _is_accelerator_value(self, node: cst.CSTNode, q: str | None) -> bool:
        if q is not None and q.endswith("()"):
            base = q[:-2]
            if base == K.ACCELERATOR or base in K.STATE_CLASSES or base == K.FABRIC:
                return True
        return isinstance(node, cst.Call) and Made.ACCELERATOR in self._external_makes(node)

    def divided_by_process_count(self, expr: cst.CSTNode, depth: int = 4) -> bool:
        """``expr`` is (a copy of) ``x // world_size`` / ``x / (n * num_processes)``, or a name
        divided in place (`bs //= world_size`): a per-device share of a global value."""
        index = self.index
        if depth <= 0 or expr is None:
            return False
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
                return self.reads_process_count(expr.right)
            return False
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Name) and expr.func.value in ("int", "max", "round"):
                return any(self.divided_by_process_count(a.value, depth - 1) for a in expr.args)
            return index.qualname(expr.func) in ("math.ceil", "math.floor") and any(
                self.divided_by_process_count(a.value, depth - 1) for a in expr.args
            )
        if isinstance(expr, cst.Name):
            assigns = index.bindings_of(expr)
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            assigns = index.attribute_assignments(expr)
        else:
            return False
        for a in assigns:
            if a.op in ("/=", "//=") and a.value is not None and self.reads_process_count(a.value):
                return True
            if (
                a.op == "="
                and a.value is not None
                and self.divided_by_process_count(a.value, depth - 1)
            ):
                return True
        if isinstance(expr, cst.Name) and all(a.op == "param" for a in assigns):
            return any(
                v is not None and self.divided_by_process_count(v, depth - 1)
                for v in index.values_of(expr)
            )
        return False

    @cached_property
    def global_batch_held_constant(self) -> bool:
        """The per-device batch or the accumulation steps are the world-size share of a global
        value: the batch per optimizer step is the same on 1 or N processes. Judged on what the
        loaders and the Accelerator are given, not on bookkeeping elsewhere in the file."""
        candidates: list[cst.BaseExpression] = []
        for call in self.index.calls:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in K.BATCH_SIZE_KEYWORDS:
                    candidates.append(arg.value)
        for loader in self.loaders:
            positional = Index.argument(loader, "batch_size", 1)
            if positional is not None and positional.keyword is None:
                candidates.append(positional.value)
        if any(self.divided_by_process_count(c) for c in candidates):
            return True
        # A place that holds the per-device batch or the accumulation steps, whose use may live
        # in another module (`args.batch_size //= world_size`): its name is what says so, and its
        # own value must be the world-size share (bookkeeping such as
        # `steps_per_epoch = len(ds) // (bs * num_processes)` is not).
        for assigns in self._batch_places():
            for a in assigns:
                if a.op in ("/=", "//=") and a.value is not None:
                    if self.reads_process_count(a.value):
                        return True
                elif a.op == "=" and self.divided_by_process_count(a.value, 2):
                    return True
        return False

    def _batch_places(self) -> Iterator[Sequence[Any]]:
        for scope in self.index.scopes:
            for name, assigns in scope.bindings.items():
                if _names_batch_or_accumulation(name):
                    yield assigns
        for key, assigns in self.index.attr_assignments.items():
            last = key.split("@")[0].rsplit(".", 1)[-1].rsplit("[", 1)[-1]
            if _names_batch_or_accumulation(last):
                yield assigns

    # ============================================================== optimizers, schedulers
    @cached_property
    def optimizers(self) -> list[Optimizer]:
        return [opt for call in self.index.calls for opt in self._optimizers_at(call)]

    def _optimizers_in(self, node: cst.CSTNode) -> list[Optimizer]:
        """The optimizers built inside ``node`` (a function or class): only its own calls are
        examined, so summarising it does not summarise everything its module calls."""
        if "optimizers" in self.__dict__:
            return [o for o in self.optimizers if self.index.is_inside(o.call, node)]
        return [
            opt
            for call in self.index.calls
            if self.index.is_inside(call, node)
            for opt in self._optimizers_at(call)
        ]

    def _optimizers_at(self, call: cst.Call) -> list[Optimizer]:
        found = self._optimizer(call)
        if found is None or found.how is not How.FACTORY or not found.lr_inside:
            return [found] if found is not None else []
        # a factory or Trainer class of another module: one per optimizer it builds
        external = self._external_summary(call)
        if external is not None and external.lrs:
            if external.trained_there:
                return []  # reported in that module
            return [self._factory_reading(call, lr) for lr in external.lrs]
        return [found]

    def _optimizer(self, call: cst.Call) -> Optimizer | None:
        index = self.index
        q = index.qualname(call.func)
        lr = Index.argument(call, "lr", 1)
        params = Index.argument(call, "params", 0)

        def made(how: How) -> Optimizer | None:
            # `AdamW(params, **opt_args)` with `opt_args = dict(lr=args.lr, ...)`
            value = lr.value if lr else self._unpacked_lr(call)
            if value is None and params is not None and self._wraps_optimizer(params.value):
                return None  # `Lookahead(optimizer)`: the inner optimizer's LR is the one
            return Optimizer(call, how, value, params.value if params else None)

        if K.is_optimizer_class(q):
            return made(How.LIBRARY_CLASS)
        if q in K.OPTIMIZER_FACTORIES:
            keyword, position = K.OPTIMIZER_FACTORIES[q]
            arg = Index.argument(call, keyword, position)
            return Optimizer(call, How.FACTORY, arg.value if arg else None, None)
        if q in K.OPTIMIZER_FACTORIES_READING:
            short = q.rsplit(".", 1)[-1]
            read = FactoryLR(K.OPTIMIZER_FACTORIES_READING[q], False, f"{short}()")
            return self._factory_reading(call, read)
        if isinstance(call.func, cst.Name):
            for b in index.bindings_of(call.func):
                if b.op == "class" and self._is_optimizer_class_def(b.node, set()):
                    return made(How.PROJECT_CLASS)
        if q is None and self._picked_optimizer_class(call.func):
            return made(How.PICKED)
        if q in K.CONFIG_INSTANTIATE:
            return self._instantiated_optimizer(call)
        external = self._external_summary(call)
        if external is not None and (Made.OPTIMIZER in external.makes or external.lrs):
            return Optimizer(call, How.FACTORY, None, None, lr_inside=True)
        local = index.local_function(call.func) is not None or (
            isinstance(call.func, cst.Name)
            and any(b.op == "class" for b in index.bindings_of(call.func))
        )
        if not local and (
            q is None or not q.startswith(("torch.", "accelerate.", "transformers."))
        ):
            # anything else given the model's parameters and an lr
            keyword_lr = call_keyword(call, "lr")
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            source = call_keyword(call, "params") or first
            if keyword_lr is not None and source is not None and self._parameters(source):
                return Optimizer(call, How.PARAMETERS_AND_LR, keyword_lr, source)
        return None

    @staticmethod
    def _factory_reading(call: cst.Call, lr: FactoryLR) -> Optimizer:
        """The optimizer a factory call returns, its LR as the factory reads it: from its
        parameter (`make(args)` reading `args.lr` has the attribute ".lr", `make(lr)` has "")
        or set inside."""
        where = lr.where
        if lr.param is None:
            opt = Optimizer(call, How.FACTORY, None, None, lr_inside=True, where=where)
            opt.lr_scaled = lr.scaled
            return opt
        name, position, suffix = lr.param
        arg = Index.argument(call, name, position)
        if arg is None:  # the factory's own default
            return Optimizer(call, How.FACTORY, None, None, lr_inside=True, where=where)
        opt = Optimizer(call, How.FACTORY, arg.value, None, where=where)
        base = target_key(arg.value) if suffix else None
        opt.lr_key = base + suffix if base is not None else None
        return opt

    def _unpacked_lr(self, call: cst.Call) -> cst.BaseExpression | None:
        """The `lr` of `**opt_args` bound to a dict literal / `dict(...)`, unless the dict's
        `lr` is assigned elsewhere (`opt_args["lr"] *= world_size`): then nothing is known."""
        found = self.accelerator_keyword(call, "lr")
        if found is None:
            return None
        for arg in call.args:
            base = target_key(arg.value) if arg.star == "**" else None
            if base is not None and self.index.attr_assignments.get(f"{base}[lr]"):
                return None
        return found

    def _wraps_optimizer(self, expr: cst.BaseExpression) -> bool:
        """``expr`` (the first argument of an optimizer class) holds an optimizer itself."""
        busy = self.__dict__.setdefault("_wrapper_checks", set())
        if expr in busy:
            return False
        busy.add(expr)
        try:
            values = (
                [expr, *self.index.values_of(expr)] if not isinstance(expr, cst.Call) else [expr]
            )
            return any(isinstance(v, cst.Call) and self._optimizer(v) is not None for v in values)
        finally:
            busy.discard(expr)

    def _instantiated_optimizer(self, call: cst.Call) -> Optimizer | None:
        """`config.instantiate(cfg.optimizer, params)` / hydra's `instantiate` of a config node
        whose `_component_` / `_target_` is an optimizer class: its LR is the node's `lr`,
        unless the call passes one."""
        if self.project is None:
            return None
        from distlint.analysis.configsource import config_component

        component = config_component(self, call, self.project, self.path)
        if component is None or not K.is_optimizer_class(component.target):
            return None
        params = call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None
        given = call_keyword(call, "lr")
        if given is not None:
            return Optimizer(call, How.CONFIG_COMPONENT, given, params)
        opt = Optimizer(call, How.CONFIG_COMPONENT, None, params)
        value = component.kwargs.get("lr")
        if value is not None:
            opt.lr_config = value.describe(getattr(self.project, "root", None))
            base = target_key(call.args[0].value) if call.args else None
            opt.lr_key = f"{base}.lr" if base is not None else None
        return opt

    def _is_optimizer_class_def(self, cls: cst.CSTNode, seen: set[cst.CSTNode]) -> bool:
        if not isinstance(cls, cst.ClassDef) or cls in seen:
            return False
        seen.add(cls)
        for base in cls.bases:
            q = self.index.qualname(base.value)
            if q in K.OPTIMIZER_BASES or K.is_optimizer_class(q):
                return True
            if isinstance(base.value, cst.Name):
                for b in self.index.bindings_of(base.value):
                    if b.op == "class" and self._is_optimizer_class_def(b.node, seen):
                        return True
                    if b.op == "import":
                        summary = self._imported_summary(base.value)
                        if summary is not None and Made.OPTIMIZER in summary.makes:
                            return True
        return False

    def _picked_optimizer_class(self, func: cst.BaseExpression) -> bool:
        """`opt_cls = bnb.optim.AdamW8bit if args.use_8bit else torch.optim.AdamW`; one
        optimizer candidate among the values is enough."""
        if not isinstance(func, (cst.Name, cst.Attribute, cst.Subscript)):
            return False

        def is_class(node: cst.CSTNode, q: str | None) -> bool:
            return not isinstance(node, cst.Call) and K.is_optimizer_class(q)

        return self.flow.reaches(func, is_class, key="optimizer-class", prune=_is_call, depth=4)

    def _parameters(self, expr: cst.CSTNode) -> bool:
        """``expr`` holds model parameters: `model.parameters()`, named params, param groups."""

        def is_params(node: cst.CSTNode, _q: str | None) -> bool:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                return node.func.attr.value in ("parameters", "named_parameters")
            if isinstance(node, cst.DictElement):
                return string_value(node.key) == "params"
            return False

        return self.flow.reaches(expr, is_params, key="parameters", depth=4)

    @cached_property
    def schedulers(self) -> list[Scheduler]:
        out: list[Scheduler] = []
        for call in self.index.calls:
            q = self.index.qualname(call.func)
            if q is None:
                continue
            kind = q.replace("transformers.optimization.", "transformers.")
            if kind not in K.SCHEDULER_LENGTHS:
                continue
            peak = None
            if kind in K.PEAK_LR_SCHEDULERS:
                arg = Index.argument(call, "max_lr", 1)
                peak = arg.value if arg is not None else None
            out.append(Scheduler(call, kind, peak))
        return out

    def scheduler_lengths(self, sched: Scheduler) -> list[tuple[cst.BaseExpression, str]]:
        """The arguments that count the schedule's steps, with their role (total / warmup)."""
        out: list[tuple[cst.BaseExpression, str]] = []
        for position, keyword, role in K.SCHEDULER_LENGTHS[sched.kind]:
            arg = Index.argument(sched.call, keyword, position)
            if arg is None:
                continue
            if role == "lambda":
                # `LambdaLR(opt, warmup_decay(warmup, total))`: the factory's arguments
                if isinstance(arg.value, cst.Call):
                    out.extend((a.value, "total") for a in arg.value.args if not a.star)
                else:
                    out.append((arg.value, "total"))
            elif isinstance(arg.value, (cst.List, cst.Tuple)):
                out.extend((el.value, role) for el in arg.value.elements)
            else:
                out.append((arg.value, role))
        return out

    # ============================================================== prepare / wrapping
    def is_prepare_call(self, node: cst.CSTNode) -> bool:
        """`accelerator.prepare(...)` (and `prepare_data_loader`, `prepare_scheduler`) on an
        Accelerator made anywhere, or `accelerate.utils.prepare_data_loader(...)`."""
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        if self.index.qualname(func) in K.PREPARE_FUNCTIONS:
            return True
        if not isinstance(func, cst.Attribute):
            return False
        name = func.attr.value
        if name in K.PREPARE_METHODS:
            return self.is_accelerator(func.value) or not self.traceable(func.value)
        if name in K.FABRIC_SETUP_METHODS:
            q = self.index.qualname(func.value)
            if q == K.FABRIC + "()":
                return True
            return q is None and (self.is_accelerator(func.value) or not self.traceable(func.value))
        return False

    @cached_property
    def prepare_calls(self) -> list[cst.Call]:
        found = self._own_prepare_calls
        if not found and self.mode not in (Mode.NONE, Mode.XLA_SPMD):
            found = list(self._training_calls)  # `E2Trainer(model, optimizer)` prepares them
        return found

    @cached_property
    def _own_prepare_calls(self) -> list[cst.Call]:
        return [c for c in self.index.calls if self.is_prepare_call(c)]

    @cached_property
    def prepared(self) -> Nodes:
        """Everything that flows into an argument of a prepare call (one closure for all)."""
        roots = [arg.value for call in self.prepare_calls for arg in call.args]
        return self.flow.closure(roots, depth=4)

    def is_prepared(self, node: cst.CSTNode) -> bool:
        """Does ``node``'s value flow into an argument of a prepare call (``node in
        prepared``)? An argument itself, or the value a name given as one was assigned
        (`opt = SGD(...)` ... `prepare(model, opt)`), is answered without the closure."""
        return id(node) in self._prepared_directly or node in self.prepared

    @cached_property
    def _prepared_directly(self) -> set[int]:
        found: set[int] = set()
        for call in self.prepare_calls:
            for arg in call.args:
                found.add(id(arg.value))
                if isinstance(arg.value, cst.Name):
                    found.update(id(b.value) for b in self.index.bindings_of(arg.value))
        return found  # ids of nodes the index holds: they stay theirs

    @cached_property
    def prepared_texts(self) -> set[str]:
        """What each prepare call is given, as :meth:`text_of` spells it."""
        return {self.text_of(arg.value) for c in self.prepare_calls for arg in c.args}

    def text_of(self, node: cst.CSTNode) -> str:
        """``a.b.c`` for a dotted name (parentheses and spaces aside), else the node's code."""
        if isinstance(node, (cst.Name, cst.Attribute)):
            dotted = dotted_name(node)
            if dotted is not None:
                return dotted
        return self.index.module.code_for_node(node).strip()

    def accelerator_expr(self, at: cst.CSTNode) -> str | None:
        """Source text of an Accelerator visible at ``at`` (``accelerator``, ``self.accelerator``,
        an accelerator parameter), for fixes; None when there is none."""
        index = self.index
        scope = index.scope(at)
        order = index.order(at)
        for name, inner in self._accelerator_names(scope):
            # a name of the innermost scope counts once it is bound before `at`
            if not inner or any(a.order < order for a in scope.bindings[name]):
                return name
        cls = index.enclosing_class_name(at)
        if cls is not None:
            for key, assigns in index.attr_assignments.items():
                if (
                    key.endswith(f"@{cls}")
                    and assigns
                    and all(
                        a.value is not None and self._made_accelerator(a.value) for a in assigns
                    )
                ):
                    return key.split("@", 1)[0]
        return None

    def _accelerator_names(self, scope: Any) -> Iterator[tuple[str, bool]]:
        """The names visible in ``scope`` that hold an Accelerator wherever they are bound, in
        the order fixes prefer them (innermost scope first), each with whether it is bound in
        ``scope`` itself. Each scope's own names are judged once (a file with many findings
        asks for every one of them), so this is linear in the bindings of the file."""
        shadows = [scope]  # the scopes between here and an outer name, which could rebind it
        for name in self._accelerator_names_of(scope, True):
            yield name, True
        here = scope.parent
        while here is not None:
            for name in self._accelerator_names_of(here, False):
                if not any(name in s.bindings for s in shadows):
                    yield name, False
            if here.kind != "class":
                shadows.append(here)
            here = here.parent

    def _accelerator_names_of(self, scope: Any, first: bool) -> Iterator[str]:
        """The names bound in ``scope`` that hold an Accelerator (a class scope is seen only
        from inside its own body, as Python resolves names), in binding order. Lazily, each
        name judged once: a fix needs the first one, and a module binds thousands of names."""
        if scope.kind == "class" and not first:
            return
        memo: dict[str, bool] = self.__dict__.setdefault("_acc_names", {}).setdefault(id(scope), {})
        index = self.index
        for name in scope.bindings:
            held = memo.get(name)
            if held is None:
                held = memo[name] = self._holds_accelerator(index.lookup(name, scope))
            if held:
                yield name

    def _holds_accelerator(self, bindings: Sequence[Any]) -> bool:
        if not bindings or not all(b.op in ("=", "with", "param", "unpack") for b in bindings):
            return False
        values = [b.value for b in bindings if b.value is not None]
        if values and all(self._made_accelerator(v) for v in values):
            return True
        node = bindings[-1].target
        return (
            isinstance(node, cst.Name)
            and all(b.op == "param" for b in bindings)
            and self.is_accelerator(node)
        )

    def process_count_at(self, at: cst.CSTNode) -> ProcessCount | None:
        """For fixes: how to spell the number of processes at ``at`` in this mode; None when
        there is no right spelling."""
        mode = self.mode
        if mode is Mode.ACCELERATE:
            acc = self.accelerator_expr(at)
            return ProcessCount(expression=f"{acc}.num_processes") if acc else None
        if mode is Mode.DDP:
            return ProcessCount(function="torch.distributed.get_world_size")
        if mode is Mode.XLA_MULTIPROCESS:
            return ProcessCount(function="torch_xla.runtime.world_size")
        if mode is Mode.FABRIC:
            fabric = self.fabric_expr(at)
            return ProcessCount(expression=f"{fabric}.world_size") if fabric else None
        return None

    def fabric_expr(self, at: cst.CSTNode) -> str | None:
        """A name bound to `Fabric(...)` visible at ``at``, for fixes."""
        index = self.index
        for name in _visible_names(index, at):
            assigns = index.lookup(name, index.scope(at))
            if assigns and all(
                a.op == "=" and a.value is not None and index.qualname(a.value) == K.FABRIC + "()"
                for a in assigns
            ):
                return name
        return None

    def _made_accelerator(self, value: cst.CSTNode) -> bool:
        q = self.index.qualname(value)
        if q == K.ACCELERATOR + "()":
            return True
        return isinstance(value, cst.Call) and (
            Made.ACCELERATOR in self._external_makes(value)
            or (self.index.local_function(value.func) is not None and self.is_accelerator(value))
        )

    # ============================================================== configuration values
    def config_origin(self, expr: cst.CSTNode) -> str | None:
        """Where the value of ``expr`` is written when it is read from a configuration file
        (or is an argparse default the script declares): ``conf/optimizer/adamw.yaml:2:
        optimizer.lr = 3e-4``, the file relative to the project root; None without a project
        or when the value cannot be traced (nothing is guessed)."""
        if self.project is None:
            return None
        from distlint.analysis.configsource import config_value

        found = config_value(self, expr, self.project, self.path)
        if found is None:
            return None
        described: str = found.describe(getattr(self.project, "root", None))
        return described

    # ============================================================== data loading
    @cached_property
    def loaders(self) -> list[cst.Call]:
        return self.calls_to(K.DATALOADERS)

    def is_dataloader(self, q: str | None) -> bool:
        return q in K.DATALOADERS

    def is_device_loader(self, q: str | None) -> bool:
        """torch_xla device loaders iterate whatever loader they wrap."""
        return q in K.DEVICE_LOADERS

    def passes_batches_through(self, func: cst.BaseExpression) -> bool:
        """`enumerate(loader)`, `tqdm(loader)`: yields the loader's batches unchanged."""
        if isinstance(func, cst.Name) and not self.index.bindings_of(func):
            return func.value in K.PASS_THROUGH
        return self.index.qualname(func) in K.PASS_THROUGH

    def iterator_of(self, call: cst.Call) -> cst.BaseExpression | None:
        """``iter(loader)`` (the builtin): the iterable whose iterator the call makes."""
        func = call.func
        if (
            isinstance(func, cst.Name)
            and func.value == "iter"
            and len(call.args) == 1
            and call.args[0].keyword is None
            and not call.args[0].star
            and not self.index.bindings_of(func)
        ):
            return call.args[0].value
        return None

    def sampler_shards(self, sampler: cst.BaseExpression) -> bool | None:
        """True: a distributed sampler; False: one that draws from the whole dataset in every
        process; None: a custom sampler (it may well shard by rank)."""
        flow = self.flow
        if flow.reaches(sampler, _distributed_sampler, key="distributed-sampler"):
            return True
        if flow.reaches(sampler, _whole_dataset_sampler, key="whole-sampler"):
            return False
        return None

    def loader_origins(
        self, expr: cst.CSTNode, depth: int = 6, position: int | None = None
    ) -> list[Origin]:
        """How each value that may flow into ``expr`` was made (``position``: the element of
        a tuple that a call returns), through assignments, tuple unpacking, helpers of this
        module and of other modules of the project, and device loaders."""
        index = self.index
        if depth <= 0:
            return [Origin.UNKNOWN]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            if isinstance(expr, cst.Name):
                assigns: Sequence[Any] = index.bindings_of(expr)
            else:
                assigns = index.attribute_assignments(expr)
            found = [o for a in assigns for o in self._assigned_origins(a, depth)]
            return found or [Origin.UNKNOWN]
        if isinstance(expr, cst.Call):
            return self._call_origins(expr, depth, position)
        return [Origin.UNKNOWN]

    def _assigned_origins(self, assignment: Any, depth: int) -> list[Origin]:
        if assignment.op == "=" and assignment.value is not None:
            return self.loader_origins(assignment.value, depth - 1)
        if assignment.op == "unpack" and isinstance(assignment.node, cst.Assign):
            # `train_dl, eval_dl = make_loaders()` / `model, opt, dl = accelerator.prepare(...)`
            targets = assignment.node.targets[0].target
            if isinstance(targets, (cst.Tuple, cst.List)):
                elements = [e.value for e in targets.elements]
                position = next((i for i, e in enumerate(elements) if e is assignment.target), None)
                if position is not None and isinstance(assignment.node.value, cst.Call):
                    return self._call_origins(assignment.node.value, depth - 1, position)
        return [Origin.UNKNOWN]

    def _call_origins(self, call: cst.Call, depth: int, position: int | None) -> list[Origin]:
        index = self.index
        if self.is_prepare_call(call):
            return [Origin.SHARDED]
        qualname = index.qualname(call.func)
        if position is None and self.is_dataloader(qualname):
            return [self._dataloader_origin(call)]
        if position is None and self.iterator_of(call) is not None:
            return self.loader_origins(call.args[0].value, depth - 1)
        if position is None and self.is_device_loader(qualname) and call.args:
            return self.loader_origins(call.args[0].value, depth - 1)
        fn = index.local_function(call.func)
        if fn is None:
            return self._external_origins(call, position)
        return self._returned_origins(fn, depth, position)

    def _returned_origins(self, fn: cst.CSTNode, depth: int, position: int | None) -> list[Origin]:
        out: list[Origin] = []
        for ret in self.index.returns.get(fn, ()):
            value = ret.value
            if position is not None:
                if not isinstance(value, (cst.Tuple, cst.List)) or position >= len(value.elements):
                    return [Origin.UNKNOWN]
                value = value.elements[position].value
            out.extend(
                self.loader_origins(value, depth - 1) if value is not None else [Origin.UNKNOWN]
            )
        return out or [Origin.UNKNOWN]

    def _external_origins(self, call: cst.Call, position: int | None) -> list[Origin]:
        """A loader factory of another module: what it returns, unless this module hands it
        data it split by rank (`build_loader(args, shard(ds))`)."""
        summary = self._external_summary(call)
        found = summary.loaders.get(position) if summary is not None else None
        if not found:
            return [Origin.UNKNOWN]
        if Origin.UNSHARDED in found and any(
            self.data_sharded_by_rank(arg.value) for arg in call.args
        ):
            return [Origin.UNKNOWN]
        return list(found)

    def _summarise_loaders(self, fn: cst.CSTNode) -> dict[int | None, list[Origin]]:
        """How the DataLoaders ``fn`` returns are made; only for modules that build any."""
        if not self.loaders:
            return {}
        out: dict[int | None, list[Origin]] = {}
        for ret in self.index.returns.get(fn, ()):
            value = ret.value
            if isinstance(value, (cst.Tuple, cst.List)):
                for i, element in enumerate(value.elements):
                    out.setdefault(i, []).extend(self.loader_origins(element.value, 5))
            elif value is not None:
                out.setdefault(None, []).extend(self.loader_origins(value, 5))
        return {k: v for k, v in out.items() if any(o is not Origin.UNKNOWN for o in v)}

    def _dataloader_origin(self, call: cst.Call) -> Origin:
        index = self.index
        sampler = index.argument(call, "sampler") or index.argument(call, "batch_sampler")
        if sampler is not None and index.constant_value(sampler.value) is not None:
            sampler = None  # sampler=None
        if sampler is not None:
            shards = self.sampler_shards(sampler.value)
            if shards is True:
                return Origin.SHARDED
            if shards is None:
                return Origin.UNKNOWN  # a custom sampler may well shard by rank
        dataset = index.argument(call, "dataset", 0)
        if dataset is not None and self.data_sharded_by_rank(dataset.value):
            return Origin.UNKNOWN
        if dataset is not None and self._iterable_dataset_of_this_module(dataset.value):
            return Origin.UNKNOWN  # its own `__iter__` decides what each process reads
        return Origin.UNSHARDED

    def _iterable_dataset_of_this_module(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is made by an `IterableDataset` class of this module (a sampler cannot split
        it; whether every process streams the same data is its `__iter__`'s business)."""
        values = [expr]
        if isinstance(expr, cst.Name):
            values = [a.value for a in self.index.bindings_of(expr) if a.value is not None]
        for value in values:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                for b in self.index.bindings_of(value.func):
                    if isinstance(b.node, cst.ClassDef) and self.is_iterable_dataset_class(b.node):
                        return True
        return False

    def data_sharded_by_rank(self, expr: cst.CSTNode) -> bool:
        """Something flowing into ``expr`` splits it by process (also in another module)."""
        return self.flow.reaches(expr, self.is_sharded_by_rank, key="sharded", depth=6)

    def is_sharded_by_rank(self, node: cst.CSTNode, qualname: str | None) -> bool:
        """Predicate: ``node`` splits data by process (a rank, the world size, a sharder)."""
        if self.is_process_count(node, qualname):
            return True
        if qualname is not None:
            if qualname in K.RANK_VALUES or qualname.rstrip("()") in K.DATASET_SHARDERS:
                return True
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in K.SHARD_METHODS:
                return True
            if Made.SHARDED in self._external_makes(node):
                return True
        if isinstance(node, (cst.Name, cst.Attribute)):
            last = _last_name(node)
            if last is not None and last.lower() in K.RANK_NAMES:
                return True
            if isinstance(node, cst.Attribute) and last in ("process_index", "global_rank"):
                return True
        return False

    # ============================================================== models
    @cached_property
    def trains(self) -> bool:
        """The module runs backward passes or optimizer steps (or hands off to a Lightning fit)."""
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("backward", "step", "fit")
            for c in self.index.calls
        )

    def builds_model(self, call: cst.Call, q: str | None) -> bool:
        """``call`` draws random initial weights (a layer, a model class, a task head)."""
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_adapter":
            # `unet.add_adapter(LoraConfig(...))`: fresh LoRA weights are drawn here.
            return any(self._is_peft_config(arg.value) for arg in call.args)
        if q is None:
            return False
        if K.TORCH_LAYER.match(q) or q in K.MODEL_FACTORIES:
            return True
        if q.startswith("torchvision.models.") and q.rsplit(".", 1)[1][:1].islower():
            return True
        top = q.split(".", 1)[0]
        if top not in ("transformers", "diffusers"):
            return False
        parts = q.split(".")
        if parts[-1] == "from_config" and K.HF_MODEL_CLASS.search(parts[-2]):
            return True
        if parts[-1] == "from_pretrained":
            # Loads checkpoint weights; only a task head missing from the checkpoint is drawn, and
            # that matters when the script trains (an inference script loads a fine-tuned head).
            head = (
                bool(K.PRETRAINED_WITHOUT_HEAD.search(parts[-2]))
                or Index.argument(call, "num_labels") is not None
            )
            return head and self.trains
        return bool(K.HF_MODEL_CLASS.search(parts[-1])) and parts[-1][:1].isupper()

    def _is_peft_config(self, expr: cst.BaseExpression) -> bool:
        values = [expr] + [v for v in self.index.values_of(expr) if v is not None]
        return any(
            isinstance(v, cst.Call) and (self.index.qualname(v.func) or "").startswith("peft.")
            for v in values
        )

    def on_one_process(self, node: cst.CSTNode) -> bool:
        """``node`` runs only under a test that holds on one process of the run (``if
        accelerator.is_main_process:``, ``if rank == 0:``, ``if args.local_rank in (-1, 0):``,
        ``if xm.is_master_ordinal():``) in its own function: what it does is not what the run
        does on every process."""
        child = node
        for anc in self.index.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False  # called from elsewhere: its callers' tests are not followed
            if (
                isinstance(anc, cst.If)
                and child is anc.body
                and self._holds_on_one_process(anc.test)
            ):
                return True
            child = anc
        return False

    def _holds_on_one_process(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.BooleanOperation):
            return isinstance(test.operator, cst.And) and (
                self._holds_on_one_process(test.left) or self._holds_on_one_process(test.right)
            )
        qualname = self.index.qualname(test)
        if qualname in K.MAIN_PROCESS_FLAGS:
            return True
        flag = test.func if isinstance(test, cst.Call) else test
        if qualname is None and isinstance(flag, cst.Attribute):
            return flag.attr.value in K.MAIN_PROCESS_ATTRIBUTES  # an untraceable receiver
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        left, (target,) = test.left, test.comparisons
        right = target.comparator
        if isinstance(target.operator, cst.Equal):
            return (_int_value(right) == 0 and self._is_rank(left)) or (
                _int_value(left) == 0 and self._is_rank(right)
            )
        if isinstance(target.operator, cst.In) and isinstance(
            right, (cst.Tuple, cst.List, cst.Set)
        ):
            values = {_int_value(e.value) for e in right.elements}
            return 0 in values and values <= {0, -1} and self._is_rank(left)
        return False

    def _is_rank(self, expr: cst.BaseExpression) -> bool:
        """The value of ``expr`` is this process's rank (traced to where it is read)."""
        return self.flow.reaches(expr, self._reads_rank, key="rank", depth=6)

    def _reads_rank(self, node: cst.CSTNode, qualname: str | None) -> bool:
        if qualname is not None and qualname in K.RANK_VALUES:
            return True
        last = _last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        return last is not None and last.lower() in K.RANK_NAMES

    def is_random_split(self, call: cst.Call) -> bool:
        """`random_split(...)` without its own generator: draws from the global generator."""
        if self.index.qualname(call.func) not in K.RANDOM_SPLITS:
            return False
        return Index.argument(call, keyword="generator", position=2) is None

    def is_model_class(self, cls: cst.ClassDef) -> bool:
        """A class of this module that subclasses a model base (`nn.Module`, ...)."""
        return self._subclasses(cls, _is_model_base, set())

    def is_iterable_dataset_class(self, cls: cst.ClassDef) -> bool:
        """A class of this module that subclasses torch's `IterableDataset`."""
        return self._subclasses(cls, K.ITERABLE_DATASETS.__contains__, set())

    def _subclasses(
        self, cls: cst.ClassDef, is_base: Callable[[str], bool], seen: set[cst.CSTNode]
    ) -> bool:
        """``cls`` has a base, or a base of a class of this module it derives from, whose
        qualified name ``is_base`` accepts."""
        if cls in seen:
            return False
        seen.add(cls)
        for base in cls.bases:
            q = self.index.qualname(base.value)
            if q is not None and is_base(q):
                return True
            if isinstance(base.value, cst.Name):
                for b in self.index.bindings_of(base.value):
                    if b.op == "class" and self._subclasses(b.node, is_base, seen):  # type: ignore[arg-type]
                        return True
        return False

    # ============================================================== seeding
    @cached_property
    def seeding(self) -> SeedingFacts:
        return SeedingFacts(self)

    # ============================================================== providers (one module each)
    @cached_property
    def loops(self) -> Loops:
        """Training / evaluation / epoch loops (analysis/loops.py)."""
        from distlint.analysis.loops import Loops

        return Loops(self)

    @cached_property
    def accumulation(self) -> Accumulation:
        """Gradient accumulation as the loops do it (analysis/accumulation.py)."""
        from distlint.analysis.accumulation import Accumulation

        return Accumulation(self)

    @cached_property
    def metrics(self) -> Metrics:
        """Evaluation metrics and cross-process collectives (analysis/metrics.py)."""
        from distlint.analysis.metrics import Metrics

        return Metrics(self)

    # ============================================================== summaries
    def summary(self, fn: cst.CSTNode) -> Summary:
        """What a function of this module returns and does (a class: what its instances are)."""
        found = self._summaries.get(fn)
        if isinstance(found, Summary):
            return found
        if found is _IN_PROGRESS:
            return Summary()  # a cycle: unknown
        self._summaries[fn] = _IN_PROGRESS
        result = self._summarise(fn)
        self._summaries[fn] = result
        return result

    def summary_of(self, name: str) -> Summary | None:
        """The summary of the module-level function or class ``name`` (None: not defined here);
        a name this module imports from another (a re-export) is followed there."""
        for b in reversed(self.index.module_scope.bindings.get(name, ())):
            if b.op in ("def", "class"):
                return self.summary(b.node)
            if b.op == "import" and b.record is not None:
                return self._summary_through(b.record, self.path)
        return None

    def _summarise(self, fn: cst.CSTNode) -> Summary:
        index = self.index
        summary = Summary()
        summary.trained_there = self.trains_data_parallel
        summary.trains = self._trains_inside(fn) if summary.trained_there else None
        if isinstance(fn, cst.ClassDef):
            if self._is_optimizer_class_def(fn, set()):
                summary.makes.add(Made.OPTIMIZER)
            else:
                summary.lrs = self._class_lrs(fn)
            summary.method = lambda name: self._method_summary(fn, name)
            return summary
        returns = [r.value for r in index.returns.get(fn, ()) if r.value is not None]
        for value in returns:
            if self.reads_process_count(value):
                summary.makes.add(Made.PROCESS_COUNT)
            if self.is_accelerator(value):
                summary.makes.add(Made.ACCELERATOR)
            if self.data_sharded_by_rank(value):
                summary.makes.add(Made.SHARDED)
        inner = self._optimizers_in(fn)
        if inner and any(self.flow.reaches(v, _node_in(inner), depth=6) for v in returns):
            summary.makes.add(Made.OPTIMIZER)
            returned = [
                o
                for o in inner
                if len(inner) == 1
                or any(self.flow.reaches(v, _node_in([o]), depth=6) for v in returns)
            ]
            method = index.scope(fn).kind == "class"
            for opt in returned:
                lr = self._factory_lr(fn, opt)
                if method and lr.param is None and not lr.scaled and not self._constant_lr(opt):
                    # `self.args.lr` in a method: given to the constructor, not to the call
                    continue
                if all((lr.param, lr.scaled) != (o.param, o.scaled) for o in summary.lrs):
                    summary.lrs.append(lr)  # one per LR: an if/elif choosing the class is one
            if method and not summary.lrs:
                summary.makes.discard(Made.OPTIMIZER)  # what its LR is, the call cannot say
        summary.seeds = self.seeding.seeds_in(fn)
        summary.loaders = self._summarise_loaders(fn)
        return summary

    def _method_summary(self, cls: cst.ClassDef, name: str) -> Summary | None:
        for st in cls.body.body:
            if isinstance(st, cst.FunctionDef) and st.name.value == name:
                return self.summary(st)
        return None

    def _class_lrs(self, cls: cst.ClassDef) -> list[FactoryLR]:
        """The LRs of the optimizers a class's methods build, as its constructor's parameters
        or constants (a `Trainer(model, args)` building AdamW(lr=args.lr) in `__init__` or in
        a method reading `self.lr`). An LR from a method's own parameter is not the
        constructor's business and is left out."""
        init = next(
            (
                st
                for st in cls.body.body
                if isinstance(st, cst.FunctionDef) and st.name.value == "__init__"
            ),
            None,
        )
        out: list[FactoryLR] = []
        for opt in self._optimizers_in(cls):
            lr = self._factory_lr(init, opt, cls.name.value) if init is not None else None
            if lr is None or (lr.param is None and not lr.scaled and not self._constant_lr(opt)):
                continue
            if lr not in out:
                out.append(lr)
        return out

    def _constant_lr(self, opt: Optimizer) -> bool:
        """The LR is a number written in the module (a literal or a constant bound to one)."""

        def numeric(node: cst.CSTNode, _q: str | None) -> bool:
            return isinstance(node, (cst.Integer, cst.Float))

        return opt.lr is None or self.flow.reaches(opt.lr, numeric, key="number", depth=3)

    def _factory_lr(self, fn: cst.CSTNode, opt: Optimizer, shown: str | None = None) -> FactoryLR:
        """Where the LR of ``opt``, built inside function ``fn`` and returned, comes from."""
        name = shown or (fn.name.value if isinstance(fn, cst.FunctionDef) else "?")
        where = f"`{name}()` at {self._place(opt.call)}"
        if opt.lr_inside:
            return FactoryLR(None, opt.lr_scaled, opt.where or where)
        if opt.lr is None:
            return FactoryLR(None, False, where)
        if self.reads_process_count(opt.lr):
            return FactoryLR(None, True, where)
        param = _param_reached(self.index, fn, opt.lr)
        if opt.lr_key is not None:
            # a factory of a factory: `create_optimizer(args, model)` reads `args.lr`
            if self.key_reads_process_count(opt.lr_key):
                return FactoryLR(None, True, where)
            base = target_key(opt.lr)
            if param is not None and base is not None and opt.lr_key.startswith(base):
                param = (param[0], param[1], param[2] + opt.lr_key[len(base) :])
        return FactoryLR(param, False, opt.where or where)

    def _place(self, node: cst.CSTNode) -> str:
        """`path:line` of ``node`` for a message: the path relative to the working directory
        when the file lies below it."""
        from distlint.positions import positions_of

        if self.path is None:
            return "another module"
        shown = os.path.relpath(self.path)
        if shown.startswith(os.pardir):
            shown = self.path
        found = positions_of(self.index.module, [node]).get(node)
        return f"{shown}:{found.start.line}" if found is not None else shown

    # ------------------------------------------------------------------ across modules
    @cached_property
    def _external_calls(self) -> list[cst.Call]:
        """Calls whose callee is imported from another module of the project."""
        if self.project is None:
            return []
        return [c for c in self.index.calls if self._external_summary(c) is not None]

    def _external_makes(self, call: cst.Call) -> set[Made]:
        summary = self._external_summary(call)
        return summary.makes if summary is not None else set()

    def _external_summary(self, call: cst.Call, needs: _Spellings | None = None) -> Summary | None:
        """The summary of the project function or class ``call`` calls. ``needs``: only what
        a call of one of these callables decides is asked, so a module whose imports reach none
        of their names is not parsed (its summary could not hold them)."""
        if self.project is None or self.path is None:
            return None
        func = call.func
        if isinstance(func, cst.Name):
            return self._imported_summary(func, needs)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            # `utils.get_world_size()` with `import utils` / `from pkg import utils`
            for b in self.index.bindings_of(func.value):
                if b.op == "import" and b.record is not None:
                    record = b.record
                    if record.name is None:
                        path = self.project.resolve_import(self.path, record.module, 0)
                    else:
                        path = self.project.resolve_from_import(
                            self.path, record.module, record.name, record.level
                        )
                    if path is not None:
                        if needs is not None and not self.imports_may_reach(needs, path):
                            return None
                        other = self._facts_of(path)
                        return other.summary_of(func.attr.value) if other else None
            # `env.size()` on `env = DistEnv()`, a class of another module
            busy = self.__dict__.setdefault("_owner_lookups", set())
            if call in busy:
                return None  # `a = b.m(); b = a.n()`: no owner to find
            busy.add(call)
            try:
                for value in self.index.values_of(func.value):
                    if isinstance(value, cst.Call) and value is not call:
                        owner = self._external_summary(value, needs)
                        if owner is not None and owner.method is not None:
                            return owner.method(func.attr.value)
            finally:
                busy.discard(call)
        return None

    def _imported_summary(self, name: cst.Name, needs: _Spellings | None = None) -> Summary | None:
        if self.project is None or self.path is None:
            return None
        for b in self.index.bindings_of(name):
            if b.op == "import" and b.record is not None and b.record.name is not None:
                return self._summary_through(b.record, self.path, needs)
        return None

    def _summary_through(
        self, record: Any, importer: str | None, needs: _Spellings | None = None
    ) -> Summary | None:
        if self.project is None or importer is None or record.name is None:
            return None
        path = self.project.resolve_import(importer, record.module, record.level)
        if path is None:
            return None
        if needs is not None and not self.imports_may_reach(needs, path):
            return None
        key = ("summary", path, record.name)
        memo = self.project.memo
        if key in memo:
            found = memo[key]
            return None if found is _IN_PROGRESS else found
        memo[key] = _IN_PROGRESS  # a cycle between modules: unknown
        other = self._facts_of(path)
        result = other.summary_of(record.name) if other is not None else None
        memo[key] = result
        return result

    def _facts_of(self, path: str) -> Facts | None:
        assert self.project is not None
        info = self.project.module(path)
        if info is None:
            return None
        return facts_for(info.index, path, self.project)


def _release(facts: Facts) -> None:
    """See :meth:`Facts.release`."""
    for provider in ("seeding", "loops", "accumulation", "metrics"):
        held = facts.__dict__.get(provider)
        if held is not None:
            held.__dict__.clear()
    facts.__dict__.clear()


class SeedingFacts:
    """What the module seeds, and what it draws from unseeded generators. A seeding call that
    runs on one process only (``Facts.on_one_process``: a generator made on the main process to
    sample images) does not seed the run."""

    def __init__(self, facts: Facts) -> None:
        index = facts.index
        self.facts = facts
        self.by_kind: dict[Seeds, list[cst.Call]] = {
            s: [] for s in (Seeds.TORCH, Seeds.PYTHON, Seeds.NUMPY, Seeds.XLA)
        }
        self.full: list[cst.Call] = []  # helpers that seed everything
        self.draws = Seeds.NONE
        for call in index.calls:
            q = index.qualname(call.func)
            kind = self.kind_of(call, q)
            if kind is not Seeds.NONE and facts.on_one_process(call):
                continue
            if kind is Seeds.ALL:
                self.full.append(call)
            elif kind is not Seeds.NONE:
                for flag in list(self.by_kind):  # a project helper may seed several generators
                    if kind & flag:  # type: ignore[operator]  # (Flag members: mypy sees Literals)
                        self.by_kind[flag].append(call)
            elif q is not None:
                if q.startswith("random.") and q.count(".") == 1:
                    if q[7:] not in K.PYTHON_NON_DRAWING:
                        self.draws |= Seeds.PYTHON
                elif q.startswith("numpy.random.") and q.count(".") == 2:
                    if q[13:] not in K.NUMPY_NON_DRAWING:
                        self.draws |= Seeds.NUMPY

    def kind_of(self, call: cst.Call, q: str | None) -> Seeds:
        if q in K.FULL_SEEDERS:
            return Seeds.ALL
        if q in K.TORCH_SEEDERS:
            return Seeds.TORCH
        if q in K.PYTHON_SEEDERS:
            return Seeds.PYTHON
        if q in K.NUMPY_SEEDERS:
            return Seeds.NUMPY
        if q in K.XLA_SEEDERS:
            return Seeds.XLA
        if not self.helpers_may_seed:
            return Seeds.NONE
        external = self.facts._external_summary(call, _SEEDERS)
        if external is not None:
            return external.seeds  # what a helper of another module seeds (ALL, some, none)
        return Seeds.NONE

    @cached_property
    def helpers_may_seed(self) -> bool:
        return self.facts.imports_may_reach(_SEEDERS)

    def seeds_in(self, fn: cst.CSTNode) -> Seeds:
        index = self.facts.index
        seeds = Seeds.NONE
        if self.full and any(index.is_inside(c, fn) for c in self.full):
            return Seeds.ALL
        for kind, calls in self.by_kind.items():
            if any(index.is_inside(c, fn) for c in calls):
                seeds |= kind
        return seeds


# ------------------------------------------------------------------ helpers
def _distributed_sampler(node: cst.CSTNode, q: str | None) -> bool:
    return q is not None and K.DISTRIBUTED_SAMPLER_WORD in q


def _whole_dataset_sampler(node: cst.CSTNode, q: str | None) -> bool:
    return q is not None and q.rstrip("()") in K.WHOLE_DATASET_SAMPLERS


def _is_call(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call)


def _node_in(calls: list[Optimizer]) -> Callable[[cst.CSTNode, str | None], bool]:
    wanted = {id(o.call) for o in calls}
    return lambda node, _q: id(node) in wanted


def _param_reached(
    index: Index, fn: cst.CSTNode, expr: cst.CSTNode
) -> tuple[str, int | None, str] | None:
    """The parameter of ``fn`` a value comes from (name, position), e.g. `lr` or `args`."""
    if not isinstance(fn, cst.FunctionDef):
        return None
    params = list(fn.params.posonly_params) + list(fn.params.params)
    names = [p.name.value for p in params]
    if index.scope(fn).kind == "class" and names and names[0] in ("self", "cls"):
        names = names[1:]
    kwonly = [p.name.value for p in fn.params.kwonly_params]
    found: list[tuple[str, str]] = []

    def hit(node: cst.CSTNode, _q: str | None) -> bool:
        key = (
            target_key(node) if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) else None
        )
        if key is None:
            return False
        head = key.split(".", 1)[0].split("[", 1)[0]
        if head in names or head in kwonly:
            base = node
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
            if isinstance(base, cst.Name) and any(b.op == "param" for b in index.bindings_of(base)):
                found.append((head, key[len(head) :]))
                return True
        return False

    path = _access_path(index, expr, set(names) | set(kwonly), 6)
    if path is not None:
        found.append(path)
    else:
        index.reaches(expr, hit, depth=4)
    if not found:
        return None
    name, suffix = found[0]
    return name, (names.index(name) if name in names else None), suffix


def _access_path(
    index: Index, expr: cst.CSTNode, params: set[str], depth: int
) -> tuple[str, str] | None:
    """The parameter and the attribute path a value is read through, composed across local
    copies: `cfg = config.optimizer.params; lr = cfg.learning_rate` gives
    ("config", ".optimizer.params.learning_rate"). None when the value is computed."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        bindings = index.bindings_of(expr)
        if expr.value in params and any(b.op == "param" for b in bindings):
            return expr.value, ""
        if len(bindings) != 1 or bindings[0].op != "=" or bindings[0].value is None:
            return None
        return _access_path(index, bindings[0].value, params, depth - 1)
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        whole, base = target_key(expr), target_key(expr.value)
        if whole is None or base is None:
            return None
        inner = _access_path(index, expr.value, params, depth - 1)
        if inner is None and whole.startswith("self."):
            # `self.lr` set once from a constructor parameter (`self.lr = lr`)
            assigns = index.attribute_assignments(expr)
            if len(assigns) == 1 and assigns[0].op == "=" and assigns[0].value is not None:
                return _access_path(index, assigns[0].value, params, depth - 1)
        return None if inner is None else (inner[0], inner[1] + whole[len(base) :])
    return None


def _dict_entry(index: Index, value: cst.CSTNode | None, name: str) -> cst.BaseExpression | None:
    if isinstance(value, cst.Dict):
        for el in value.elements:
            if isinstance(el, cst.DictElement) and string_value(el.key) == name:
                return el.value
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "dict"
    ):
        return call_keyword(value, name)
    return None


def _names_batch_or_accumulation(name: str) -> bool:
    lowered = name.lower()
    return "accum" in lowered or ("batch" in lowered and "batches" not in lowered)


def _is_model_base(qualname: str) -> bool:
    return qualname in K.MODEL_BASES or (
        qualname.startswith("transformers.") and qualname.endswith("PreTrainedModel")
    )


def _int_value(node: cst.CSTNode) -> int | None:
    """An integer literal's value (``-1`` included); None for anything else."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _int_value(node.expression)
        return None if inner is None else -inner
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    return None


def _last_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript):
        key = target_key(node)
        if key is not None and key.endswith("]"):
            return key.rsplit("[", 1)[1][:-1]
    return None


def _visible_names(index: Index, at: cst.CSTNode) -> list[str]:
    names: list[str] = []
    scope: Scope | None = index.scope(at)
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
