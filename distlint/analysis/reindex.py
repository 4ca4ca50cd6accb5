"""The index of an edited editor buffer, made from the index of its previous text.

The language server lints a buffer again at each pause in typing, and most edits change one
statement: :mod:`distlint.incremental` re-parses only the statements around the edit and
splices them into the old module (its :class:`~distlint.incremental.Edit` says what it
replaced). Every other node of the new module is the old module's own object, so what the old
index knew of it (its parent, scope and place in the walk, what it binds) still holds, except
that the nodes after the edit move by as many places as the edit added or removed.

:func:`edited` takes the old index's state over, forgets the removed statements, renumbers
what follows them, walks only the new statements, and forgets every answer memoised from the
old text: the result holds what a fresh :class:`~distlint.analysis.index.Index` of the new
module holds, entry for entry and in the same order (``tests/test_reindex.py`` compares them
on every fixture script and on random edits). Where a ``global`` or ``nonlocal`` statement is
involved (it changes how names bind elsewhere in its function), the index is built anew.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

import libcst as cst

from distlint.analysis.index import _BINDERS, Assignment, Index, Scope, child_list, walk
from distlint.collector import free
from distlint.incremental import Document, Edit

# Indexes made, by how (tests, benchmarks): "built" walked the whole module; "edited" took the
# last one over and walked "walked" nodes (the edits' new statements).
COUNTS = {"built": 0, "edited": 0, "walked": 0}

_BY_ORDER = attrgetter("order")


def index_for(document: Document, module: cst.Module, text: str) -> Index:
    """The index of ``module`` (``document``'s module, of ``text``), which the document keeps
    for its next edit: made from the one it kept when the document's last update is the edit
    between them, else built."""
    old, edit = document.index, document.edit
    document.edit = None
    index = None
    if old is not None and module is document.module:
        if old.module is module:  # the same text again
            index = edited(old, module, text, None)
        elif edit is not None and old.module is edit.rebuilt[0][0]:
            index = edited(old, module, text, edit)
    if index is None:
        document.let_go()
        index = Index(module, text)
        COUNTS["built"] += 1
    document.index = index
    return index


class _Plan(NamedTuple):
    """Where an edit's statements are in the old index's walk: the removed ones at positions
    ``start`` to ``end`` (exclusive) of its nodes, their ``scope``; the ``size`` nodes of the
    new statements, their ``parent``; and the rebuilt nodes, old id -> new node."""

    start: int
    end: int
    size: int
    scope: Scope
    parent: cst.CSTNode
    rebuilt: dict[int, cst.CSTNode]


def edited(old: Index, module: cst.Module, text: str, edit: Edit | None) -> Index | None:
    """The index of ``module`` (of ``text``): ``old``'s state taken over (``old`` is left
    empty) and changed by ``edit`` (None: the same module again). None where it cannot be
    (see the module's doc; ``old`` is left untouched, but where the order of bindings that
    tie cannot be told (`_Tied`): it is released then)."""
    if any(scope.globals or scope.nonlocals for scope in old.scopes):
        return None
    plan = None
    if edit is not None:
        plan = _plan(old, edit)
        if plan is None:
            return None
    index = Index.__new__(Index)
    index.__dict__.update(old.__dict__)
    old.__dict__.clear()
    index.module, index.source, index.source_map = module, text, None
    if edit is not None and plan is not None:
        try:
            _apply(index, edit, plan)
        except _Tied:
            index.release()
            return None
    _forget_answers(index)
    COUNTS["edited"] += 1
    return index


def _plan(old: Index, edit: Edit) -> _Plan | None:
    """Where ``edit``'s statements are in ``old``'s walk; None where the edit does not match
    the index (nodes it does not know) or its new statements hold `global` or `nonlocal`."""
    info = old._info
    removed = edit.removed
    rebuilt = {id(was): now for was, now in edit.rebuilt}
    if not removed or any(id(node) not in info for node in removed):
        return None
    if any(key not in info for key in rebuilt):
        return None
    parent, scope, order = info[id(removed[0])]
    new_parent = rebuilt.get(id(parent))
    if new_parent is None:
        return None
    last = removed[-1]  # the removed statements' last node in the walk: their last one's last
    while True:
        kids = child_list(last)
        if not kids or id(kids[-1]) not in info:
            break
        last = kids[-1]
    count = 0
    for node in chain.from_iterable(walk(statement) for statement in edit.added):
        if type(node) is cst.Global or type(node) is cst.Nonlocal:
            return None
        count += 1
    return _Plan(order - 1, info[id(last)][2], count, scope, new_parent, rebuilt)


def _apply(index: Index, edit: Edit, plan: _Plan) -> None:
    """Change the taken-over state of ``index`` as ``edit`` changed the module (raises
    `_Tied` where it cannot tell the order a whole walk gives)."""
    nodes = index._nodes
    _take_rebuilt(index, plan.rebuilt)
    touched = _drop(index, nodes[plan.start : plan.end])
    delta = plan.size - (plan.end - plan.start)
    if delta:
        _shift(index, nodes[plan.end :], plan.end, delta)
    sizes = [len(index.calls), len(index.loops), len(index.scopes)]
    sizes += [_size(table) for table in _tables(index)]
    added: list[cst.CSTNode] = []
    stack: list[tuple[Any, cst.CSTNode | None, Scope]] = [
        (statement, plan.parent, plan.scope) for statement in reversed(edit.added)
    ]
    index._build(stack, plan.start, added)
    COUNTS["walked"] += len(added)
    index._nodes = [*nodes[: plan.start], *added, *nodes[plan.end :]]
    if index._by_type is not None:
        index._by_type = _retyped(index._by_type, plan.start, plan.end, delta, added)
    grown = [_size(table) for table in _tables(index)]
    for table, before, after in zip(_tables(index), sizes[3:], grown):
        if after > before:
            touched.setdefault(id(table), set())
    touched.setdefault(id(plan.scope), set())
    _in_walk_order(index, sizes[:3], touched)
    if delta:
        for scope in index.scopes:
            scope.renumbered()


def _retyped(
    by_type: dict[type, list[int]], start: int, end: int, delta: int, added: list[cst.CSTNode]
) -> dict[type, list[int]]:
    """`Index._by_type` (type -> positions in the walk) once the nodes at positions ``start``
    to ``end`` were replaced by the ``added`` ones (and those after them moved by ``delta``)."""
    new: dict[type, list[int]] = {}
    for position, node in enumerate(added, start):
        new.setdefault(type(node), []).append(position)
    out: dict[type, list[int]] = {}
    for tp, positions in by_type.items():
        low = bisect_left(positions, start)
        high = bisect_left(positions, end, low)
        middle = new.pop(tp, [])
        if low == high and not middle and not delta:
            out[tp] = positions
            continue
        tail = [p + delta for p in positions[high:]] if delta else positions[high:]
        kept = [*positions[:low], *middle, *tail]
        if kept:
            out[tp] = kept
    out.update(new)  # (types the module had none of)
    return out


def _take_rebuilt(index: Index, rebuilt: dict[int, cst.CSTNode]) -> None:
    """Each rebuilt node takes its old node's place (parent, scope, number; the scope it
    opens, what binds it, the tables naming it), and its children that the edit left are its."""
    info, nodes = index._info, index._nodes
    binding: dict[int, Scope] = {}  # the scopes of the rebuilt nodes that bind names
    for key, new in rebuilt.items():
        parent, scope, order = info.pop(key)
        if parent is not None:
            parent = rebuilt.get(id(parent), parent)
        info[id(new)] = (parent, scope, order)
        nodes[order - 1] = new
        if type(new) in _BINDERS:
            binding[id(scope)] = scope
    for new in rebuilt.values():
        for child in child_list(new):
            entry = info.get(id(child))
            if entry is not None and entry[0] is not new:
                info[id(child)] = (new, entry[1], entry[2])
    for scope in index.scopes:
        scope.node = rebuilt.get(id(scope.node), scope.node)
    if binding:  # (not the module, blocks, `if`, `try`, `with`...: no table names them)
        _renamed(index, rebuilt, list(binding.values()))


def _renamed(index: Index, rebuilt: dict[int, cst.CSTNode], scopes: list[Scope]) -> None:
    """What binds the rebuilt nodes, in their ``scopes``, and the tables of the index, name
    the new nodes."""
    types = {type(new) for new in rebuilt.values()}
    for scope in scopes:  # (a loop's target, a def's name, an `except ... as` name)
        for found in scope.bindings.values():
            for a in found:
                a.node = rebuilt.get(id(a.node), a.node)
    for found in index.attr_assignments.values():
        for a in found:
            a.node = rebuilt.get(id(a.node), a.node)
    for table in (index.functions, index.classes):
        for name, defs in table.items():
            table[name] = [rebuilt.get(id(d), d) for d in defs]  # type: ignore[misc]
    if cst.For in types or cst.While in types:
        index.loops = [rebuilt.get(id(loop), loop) for loop in index.loops]
    if cst.FunctionDef in types:
        index.returns = {rebuilt.get(id(fn), fn): found for fn, found in index.returns.items()}


def _drop(index: Index, removed: list[cst.CSTNode]) -> dict[int, set[Any]]:
    """Forget the ``removed`` nodes. For each scope and table that lost entries (by id): the
    keys that lost their first one but not all (see `_regrouped`). What a node binds is in
    the scope it is walked in (a def's parameters: in the def's own)."""
    info = index._info
    touched: dict[int, set[Any]] = {}
    gone = {id(node) for node in removed}
    scopes = {id(info.pop(key)[1]) for key in gone}  # the removed nodes' scopes
    types = {type(node) for node in removed}
    kept_scopes = []
    for scope in index.scopes:
        if id(scope.node) in gone:
            scope.release()  # (opened by a removed statement)
        else:
            kept_scopes.append(scope)
            if id(scope) in scopes:
                _drop_entries(scope.bindings, gone, touched, id(scope))
    index.scopes = kept_scopes
    if cst.Call in types:
        index.calls = [c for c in index.calls if id(c) not in gone]
    if cst.For in types or cst.While in types:
        index.loops = [loop for loop in index.loops if id(loop) not in gone]
    tables = zip(_tables(index), (cst.FunctionDef, cst.ClassDef, cst.Return, None))
    for table, kind in tables:  # (what binds an attribute: any binding statement)
        if kind in types or (kind is None and not types.isdisjoint(_BINDERS)):
            _drop_entries(table, gone, touched, id(table))
    return touched


def _drop_entries(
    table: dict[Any, list[Any]], gone: set[int], touched: dict[int, set[Any]], owner: int
) -> None:
    """The entries of ``table`` (nodes, or assignments by their node) not ``gone``."""
    for name, found in list(table.items()):
        left = [e for e in found if id(e.node if type(e) is Assignment else e) not in gone]
        if len(left) < len(found):
            moved = touched.setdefault(owner, set())
            if not left:
                del table[name]
            else:
                table[name] = left
                if left[0] is not found[0]:
                    moved.add(name)


def _shift(index: Index, after: list[cst.CSTNode], end: int, delta: int) -> None:
    """Renumber the nodes ``after`` the edit (numbered above ``end``), and their bindings."""
    info = index._info
    for node in after:
        key = id(node)
        parent, scope, order = info[key]
        info[key] = (parent, scope, order + delta)
    for a in index.assignments():
        if a.order > end:
            a.order += delta


def _tables(index: Index) -> list[dict[Any, list[Any]]]:
    """The tables of the index that name nodes of the walk, key -> entries in walk order."""
    return [index.functions, index.classes, index.returns, index.attr_assignments]


def _size(table: dict[Any, list[Any]]) -> int:
    return sum(map(len, table.values()))


def _in_walk_order(index: Index, grew: list[int], touched: dict[int, set[Any]]) -> None:
    """Put what the removal and the walk of the new statements changed in walk order, as a
    whole walk would have: lists by number, tables' keys by their first entry's. ``grew``:
    how many calls, loops and scopes there were before the walk; ``touched``: see `_drop`."""
    info = index._info

    def order(node: Any) -> int:
        return info[id(node)][2]

    index.calls = _spliced(index.calls, grew[0], order)
    index.loops = _spliced(index.loops, grew[1], order)
    index.scopes = _spliced(index.scopes, grew[2], lambda scope: order(scope.node))
    for name in ("functions", "classes", "returns"):  # (tables of nodes)
        table = getattr(index, name)
        moved = touched.get(id(table))
        if moved is not None:
            setattr(index, name, _regrouped(table, order, moved))
    rank = _TieBreak(index)
    moved = touched.get(id(index.attr_assignments))
    if moved is not None:
        index.attr_assignments = _regrouped(index.attr_assignments, _BY_ORDER, moved, rank)
    for scope in index.scopes:
        moved = touched.get(id(scope))
        if moved is not None:
            scope.bindings = _regrouped(scope.bindings, _BY_ORDER, moved, rank)
            scope.renumbered()


def _spliced(items: list[Any], old: int, order: Callable[[Any], int]) -> list[Any]:
    """``items``, whose first ``old`` are in walk order and the others too, in walk order:
    the others (a walk's appends, numbered between two of the first) moved in between."""
    if old == len(items):
        return items
    new = items[old:]
    del items[old:]
    at = bisect_left(items, order(new[0]), key=order)
    items[at:at] = new
    return items


class _Tied(Exception):
    """Entries that tie, whose order no rule here gives (the index is built anew)."""


def _regrouped(
    table: dict[Any, list[Any]],
    order: Any,
    moved: set[Any],
    rank: Callable[[int, Any], int] | None = None,
) -> dict[Any, list[Any]]:
    """``table`` (key -> entries) with each list in walk order and its keys in the order of
    their first entries, as a whole walk's appends give. The keys are in that order already
    but for new ones (appended: after every key with an earlier first entry, and in the order
    their node bound them) and ``moved`` ones (their first entry removed). A moved key whose
    first entry is at a node binding other keys first too takes its place among them by
    ``rank(number, key)``: where that node's walk bound it (`_TieBreak`)."""
    firsts = []
    for position, (key, found) in enumerate(table.items()):
        if len(found) > 1:
            found.sort(key=order)
        firsts.append([order(found[0]), position, key])
    firsts.sort()
    if moved:
        tied = {a[0] for a, b in zip(firsts, firsts[1:]) if a[0] == b[0]}
        tied = {n for n in tied if any(f[0] == n and f[2] in moved for f in firsts)}
        if tied and rank is None:
            raise _Tied()
        for first in firsts:
            if first[0] in tied and rank is not None:
                first[1] = rank(first[0], first[2])
        firsts.sort()
    return {key: table[key] for _, _, key in firsts}


class _TieBreak:
    """`_regrouped`'s ``rank`` for the bindings of an index: the place of a key among those
    the node numbered ``number`` binds, in the order its walk's handler binds them (found by
    running the handler on a scratch index: tuple targets, imports, parameters)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.known: dict[int, list[Any]] = {}

    def __call__(self, number: int, key: Any) -> int:
        keys = self.known.get(number)
        if keys is None:
            keys = self.known[number] = self._bound_by(number)
        if key not in keys:
            raise _Tied()
        return keys.index(key)

    def _bound_by(self, number: int) -> list[Any]:
        node = self.index._nodes[number - 1]
        handler = _BINDERS.get(type(node))
        if handler is None:
            raise _Tied()
        scope = self.index._info[id(node)][1]
        scratch = Index.__new__(Index)
        scratch.attr_assignments, scratch.functions, scratch.classes = {}, {}, {}
        scratch.returns, scratch.loops, scratch.scopes = {}, [], []
        probe = scratch.module_scope = Scope(scope.kind, scope.node, scope.parent, scope.name)
        handler(scratch, node, number, probe, lambda item: None)
        inner = [key for opened in scratch.scopes for key in opened.bindings]
        return [*probe.bindings, *inner, *scratch.attr_assignments]


def _forget_answers(index: Index) -> None:
    """Drop every answer the index memoised from its old text (freed once the language
    server's reply is sent: :func:`distlint.collector.free`)."""
    free(_Dropped(index.forget_answers()))


class _Dropped:
    """What an index memoised from its old text, to be freed (`release`)."""

    __slots__ = ("held",)

    def __init__(self, held: list[Any]) -> None:
        self.held = held

    def release(self) -> None:
        self.held.clear()
