"""What runs before what in one module: the order of seeding and model building.

Source order within a function, then through the calls it makes to functions, classes
(their ``__init__``) and methods of instances of classes of the same file; entry points are the
module and every function no call of the file reaches (``mp.spawn`` workers, methods called from
outside), a method running after its class's ``__init__``. Seeding that runs on one process only
(``Facts.on_one_process``) or reseeds per loop iteration does not count as the run's seeding.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from functools import cached_property
from typing import NamedTuple

import libcst as cst

from distlint.analysis.facts import Facts, Seeds
from distlint.analysis.index import Assignment, Op, ScopeKind, iter_names


class Happens(enum.Enum):
    SEED = "seed"  # the torch generator is seeded (directly or by a helper of the file)
    MODEL = "model"  # a model with fresh random weights is built, or a dataset randomly split


class Event(NamedTuple):
    kind: Happens
    site: cst.Call  # the call in the function being analysed through which it happens
    origin: cst.Call  # the seeding call (or seeding helper call) / the constructor itself


class Ordering:
    """What runs before what, following calls to functions, classes and methods of the file."""

    def __init__(self, facts: Facts) -> None:
        index = facts.index
        self.facts = facts
        self.index = index
        self._memo: dict[cst.CSTNode, list[Event]] = {}
        self._builds: dict[cst.CSTNode, bool] = {}  # `_may_build`
        self._seeded: dict[cst.CSTNode, bool] = {}  # `seeded_first`
        self._targets: dict[cst.Call, list[cst.CSTNode]] = {}
        # by id of a list of bindings (held, so the id stays its own): what it holds
        self._instances: dict[int, tuple[list[Assignment], cst.ClassDef | None]] = {}
        self._classes: dict[int, tuple[list[Assignment], tuple[cst.CSTNode, ...]]] = {}
        # Calls owned by each function (or the module), in source order; nested defs excluded.
        self.calls_of: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in index.calls:
            owner = self._owner(call)
            if owner is not None:
                self.calls_of.setdefault(owner, []).append(call)

    def _owner(self, node: cst.CSTNode) -> cst.CSTNode | None:
        scope = self.index.scope(node)
        while scope.kind is ScopeKind.COMPREHENSION:
            scope = scope.parent  # type: ignore[assignment]
        if scope.kind in (ScopeKind.FUNCTION, ScopeKind.MODULE):
            return scope.node
        return None  # lambda bodies and class bodies do not run in order with the rest

    # ---------------------------------------------------------------- entry points
    def roots(self, may_build_first: bool = False) -> list[tuple[cst.CSTNode, list[Event]]]:
        """The module, plus every function no call of the file reaches (mp.spawn workers, methods
        called from outside); a method runs after its class's ``__init__``. ``may_build_first``:
        only those whose run may build a model (`_may_build`): no other can start with one, and
        what their calls seed is not asked (all of them where the file's functions call each
        other in a cycle: which root is walked first decides what a cycle leaves out)."""
        called: set[cst.CSTNode] = set()
        for call in self.index.calls:
            called.update(self.targets(call))
        some = may_build_first and not self._cyclic
        out: list[tuple[cst.CSTNode, list[Event]]] = []
        if not some or self._may_build(self.index.module):
            out.append((self.index.module, []))
        for defs in self.index.functions.values():
            for fn in defs:
                if fn in called:
                    continue
                init = self._init_of_class_of(fn)
                if init is fn:
                    init = None
                if some and not self._may_build(fn) and (init is None or not self._may_build(init)):
                    continue
                out.append((fn, self.events(init) if init is not None else []))
        return out

    def _may_build(self, fn: cst.CSTNode) -> bool:
        """Running ``fn`` may build a model or split a dataset at random: one of its calls does,
        or makes an instance of a model class, or runs a function that may (every target of
        every call counted: a bound of what `events` can find, asking nobody what they seed)."""
        memo = self._builds
        if fn in memo:
            return memo[fn]
        memo[fn] = False  # (a function calling itself adds nothing)
        facts = self.facts
        found = False
        for call in self.calls_of.get(fn, ()):
            if facts.builds_model(call, self.index.qualname(call.func)) or facts.is_random_split(
                call
            ):
                found = True
            for target in self.targets(call):
                if isinstance(target, cst.ClassDef):
                    found = found or facts.is_model_class(target)
                    init = self._init(target.name.value)
                    if init is None:
                        continue
                    target = init
                found = found or self._may_build(target)
            if found:
                break
        memo[fn] = found
        return found

    def _init_of_class_of(self, fn: cst.FunctionDef) -> cst.FunctionDef | None:
        scope = self.index.scope(fn)  # the scope the `def` statement sits in
        cls = scope if scope.kind is ScopeKind.CLASS else None
        if cls is None:
            return None
        return self._init(cls.name)

    def _init(self, cls: str) -> cst.FunctionDef | None:
        """The `__init__` of the file's class ``cls`` (its last definition), if it has one."""
        inits = self.index.functions.get(f"{cls}.__init__")
        return inits[-1] if inits else None

    # ---------------------------------------------------------------- events
    def events(self, fn: cst.CSTNode) -> list[Event]:
        """What happens when ``fn`` runs, in order, up to its first seeding: what the order is
        asked (the first event, the first seeding after it) never lies past it, so the calls
        after it are not asked what they seed or build (what a helper seeds is a summary of
        another module). Where the file's functions call each other in a cycle, all of it:
        what a cycle's recursion guard leaves out depends on where it was entered first."""
        memo = self._memo
        if fn in memo:
            return memo[fn]
        memo[fn] = []  # recursion guard
        out: list[Event] = []
        whole = self._cyclic
        for call in self.calls_of.get(fn, ()):
            for event in self._call_events(call, fn):
                out.append(event)
                if event.kind is Happens.SEED and not whole:
                    memo[fn] = out
                    return out
        memo[fn] = out
        return out

    def seeded_first(self, fn: cst.CSTNode) -> bool:
        """The order of ``fn`` starts with a seeding, known without asking what any helper
        seeds: a seeding call the knowledge base knows runs before every call that may build a
        model (`_may_build`), following the calls of the file's functions that may. (What
        runs before it builds nothing: it seeds or does nothing the order sees.) False: not
        known so (always where the file's functions call each other in a cycle)."""
        if self._cyclic:
            return False
        memo = self._seeded
        if fn in memo:
            return memo[fn]
        memo[fn] = False  # (a function calling itself: not known)
        found = False
        for call in self.calls_of.get(fn, ()):
            step = self._seeded_at(call, fn)
            if step is not None:
                found = step
                break
        memo[fn] = found
        return found

    def _seeded_at(self, call: cst.Call, fn: cst.CSTNode) -> bool | None:
        """For `seeded_first`: ``call`` is a known seeding (True), may build a model first
        (False: not known), or neither (None: it seeds through a helper or does nothing)."""
        facts = self.facts
        q = self.index.qualname(call.func)
        if facts.seeding.known_kind(q) in (Seeds.TORCH, Seeds.ALL):
            if self._per_iteration(call, fn) or facts.on_one_process(call):
                return None  # (no event: a per-step reseed, a seeding on one process)
            return True
        if facts.builds_model(call, q) or facts.is_random_split(call):
            return False
        for target in self.targets(call):  # (as `_events_through`: the first with a body)
            if isinstance(target, cst.ClassDef):
                if facts.is_model_class(target):
                    return False
                init = self._init(target.name.value)
                if init is None:
                    continue
                target = init
            if not self._may_build(target):
                return None
            return self.seeded_first(target)
        return None

    def _call_events(self, call: cst.Call, fn: cst.CSTNode) -> list[Event]:
        q = self.index.qualname(call.func)
        if self.facts.seeding.kind_of(call, q) in (Seeds.TORCH, Seeds.ALL):
            if not self._per_iteration(call, fn) and not self.facts.on_one_process(call):
                return [Event(Happens.SEED, call, call)]
            return []
        if self.facts.builds_model(call, q) or self.facts.is_random_split(call):
            return [Event(Happens.MODEL, call, call)]
        return self._events_through(call)

    @cached_property
    def _local_names(self) -> frozenset[str]:
        """The names of the file's functions, methods and classes: a call runs one of them only
        under its name (`f(...)`, `self.f(...)`, `obj.f(...)`, `Cls(...)`)."""
        names = {fn.name.value for defs in self.index.functions.values() for fn in defs}
        return frozenset(names.union(self.index.classes))

    @cached_property
    def _cyclic(self) -> bool:
        """Two or more functions of the file may call each other in a cycle (every target of
        every call counted; a function calling itself is no such cycle: its own guard is the
        same wherever it is entered)."""
        edges: dict[cst.CSTNode, set[cst.CSTNode]] = {}
        for fn, calls in self.calls_of.items():
            out = edges[fn] = set()
            for call in calls:
                for target in self.targets(call):
                    if isinstance(target, cst.ClassDef):  # (it runs its `__init__`)
                        init = self._init(target.name.value)
                        if init is None:
                            continue
                        target = init
                    if target is not fn:
                        out.add(target)
        return _has_cycle(edges)

    def _events_through(self, call: cst.Call) -> list[Event]:
        """What happens through ``call`` of a function, class or method of the file: a model
        class without an ``__init__`` of its own builds a model; the first target with a body
        tells the rest."""
        out: list[Event] = []
        for target in self.targets(call):
            model_class = False
            if isinstance(target, cst.ClassDef):
                model_class = self.facts.is_model_class(target)
                init = self._init(target.name.value)
                if init is None:
                    if model_class:
                        out.append(Event(Happens.MODEL, call, call))
                    continue
                target = init
            inner = self.events(target)
            seeds = bool(inner) and inner[0].kind is Happens.SEED
            if model_class and not seeds:
                out.append(Event(Happens.MODEL, call, call))  # layers may be built by a base class
            elif seeds:  # a seeding helper: the call is the seeding
                out.append(Event(Happens.SEED, call, call))
            else:
                out.extend(Event(e.kind, call, e.origin) for e in inner)
            break
        return out

    def _per_iteration(self, call: cst.Call, fn: cst.CSTNode) -> bool:
        """`torch.manual_seed(base + step)` inside `for step in ...`: a deliberate per-step reseed
        of the data stream, not the run's seed."""
        used = {n.value for arg in call.args for n in iter_names(arg.value)}
        for anc in self.index.ancestors(call):
            if anc is fn:
                break
            if isinstance(anc, cst.For) and used & {n.value for n in iter_names(anc.target)}:
                return True
        return False

    def targets(self, call: cst.Call) -> list[cst.CSTNode]:
        """Functions, methods or classes of this file that ``call`` runs."""
        found = self._targets.get(call)
        if found is None:
            found = self._targets[call] = self._find_targets(call)
        return found

    def _find_targets(self, call: cst.Call) -> list[cst.CSTNode]:
        index = self.index
        func = call.func
        name = func.value if isinstance(func, cst.Name) else None
        if isinstance(func, cst.Attribute):
            name = func.attr.value
        if name not in self._local_names:
            return []  # (a function or class of the file runs under its own name)
        fn = index.local_function(func)
        if fn is not None:
            return [fn]
        if isinstance(func, cst.Name):
            return list(self._classes_bound(index.bindings_of(func)))
        if isinstance(func, cst.Attribute):
            cls = self._instance_class(func.value)
            if cls is not None:
                return list(index.functions.get(f"{cls.name.value}.{func.attr.value}", ())[-1:])
        return []

    def _instance_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of this file that ``trainer`` (``trainer = Trainer(...)``) is an instance of."""
        if isinstance(expr, cst.Name):
            bindings = self.index.bindings_of(expr)
            # the uses of a module-level name inside functions share one list of bindings
            known = self._instances.get(id(bindings))
            if known is None or known[0] is not bindings:
                made = self._class_made([b.value for b in bindings if b.op is Op.ASSIGN])
                known = self._instances[id(bindings)] = (bindings, made)
            return known[1]
        values: list[cst.CSTNode | None] = [expr] if isinstance(expr, cst.Call) else []
        if isinstance(expr, cst.Attribute):  # `self.trainer = Trainer(...)`
            values = [a.value for a in self.index.attribute_assignments(expr) if a.op is Op.ASSIGN]
        return self._class_made(values)

    def _class_made(self, values: Sequence[cst.CSTNode | None]) -> cst.ClassDef | None:
        """The one class of this file whose instances ``values`` are (`Trainer(...)`)."""
        classes: set[cst.CSTNode] = set()
        for value in values:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                classes.update(self._classes_bound(self.index.bindings_of(value.func)))
        found = classes.pop() if len(classes) == 1 else None
        return found if isinstance(found, cst.ClassDef) else None

    def _classes_bound(self, bindings: list[Assignment]) -> tuple[cst.CSTNode, ...]:
        """The class statements among ``bindings`` (judged once per list: see above)."""
        known = self._classes.get(id(bindings))
        if known is None or known[0] is not bindings:
            found = tuple(b.node for b in bindings if b.op is Op.CLASS)
            known = self._classes[id(bindings)] = (bindings, found)
        return known[1]


def _has_cycle(edges: dict[cst.CSTNode, set[cst.CSTNode]]) -> bool:
    """The directed graph ``edges`` has a cycle (a depth-first search meets a node on its path)."""
    done: set[cst.CSTNode] = set()
    for start in edges:
        if start in done:
            continue
        path = {start}
        stack = [(start, iter(edges.get(start, ())))]
        while stack:
            node, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                stack.pop()
                path.discard(node)
                done.add(node)
            elif nxt in path:
                return True
            elif nxt not in done:
                path.add(nxt)
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return False
