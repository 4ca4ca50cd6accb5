"""What each function and class of the module returns and does, for its callers in this
and other modules: how the facts compose across the project's modules.

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.summaries``), computed once per
module."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Union

import libcst as cst

from distlint.analysis.common import (
    _IN_PROGRESS,
    Provider,
    _AnyOf,
    _node_in,
    _param_reached,
    _Spellings,
)
from distlint.analysis.index import (
    target_key,
)
from distlint.analysis.records import (
    FactoryLR,
    Made,
    MethodsOf,
    Optimizer,
    Summary,
)

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

_Needs = Union[_Spellings, _AnyOf]
# a class's header, decorators first: `class Name(Base):`, up to its colon
_CLASS_HEADER = re.compile(r"\s*(?:@[^\n]*\n\s*)*class\b[^:]*:")


# A pure function of the class's code: memoised, since every lint of a script asks it again
# for the same classes (the language server re-lints at each pause in typing; a diffusers
# model class is thousands of lines, and the search was a quarter of a re-lint).
@lru_cache(maxsize=64)
def _method_code(code: str, method: str) -> str:
    """The code of method ``method`` in the code of a class (strings blanked): from its
    `def` to the next line indented no deeper; the class's body when it has no such method."""
    found = re.search(rf"^([ \t]+)(?:async[ \t]+)?def[ \t]+{re.escape(method)}\b", code, re.M)
    if found is None:
        header = _CLASS_HEADER.match(code)
        return code[header.end() :] if header is not None else code
    indent = len(found.group(1))
    end = len(code)
    for line in re.finditer(r"\n([ \t]*)[^\s)\]}]", code[found.end() :]):  # (`):` ends a header)
        if len(line.group(1)) <= indent:
            end = found.end() + line.start()
            break
    return code[found.start() : end]


