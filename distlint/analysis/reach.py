"""What a module's run reaches (``Facts.reach``): the scope findings are reported in.

A module **has a run** when running it trains or starts something: it holds an
`if __name__ == "__main__":` block, or it trains at module level (a backward pass outside every
function and class, nanoGPT style). Such a module is an entry: a top-level function or class
that the run never uses never runs, so what a rule finds inside it is not reported. **Reached**
is decided on names, conservatively: the module-level code (imports, assignments, the
`__main__` block, every decorator, base class and default value) reaches each top-level function
or class whose name it spells (as a name, an attribute or a string: `TRAINERS = {"a": Trainer}`,
`getattr(self, "train")`), and a reached function or class reaches what its own code spells, to
a fixed point. Everything is reached (the module reports as a library does) when the module
looks its own names up at run time (`globals()`, `vars()`, `eval`, `sys.modules`,
`importlib.import_module`, hydra's `instantiate` / `_target_`, a test runner or `fire.Fire()`
that looks through the module), when a class of it is made by a metaclass, or when another file
of the run imports it (its classes are then that file's API).
A decorated top-level function or class is reached (a decorator may register it).

A module without a run (a library module: helpers, a trainer class) reports what it holds, as
its own API; but a finding inside one of its functions that the run's other files call can be
decided by those callers (:meth:`Reach.run_callers`).

**One process only**: a run that refuses to start on more than one process
(`if world_size > 1: raise ...`, `assert torch.cuda.device_count() == 1`, `sys.exit` in such a
branch) on its path (module level, the `__main__` block, or the top of a function these call
directly) trains on one process, whatever else it creates (:attr:`Reach.one_process_only`).
A refusal under a further condition (`if args.train_text_encoder and num_processes > 1:`) or a
branch that only warns does not make the script single-process.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import Index, ScopeKind, dotted_name

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

# Text that means the module looks its own names up at run time: reachability by names is not
# known there, so everything is reached.
_DYNAMIC_LOOKUPS = (
    "globals()",
    "locals()",
    "vars(",
    "eval(",
    "exec(",
    "sys.modules",
    "__import__",
    "import_module",
    "instantiate(",
    "_target_",
    "metaclass",
    "__init_subclass__",
    # runners that find what to run by looking through the module: test classes for
    # unittest / pytest / absltest, every function for `fire.Fire()` and `jsonargparse.CLI()`
    "unittest",
    "TestCase",
    "pytest",
    "absltest",
    "Fire()",
    "CLI()",
)
_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)
_ENTRY_DEPTH = 3  # how many direct calls deep a refusal of several processes is looked for


class Reach:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index: Index = facts.index
        self._deciding = False

    # ------------------------------------------------------------------ the run
    @cached_property
    def main_blocks(self) -> list[cst.If]:
        """The module's `if __name__ == "__main__":` blocks."""
        return [
            s for s in self.index.module.body if isinstance(s, cst.If) and _is_main_test(s.test)
        ]

    @cached_property
    def has_run(self) -> bool:
        """Running the module trains or starts something: its `__main__` block runs a function
        of the module (`main()`, `fire.Fire(main)`, `mp.spawn(worker, ...)`) or trains, or the
        module trains at module level."""
        blocks = self.main_blocks
        runs = (self.index.module, *blocks)
        for call in self.index.calls:
            if _is_backward(call) and any(self._owner(call)[0] is r for r in runs):
                return True
        return any(
            any(self._owner(call)[0] is b for b in blocks)
            for call, _fns in (self._local_calls if blocks else ())
        )

    @cached_property
    def _local_calls(self) -> list[tuple[cst.Call, list[cst.FunctionDef]]]:
        """The calls that run a function of this module (as the callee or handed to one),
        with those functions."""
        index = self.index
        names = {name.rsplit(".", 1)[-1] for name in index.functions}
        out = []
        for call in index.calls:
            spelled = [call.func, *(a.value for a in call.args)]
            if any(isinstance(e, cst.Name) and e.value in names for e in spelled):
                found = self._called_functions(call)
                if found:
                    out.append((call, found))
        return out

    def _owner(self, call: cst.Call) -> tuple[cst.CSTNode | None, bool]:
        """The function, `__main__` block or module whose code holds ``call`` (None: a class
        body or a lambda), and whether an `if` stands between them."""
        blocks = self.main_blocks
        conditional = False
        for anc in self.index.ancestors(call):
            if isinstance(anc, (cst.FunctionDef, cst.Module)) or any(anc is b for b in blocks):
                return anc, conditional
            if isinstance(anc, (cst.ClassDef, cst.Lambda)):
                return None, conditional
            conditional = conditional or isinstance(anc, cst.If)
        return None, conditional

    @cached_property
    def _unreached(self) -> tuple[cst.CSTNode, ...]:
        """The top-level functions and classes this module's own run never uses."""
        index = self.index
        body = index.module.body
        if not self.has_run or any(w in index.source for w in _DYNAMIC_LOOKUPS):
            return ()
        defined: dict[str, list[int]] = {}
        for i, stmt in enumerate(body):
            if isinstance(stmt, _DEFINITIONS) and not stmt.decorators:
                defined.setdefault(stmt.name.value, []).append(i)
        if not defined:
            return ()
        uses = self._spelled_by_statement(defined)
        reached: set[int] = set()
        todo = [i for name in uses.get(None, ()) for i in defined[name]]
        while todo:
            i = todo.pop()
            if i not in reached:
                reached.add(i)
                todo += [j for name in uses.get(i, ()) for j in defined[name]]
        unreached = tuple(body[i] for ids in defined.values() for i in ids if i not in reached)
        if unreached and self._imported_in_run():
            return ()
        return unreached

    def _spelled_by_statement(self, defined: dict[str, list[int]]) -> dict[int | None, set[str]]:
        """Which of the names in ``defined`` each top-level definition spells (by its position
        in the module; None: the module-level code, decorated definitions included)."""
        index = self.index
        body = index.module.body
        tops = [index.order(stmt) for stmt in body]
        uses: dict[int | None, set[str]] = {}
        for node in index.nodes_of(cst.Name, cst.SimpleString):
            spelled = _spelled(node)
            if spelled is None or spelled not in defined:
                continue
            top = bisect.bisect_right(tops, index.order(node)) - 1
            holder = body[top] if top >= 0 else None
            if not isinstance(holder, _DEFINITIONS) or holder.decorators:
                uses.setdefault(None, set()).add(spelled)
            elif holder.name is not node:  # (not its own name)
                uses.setdefault(top, set()).add(spelled)
        return uses

    def _imported_in_run(self) -> bool:
        """Another file of this run imports this module: what it defines is that file's API."""
        project, path = self.facts.project, self.facts.path
        importers = getattr(project, "run_importers", None)
        if importers is None or path is None:
            return False
        return bool(importers(os.path.normpath(os.path.abspath(path))))

    def reached(self, node: cst.CSTNode) -> bool:
        """``node`` is code the module's run may execute (always, for a module without a run)."""
        unreached = self._unreached
        if not unreached:
            return True
        return not any(self.index.is_inside(node, stmt) for stmt in unreached)

    # ------------------------------------------------------------------ callers in the run
    def run_callers(self, fn: cst.FunctionDef) -> list[tuple[Facts, cst.Call]] | None:
        """The calls of module-level function ``fn`` (or of the class a method ``fn`` belongs
        to) that the other files of the run make, with their files' facts: they say what ``fn``
        is given and how its caller trains. Empty when files of the run import the module and
        none of them names ``fn`` (the run never goes there). None when they do not decide:
        the module has a run of its own, ``fn`` is used in its own module too, no file of the
        run imports the module, or one names ``fn`` other than in a call (passed around)."""
        facts, index = self.facts, self.index
        project, path = facts.project, facts.path
        importers = getattr(project, "run_importers", None)
        if importers is None or path is None or self.has_run:
            return None
        kind = index.scope(fn).kind
        if kind is ScopeKind.CLASS:
            names = self._class_and_subclasses(fn)
        elif kind is ScopeKind.MODULE and not index.callers(fn):
            names = self._only_defined(fn)
        else:
            return None
        if not names:
            return None
        path = os.path.normpath(os.path.abspath(path))  # as imports resolve
        found: list[tuple[Facts, cst.Call]] = []
        spelled = False  # an importer names one of them other than in a call found
        files = importers(path)
        for importer in files:
            other = facts._facts_of(importer, kept=True)
            if other is None:
                return None
            calls = [
                call
                for call in other.index.calls
                if any(other.loops.calls_function_of(call, path, name) for name in names)
            ]
            found += [(other, call) for call in calls]
            spelled = spelled or _names_elsewhere(other.index, names, calls)
        if not files or (spelled and not found):
            return None
        return found

    def _only_defined(self, fn: cst.FunctionDef) -> set[str]:
        """``{fn's name}`` when its module never names it elsewhere (it is not passed around
        nor called there), else nothing."""
        name = fn.name.value
        for n in self.index.nodes_of(cst.Name):
            if isinstance(n, cst.Name) and n.value == name and n is not fn.name:
                return set()
        return {name}

    def _class_and_subclasses(self, method: cst.FunctionDef) -> set[str]:
        """For a method of a module-level class (consistency_models' `TrainLoop.__init__`
        builds the optimizer from what its constructor is given): the class and its subclasses
        of the module, when the module names them only to define and derive them, so that only
        the run's other files make instances. Else nothing."""
        index = self.index
        cls = index.enclosing(method, cst.ClassDef)
        classes = {
            c.name.value: c
            for c in index.module.body
            if isinstance(c, cst.ClassDef) and len(index.classes.get(c.name.value, ())) == 1
        }
        if not isinstance(cls, cst.ClassDef) or classes.get(cls.name.value) is not cls:
            return set()
        names, bases = _with_subclasses(cls.name.value, classes)
        for n in index.nodes_of(cst.Name):
            if (
                isinstance(n, cst.Name)
                and n.value in names
                and id(n) not in bases
                and not any(n is c.name for c in classes.values())
            ):
                return set()  # made or passed around in its own module
        return names

    # ------------------------------------------------------------------ one process only
    @property
    def one_process_only(self) -> bool:
        """The run refuses to go on with more than one process before it trains."""
        if self._deciding:  # asked again while deciding (through the process count): not known
            return False
        found = self.__dict__.get("_one_process")
        if found is None:
            self._deciding = True
            try:
                found = self.__dict__["_one_process"] = self._refuses_several_processes()
            finally:
                self._deciding = False
        return bool(found)

    def _refuses_several_processes(self) -> bool:
        if not self.has_run:
            return False
        return any(self._refuses(stmt) for stmt in self._run_statements())

    def _run_statements(self) -> Iterator[cst.CSTNode]:
        """The statements that always run, in the order of the run: the module's, the
        `__main__` block's, and those of the functions these call outside every `if`, a few
        calls deep."""
        runs: dict[int, list[cst.FunctionDef]] = {}  # id(function / block / module) -> callees
        for call, functions in self._local_calls:
            owner, conditional = self._owner(call)
            if owner is not None and not conditional:
                runs.setdefault(id(owner), []).extend(functions)
        todo: list[tuple[cst.CSTNode, int]] = [(self.index.module, 0)]
        todo += [(block, 0) for block in self.main_blocks]
        seen: set[int] = set()
        while todo:
            owner, depth = todo.pop(0)
            body = owner if isinstance(owner, cst.Module) else getattr(owner, "body", None)
            yield from _statements(body) if body is not None else ()
            for fn in runs.get(id(owner), ()) if depth < _ENTRY_DEPTH else ():
                if id(fn) not in seen:
                    seen.add(id(fn))
                    todo.append((fn, depth + 1))

    def _called_functions(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The module's functions ``call`` runs: its callee, or one it is handed
        (`fire.Fire(main)`, `app.run(main)`)."""
        found = []
        for expr in [call.func, *(a.value for a in call.args)]:
            fn = self.index.local_function(expr)
            if fn is not None:
                found.append(fn)
        return found

    def _refuses(self, stmt: cst.CSTNode) -> bool:
        if isinstance(stmt, cst.If):
            return _stops(stmt.body) and any(
                self._above_one(t) for t in _operands(stmt.test, cst.Or)
            )
        if isinstance(stmt, cst.SimpleStatementLine):
            return any(
                isinstance(small, cst.Assert)
                and any(self._at_most_one(t) for t in _operands(small.test, cst.And))
                for small in stmt.body
            )
        return False

    def _above_one(self, test: cst.BaseExpression) -> bool:
        """`count > 1`, `count >= 2`, `count != 1`, `1 < count` on the process count."""
        return self._compares(
            test, {(cst.GreaterThan, 1), (cst.GreaterThanEqual, 2), (cst.NotEqual, 1)}
        )

    def _at_most_one(self, test: cst.BaseExpression) -> bool:
        """`count == 1`, `count <= 1`, `count < 2`, `not count > 1` on the process count."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._above_one(test.expression)
        return self._compares(test, {(cst.Equal, 1), (cst.LessThanEqual, 1), (cst.LessThan, 2)})

    def _compares(self, test: cst.BaseExpression, wanted: set[tuple[type, int]]) -> bool:
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        target = test.comparisons[0]
        left, op, right = test.left, type(target.operator), target.comparator
        if isinstance(left, cst.Integer):  # `1 < count`: the count on the left
            left, right, op = right, left, _MIRRORED.get(op, op)
        if not isinstance(right, cst.Integer) or (op, right.evaluated_value) not in wanted:
            return False
        return self.facts.reads_process_count(left)


_MIRRORED: dict[type, type] = {
    cst.LessThan: cst.GreaterThan,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.GreaterThan: cst.LessThan,
    cst.GreaterThanEqual: cst.LessThanEqual,
}


def _is_main_test(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    texts = [
        s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"
    ]
    return bool(names) and bool(texts)


def _spelled(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in K.BACKWARD_METHODS


def _statements(body: cst.CSTNode) -> list[cst.CSTNode]:
    inner = getattr(body, "body", ())
    return list(inner) if isinstance(inner, (list, tuple)) else []


def _stops(body: cst.BaseSuite) -> bool:
    """The block raises or exits, whatever else it does first."""
    for stmt in _statements(body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Raise):
                return True
            if (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and dotted_name(small.value.func) in _EXIT_CALLS
            ):
                return True
    return False


def _operands(test: cst.BaseExpression, kind: type) -> list[cst.BaseExpression]:
    """The operands of a chain of ``kind`` (`cst.Or` / `cst.And`) boolean operations."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, kind):
        return _operands(test.left, kind) + _operands(test.right, kind)
    return [test]


def _with_subclasses(name: str, classes: dict[str, cst.ClassDef]) -> tuple[set[str], set[int]]:
    """Class ``name`` and the ``classes`` derived from it, directly or in turn; and the base
    Name nodes that derive them (ids)."""
    names = {name}
    bases: set[int] = set()
    grown = True
    while grown:
        grown = False
        for other, c in classes.items():
            for base in c.bases:
                if isinstance(base.value, cst.Name) and base.value.value in names:
                    bases.add(id(base.value))
                    if other not in names:
                        names.add(other)
                        grown = True
    return names, bases


def _names_elsewhere(index: Index, names: set[str], calls: list[cst.Call]) -> bool:
    """``index``'s module spells one of ``names`` other than as the callee of ``calls`` and
    in its imports (it may pass it around, register it or call it through an alias)."""
    callees = {id(c.func) for c in calls} | {
        id(c.func.attr) for c in calls if isinstance(c.func, cst.Attribute)
    }
    for n in index.nodes_of(cst.Name):
        if not isinstance(n, cst.Name) or n.value not in names or id(n) in callees:
            continue
        if index.enclosing(n, (cst.Import, cst.ImportFrom)) is None:
            return True
    return False
