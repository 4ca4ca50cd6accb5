"""Line/column positions of the few nodes a lint run reports.

LibCST's ``PositionProvider`` records a range for every node of the module (and importing
``libcst.metadata`` pulls in all providers): about twice the cost of parsing the file. A
finding needs positions for a handful of nodes only, so this module runs LibCST's code
generation once with a codegen state that tracks line and column and records ranges only for
the wanted nodes. The ranges are the same as ``PositionProvider``'s (syntactic positions, with a
whitespace-inclusive fallback for nodes that record none); ``tests/test_positions.py`` checks that
on every fixture. Should a LibCST release change its codegen internals, we fall back to
``PositionProvider``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext

import libcst as cst
from libcst._nodes.internal import CodegenState  # stable since LibCST 0.3; guarded below
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")
_NULL = nullcontext()


class _WantedPositionsState(CodegenState):
    def __init__(self, module: cst.Module, wanted: set[cst.CSTNode]) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.wanted = wanted
        self.found: dict[cst.CSTNode, CodeRange] = {}
        self.line = 1  # 1-based
        self.column = 0  # 0-based
        self._starts: list[tuple[int, int]] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def _advance(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            segments = _NEWLINE.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            self._starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            line, column = self._starts.pop()
            if node not in self.found:  # a syntactic position, when recorded, wins
                self.found[node] = CodeRange(
                    CodePosition(line, column), CodePosition(self.line, self.column)
                )

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        if node not in self.wanted:
            return _NULL
        # the range may be hoisted from children: make sure theirs are recorded too
        if start_node is not None:
            self.wanted.add(start_node)
        if end_node is not None:
            self.wanted.add(end_node)
        return self._record(node, start_node, end_node)

    @contextmanager
    def _record(self, node, start_node, end_node) -> Iterator[None]:
        start = CodePosition(self.line, self.column)
        try:
            yield
        finally:
            end = CodePosition(self.line, self.column)
            if start_node is not None:
                start = self.found[start_node].start
            if end_node is not None:
                end = self.found[end_node].end
            self.found[node] = CodeRange(start, end)


def positions_of(
    module: cst.Module, nodes: Collection[cst.CSTNode]
) -> dict[cst.CSTNode, CodeRange]:
    """Ranges (1-based lines, 0-based columns, as LibCST's) of ``nodes`` in ``module``."""
    if not nodes:
        return {}
    try:
        state = _WantedPositionsState(module, set(nodes))
        module._codegen(state)
        return state.found
    except Exception:  # pragma: no cover - only if LibCST's internals change
        return all_positions(module)


def all_positions(module: cst.Module):
    """Every node's range, through LibCST's own PositionProvider (e.g. for every comment)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