class Summaries(Provider):
    """What each function and class of the module returns and does, for its callers in this
    and other modules: how the facts compose across the project's modules."""

    def __init__(self, facts: Facts) -> None:
        super().__init__(facts)
        self._summaries: dict[cst.CSTNode, Summary | object] = {}
        # Per name of this module: the project module (and the name there) it is imported
        # from; per (needs, module, name): the gate `_may_reach`. Every fact asks them again
        # for the same calls (the mode, the seeding, the optimizers, the batch: several times
        # per call). Like the other answers these Facts hold, what they consulted is part of
        # the Facts' own record (`Project.handed_out`), so a frame that uses them depends on it.
        # (keyed by the name's id: a node's own hash and equality are Python calls, and every
        # node asked lives in this module's tree, as long as these Facts)
        self._imported: dict[int, tuple[str, str] | None] = {}
        self._modules: dict[int, str | None] = {}
        self._reaches: dict[tuple[Any, str, str], bool] = {}
        self._classes: dict[tuple[str, str], bool] = {}  # `_class_only`

    def summary(self, fn: cst.CSTNode) -> Summary:
        """What a function of this module returns and does (a class: what its instances are)."""
        found = self._summaries.get(fn)
        if isinstance(found, Summary):
            return found
        if found is _IN_PROGRESS:
            cycle = getattr(self.project, "order_dependent", None)
            if cycle is not None:  # what is computed now depends on which was asked first
                cycle(self.facts)
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
                target = self._record_target(b.record)
                return self._summary_in(*target) if target is not None else None
        return None

    def _summarise(self, fn: cst.CSTNode) -> Summary:
        index = self.index
        summary = Summary()
        summary.trained_there = self.facts.processes.trains_data_parallel
        summary.trains = self.facts.processes._trains_inside(fn) if summary.trained_there else None
        summary.batch = self.facts.data.batch._local_use(fn)
        if self.facts.processes.starts_process_group(fn):
            summary.makes.add(Made.PROCESS_GROUP)
        if self.facts.optimization.instantiates_component(fn):
            summary.makes.add(Made.CONFIGURED)
        if isinstance(fn, cst.ClassDef):
            if self.facts.optimization._is_optimizer_class_def(fn, set()):
                summary.makes.add(Made.OPTIMIZER)
            else:
                summary.lrs = self._class_lrs(fn)
            if self.path is not None and index.scope(fn).kind == "module":
                summary.method = MethodsOf(self.path, fn.name.value)
            return summary
        returns = [r.value for r in index.returns.get(fn, ()) if r.value is not None]
        for value in returns:
            if self.facts.processes.reads_process_count(value):
                summary.makes.add(Made.PROCESS_COUNT)
            if self.facts.processes.is_accelerator(value):
                summary.makes.add(Made.ACCELERATOR)
            if self.facts.data.data_sharded_by_rank(value):
                summary.makes.add(Made.SHARDED)
        self._returned_optimizers(fn, returns, summary)
        summary.seeds = self.facts.seeding.seeds_in(fn)
        summary.loaders = self.facts.data._summarise_loaders(fn)
        return summary

    def _returned_optimizers(
        self, fn: cst.CSTNode, returns: list[cst.BaseExpression], summary: Summary
    ) -> None:
        """Function ``fn`` returns an optimizer it builds: record it, with the LR of each."""
        inner = self.facts.optimization._optimizers_in(fn)
        if not inner or not any(self.flow.reaches(v, _node_in(inner), depth=6) for v in returns):
            return
        summary.makes.add(Made.OPTIMIZER)
        returned = [
            o
            for o in inner
            if len(inner) == 1 or any(self.flow.reaches(v, _node_in([o]), depth=6) for v in returns)
        ]
        method = self.index.scope(fn).kind == "class"
        for opt in returned:
            lr = self._factory_lr(fn, opt)
            if method and lr.param is None and not lr.scaled and not self._constant_lr(opt):
                # `self.facts.args.lr` in a method: given to the constructor, not to the call
                continue
            if all((lr.param, lr.scaled) != (o.param, o.scaled) for o in summary.lrs):
                summary.lrs.append(lr)  # one per LR: an if/elif choosing the class is one
        if method and not summary.lrs:
            summary.makes.discard(Made.OPTIMIZER)  # what its LR is, the call cannot say

    def method_of(self, cls: str, name: str) -> Summary | None:
        """The summary of method ``name`` of the module-level class ``cls`` (its last
        definition, the one ``summary_of`` answers for)."""
        for b in reversed(self.index.module_scope.bindings.get(cls, ())):
            if b.op in ("def", "class"):
                node = b.node
                return self._method_summary(node, name) if isinstance(node, cst.ClassDef) else None
        return None

    def _method_summary(self, cls: cst.ClassDef, name: str) -> Summary | None:
        for st in cls.body.body:
            if isinstance(st, cst.FunctionDef) and st.name.value == name:
                return self.summary(st)
        return None

    def _class_lrs(self, cls: cst.ClassDef) -> list[FactoryLR]:
        """The LRs of the optimizers a class's methods build, as its constructor's parameters
        or constants (a `Trainer(model, args)` building AdamW(lr=args.lr) in `__init__` or in
        a method reading `self.facts.lr`). An LR from a method's own parameter is not the
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
        for opt in self.facts.optimization._optimizers_in(cls):
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
        if self.facts.processes.reads_process_count(opt.lr):
            return FactoryLR(None, True, where)
        param = _param_reached(self.index, fn, opt.lr)
        if opt.lr_key is not None:
            # a factory of a factory: `create_optimizer(args, model)` reads `args.lr`
            if self.facts.processes.key_reads_process_count(opt.lr_key):
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
        found = positions_of(self.index.module, [node], self.index.source_map).get(node)
        return f"{shown}:{found.start.line}" if found is not None else shown

    # ------------------------------------------------------------------ across modules
    def _external_makes(self, call: cst.Call, needs: _Needs | None = None) -> set[Made]:
        summary = self._external_summary(call, needs)
        return summary.makes if summary is not None else set()

    def _external_returns(self, call: cst.Call, needs: _Needs) -> set[Made]:
        """`_external_makes` for what only a function's return makes (an Accelerator): a
        class's summary never holds it, so a class of another module that ``call`` makes
        is not summarised for it (see `_class_only`)."""
        summary = self._external_summary(call, needs, functions=True)
        return summary.makes if summary is not None else set()

    def _external_summary(
        self, call: cst.Call, needs: _Needs | None = None, functions: bool = False
    ) -> Summary | None:
        """The summary of the project function or class ``call`` calls. ``needs``: only what
        a call of one of these callables decides is asked, so a module whose imports reach none
        of their names is not parsed (its summary could not hold them). ``functions``: only a
        function's summary is asked (None for a class's)."""
        if self.project is None or self.path is None:
            return None
        func = call.func
        # (exact type tests: `isinstance` on LibCST's classes is slow to fail)
        if type(func) is cst.Name:
            return self._imported_summary(func, needs, functions)
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            # `utils.get_world_size()` with `import utils` / `from pkg import utils`
            path = self._imported_module(func.value)
            if path is not None:
                if needs is not None and not self._may_reach(needs, path, func.attr.value):
                    return None
                if functions and self._class_only(path, func.attr.value):
                    return None
                return self._summary_in(path, func.attr.value, through_attribute=True)
            # `env.size()` on `env = DistEnv()`, a class of another module
            return self._owner_method_summary(call, func.value, func.attr.value, needs)
        return None

    def _imported_module(self, name: cst.Name) -> str | None:
        """The path of the project module ``name`` is bound to by an import, if any."""
        known = self._modules
        key = id(name)
        if key in known:
            return known[key]
        found = known[key] = self._find_imported_module(name)
        return found

    def _find_imported_module(self, name: cst.Name) -> str | None:
        assert self.project is not None and self.path is not None
        for b in self.index.bindings_of(name):
            if b.op == "import" and b.record is not None:
                record = b.record
                if record.name is None:
                    path = self.project.resolve_import(self.path, record.module, 0)
                else:
                    path = self.project.resolve_from_import(
                        self.path, record.module, record.name, record.level
                    )
                if path is not None:
                    return path
        return None

    def _owner_method_summary(
        self, call: cst.Call, owner: cst.Name, method: str, needs: _Needs | None
    ) -> Summary | None:
        """The summary of method ``method`` of the project class whose instance ``owner``
        holds (``owner = DistEnv()``)."""
        made_by = [v for v in self.index.values_of(owner) if type(v) is cst.Call and v is not call]
        if not made_by:
            return None  # (most owners: a parameter, `self`, a module)
        busy = self.facts.__dict__.setdefault("_owner_lookups", set())
        if id(call) in busy:
            return None  # `a = b.m(); b = a.n()`: no owner to find
        busy.add(id(call))
        try:
            for value in made_by:
                assert isinstance(value, cst.Call)
                # what is asked of the method: the class's code stands for its methods'
                asked = needs._replace(method=method) if isinstance(needs, _AnyOf) else needs
                made = self._external_summary(value, asked)
                if made is not None and made.method is not None:
                    return self._methods_summary(made.method, method)
        finally:
            busy.discard(id(call))
        return None

    def _methods_summary(self, methods: MethodsOf, name: str) -> Summary | None:
        """The summary of method ``name`` of the class ``methods`` names. Its module was
        reached (and counted) when the class's summary was made: it is not a dependency of
        this lint again, and is parsed again only if it was let go since."""
        if self.project is None:
            return None

        def compute() -> Summary | None:
            other = self.facts._facts_of(methods.path, quiet=True)
            return other.summaries.method_of(methods.name, name) if other is not None else None

        answer = getattr(self.project, "answer", None)
        if answer is None:
            return compute()
        found: Summary | None = answer(("method", methods.path, methods.name, name), compute)
        return found

    def _may_reach(self, needs: _Needs, path: str, name: str) -> bool:
        """The summary of ``name`` in module ``path`` may hold what ``needs`` names: the
        definition of ``name``, with what it uses, followed across modules, writes it (a line
        scan; nothing parsed), and its own code has the shape the spellings ask for."""
        key = (needs, path, name)
        found = self._reaches.get(key)
        if found is None:
            found = self._reaches[key] = self._may_reach_any(needs, path, name)
        return found

    def _may_reach_any(self, needs: _Needs, path: str, name: str) -> bool:
        if isinstance(needs, _AnyOf):
            return any(
                self._may_reach_shaped(option, path, name, needs.method) for option in needs.options
            )
        return self._may_reach_shaped(needs, path, name, None)

    def _may_reach_shaped(
        self, needs: _Spellings, path: str, name: str, method: str | None
    ) -> bool:
        """`_may_reach` for one set of spellings; ``method``: a method of the class ``name``
        is asked, so its code decides the shape (the class's body when the class does not
        define it: it may inherit it)."""
        if needs.shape is not None:
            own = getattr(self.project, "own_code", None)
            code = own(path, name) if own is not None else None
            if code is not None and method is not None:
                code = _method_code(code, method)
            if code is not None and not needs.shape(code):
                return False
            if not needs.pairs and not needs.folded:
                return True
        may_write = getattr(self.project, "name_may_write", None)
        if may_write is None:
            return self.facts.imports_may_reach(needs, path)
        # (what the name's definition reaches is part of what its module's imports reach:
        # the module-wide search would answer yes whenever this does, and costs a search of
        # the import closure per module asked, quadratic along a chain of helpers)
        return bool(may_write(path, name, needs))

    def _imported_summary(
        self, name: cst.Name, needs: _Needs | None = None, functions: bool = False
    ) -> Summary | None:
        if self.project is None or self.path is None:
            return None
        known = self._imported
        key = id(name)
        if key in known:
            target = known[key]
        else:
            target = known[key] = self._import_target(name)
        if target is None:
            return None
        path, member = target
        if needs is not None and not self._may_reach(needs, path, member):
            return None
        if functions and self._class_only(path, member):
            return None
        return self._summary_in(path, member)

    def _class_only(self, path: str, name: str) -> bool:
        """``name`` of project module ``path`` is, its re-exports followed, a class (read from
        the outlines, nothing parsed). The modules on the way count as reached, as the parse
        for its summary would have."""
        key = (path, name)
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = self._find_class(path, name)
        return found

    def _find_class(self, path: str, name: str) -> bool:
        reexport = getattr(self.project, "reexport_of", None)
        classes = getattr(self.project, "defines_only_classes", None)
        if reexport is None or classes is None:
            return False
        seen: set[tuple[str, str]] = set()
        while (path, name) not in seen:
            seen.add((path, name))
            forwarded = reexport(path, name)
            if forwarded is None:
                return bool(classes(path, name))
            path, name = forwarded
        return False

    def _import_target(self, name: cst.Name) -> tuple[str, str] | None:
        """The project module and the name in it that ``name`` is imported as (its first
        `from ... import` binding decides)."""
        for b in self.index.bindings_of(name):
            record = b.record
            if b.op == "import" and record is not None and record.name is not None:
                return self._record_target(record)
        return None

    def _record_target(self, record: Any) -> tuple[str, str] | None:
        """The project module and the name in it that a `from ... import` record binds (None:
        a plain import, or a module outside the project)."""
        if self.project is None or self.path is None or record.name is None:
            return None
        path = self.project.resolve_import(self.path, record.module, record.level)
        return (path, record.name) if path is not None else None

    def _summary_in(self, path: str, name: str, through_attribute: bool = False) -> Summary | None:
        """The summary of ``name`` in project module ``path``, once per project (with what
        it consulted; on disk with the project's answer store). In a cycle between modules:
        None, or (``through_attribute``: `module.name(...)`) what the module's own guard
        answers."""
        assert self.project is not None

        def compute() -> Summary | None:
            reexport = getattr(self.project, "reexport_of", None)
            forwarded = reexport(path, name) if reexport is not None else None
            if forwarded is not None:  # (what `summary_of` would follow, without the parse)
                return self._summary_in(*forwarded)
            other = self.facts._facts_of(path)
            return other.summary_of(name) if other is not None else None

        answer = getattr(self.project, "answer", None)
        if answer is not None:
            found: Any = answer(("summary", path, name), compute, _IN_PROGRESS)
            if found is _IN_PROGRESS:
                return compute() if through_attribute else None
            return found  # type: ignore[no-any-return]
        key = ("summary", path, name)
        memo = self.project.memo
        if key in memo:
            known = memo[key]
            return None if known is _IN_PROGRESS else known
        memo[key] = _IN_PROGRESS  # a cycle between modules: unknown
        memo[key] = result = compute()
        return result
