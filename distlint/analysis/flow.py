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

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import libcst as cst

if TYPE_CHECKING:
    from distlint.analysis.index import Index

Predicate = Callable[[cst.CSTNode, "str | None"], bool]
_QUALIFIABLE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
DEFAULT_DEPTH = 10


class Flow:
    def __init__(self, index: Index) -> None:
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
        values_of = index.values_of
        stack = [root]
        result = False
        while stack and not result:
            node = stack.pop()
            q = qualname(node) if isinstance(node, _QUALIFIABLE) else None
            if predicate(node, q):
                result = True
                break
            if prune is not None and prune(node):
                continue
            if depth > 0:
                for value in values_of(node):
                    if value is not None and self._reach(value, predicate, prune, memo, depth - 1):
                        result = True
                        break
                if result:
                    break
                if self.external is not None and isinstance(node, cst.Call):
                    for value in self.external(node):
                        if self._reach(value, predicate, prune, memo, depth - 1):
                            result = True
                            break
            children = index.children(node)
            stack.extend(reversed(children))
        memo[root] = result
        return result

    def closure(
        self,
        roots: Iterable[cst.CSTNode],
        *,
        prune: Callable[[cst.CSTNode], bool] | None = None,
        depth: int = 4,
    ) -> set[cst.CSTNode]:
        """Every node that flows into one of ``roots`` (``roots`` included), ``depth`` hops deep."""
        index = self.index
        seen: dict[cst.CSTNode, int] = {}
        stack: list[tuple[cst.CSTNode, int]] = [(r, depth) for r in roots]
        while stack:
            node, left = stack.pop()
            if seen.get(node, -1) >= left:
                continue
            seen[node] = left
            if prune is not None and prune(node):
                continue
            if left > 0:
                stack.extend((v, left - 1) for v in index.values_of(node) if v is not None)
            stack.extend((child, left) for child in index.children(node))
        return set(seen)
