"""Line/column positions of the few nodes a lint run reports.

LibCST's ``PositionProvider`` records a range for every node of the module (and importing
``libcst.metadata`` pulls in all providers): about twice the cost of parsing the file. A
finding needs positions for a handful of nodes only, so this module runs LibCST's code
generation once with a codegen state that tracks line and column and records ranges only for
the wanted nodes. The ranges are the same as ``PositionProvider``'s (syntactic positions, with a
whitespace-inclusive fallback for nodes that record none); ``tests/test_positions.py`` checks that
on every fixture. Should a LibCST release change its codegen internals, we fall back to
``PositionProvider``.

The same pass records, for the statements a fix rewrites, their span and the indentation in
effect there: what :mod:`distlint.fixes` needs to turn a fix plan into text edits.

LibCST's code generation recurses once per nesting level (an ``elif`` is an ``If`` inside the
previous one's ``orelse``), so a deeply nested file exhausts Python's default recursion limit.
Such a pass is run again in a thread with a large stack and a higher limit (:func:`deep_call`);
beyond that bound it fails with :class:`TooDeep`, which callers report in one line.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext
from typing import Callable, TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState  # stable since LibCST 0.3; guarded below
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")
_NULL = nullcontext()
T = TypeVar("T")

DEEP_RECURSION_LIMIT = 60_000
DEEP_STACK_BYTES = 1 << 30  # reserved address space for the retry thread, not memory used


class TooDeep(Exception):
    """The code nests deeper than even the large-stack retry allows."""


def deep_call(fn: Callable[[], T]) -> T:
    """``fn()``; on RecursionError, ``fn()`` again in a thread with a large stack and a
    recursion limit of :data:`DEEP_RECURSION_LIMIT`; :class:`TooDeep` when that fails too.
    ``fn`` must start from scratch each time (no state kept from the failed call)."""
    try:
        return fn()
    except RecursionError:
        pass
    box: dict[str, object] = {}

    def target() -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, DEEP_RECURSION_LIMIT))
        try:
            box["value"] = fn()
        except RecursionError:
            box["error"] = TooDeep()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            sys.setrecursionlimit(old)

    old_size = threading.stack_size()
    try:
        threading.stack_size(DEEP_STACK_BYTES)
        thread = threading.Thread(target=target, name="distlint-deep")
        thread.start()
    except (ValueError, RuntimeError, MemoryError) as exc:  # no big stack here: refuse
        raise TooDeep() from exc
    finally:
        threading.stack_size(old_size)
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


# A statement's span: (start line, start column, end line, end column, indent tokens in
# effect), lines 1-based, columns 0-based, in the code LibCST generates.
Span = tuple[int, int, int, int, tuple[str, ...]]


class _WantedPositionsState(CodegenState):
    def __init__(
        self,
        module: cst.Module,
        wanted: set[cst.CSTNode],
        spans: Collection[cst.CSTNode] = (),
    ) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.wanted = wanted
        self.found: dict[cst.CSTNode, CodeRange] = {}
        self.line = 1  # 1-based
        self.column = 0  # 0-based
        self._starts: list[tuple[int, int]] = []
        self.span_wanted = set(spans)
        self.spans: dict[cst.CSTNode, Span] = {}
        self._span_starts: list[tuple[int, int, tuple[str, ...]]] = []

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
        if node in self.span_wanted:
            self._span_starts.append((self.line, self.column, tuple(self.indent_tokens)))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if node in self.span_wanted:
            line, column, indent = self._span_starts.pop()
            self.spans[node] = (line, column, self.line, self.column, indent)
        if node in self.wanted:
            line, column = self._starts.pop()
            if node not in self.found:  # a syntactic position, when recorded, wins
                self.found[node] = CodeRange(
                    CodePosition(line, column), CodePosition(self.line, self.column)
                )

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
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
    return layout(module, nodes)[0]


def layout(
    module: cst.Module, nodes: Collection[cst.CSTNode], spans: Collection[cst.CSTNode] = ()
) -> tuple[dict[cst.CSTNode, CodeRange], dict[cst.CSTNode, Span]]:
    """Ranges of ``nodes`` and spans of the statements ``spans``, in one codegen pass.

    Raises :class:`TooDeep` for code nested beyond what even a large stack allows."""
    if not nodes and not spans:
        return {}, {}

    def run() -> tuple[dict[cst.CSTNode, CodeRange], dict[cst.CSTNode, Span]]:
        state = _WantedPositionsState(module, set(nodes), spans)
        module._codegen(state)
        return state.found, state.spans

    try:
        return deep_call(run)
    except TooDeep:
        raise
    except Exception:  # pragma: no cover - only if LibCST's internals change
        if spans:
            raise
        return deep_call(lambda: all_positions(module)), {}


def all_positions(module: cst.Module):
    """Every node's range, through LibCST's own PositionProvider (e.g. for every comment)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
