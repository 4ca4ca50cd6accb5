"""Training and evaluation loops of a module (``Facts.loops``).

A training loop is a ``for`` / ``while`` whose body runs a backward pass, directly or through a
function of this module it calls; an evaluation loop iterates a DataLoader and runs none. The
epoch loop of a loop is the loop that repeats it: the enclosing loop of its function, or a loop
around a call of that function in this module.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import child_list, walk
from distlint.analysis.records import Origin

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def body_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes ``node`` runs itself (nested functions and classes left out)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in reversed(child_list(current)) if not isinstance(c, _NESTED))


class Loops:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index = facts.index

    # ------------------------------------------------------------------ training
    @cached_property
    def backward_calls(self) -> list[cst.Call]:
        """Every `<x>.backward(...)` / `<x>.optimizer_step(...)` call of the module."""
        return [
            c
            for c in self.index.calls
            if isinstance(c.func, cst.Attribute) and c.func.attr.value in K.BACKWARD_METHODS
        ]

    @cached_property
    def _running_backward(self) -> set[int]:
        """The ids of the loops whose body holds a backward call (`loss.backward()`,
        `accelerator.backward(loss)`) at any depth: found from those calls up, once, rather
        than by a walk of every loop's body (a nested loop's walked again for each)."""
        found: set[int] = set()
        for call in self.backward_calls:
            inner: cst.CSTNode = call
            for outer in self.index.ancestors(call):
                if isinstance(outer, (cst.For, cst.While)) and outer.body is inner:
                    found.add(id(outer))
                inner = outer
        return found

    def runs_backward_directly(self, loop: cst.For | cst.While) -> bool:
        """The loop's body runs a backward pass itself, not through a helper of this module
        (:meth:`trains` follows helpers)."""
        return id(loop) in self._running_backward

    def _functions_calling(self, methods: frozenset[str]) -> set[cst.CSTNode]:
        """Functions of this module that call `<x>.<one of methods>(...)`, or call one that does."""
        memo: dict[frozenset[str], set[cst.CSTNode]] = self.__dict__.setdefault("_calling", {})
        if methods in memo:
            return memo[methods]
        index = self.index
        found = {
            index.enclosing_function(c)
            for c in index.calls
            if isinstance(c.func, cst.Attribute) and c.func.attr.value in methods
        } - {None}
        changed = True
        while changed:  # callers of such functions call them too (a step helper)
            changed = False
            for fn in list(found):
                assert isinstance(fn, cst.FunctionDef)
                for call in index.callers(fn):
                    caller = index.enclosing_function(call)
                    if caller is not None and caller not in found:
                        found.add(caller)
                        changed = True
        memo[methods] = found  # type: ignore[assignment]
        return memo[methods]

    def calls_method(self, node: cst.CSTNode, methods: frozenset[str]) -> bool:
        """``node`` (a loop body, a block) calls `<x>.<one of methods>(...)`, itself or through
        a function of this module it calls."""
        functions = self._functions_calling(methods)
        index = self.index
        # (the index knows the calls of the module's nodes; a node it does not know is walked)
        calls = index.calls_run_by(node) if index.order(node) else body_nodes(node)
        for n in calls:
            if isinstance(n, cst.Call):
                if isinstance(n.func, cst.Attribute) and n.func.attr.value in methods:
                    return True
                fn = index.local_function(n.func)
                if fn is not None and fn in functions:
                    return True
        return False

    def runs_backward_in_helper(self, call: cst.Call) -> bool:
        """``call`` calls a function of this module that runs a backward pass (`loss =
        train_step(batch)`)."""
        fn = self.index.local_function(call.func)
        return fn is not None and fn in self._functions_calling(K.BACKWARD_METHODS)

    def trains(self, node: cst.CSTNode) -> bool:
        """``node`` (a loop body, a block) runs a backward pass, itself or through a function of
        this module it calls."""
        return bool(self.backward_calls) and self.calls_method(node, K.BACKWARD_METHODS)

    def steps(self, node: cst.CSTNode) -> bool:
        """``node`` takes an optimizer step (`optimizer.step()`), itself or through a helper."""
        return self.calls_method(node, K.STEP_METHODS)

    @cached_property
    def training_loops(self) -> list[cst.For | cst.While]:
        """Loops that train, innermost first excluded: only those with no training loop inside
        (the micro-batch loop, not the epoch loop around it)."""
        trains = [
            loop
            for loop in self.index.loops
            if isinstance(loop, (cst.For, cst.While)) and self.trains(loop.body)
        ]
        index = self.index
        inner = []
        for loop in trains:
            # the epoch loop around `train_one_epoch(...)`, whose loop trains, is not one
            called = [
                fn
                for n in body_nodes(loop.body)
                if isinstance(n, cst.Call) and (fn := index.local_function(n.func)) is not None
            ]
            if not any(
                other is not loop
                and (
                    index.is_inside(other, loop)
                    or any(fn is not None and index.is_inside(other, fn) for fn in called)
                )
                for other in trains
            ):
                inner.append(loop)
        return inner

    # ------------------------------------------------------------------ epochs
    def epoch_loop(self, loop: cst.CSTNode) -> cst.For | cst.While | None:
        """The loop that repeats ``loop``: the nearest enclosing loop of its function, else a loop
        of this module around a call of its function (`for epoch ...: train_one_epoch(...)`)."""
        index = self.index
        function = index.enclosing_function(loop)
        for ancestor in index.ancestors(loop):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
        if function is None:
            return None
        for call in index.callers(function):
            outer = self.epoch_loop_of_call(call)
            if outer is not None:
                return outer
        return None

    def epoch_loop_of_call(self, call: cst.CSTNode) -> cst.For | cst.While | None:
        index = self.index
        function = index.enclosing_function(call)
        for ancestor in index.ancestors(call):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
        return None

    # ------------------------------------------------------------------ what a loop iterates
    def iterated(self, loop: cst.For) -> cst.BaseExpression:
        """The iterable of a `for`, through `enumerate` / `tqdm` / device loaders."""
        facts = self.facts
        expr = loop.iter
        while isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None:
            if not facts.passes_batches_through(expr.func) and not facts.is_device_loader(
                self.index.qualname(expr.func)
            ):
                break
            expr = expr.args[0].value
        return expr

    @cached_property
    def evaluation_loops(self) -> list[cst.For]:
        """`for` loops over a DataLoader that run no backward pass."""
        out = []
        for loop in self.index.loops:
            if not isinstance(loop, cst.For) or self.trains(loop.body):
                continue
            loader = self.iterated(loop)
            if not isinstance(loader, (cst.Name, cst.Attribute)):
                continue
            if self.is_loader(loader):
                out.append(loop)
        return out

    def is_loader(self, expr: cst.BaseExpression) -> bool:
        """A DataLoader (made, prepared, or set up) flows into ``expr``."""
        return any(o is not Origin.UNKNOWN for o in self.loader_origins(expr))

    def is_sharded_loader(self, expr: cst.BaseExpression) -> bool:
        """Every loader flowing into ``expr`` is split across processes (prepared, set up, or
        given a distributed sampler)."""
        origins = self.loader_origins(expr)
        return bool(origins) and all(o is Origin.SHARDED for o in origins)

    def loader_origins(
        self, expr: cst.BaseExpression, hops: int = 2, through: int = 3
    ) -> list[Origin]:
        """``Facts.loader_origins``, also through a parameter: what the calls of this module
        pass for it (`evaluate(model, eval_loader)`, and through ``through`` more parameters:
        `main` -> `fit(..., val)` -> `validate(..., val)`) and, for a module-level function,
        what the calls of the other files of the run that import this module pass (``hops``:
        how many modules away such calls are followed)."""
        index = self.index
        if isinstance(expr, cst.Name):
            bindings = index.bindings_of(expr)
            if bindings and all(b.op == "param" for b in bindings):
                passed = [
                    v
                    for v in index.values_of(expr)
                    if isinstance(v, (cst.Name, cst.Attribute, cst.Call))
                ]
                origins = [
                    o
                    for v in passed
                    for o in (
                        self.loader_origins(v, 0, through - 1)
                        if through > 0 and isinstance(v, cst.Name)
                        else self.facts.loader_origins(v, 6)
                    )
                ]
                if hops > 0 and len(bindings) == 1:
                    origins += self._passed_by_importers(bindings[0].node, hops)
                return origins
        return self.facts.loader_origins(expr, 6)

    def _passed_by_importers(self, param: cst.CSTNode, hops: int) -> list[Origin]:
        """The origins of the loaders the other files of the run pass for parameter ``param``
        of a module-level function of this module, where they import and call it."""
        facts, index = self.facts, self.index
        project, path = facts.project, facts.path
        fn = index.enclosing_function(param)
        if project is None or path is None or fn is None or not isinstance(param, cst.Param):
            return []
        if index.scope(fn).kind != "module":
            return []
        position = _position_of(fn, param)
        if position is False:
            return []  # `*args` / `**kwargs`
        path = os.path.normpath(os.path.abspath(path))  # as imports resolve (linted as given)
        importers = getattr(project, "run_importers", None)  # a project of this run's files
        out: list[Origin] = []
        # (paths, not their facts: a caller's parse may be let go between lints)
        callers: list[str] = self._this_run("_callers").setdefault(param, [])
        for importer in _spelling(project, importers(path) if importers else (), fn.name.value):
            other = facts._facts_of(importer, kept=True)
            if other is None:
                continue
            passed = other.loops.passed_to(path, fn.name.value, position, param.name.value, hops)
            if passed and importer not in callers:
                callers.append(importer)
            out += passed
        return out

    def _this_run(self, name: str) -> dict[Any, Any]:
        """A memo of facts that depend on the files of the run (what importers pass), kept
        while the project is in the same run: a later run, or an editor's next lint, asks
        again (this module's facts outlive a run while its text is unchanged)."""
        run = getattr(self.facts.project, "run_number", 0)
        held = self.__dict__.get(name)
        if held is None or held[0] != run:
            held = self.__dict__[name] = (run, {})
        return held[1]

    def callers_of_loader(self, loop: cst.For) -> list[Facts]:
        """The other files of the run whose calls pass ``loop`` its loader (a loop over a
        parameter of a module-level function): the mode they train in (Accelerate, DDP) and
        how their Accelerator pads batches decide what the loop sees."""
        expr = self.iterated(loop)
        if not isinstance(expr, cst.Name):
            return []
        bindings = self.index.bindings_of(expr)
        if len(bindings) != 1 or bindings[0].op != "param":
            return []
        self.loader_origins(expr)  # (records the callers)
        found: dict[cst.CSTNode, list[str]] = self._this_run("_callers")
        held = found.get(bindings[0].node, ())
        callers = (self.facts._facts_of(path, kept=True) for path in held)
        return [other for other in callers if other is not None]

    def passed_to(
        self, path: str, name: str, position: int | None, keyword: str, hops: int
    ) -> list[Origin]:
        """The origins of the loaders this module's calls of function ``name`` of module
        ``path`` (imported by name or through its module) pass for the parameter at
        ``position`` (None: keyword-only) called ``keyword``: plain data, for that module."""
        memo: dict[tuple[str, str, int | None, str], list[Origin]]
        memo = self._this_run("_passed_to")
        key = (path, name, position, keyword)
        if key in memo:
            return memo[key]
        memo[key] = []  # a cycle between modules: nothing known
        out: list[Origin] = []
        for call in self.index.calls:
            if not self.calls_function_of(call, path, name):
                continue
            arg = _argument(call, position, keyword)
            if arg is not None:
                out += self.loader_origins(arg, hops - 1)
        memo[key] = out
        return out

    def calls_function_of(self, call: cst.Call, path: str, name: str) -> bool:
        """``call`` calls function ``name`` of module ``path`` (`name(...)` imported from it,
        `module.name(...)` with the module imported)."""
        project, here = self.facts.project, self.facts.path
        func = call.func
        if project is None or here is None:
            return False
        if isinstance(func, cst.Name):
            for b in self.index.bindings_of(func):
                record = b.record
                if b.op == "import" and record is not None and record.name == name:
                    return project.resolve_import(here, record.module, record.level) == path
            return False
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.attr.value != name:
                return False
            for b in self.index.bindings_of(func.value):
                record = b.record
                if b.op == "import" and record is not None:
                    if record.name is None:
                        found = project.resolve_import(here, record.module, 0)
                    else:
                        found = project.resolve_from_import(
                            here, record.module, record.name, record.level
                        )
                    return found == path
        return False


# ------------------------------------------------------------------ loops of one function
def _spelling(project: Any, importers: Iterable[str], name: str) -> Iterator[str]:
    """The ``importers`` whose text writes ``name``: a call of function ``name`` spells it
    (see `Loops.calls_function_of`), so the others are not parsed to look for one."""
    spells = getattr(project, "spells", None)
    for importer in importers:
        if spells is None or spells(importer, name):
            yield importer


def _argument(call: cst.Call, position: int | None, keyword: str) -> cst.BaseExpression | None:
    """What ``call`` passes for the parameter at ``position`` called ``keyword`` (None: not
    passed, or hidden behind `*args` / `**kwargs`)."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None and i == position:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


def iterators_drawn_in(facts: Facts, loop: cst.For | cst.While) -> list[cst.Call]:
    """The `iter(...)` calls whose iterators `next(...)` draws from in the loop's body."""
    index = facts.index
    out: list[cst.Call] = []
    body = loop.body  # (its calls: the index knows them; a loop it does not know is walked)
    for node in index.calls_inside(body) if index.order(body) else walk(body):
        if not (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "next"
            and node.args
            and not index.bindings_of(node.func)
        ):
            continue
        drawn = node.args[0].value
        if isinstance(drawn, cst.Call):
            values: list[cst.BaseExpression | None] = [drawn]
        elif isinstance(drawn, cst.Name):
            values = [a.value for a in index.bindings_of(drawn) if a.op == "="]
        elif isinstance(drawn, cst.Attribute):
            values = [a.value for a in index.attribute_assignments(drawn) if a.op == "="]
        else:
            continue
        out.extend(
            v for v in values if isinstance(v, cst.Call) and facts.iterator_of(v) is not None
        )
    return out


def _position_of(fn: cst.FunctionDef, param: cst.Param) -> int | None | bool:
    """The position of parameter ``param`` of ``fn`` (None: keyword-only; False: `*args`
    or `**kwargs`, which no argument is passed for by name or position)."""
    params = fn.params
    positional = [*params.posonly_params, *params.params]
    if param in positional:
        return positional.index(param)
    return None if param in params.kwonly_params else False
