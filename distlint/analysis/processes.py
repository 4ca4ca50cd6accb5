"""How the script trains data-parallel (the mode: Accelerate, Fabric, DDP, torch_xla)
and what counts its processes (``get_world_size()``, ``num_processes``, launch arguments),
however it is wrapped; the global batch held constant across process counts.

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.processes``), computed once per
module."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _DISTRIBUTED,
    Provider,
    _dict_entry,
    _last_name,
    _names_batch_or_accumulation,
    _Spellings,
)
from distlint.analysis.index import (
    Assignment,
    ImportRecord,
    Index,
    Op,
    call_keyword,
    string_value,
    target_key,
)
from distlint.analysis.records import (
    Made,
    Mode,
)

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts


_PROCESS_GROUP = _Spellings.of(K.PROCESS_GROUP_STARTS)


class ConstantShare(NamedTuple):
    """`place = whole // divisor` with `divisor` a module constant `count`."""

    place: str  # `batch_size`
    value: str  # `global_batch_size // num_of_devices`
    divisor: str  # `num_of_devices`
    processes: int  # 8


class Processes(Provider):
    """How the script trains data-parallel (the mode: Accelerate, Fabric, DDP, torch_xla)
    and what counts its processes (``get_world_size()``, ``num_processes``, launch arguments),
    however it is wrapped; the global batch held constant across process counts."""

    def is_dataloader_configuration(self, node: cst.CSTNode | None) -> bool:
        return isinstance(node, cst.Call) and self.index.qualname(node.func) == (
            K.DATALOADER_CONFIGURATION
        )

    @cached_property
    def accelerators(self) -> list[cst.Call]:
        """`Accelerator(...)` constructions of this module."""
        return self.facts.calls_to({K.ACCELERATOR})

    @cached_property
    def creates_accelerator(self) -> bool:
        """An Accelerator is made here, or by a project helper this module calls."""
        if self.accelerators:
            return True
        if not self._imports_may_train:
            return False
        return any(
            Made.ACCELERATOR in self.facts.summaries._external_returns(c, _DISTRIBUTED)
            for c in self.index.calls
        )

    @cached_property
    def _imports_may_train(self) -> bool:
        """Some module this one imports from the project (directly or through others) writes
        the name of a callable that makes an Accelerator or trains data-parallel. When none
        does, no call into them can, and `mode` needs none of their summaries. (A project
        that reads one name's text checks each call by itself instead: `_may_reach`.)"""
        if getattr(self.project, "name_may_write", None) is not None:
            return True
        return self.imports_may_reach(_DISTRIBUTED)

    def imports_may_reach(self, callables: _Spellings, path: str | None = None) -> bool:
        """A call into the project modules this module (or the module ``path``) reaches by
        imports may end in one of ``callables``: a text among them (or its own) writes one of
        their names. The search stops once the answer is yes."""
        path = path if path is not None else self.path
        reached = getattr(self.project, "words_reached", None)
        if reached is None or path is None:
            return self.project is not None
        return callables.written_in(reached(path, callables.words, callables.written_in))

    @cached_property
    def uses_xla(self) -> bool:
        return self.facts.imports_module(K.XLA_MODULE)

    @cached_property
    def xla_spmd(self) -> bool:
        return bool(self.facts.calls_to(K.XLA_SPMD_CALLS)) or self.facts.imports_module(
            K.XLA_SPMD_MODULE
        )

    @cached_property
    def mode(self) -> Mode:
        if self.xla_spmd:
            return Mode.XLA_SPMD
        if self.facts.reach.one_process_only:  # `if world_size > 1: raise ...` before training
            return Mode.NONE
        if self.creates_accelerator:
            return Mode.ACCELERATE
        fabrics = self.facts.calls_to({K.FABRIC})
        if fabrics and not all(self._one_process_fabric(call) for call in fabrics):
            return Mode.FABRIC
        if self.facts.calls_to(K.XLA_MULTIPROCESS):
            return Mode.XLA_MULTIPROCESS
        if any(not self._one_process(c) for c in self.facts.calls_to(K.DDP_CALLS)):
            return Mode.DDP
        # the script hands its model / optimizer to a project class or function that trains
        # them data-parallel (a Trainer that creates the Accelerator and prepares what it gets)
        for call in self._training_calls:
            summary = self.facts.summaries._external_summary(call, _DISTRIBUTED)
            if summary is not None and summary.trains is not None:
                return summary.trains
        return self._mode_by_use()

    def _mode_by_use(self) -> Mode:
        """Where no construction says it: a process group started by a project helper a few
        calls deep; an object nothing resolves that is used as an Accelerator
        (`.prepare(...)` and `.backward(loss)`); a model that is used as a DDP model
        (`model.no_sync()`, or `model.module` in a run that uses torch.distributed)."""
        if self.project is not None and self._group_started_elsewhere:
            for call in self.index.calls:
                found = self.facts.summaries._external_summary(call, _PROCESS_GROUP)
                if found is not None and Made.PROCESS_GROUP in found.makes:
                    return Mode.DDP
        methods = self._role_methods_of_unresolved()
        if any({"prepare", "backward"} <= used for used in methods.values()):
            return Mode.ACCELERATE
        if any("no_sync" in used for used in methods.values()):
            return Mode.DDP
        if self._wrapped_model_used and self._uses_torch_distributed:
            return Mode.DDP
        return Mode.NONE

    def _role_methods_of_unresolved(self) -> dict[str, set[str]]:
        """Objects nothing resolves (by their key) -> the role methods called on them."""
        methods: dict[str, set[str]] = {}
        for call in self.index.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in K.ROLE_METHODS:
                continue
            key = (
                target_key(func.value)
                if isinstance(func.value, (cst.Name, cst.Attribute))
                else None
            )
            if key is None or (func.attr.value != "no_sync") != bool(call.args):
                continue  # `accelerator.prepare(model)`, `loss.backward()` has no argument
            if self._unresolved(func.value):
                methods.setdefault(key, set()).add(func.attr.value)
        return methods

    @cached_property
    def _wrapped_model_used(self) -> bool:
        """`model.module` on a model nothing resolves (`model = build_model(cfg)` from a
        registry): a DistributedDataParallel wrapper, or a DataParallel one, which trains on
        one process; the rest of the run tells them apart (`_uses_torch_distributed`)."""
        for node in self.index.nodes_of(cst.Attribute):
            assert isinstance(node, cst.Attribute)
            if node.attr.value != K.WRAPPED_MODEL_ATTRIBUTE:
                continue
            if isinstance(node.value, (cst.Name, cst.Attribute)) and self._unresolved(node.value):
                return True
        return False

    @cached_property
    def _uses_torch_distributed(self) -> bool:
        """The module calls torch.distributed or reads what a distributed launcher sets for
        each process (`LOCAL_RANK`, `RANK`, `WORLD_SIZE`): a single-process run has neither."""
        index = self.index
        for call in index.calls:
            q = index.qualname(call.func)
            if q is not None and q.startswith("torch.distributed."):
                # `dist.is_initialized()` / `is_available()` only ask: either kind of run does
                if not q.rsplit(".", 1)[1].startswith("is_"):
                    return True
            if f"{q}()" in K.ENV_READERS and call.args:
                if string_value(call.args[0].value) in K.LAUNCHER_ENV:
                    return True
        for node in index.nodes_of(cst.Subscript):
            assert isinstance(node, cst.Subscript)
            if index.qualname(node.value) == "os.environ" and len(node.slice) == 1:
                element = node.slice[0].slice
                if isinstance(element, cst.Index) and string_value(element.value) in K.LAUNCHER_ENV:
                    return True
        return False

    @cached_property
    def _process_group_starts(self) -> list[cst.Call]:
        """Calls of this module that start a process group of several processes: a group
        started with `world_size=1` is one process (a single-GPU run that calls collectives)."""
        return [c for c in self.facts.calls_to(K.PROCESS_GROUP_STARTS) if not self._one_process(c)]

    def _one_process(self, call: cst.Call) -> bool:
        """`init_process_group(..., world_size=1)`: a number 1 written (or a name bound once
        to it), not a launcher's value that is 1 only when nothing sets it."""
        size = call_keyword(call, "world_size")
        return size is not None and self.index.constant_value(size) == 1

    @cached_property
    def _group_started_elsewhere(self) -> bool:
        """A call of this module into the project may start the process group: a module its
        imports reach writes one of the calls that start it (a line scan; nothing parsed). A
        project that reads one name's text checks each call by itself instead (`_may_reach`):
        the search of the whole import closure (every module of diffusers' `src` for one of
        its scripts) would cost more than the calls it could spare."""
        if self.project is None:
            return False
        if getattr(self.project, "name_may_write", None) is not None:
            return True
        return self.imports_may_reach(_PROCESS_GROUP)

    @cached_property
    def _calls_within(self) -> dict[cst.CSTNode, list[cst.Call]]:
        """Each function and class of this module -> the calls written inside it (one walk of
        every call's ancestors, instead of one per function asked)."""
        out: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in self.index.calls:
            for anc in self.index.ancestors(call):
                if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
                    out.setdefault(anc, []).append(call)
        return out

    def starts_process_group(self, fn: cst.CSTNode) -> bool:
        """``fn`` (a function or class of this module) starts a torch.distributed process group
        of several processes, itself or through what it calls: functions and classes of this
        module (asked here, once each), and of other project modules, whose summaries ask the
        same question (a chain of helpers and constructors across any number of modules, each
        link answered once)."""
        known = self._starts
        if fn in known:
            return bool(known[fn])  # None: a cycle, asked again on the way
        known[fn] = None
        known[fn] = found = self._starts_process_group(fn)
        return found

    @cached_property
    def _starts(self) -> dict[cst.CSTNode, bool | None]:
        return {}

    def _starts_process_group(self, fn: cst.CSTNode) -> bool:
        starts = self._process_group_starts
        elsewhere = self._group_started_elsewhere
        if not starts and not elsewhere:
            return False
        inside = self._calls_within.get(fn, ())
        if any(c in starts for c in inside):
            return True
        for call in inside:
            local = self._local_callable(call.func)
            if local is not None:
                if local is not fn and self.starts_process_group(local):
                    return True
            elif elsewhere:
                found = self.facts.summaries._external_summary(call, _PROCESS_GROUP)
                if found is not None and Made.PROCESS_GROUP in found.makes:
                    return True
        return False

    def _local_callable(self, func: cst.BaseExpression) -> cst.CSTNode | None:
        """The function, method or class of this module that a call of ``func`` runs."""
        local = self.index.local_function(func)
        if local is None and isinstance(func, cst.Name):
            for b in self.index.bindings_of(func):
                if b.op is Op.CLASS and isinstance(b.node, cst.ClassDef):
                    return b.node
        return local

    def _unresolved(self, expr: cst.BaseExpression) -> bool:
        """Nothing in the project says what ``expr`` holds: every value it is given is a call
        of something unresolved (not a class or function of the project, not a library the
        knowledge base describes)."""
        index = self.index
        values = [v for v in index.values_of(expr) if v is not None]
        if isinstance(expr, cst.Name) and any(b.op == "param" for b in index.bindings_of(expr)):
            return False  # a parameter: its callers say what it is
        if not values:
            return False
        for value in values:
            if not isinstance(value, cst.Call):
                return False
            q = index.qualname(value.func)
            if q is not None and q.split(".", 1)[0] in K.KNOWN_LIBRARIES:
                return False
            if index.local_function(value.func) is not None:
                return False
            if isinstance(value.func, cst.Name) and any(
                b.op in ("class", "def") for b in index.bindings_of(value.func)
            ):
                return False
            if self.facts.summaries._external_summary(value) is not None:
                return False
        return True

    @cached_property
    def _training_calls(self) -> list[cst.Call]:
        """Calls of project classes / functions of other modules that train data-parallel
        what they are given: they count as preparing their arguments."""
        out: list[cst.Call] = []
        if not self._imports_may_train:
            return out
        for call in self.index.calls:
            if not call.args:
                continue  # given nothing to train
            summary = self.facts.summaries._external_summary(call, _DISTRIBUTED)
            if summary is not None and summary.trains is not None:
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
        if self.accelerators or self.facts.calls_to({K.FABRIC}):
            return bool(self.facts.preparation._own_prepare_calls)
        return bool(
            self.facts.calls_to(K.DDP_WRAPPERS | K.XLA_MULTIPROCESS | {"deepspeed.initialize"})
        )

    def _trains_inside(self, node: cst.CSTNode) -> Mode | None:
        """The mode ``node`` (a function or class of this module) trains in by itself."""
        index = self.index
        inside = index.calls_inside(node)
        quals = {index.qualname(c.func) for c in inside}
        if quals & (K.DDP_WRAPPERS | {"deepspeed.initialize"}):
            return Mode.DDP
        if quals & K.XLA_MULTIPROCESS:
            return Mode.XLA_MULTIPROCESS
        if not any(self.facts.preparation.is_prepare_call(c) for c in inside):
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
        """Tensor / context parallelism, as the script runs by default: only the data-parallel
        size multiplies the batch. An optional path whose size defaults to 1 (`--tp-size 1`,
        `if args.tp > 1: parallelize_module(...)`) is plain data-parallel."""
        for call in self.index.calls:
            q = self.index.qualname(call.func)
            if q in K.MODEL_PARALLEL_CALLS or (q or "").startswith(K.MODEL_PARALLEL_PREFIXES):
                if not self._off_by_default(call, q):
                    return True
        for call in self.accelerators:
            for kw in K.MODEL_PARALLEL_KEYWORDS:
                value = self.accelerator_keyword(call, kw)
                if value is not None and not self._parallel_value_off(value):
                    return True
        return False

    def _parallel_value_off(self, value: cst.BaseExpression, depth: int = 3) -> bool:
        """A `parallelism_config=` value that is None or a config whose sizes are all 1, as the
        script runs by default (names followed to what they are bound to)."""
        if isinstance(value, cst.Name) and value.value == "None":
            return True
        if isinstance(value, cst.Call):
            return self._off_by_default(value, self.index.qualname(value.func))
        if isinstance(value, cst.IfExp):  # `config if args.tp > 1 else None`
            return all(self._parallel_value_off(v, depth) for v in (value.body, value.orelse))
        values = [v for v in self.index.values_of(value) if v is not None] if depth > 0 else []
        return bool(values) and all(self._parallel_value_off(v, depth - 1) for v in values)  # type: ignore[arg-type]

    def _off_by_default(self, call: cst.Call, q: str | None) -> bool:
        """A model-parallel call whose parallel sizes are 1 as the script runs by default."""
        sizes = [a.value for a in call.args if a.keyword and a.keyword.value in K.PARALLEL_SIZES]
        if sizes and all(self._defaults_to_one(v) for v in sizes):
            return True
        if not sizes and q in K.PARALLEL_SIZE_CONFIGS:
            return True  # every size left at 1 (`ParallelismConfig(dp_shard_size=8)`)
        return self._guarded_by_size_above_one(call)

    def _guarded_by_size_above_one(self, node: cst.CSTNode) -> bool:
        """``node`` only runs under `if size > 1:` (or `!= 1`, `>= 2`) with a size of 1 by
        default."""
        index = self.index
        child, parent = node, index.parent(node)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Module)):
            if isinstance(parent, cst.If) and parent.body is child:
                if any(self._size_above_one(t) for t in _conjuncts(parent.test)):
                    return True
            child, parent = parent, index.parent(parent)
        return False

    def _size_above_one(self, test: cst.BaseExpression) -> bool:
        """`size > 1` (`!= 1`, `>= 2`) with a size of 1 by default."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        bound = self.index.constant_value(right)
        above = (isinstance(op, (cst.GreaterThan, cst.NotEqual)) and bound == 1) or (
            isinstance(op, cst.GreaterThanEqual) and bound == 2
        )
        return above and self._defaults_to_one(test.left)

    def _defaults_to_one(self, expr: cst.CSTNode, depth: int = 4) -> bool:
        """``expr`` is 1 as the script runs by default: a constant, an argparse or config-file
        default, or names bound only to such values."""
        if depth <= 0:
            return False
        constant = self.index.constant_value(expr)
        if constant is not None:
            return constant == 1
        from distlint.analysis.configsource import config_value

        found = config_value(self, expr, self.project, self.path)  # argparse defaults too
        if found is not None:
            return bool(found.value == 1)
        values = [v for v in self.index.values_of(expr) if v is not None]
        if not values and isinstance(expr, cst.Attribute):
            values.extend(self._field_defaults(expr.attr.value))  # `args.x` parsed into a dataclass
        return bool(values) and all(self._defaults_to_one(v, depth - 1) for v in values)

    def _field_defaults(self, name: str) -> list[cst.BaseExpression]:
        """The defaults of the class fields ``name`` of this module (`x: int = 1`,
        `x: int = field(default=1)`): what an argument parser filling those classes gives."""
        out: list[cst.BaseExpression] = []
        for node in self.index.nodes_of(cst.AnnAssign):
            assert isinstance(node, cst.AnnAssign)
            target, value = node.target, node.value
            if not isinstance(target, cst.Name) or target.value != name or value is None:
                continue
            if self.index.scope(node).kind != "class":
                continue
            if isinstance(value, cst.Call):
                default = call_keyword(value, "default")
                if default is None:
                    return []
                value = default
            out.append(value)
        return out

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

    def is_process_count(self, node: cst.CSTNode, qualname: str | None) -> bool:
        """Predicate: ``node`` IS the number of processes (or a device count)."""
        if qualname is not None:
            known = _known_process_count(node, qualname)
            if known is not None:
                return known
        if isinstance(node, cst.Attribute) and self._process_count_attribute(node):
            return True
        if isinstance(node, cst.Call) and self._calls_process_count(node, qualname):
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

    def _process_count_attribute(self, node: cst.Attribute) -> bool:
        """`accelerator.num_processes` / `fabric.world_size` on an instance made anywhere
        (a parameter fed an Accelerator, `self.facts.accelerator`, a helper's return value)."""
        if node.attr.value not in K.PROCESS_COUNT_ATTRIBUTES:
            return False
        if self.is_accelerator(node.value):
            return True
        # an object nothing in the project describes: the API attribute
        return not self.traceable(node.value) and not self.traceable(node)

    def _calls_process_count(self, node: cst.Call, qualname: str | None) -> bool:
        """A call of a project function that returns the process count, or of
        `utils.get_world_size()` from a module the project does not contain."""
        if Made.PROCESS_COUNT in self.facts.summaries._external_makes(node):
            return True
        name = self._untraced_import_call(node, qualname)
        return name is not None and name.lower().removeprefix("get_") in K.PROCESS_COUNT_NAMES

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
            if self._imports_from_project(func, b.record):
                return None
        return func.attr.value if isinstance(func, cst.Attribute) else head.value

    def _imports_from_project(self, func: cst.BaseExpression, record: ImportRecord) -> bool:
        """The import ``func`` is called through (``record``) resolves to a project module."""
        if self.project is None or self.path is None:
            return False
        if record.name is None or isinstance(func, cst.Name):
            found = self.project.resolve_import(self.path, record.module, record.level)
        else:
            found = self.project.resolve_from_import(
                self.path, record.module, record.name, record.level
            ) or self.project.resolve_import(self.path, record.module, record.level)
        return found is not None

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
        return isinstance(
            node, cst.Call
        ) and Made.ACCELERATOR in self.facts.summaries._external_returns(node, _DISTRIBUTED)

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
            return self._rounds_a_share(expr, depth)
        if isinstance(expr, cst.Name):
            assigns = index.bindings_of(expr)
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            assigns = index.attribute_assignments(expr)
        else:
            return False
        if self._assigned_a_share(assigns, depth):
            return True
        if isinstance(expr, cst.Name) and all(a.op == "param" for a in assigns):
            return any(
                v is not None and self.divided_by_process_count(v, depth - 1)
                for v in index.values_of(expr)
            )
        return False

    def _rounds_a_share(self, call: cst.Call, depth: int) -> bool:
        """`int(x / world_size)`, `math.ceil(x / world_size)`: a rounded per-device share."""
        if isinstance(call.func, cst.Name) and call.func.value in ("int", "max", "round"):
            return any(self.divided_by_process_count(a.value, depth - 1) for a in call.args)
        return self.index.qualname(call.func) in ("math.ceil", "math.floor") and any(
            self.divided_by_process_count(a.value, depth - 1) for a in call.args
        )

    def _assigned_a_share(self, assigns: Sequence[Assignment], depth: int) -> bool:
        """One of ``assigns`` divides by the process count in place or assigns a share."""
        for a in assigns:
            if a.op in ("/=", "//=") and a.value is not None and self.reads_process_count(a.value):
                return True
            if (
                a.op == "="
                and a.value is not None
                and self.divided_by_process_count(a.value, depth - 1)
            ):
                return True
        return False

    @cached_property
    def global_batch_held_constant(self) -> bool:
        """The per-device batch or the accumulation steps are the world-size share of a global
        value: the batch per optimizer step is the same on 1 or N processes. Judged on what the
        loaders and the Accelerator are given, not on bookkeeping elsewhere in the file."""
        if any(self.divided_by_process_count(c) for c in self._batch_size_arguments()):
            return True
        batch = self.facts.data.batch
        if batch.held_constant_by_helpers or batch.shares_held(self._launch_counts):
            return True
        if self._imported_shares_held():
            return True
        # A place that holds the per-device batch or the accumulation steps, whose use may live
        # in another module (`args.batch_size //= world_size`): its name is what says so, and its
        # own value must be the world-size share (bookkeeping such as
        # `steps_per_epoch = len(ds) // (bs * num_processes)` is not).
        for _name, assigns in self._batch_places():
            for a in assigns:
                if a.op in ("/=", "//=") and a.value is not None:
                    if self.reads_process_count(a.value):
                        return True
                elif a.op == "=" and self.divided_by_process_count(a.value, 2):
                    return True
        return False

    def _batch_size_arguments(self) -> list[cst.BaseExpression]:
        """What calls are given as a batch size: `batch_size=` and friends by keyword, and a
        loader's second positional argument."""
        candidates: list[cst.BaseExpression] = []
        for call in self.index.calls:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in K.BATCH_SIZE_KEYWORDS:
                    candidates.append(arg.value)
        for loader in self.facts.data.loaders:
            positional = Index.argument(loader, "batch_size", 1)
            if positional is not None and positional.keyword is None:
                candidates.append(positional.value)
        return candidates

    def _batch_places(self) -> Iterator[tuple[str, Sequence[Any]]]:
        """(name, its assignments) of each place named for the batch or the accumulation."""
        for scope in self.index.scopes:
            for name, assigns in scope.bindings.items():
                if _names_batch_or_accumulation(name):
                    yield name, assigns
        for key, assigns in self.index.attr_assignments.items():
            last = key.split("@")[0].rsplit(".", 1)[-1].rsplit("[", 1)[-1]
            if _names_batch_or_accumulation(last):
                yield key.split("@")[0], assigns

    @cached_property
    def constant_share(self) -> ConstantShare | None:
        """A batch or accumulation value that is a share of a global batch by a named constant
        count (`batch_size = global_batch_size // num_of_devices` with `num_of_devices = 8`),
        here or in a hyper-parameter module this one imports: the global batch is what the
        author meant on that many processes only. (Dividing by another batch,
        `global_batch // micro_batch`, is an accumulation count, not a share.)"""
        for name, assigns in self._batch_places():
            for a in assigns:
                found = self._share_by_constant(name, a.value) if a.op == "=" else None
                if found is not None:
                    return found
        for path, (_counts, batchy) in self._imported_modules().items():
            if batchy:
                shared: ConstantShare | None
                shared = self._asked(("constant-share", path), path, self._constant_share_of)
                if shared is not None:
                    return shared
        return None

    @staticmethod
    def _constant_share_of(other: Facts) -> ConstantShare | None:
        return other.processes.constant_share

    def _asked(self, key: tuple[Any, ...], path: str, question: Callable[..., Any]) -> Any:
        """``question(facts of module path)``: an answer of the project (memoised with what
        it consulted, see `Project.answer`), None when the module has no facts."""

        def compute() -> Any:
            other = self.facts._facts_of(path)
            return question(other) if other is not None else None

        answer = getattr(self.project, "answer", None)
        return answer(key, compute) if answer is not None else compute()

    def _share_by_constant(
        self, name: str, value: cst.BaseExpression | None
    ) -> ConstantShare | None:
        while isinstance(value, cst.Call) and len(value.args) == 1:  # `int(a / b)`
            value = value.args[0].value
        if not isinstance(value, cst.BinaryOperation) or not isinstance(
            value.operator, (cst.Divide, cst.FloorDivide)
        ):
            return None
        left, right = value.left, value.right
        whole = _last_name(left) if isinstance(left, (cst.Name, cst.Attribute)) else None
        if whole is None or not _names_batch_or_accumulation(whole):
            return None
        if not isinstance(right, cst.Name) or _names_batch_or_accumulation(right.value):
            return None
        count = self.index.constant_value(right)
        if type(count) is not int or count < 2:
            return None
        text = self.index.module.code_for_node(value).strip()
        return ConstantShare(name, text, right.value, count)

    def _imported_shares_held(self) -> bool:
        """A module this one imports its batch sizes from (a hyper-parameter module) sets one
        to a world-size share: `batch_size = global_batch_size // (devices * num_nodes)`, with
        the process count or with names this module gives its launcher (`Fabric(devices=devices)`)."""
        for path, (counts, batchy) in self._imported_modules().items():
            if not batchy:
                continue
            names = frozenset(counts)
            key = ("holds-share", path, tuple(sorted(names)))
            if self._asked(key, path, lambda other, n=names: other.processes.holds_share(n)):
                return True
        return False

    def _imported_modules(self) -> dict[str, tuple[set[str], bool]]:
        """The project modules this one imports names from: path -> (the names it gives its
        launcher as the device count, whether it imports a batch or accumulation value)."""
        if self.project is None or self.path is None:
            return {}
        launched = {
            i for place in self._launch_counts if isinstance(place, frozenset) for i in place
        }
        modules: dict[str, tuple[set[str], bool]] = {}
        for assigns in self.index.module_scope.bindings.values():
            for b in assigns:
                record = b.record
                if b.op != "import" or record is None or record.name is None:
                    continue
                path = self.project.resolve_import(self.path, record.module, record.level)
                if path is None:
                    continue
                counts, batchy = modules.get(path, (set(), False))
                if id(b) in launched:
                    counts.add(record.name)
                modules[path] = (counts, batchy or _names_batch_or_accumulation(record.name))
        return modules

    def holds_share(self, counts: frozenset[str]) -> bool:
        """A module-level batch or accumulation value of this module is a share of the process
        count, or of one of the module-level names ``counts`` (which an importer gives its
        launcher as the number of devices)."""
        index = self.index
        scope = index.module_scope

        def is_count(node: cst.CSTNode, q: str | None) -> bool:
            if isinstance(node, cst.Name) and node.value in counts:
                if any(b.scope is scope for b in index.bindings_of(node)):
                    return True
            return self.is_process_count(node, q)

        for name, assigns in scope.bindings.items():
            if not _names_batch_or_accumulation(name):
                continue
            for a in assigns:
                value = a.value
                if a.op != "=" or value is None:
                    continue
                while isinstance(value, cst.Call) and len(value.args) == 1:
                    value = value.args[0].value
                if isinstance(value, cst.BinaryOperation) and isinstance(
                    value.operator, (cst.Divide, cst.FloorDivide)
                ):
                    if self.flow.reaches(value.right, is_count, key=("count", counts), depth=6):
                        return True
        return False


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `a and b and c` (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _known_process_count(node: cst.CSTNode, qualname: str) -> bool | None:
    """What ``qualname`` says of ``node``: True for a process or device count by name
    (`dist.get_world_size`, a device mesh's `.size()`), the variable read for
    `os.environ.get(...)`, None when the name decides nothing."""
    if qualname in K.PROCESS_COUNT or qualname in K.DEVICE_COUNTS:
        return True
    if qualname.startswith(K.DEVICE_MESH) and qualname.endswith(".size()"):
        return True
    if qualname in K.ENV_READERS and isinstance(node, cst.Call) and node.args:
        return string_value(node.args[0].value) == K.ENV_WORLD_SIZE
    return None
