"""DataLoaders: where each iterated loader was made and whether it is sharded across
processes (prepared, a ``DistributedSampler``, a dataset split by rank).

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.data``), computed once per
module."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _LOADER_SPELLINGS,
    Provider,
    _distributed_sampler,
    _last_name,
    _whole_dataset_sampler,
)
from distlint.analysis.index import Op
from distlint.analysis.records import (
    Made,
    Origin,
)

if TYPE_CHECKING:
    from distlint.analysis.batch import BatchFlow


class Loaders(Provider):
    """DataLoaders: where each iterated loader was made and whether it is sharded across
    processes (prepared, a ``DistributedSampler``, a dataset split by rank)."""

    @cached_property
    def loaders(self) -> list[cst.Call]:
        """The calls that make a DataLoader: of a DataLoader class, of a class of this module
        derived from one (yolov5's `InfiniteDataLoader`), or of a name bound once to a choice
        between such classes (`loader = DataLoader if weighted else InfiniteDataLoader`)."""
        derived = self._derived_loader_classes
        return [c for c in self.index.calls if self._makes_loader(c.func, derived, 0)]

    @cached_property
    def _derived_loader_classes(self) -> frozenset[int]:
        """The classes of this module that derive from a DataLoader, directly or through
        each other (ids of their ClassDefs)."""
        found: set[int] = set()
        classes = [c for group in self.index.classes.values() for c in group]
        grown = True
        while grown:
            grown = False
            for cls in classes:
                if id(cls) not in found and any(
                    self._makes_loader(base.value, frozenset(found), 0) for base in cls.bases
                ):
                    found.add(id(cls))
                    grown = True
        return frozenset(found)

    def _makes_loader(self, func: cst.BaseExpression, derived: frozenset[int], depth: int) -> bool:
        if self.index.qualname(func) in K.DATALOADERS:
            return True
        if not isinstance(func, cst.Name) or depth > 2:
            return False
        bindings = self.index.bindings_of(func)
        if len(bindings) != 1:
            return False
        bound = bindings[0]
        if isinstance(bound.node, cst.ClassDef):
            return id(bound.node) in derived
        if bound.op is Op.IMPORT:
            return self._imports_derived_loader(bound.record)
        choice = bound.value
        return isinstance(choice, cst.IfExp) and all(
            self._makes_loader(side, derived, depth + 1) for side in (choice.body, choice.orelse)
        )

    def derives_loader(self, name: str) -> bool:
        """``name`` is a class of this module derived from a DataLoader (or a re-export of
        one)."""
        for b in self.index.module_scope.bindings.get(name, ()):
            if isinstance(b.node, cst.ClassDef) and id(b.node) in self._derived_loader_classes:
                return True
            if b.op is Op.IMPORT:
                return self._imports_derived_loader(b.record)
        return False

    def _imports_derived_loader(self, record: Any) -> bool:
        """An imported name is a project class derived from a DataLoader (yolov5's
        `from ..dataloaders import InfiniteDataLoader`); its module is parsed only when its
        text can spell a DataLoader."""
        project, path = self.project, self.path
        if project is None or path is None or record is None or record.name is None:
            return False
        target = project.resolve_import(path, record.module, record.level)
        only_functions = getattr(project, "defines_only_functions", None)
        if target is None or (only_functions is not None and only_functions(target, record.name)):
            return False  # a helper function: not a class (its module is not parsed for it)
        if not self.facts.summaries._may_reach(_LOADER_SPELLINGS, target, record.name):
            return False
        key = ("derives-loader", target, record.name)

        def compute() -> bool:
            other = self.facts._facts_of(target)
            return other is not None and other.data.derives_loader(record.name)

        answer = getattr(project, "answer", None)
        if answer is not None:  # False in a cycle between modules: not known to be one
            return bool(answer(key, compute, False))
        if key not in project.memo:
            project.memo[key] = False  # a cycle between modules: not known to be one
            project.memo[key] = compute()
        return bool(project.memo[key])

    @cached_property
    def batch(self) -> BatchFlow:
        """The batch through helpers (analysis/batch.py)."""
        from distlint.analysis.batch import BatchFlow

        return BatchFlow(self.facts)

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
                assigns: Sequence[Any] = _past_none_tests(index, expr, index.bindings_of(expr))
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
        if self.facts.preparation.is_prepare_call(call):
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
        summary = self.facts.summaries._external_summary(call)
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
                    if isinstance(
                        b.node, cst.ClassDef
                    ) and self.facts.models.is_iterable_dataset_class(b.node):
                        return True
        return False

    def data_sharded_by_rank(self, expr: cst.CSTNode) -> bool:
        """Something flowing into ``expr`` splits it by process (also in another module)."""
        return self.flow.reaches(expr, self.is_sharded_by_rank, key="sharded", depth=6)

    def is_sharded_by_rank(self, node: cst.CSTNode, qualname: str | None) -> bool:
        """Predicate: ``node`` splits data by process (a rank, the world size, a sharder)."""
        if self.facts.processes.is_process_count(node, qualname):
            return True
        if qualname is not None:
            if qualname in K.RANK_VALUES or qualname.rstrip("()") in K.DATASET_SHARDERS:
                return True
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in K.SHARD_METHODS:
                return True
            if Made.SHARDED in self.facts.summaries._external_makes(node):
                return True
        if isinstance(node, (cst.Name, cst.Attribute)):
            last = _last_name(node)
            if last is not None and last.lower() in K.RANK_NAMES:
                return True
            if isinstance(node, cst.Attribute) and last in ("process_index", "global_rank"):
                return True
        return False


def _past_none_tests(index: Any, use: cst.Name, bindings: Sequence[Any]) -> Sequence[Any]:
    """Drop the bindings that reach ``use`` only where the name is None: before an
    `if val is None: ... else: val = setup(val)` (or `if val is not None: val = setup(val)`) that
    ``use`` follows, the earlier value gets past the test only as None (Samba's validation loader,
    set up by Fabric only when there is one)."""
    name, at = use.value, index.order(use)
    cut = -1
    for b in bindings:
        for anc in index.ancestors(b.node):
            if not isinstance(anc, cst.If) or index.order(anc) > at or index.is_inside(use, anc):
                continue
            branch = _not_none_branch(anc, name)
            if branch is not None and _block_of(index, b.node) is branch:
                cut = max(cut, index.order(anc))  # bound on every path of that branch
    if cut < 0:
        return bindings
    return [b for b in bindings if b.order >= cut]


def _block_of(index: Any, node: cst.CSTNode) -> cst.CSTNode | None:
    """The innermost block (indented body) that holds ``node``."""
    return next((a for a in index.ancestors(node) if isinstance(a, cst.IndentedBlock)), None)


def _not_none_branch(node: cst.If, name: str) -> cst.CSTNode | None:
    """The block of ``node`` where ``name`` is not None: the `else` of `if name is None:`,
    the body of `if name is not None:`."""
    test = node.test
    if not (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        return None
    operator = test.comparisons[0].operator
    if isinstance(operator, cst.IsNot):
        return node.body
    if isinstance(operator, cst.Is) and isinstance(node.orelse, cst.Else):
        return node.orelse.body
    return None
