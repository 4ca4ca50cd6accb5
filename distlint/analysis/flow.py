"""Dataflow over one module: what may reach a value.

``Flow.reaches(expr, predicate, key=...)`` asks whether any value flowing into ``expr`` (its
sub-expressions, the assignments of the names and dotted targets it reads, the arguments passed
for the parameters it reads, the return values of the in-file functions it calls) satisfies
``predicate(node, qualname)``. Answers are memoised per value root and per ``key``, so asking
the same question of many expressions that share their sources costs the sources once; each
value root is explored once per question (cycles answer "no"), and the number of assignment
hops is bounded. ``Flow.closure(roots)`` is the set of everything that reaches any of ``roots``,
computed with one visited set: "is this scheduler among what flows into a prepare call?" becomes
a set lookup instead of one search per (scheduler, argument) pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import libcst as cst

Predicate = Callable[[cst.CSTNode, "str | None"], bool]
_QUALIFIABLE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
DEFAULT_DEPTH = 10


class Graph(Protocol):
    """What the dataflow reads of a module: the :class:`~distlint.analysis.index.Index`
    provides it (and owns its :class:`Flow`; the flow does not depend on the index)."""

    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]: ...

    def qualname(self, node: cst.CSTNode) -> str | None: ...

    def values_of(self, node: cst.CSTNode) -> list[cst.CSTNode | None]: ...


class Flow:
    def __init__(self, index: Graph) -> None:
        self.index = index
        self._memo: dict[Any, dict[cst.CSTNode, bool]] = {}
        # Extra sources for a node (cross-module values), asked when the index knows none.
        self.external: Callable[[cst.CSTNode], list[cst.CSTNode]] | None = None

    def reaches(
        self,
        expr: cst.CSTNode,
        predicate: Predicate,
        *,
        key: Any = None,
        prune: Callable[[cst.CSTNode], bool] | None = None,
        depth: int = DEFAULT_DEPTH,
    ) -> bool:
        """Does any value flowing into ``expr`` satisfy ``predicate``? ``key`` names the
        question (with ``prune``) so answers are shared across calls; without it they are
        shared within this call only. ``prune(node)`` True: the predicate still sees ``node``,
        but nothing inside it or flowing into it is followed."""
        if key is None:
            memo: dict[cst.CSTNode, bool] = {}
        else:
            memo = self._memo.setdefault((key, prune), {})
        return self._reach(expr, predicate, prune, memo, depth)

    def _reach(
        self,
        root: cst.CSTNode,
        predicate: Predicate,
        prune: Callable[[cst.CSTNode], bool] | None,
        memo: dict[cst.CSTNode, bool],
        depth: int,
    ) -> bool:
        known = memo.get(root)
        if known is not None:
            return known
        memo[root] = False  # in progress: a cycle back here adds nothing
        index = self.index
        qualname = index.qualname
        stack = [root]
        result = False
        while stack:
            node = stack.pop()
            q = qualname(node) if isinstance(node, _QUALIFIABLE) else None
            if predicate(node, q):
                result = True
                break
            if prune is not None and prune(node):
                continue
            if depth > 0 and self._sources_reach(node, predicate, prune, memo, depth - 1):
                result = True
                break
            stack.extend(reversed(index.children(node)))
        memo[root] = result
        return result

    def _sources_reach(
        self,
        node: cst.CSTNode,
        predicate: Predicate,
        prune: Callable[[cst.CSTNode], bool] | None,
        memo: dict[cst.CSTNode, bool],
        depth: int,
    ) -> bool:
        """Does a value flowing into ``node`` one step back reach (what the index knows, then
        for a call what the other modules give)?"""
        for value in self.index.values_of(node):
            if value is not None and self._reach(value, predicate, prune, memo, depth):
                return True
        if self.external is not None and isinstance(node, cst.Call):
            return any(self._reach(v, predicate, prune, memo, depth) for v in self.external(node))
        return False

    def closure(
        self,
        roots: Iterable[cst.CSTNode],
        *,
        prune: Callable[[cst.CSTNode], bool] | None = None,
        depth: int = 4,
    ) -> Nodes:
        """Every node that flows into one of ``roots`` (``roots`` included), ``depth`` hops deep."""
        index = self.index
        values_of = index.values_of
        children = index.children
        seen: dict[int, int] = {}  # id -> hops left when seen (a node's own hash is a Python call)
        nodes: list[cst.CSTNode] = []
        stack: list[tuple[cst.CSTNode, int]] = [(r, depth) for r in roots]
        pop, extend = stack.pop, stack.extend
        while stack:
            node, left = pop()
            key = id(node)
            before = seen.get(key)
            if before is not None and before >= left:
                continue
            if before is None:
                nodes.append(node)
            seen[key] = left
            if prune is not None and prune(node):
                continue
            tp = type(node)
            if left > 0 and tp in _FLOWING:
                extend((v, left - 1) for v in values_of(node) if v is not None)
            if tp is cst.Call and isinstance(node, cst.Call):
                # what a call gives comes from its arguments, its receiver (`x.to(device)`)
                # and the returns values_of gave, not from the name of the function called
                func = node.func
                if type(func) is not cst.Name:
                    stack.append((func, left))
                extend((arg.value, left) for arg in node.args)
            elif tp is cst.Attribute and isinstance(node, cst.Attribute):
                stack.append((node.value, left))  # `.attr` names a field: no value of its own
            else:
                extend((child, left) for child in children(node))
        return Nodes(nodes)


# The node types :meth:`Index.values_of` knows sources of (anything else: none).
_FLOWING = frozenset({cst.Name, cst.Attribute, cst.Subscript, cst.Call})


class Nodes:
    """A set of nodes by identity (membership without hashing a node's fields)."""

    __slots__ = ("_ids", "_nodes")

    def __init__(self, nodes: list[cst.CSTNode]) -> None:
        self._nodes = nodes  # held: their ids stay theirs
        self._ids = {id(n) for n in nodes}

    def __contains__(self, node: object) -> bool:
        return id(node) in self._ids

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)
