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
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from itertools import accumulate
from typing import TYPE_CHECKING, Callable, TypeVar

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from distlint._libcst_compat import CodegenState  # stable since LibCST 0.3; guarded below

if TYPE_CHECKING:  # pragma: no cover
    import ast

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
# What a layout gives: the range of each wanted node, and the span of each node asked for one.
Layout = tuple[dict[cst.CSTNode, CodeRange], dict[cst.CSTNode, Span]]


def line_starts(text: str) -> list[int]:
    """Offsets where the lines of ``text`` start (LibCST's and the tokenizer's line breaks)."""
    if "\r" in text:
        return [0] + [m.end() for m in _NEWLINE.finditer(text)]
    starts = [0]  # "\n" only (nearly every file): found by str.find, twice as fast
    find, add = text.find, starts.append
    at = find("\n")
    while at >= 0:
        at += 1
        add(at)
        at = find("\n", at)
    return starts


class SourceMap:
    """Where the text LibCST parsed stands in the file's text: the one way an offset of LibCST's
    code becomes the line and column that findings, fix edits and ``# noqa`` comments use.

    ``parsed`` is the file's ``text`` less its ``cuts`` (sorted, disjoint ``(start, end)``
    spans of the text: what :func:`distlint.guard.indentation_cuts` takes out of odd
    indentation so that LibCST reads it as Python does); LibCST's code for the module is
    ``parsed``. Most files have no cut: both texts are then one. An offset of ``parsed`` maps
    to the text before the cuts that stand at it (``after=False``: the end of a range, or a
    statement's span, which then covers its odd indentation) or after them (``after=True``:
    where a node's first character is)."""

    __slots__ = ("text", "cuts", "parsed", "_starts", "_parsed_starts", "_at", "_removed")

    def __init__(
        self, text: str, cuts: Sequence[tuple[int, int]] = (), starts: list[int] | None = None
    ) -> None:
        self.text = text
        self.cuts = list(cuts)
        # the line starts of `text` and of `parsed`: found when first asked (a file with no
        # finding and no cut never asks)
        self._starts = starts
        self._parsed_starts: list[int] | None = None
        self._at: list[int] = []  # where each cut stands in `parsed`
        self._removed = [0]  # characters removed by the first k cuts
        if not self.cuts:
            self.parsed = text
            return
        pieces, pos = [], 0
        for a, b in self.cuts:
            pieces.append(text[pos:a])
            self._at.append(a - self._removed[-1])
            self._removed.append(self._removed[-1] + b - a)
            pos = b
        pieces.append(text[pos:])
        self.parsed = "".join(pieces)

    @property
    def starts(self) -> list[int]:
        """Offsets where the lines of ``text`` start."""
        if self._starts is None:
            self._starts = line_starts(self.text)
        return self._starts

    @property
    def parsed_starts(self) -> list[int]:
        """Offsets where the lines of ``parsed`` start."""
        if not self.cuts:
            return self.starts
        if self._parsed_starts is None:
            self._parsed_starts = line_starts(self.parsed)
        return self._parsed_starts

    def to_text(self, offset: int, after: bool = True) -> int:
        """The offset of the text where ``offset`` of ``parsed`` stands."""
        if not self.cuts:
            return offset
        k = bisect_right(self._at, offset) if after else bisect_left(self._at, offset)
        return offset + self._removed[k]

    def from_text(self, offset: int) -> int:
        """The offset of ``parsed`` where ``offset`` of the text stands (a cut's place for an
        offset inside it)."""
        if not self.cuts:
            return offset
        k = bisect_right(self.cuts, (offset, len(self.text) + 1))
        if k and offset < self.cuts[k - 1][1]:
            return self._at[k - 1]
        return offset - self._removed[k]

    def position(self, offset: int, after: bool = True) -> tuple[int, int]:
        """1-based line and 0-based column in the text of ``offset`` of ``parsed``."""
        at = self.to_text(offset, after)
        line = bisect_right(self.starts, at)
        return line, at - self.starts[line - 1]

    def parsed_slice(self, start: int, end: int) -> str:
        """What LibCST read of ``text[start:end]`` (the cuts inside it left out)."""
        return self.parsed[self.from_text(start) : self.from_text(end)]


class _WantedPositionsState(CodegenState):
    """LibCST's codegen state, marking where the wanted nodes start and end.

    A mark is the number of tokens generated so far (nodes are looked up by ``id``: a CST
    node's own ``__hash__`` is a Python call); the marks become lines and columns once, from the
    generated text, after the pass (:meth:`resolve`)."""

    def __init__(
        self,
        module: cst.Module,
        wanted: Collection[cst.CSTNode],
        spans: Collection[cst.CSTNode] = (),
    ) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.wanted = {id(n) for n in wanted}
        self.span_wanted = {id(n) for n in spans}
        self.watched = self.wanted | self.span_wanted
        self.marks: dict[int, tuple[cst.CSTNode, int, int]] = {}  # id -> (node, start, end)
        self.span_marks: dict[int, tuple[cst.CSTNode, int, int, tuple[str, ...]]] = {}
        self._open: list[tuple[int, tuple[str, ...] | None]] = []
        self.popped: str | None = None

    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.watched:
            indent = tuple(self.indent_tokens) if key in self.span_wanted else None
            self._open.append((len(self.tokens), indent))

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.watched:
            start, indent = self._open.pop()
            end = len(self.tokens)
            if indent is not None:
                self.span_marks[key] = (node, start, end, indent)
            if key in self.wanted and key not in self.marks:
                # a syntactic position, when recorded, wins
                self.marks[key] = (node, start, end)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.popped = self.tokens.pop()

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if id(node) not in self.wanted:
            return _NULL
        # the range may be hoisted from children: make sure theirs are recorded too
        for child in (start_node, end_node):
            if child is not None:
                self.wanted.add(id(child))
                self.watched.add(id(child))
        return self._record(node, start_node, end_node)

    @contextmanager
    def _record(self, node, start_node, end_node) -> Iterator[None]:
        start = len(self.tokens)
        try:
            yield
        finally:
            end = len(self.tokens)
            if start_node is not None:
                start = self.marks[id(start_node)][1]
            if end_node is not None:
                end = self.marks[id(end_node)][2]
            self.marks[id(node)] = (node, start, end)

    def code(self) -> str:
        """The generated code (the trailing newline a module without one drops included)."""
        return "".join(self.tokens) + (self.popped or "")

    def resolve(self, base: int = 0, source: SourceMap | None = None) -> Layout:
        """The marks as (line, column) ranges and spans: lines 1-based, columns 0-based, in
        the generated text, or with ``source``, in its text: the generated code is then
        ``source.parsed`` from offset ``base`` on (one statement of a module, see
        :func:`layout`)."""
        tokens = self.tokens
        if self.popped is not None:
            tokens = [*tokens, self.popped]
        offsets = list(accumulate(map(len, tokens), initial=base))
        if source is None:
            source = SourceMap("".join(tokens))
        at = source.position

        found: dict[cst.CSTNode, CodeRange] = {}
        for node, start, end in self.marks.values():
            found[node] = CodeRange(
                CodePosition(*at(offsets[start])), CodePosition(*at(offsets[end], False))
            )
        spans: dict[cst.CSTNode, Span] = {}
        for node, start, end, indent in self.span_marks.values():
            spans[node] = (*at(offsets[start], False), *at(offsets[end], False), indent)
        return found, spans


def positions_of(
    module: cst.Module, nodes: Collection[cst.CSTNode], source: SourceMap | None = None
) -> dict[cst.CSTNode, CodeRange]:
    """Ranges (1-based lines, 0-based columns, as LibCST's) of ``nodes`` in ``module``, in
    ``source``'s text when given (see :class:`SourceMap`), else in the module's code."""
    return layout(module, nodes, source=source)[0]


# Beyond this many top-level statements holding a node, one pass over the module is as cheap.
MAX_LOCATED_STATEMENTS = 64


def layout(
    module: cst.Module,
    nodes: Collection[cst.CSTNode],
    spans: Collection[cst.CSTNode] = (),
    top_of: Callable[[cst.CSTNode], int | None] | None = None,
    offsets: Sequence[int] | None = None,
    starts: list[int] | None = None,
    text: str | None = None,
    ancestors: Callable[[cst.CSTNode], Iterable[cst.CSTNode]] | None = None,
    tops: Sequence[int] | None = None,
    source: SourceMap | None = None,
) -> Layout:
    """Ranges of ``nodes`` and spans of the statements ``spans``.

    Without more, in one codegen pass over the module. With ``top_of`` (node -> index of its
    top-level statement in ``module.body``) and ``starts`` (where the text's lines start), only
    the top-level statements holding a node are generated, then placed in the text: at
    ``offsets`` (where each top-level statement starts, what :mod:`distlint.incremental`
    knows), else by finding their code in ``text`` (the module's code): a statement's code that
    occurs once after the previous one placed is there; one that occurs more than once is placed
    by generating the statements before it. Beyond :data:`MAX_LOCATED_STATEMENTS` statements
    (where finding each one's code again costs more), at the offsets :func:`statement_offsets`
    reads from Python's own parser (or, given ``tops``, from where the guard's scan saw
    statements start at column 0: :func:`offsets_from_tops`, whatever the number of
    statements), each checked against the text. With ``ancestors`` (node -> its ancestors,
    innermost first), the nodes of a simple statement line are placed by generating that line
    alone (:class:`_Lines`), not the compound statement around it. Same result as the whole
    pass.

    ``source``: where the text LibCST parsed stands in the file's (:class:`SourceMap`); the
    ranges and spans are in the file's text, and ``text``, ``starts``, ``offsets`` and
    ``tops`` are of the parsed text (``source.parsed``). Without it, ``text`` is both.

    Raises :class:`TooDeep` for code nested beyond what even a large stack allows."""
    if not nodes and not spans:
        return {}, {}
    if source is None and text is not None:
        source = SourceMap(text, (), starts)
    if source is not None:
        text, starts = source.parsed, source.parsed_starts
    groups = None
    if top_of is not None and starts is not None:
        groups = _by_top_statement(module, nodes, spans, top_of, offsets is not None, text)
    checked = False  # are ``offsets`` ours (from the scan or ast), to be checked against the text?
    if groups is not None and offsets is None:
        many = len(groups) > MAX_LOCATED_STATEMENTS
        offsets, checked = _found_offsets(module, text, starts, tops, many)
        if offsets is None and many:
            groups = None

    def run() -> Layout | None:
        if groups is None:
            return _whole_pass(module, nodes, spans, source)
        lines = None
        if ancestors is not None and source is not None:
            lines = _Lines(module, source, ancestors, offsets)
        where = _Statements(module, text or "", offsets, checked, source)
        return _by_statement(groups, where, lines)

    return _laid_out(run, lambda: _whole_pass(module, nodes, spans, source), module, spans)


def _laid_out(
    run: Callable[[], Layout | None],
    whole: Callable[[], Layout],
    module: cst.Module,
    spans: Collection[cst.CSTNode],
) -> Layout:
    """``run()`` with a large stack, or ``whole()`` when it could not place a statement."""
    try:
        result = deep_call(run)
        if result is None:  # a statement could not be placed: the whole pass
            result = deep_call(whole)
        return result
    except TooDeep:
        raise
    except Exception:  # pragma: no cover - only if LibCST's internals change
        if spans:
            raise
        return deep_call(lambda: all_positions(module)), {}


def _found_offsets(
    module: cst.Module,
    text: str | None,
    starts: list[int] | None,
    tops: Sequence[int] | None,
    many: bool,
) -> tuple[Sequence[int] | None, bool]:
    """Where the top-level statements start, found here (so to be checked against the text):
    from the guard's ``tops`` (cheap: always worth it), else, for ``many`` statements, from
    Python's parser; and whether they were found."""
    offsets = None
    if tops is not None and text is not None and starts is not None:
        offsets = offsets_from_tops(module, text, starts, tops)
    if offsets is None and many:
        return statement_offsets(module, text or "", starts or [0]), True
    return offsets, offsets is not None


# For each top-level statement (by its index in the module's body): the wanted nodes in it,
# and the nodes in it whose spans are wanted.
_Groups = dict[int, tuple[list[cst.CSTNode], list[cst.CSTNode]]]


def _by_top_statement(
    module: cst.Module,
    nodes: Collection[cst.CSTNode],
    spans: Collection[cst.CSTNode],
    top_of: Callable[[cst.CSTNode], int | None],
    offsets_known: bool,
    text: str | None,
) -> _Groups | None:
    """``nodes`` and ``spans`` grouped by their top-level statement; None when one is outside
    every statement (the whole pass finds it), or when the statements cannot be placed: their
    offsets are not known, and the text is not, or ends without a line break (then the last
    statement's code is not the text's)."""
    if not offsets_known and (text is None or not module.has_trailing_newline):
        return None
    groups: _Groups = {}
    for kind, group in ((0, nodes), (1, spans)):
        for node in group:
            number = top_of(node)
            if number is None:
                return None
            groups.setdefault(number, ([], []))[kind].append(node)
    return groups


class _Statements:
    """Where the code generated for a top-level statement stands in the text: at its known
    offset (checked against the text when ``checked``), else where :class:`_Placer` finds it."""

    def __init__(
        self,
        module: cst.Module,
        text: str,
        offsets: Sequence[int] | None,
        checked: bool,
        source: SourceMap | None,
    ) -> None:
        self.module, self.text, self.offsets, self.checked = module, text, offsets, checked
        self.source = source
        self.placer = None if offsets is not None else _Placer(module, text)

    def place(
        self, number: int, inside: list[cst.CSTNode], inside_spans: list[cst.CSTNode]
    ) -> Layout | None:
        """The ranges of ``inside`` and spans of ``inside_spans``, all in top-level statement
        ``number``, from its code generated alone; None: it could not be placed."""
        module = self.module
        part = _statement_code(module, module.body[number], inside, inside_spans)
        if self.placer is not None:
            base = self.placer.place(number, "".join(part.tokens))
            if base is None:
                return None
        else:
            assert self.offsets is not None
            base = self.offsets[number]
            if self.checked and not self.text.startswith("".join(part.tokens), base or 0):
                return None
        return part.resolve(base or 0, self.source)


def _by_statement(groups: _Groups, where: _Statements, lines: _Lines | None) -> Layout | None:
    """The layout of the wanted nodes, statement by statement: each simple line alone where
    ``lines`` can, else its top-level statement; None: a statement could not be placed."""
    found: dict[cst.CSTNode, CodeRange] = {}
    found_spans: dict[cst.CSTNode, Span] = {}
    for number in sorted(groups):
        inside, inside_spans = groups[number]
        placed = lines.place(number, inside, inside_spans) if lines else None
        if placed is None:
            placed = where.place(number, inside, inside_spans)
            if placed is None:
                return None
        found.update(placed[0])
        found_spans.update(placed[1])
    return found, found_spans


class _Lines:
    """Ranges in the simple statement lines that hold the wanted nodes, without generating
    the top-level statement around them: a finding in a 300-line ``def main()`` costs one
    line's code generation, and a file where every statement holds a finding a few
    expressions' each.

    A line that is itself a top-level statement whose offset is known (from the language
    server's incremental parse, the guard's scan or Python's parser) is the text between its
    offset and the next statement's, once its comments and line break are found there. Any other line is generated alone (with the indentation of the
    blocks around it) and found in the text of its top-level statement (the whole text when
    where that starts is not known): its code (leading comments, indentation and line break
    included) occurring exactly once at a line start is that line, since LibCST's code is the
    text. In a placed line, each wanted expression is found by its own code, or by that of
    the smallest expression around it whose code occurs only once in the line. Anything else
    (a node in a compound statement's header, a suite on one line, a line that occurs twice)
    is left to the caller: :meth:`place` gives None."""

    MAX_CLIMB = 4  # expressions tried around a node whose own code occurs twice in its line

    def __init__(
        self,
        module: cst.Module,
        source: SourceMap,
        ancestors: Callable[[cst.CSTNode], Iterable[cst.CSTNode]],
        offsets: Sequence[int] | None,
    ) -> None:
        self.module = module
        self.source = source
        self.text = source.parsed
        self.ancestors = ancestors
        self.offsets = offsets
        self._footer: int | None = None

    def place(
        self, number: int, nodes: Sequence[cst.CSTNode], spans: Sequence[cst.CSTNode]
    ) -> Layout | None:
        by_line: dict[int, tuple[cst.SimpleStatementLine, list[cst.CSTNode], list[cst.CSTNode]]]
        by_line = {}
        for is_span, group in ((False, nodes), (True, spans)):
            for node in group:
                line = self._line_of(node)
                if line is None:
                    return None
                entry = by_line.setdefault(id(line), (line, [], []))
                (entry[2] if is_span else entry[1]).append(node)
        begin, end = 0, len(self.text)
        offsets = self.offsets
        if offsets is not None:
            begin = offsets[number]
            end = offsets[number + 1] if number + 1 < len(offsets) else end - self.footer()
        found: dict[cst.CSTNode, CodeRange] = {}
        found_spans: dict[cst.CSTNode, Span] = {}
        top = self.module.body[number]
        for line, inside, inside_spans in by_line.values():
            placed = None
            if line is top and offsets is not None:
                placed = self._place_top(line, inside, inside_spans, begin, end)
            if placed is None:
                placed = self._place_line(line, inside, inside_spans, begin, end)
            if placed is None:
                return None
            found.update(placed[0])
            found_spans.update(placed[1])
        return found, found_spans

    def _line_of(self, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
        if isinstance(node, cst.SimpleStatementLine):
            return node
        if isinstance(node, _HEADER_STOPS):
            return None
        for anc in self.ancestors(node):
            if isinstance(anc, cst.SimpleStatementLine):
                return anc
            if isinstance(anc, _HEADER_STOPS):
                return None  # in a compound statement's header, or a one-line suite
        return None

    def _place_top(
        self,
        line: cst.SimpleStatementLine,
        nodes: list[cst.CSTNode],
        spans: list[cst.CSTNode],
        begin: int,
        end: int,
    ) -> Layout | None:
        """A top-level line whose code is ``text[begin:end]``: nothing of it is generated but
        its comments and line break, and the wanted expressions."""
        if not line.body or not isinstance(line.body[-1].semicolon, cst.MaybeSentinel):
            return None  # `x = 1;`: where the statement's range ends is the generated code's
        module, text = self.module, self.text
        lead = _plain_code(module, line.leading_lines)
        trail = _plain_code(module, [line.trailing_whitespace])
        start, stop = begin + len(lead), end - len(trail)
        if (
            stop <= start
            or not text.startswith(lead, begin)
            or not text.startswith(trail, stop)
            or text[start] in " \t"  # a top-level statement is not indented
        ):
            return None
        found: dict[cst.CSTNode, CodeRange] = {}
        found_spans: dict[cst.CSTNode, Span] = {}
        for node in nodes:
            if node is line:
                found[node] = CodeRange(
                    CodePosition(*self.source.position(start)),
                    CodePosition(*self.source.position(stop, False)),
                )
            else:
                marked = self._search(node, line, start, stop, node in spans, [])
                if marked is None:
                    return None
                found.update(marked[0])
                found_spans.update(marked[1])
        for node in spans:
            if node is line:
                at = self.source.position
                found_spans[node] = (*at(begin, False), *at(end, False), ())
            elif node not in found_spans:
                marked = self._search(node, line, start, stop, True, [])
                if marked is None:
                    return None
                found_spans.update(marked[1])
        return found, found_spans

    def _place_line(
        self,
        line: cst.SimpleStatementLine,
        nodes: list[cst.CSTNode],
        spans: list[cst.CSTNode],
        begin: int,
        end: int,
    ) -> Layout | None:
        module = self.module
        state = _WantedPositionsState(module, [line, *nodes], spans)
        blocks = [a for a in self.ancestors(line) if isinstance(a, cst.IndentedBlock)]
        state.indent_tokens = [
            module.default_indent if b.indent is None else b.indent for b in reversed(blocks)
        ]
        line._codegen(state)
        at = self._once(state, begin, end, at_line_start=True)
        return None if at is None else state.resolve(at, self.source)

    def _search(
        self,
        node: cst.CSTNode,
        line: cst.SimpleStatementLine,
        start: int,
        stop: int,
        span: bool,
        indent: list[str],
    ) -> Layout | None:
        """``node``'s range (and span), found by the code of ``node`` or of the smallest
        expression around it that occurs once in ``text[start:stop]``."""
        tries = 0
        for candidate in (node, *self.ancestors(node)):
            if candidate is line or tries >= self.MAX_CLIMB:
                return None
            if not (
                isinstance(candidate, cst.BaseExpression) and context_free(candidate)
            ) and not isinstance(candidate, cst.Arg):
                # an argument generates its comma only when its parent asks (a parsed tree
                # holds every comma it has), after the value: the value's place is the same
                continue
            tries += 1
            state = _WantedPositionsState(self.module, (node,), (node,) if span else ())
            state.indent_tokens = list(indent)
            candidate._codegen(state)
            at = self._once(state, start, stop, at_line_start=False)
            if at is not None:
                return state.resolve(at, self.source)
        return None

    def _once(
        self, state: _WantedPositionsState, begin: int, end: int, at_line_start: bool
    ) -> int | None:
        """Where the code of ``state`` occurs in ``text[begin:end]`` when it occurs there
        exactly once (at a line start, with ``at_line_start``); else None."""
        code = "".join(state.tokens)
        if not code:
            return None
        text = self.text
        found = -1
        at = text.find(code, begin, end)
        while at >= 0:
            if not at_line_start or at == 0 or text[at - 1] in "\r\n":
                if found >= 0:
                    return None  # twice: which one is it
                found = at
            at = text.find(code, at + 1, end)
        return found if found >= 0 else None

    def footer(self) -> int:
        if self._footer is None:
            self._footer = len(_plain_code(self.module, self.module.footer))
        return self._footer


_CONTEXT_FREE: dict[type, bool] = {}
_VARARGS = 0x04 | 0x08  # CO_VARARGS | CO_VARKEYWORDS


def context_free(node: cst.CSTNode) -> bool:
    """Does ``node`` generate the same code wherever it stands (its ``_codegen_impl`` takes no
    argument from its parent, such as a default comma or semicolon)?"""
    tp = type(node)
    known = _CONTEXT_FREE.get(tp)
    if known is None:
        impl = tp._codegen_impl
        code = getattr(impl, "__code__", None)
        if code is None or hasattr(impl, "__wrapped__"):
            import inspect

            plain = list(inspect.signature(impl).parameters) == ["self", "state"]
        else:  # exactly (self, state): no default, no *args or **kwargs, no keyword-only
            plain = (
                code.co_varnames[: code.co_argcount] == ("self", "state")
                and code.co_kwonlyargcount == 0
                and not code.co_flags & _VARARGS
                and not impl.__defaults__
            )
        known = plain and isinstance(
            node, (cst.BaseExpression, cst.SimpleStatementLine, cst.BaseCompoundStatement)
        )
        _CONTEXT_FREE[tp] = known
    return known


# A node inside one of these, before any simple statement line, is not in a line of its own.
_HEADER_STOPS = (cst.BaseCompoundStatement, cst.BaseSuite, cst.Module)


# The code of a statement with its marks, by statement and wanted nodes: a language server
# re-lints after each edit, and the statements an edit did not touch are the same nodes again.
_STATEMENT_CODES: dict[tuple, tuple[tuple[cst.CSTNode, ...], _WantedPositionsState]] = {}
MAX_STATEMENT_CODES = 64


def _statement_code(
    module: cst.Module,
    statement: cst.CSTNode,
    nodes: Sequence[cst.CSTNode],
    spans: Sequence[cst.CSTNode],
) -> _WantedPositionsState:
    """``statement`` generated with the marks of ``nodes`` and ``spans`` (remembered: the
    cache holds the nodes, so their ids stay theirs while an entry lives)."""
    key = (
        id(statement),
        module.default_indent,
        module.default_newline,
        tuple(map(id, nodes)),
        tuple(map(id, spans)),
    )
    known = _STATEMENT_CODES.get(key)
    if known is not None and known[0][0] is statement:
        return known[1]
    part = _WantedPositionsState(module, nodes, spans)
    statement._codegen(part)
    if len(_STATEMENT_CODES) >= MAX_STATEMENT_CODES:
        del _STATEMENT_CODES[next(iter(_STATEMENT_CODES))]  # the oldest goes
    _STATEMENT_CODES[key] = ((statement, *nodes, *spans), part)
    return part


def python_ast(text: str) -> ast.Module:
    """``ast.parse(text)`` without the warnings Python's parser gives about the code (an
    invalid escape sequence, `1()`): the user's code is not ours to warn about."""
    import ast
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def statement_offsets(module: cst.Module, text: str, starts: Sequence[int]) -> list[int] | None:
    """Where each statement of ``module.body`` starts in ``text`` (the module's code), its
    leading comment and blank lines included, from the line numbers of Python's own parser
    (``ast``, about a tenth of LibCST's parse and of its code generation). None when ``ast``
    refuses the text or its statements do not line up with LibCST's; callers check each
    statement's code at its offset all the same (a parenthesised decorator starts a line
    later in ``ast``)."""
    try:
        tree = python_ast(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    theirs = tree.body
    found: list[int] = []
    k = 0
    for stmt in module.body:
        if k >= len(theirs):
            return None
        node = theirs[k]
        line = node.lineno
        decorators = getattr(node, "decorator_list", None)
        if decorators and isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators:
            line = min(line, decorators[0].lineno) - len(stmt.decorators[0].leading_lines)
        line -= len(stmt.leading_lines)
        if not 1 <= line <= len(starts):
            return None
        found.append(starts[line - 1])
        k += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
    return found if k == len(theirs) else None


_CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")


def offsets_from_tops(
    module: cst.Module, text: str, starts: Sequence[int], tops: Sequence[int]
) -> list[int] | None:
    """:func:`statement_offsets` from ``tops``, the offsets of the first tokens of the lines
    that start a statement at column 0 (:func:`distlint.guard.check_source` collects them as it
    scans): each statement of ``module.body`` starts at one of them, less its leading comment
    lines; a decorated definition at its first decorator; an ``else:`` / ``except:`` line
    continues the statement before it. None when they do not line up with ``module.body``
    (callers check each statement's code at its offset all the same)."""
    found: list[int] = []
    k, n = 0, len(tops)
    for stmt in module.body:
        while k < n and _CLAUSE.match(text, tops[k]):
            k += 1
        if k >= n:
            return None
        first = tops[k]
        leading = len(stmt.leading_lines)
        decorators = getattr(stmt, "decorators", None)
        if text.startswith("@", first):
            if not decorators:
                return None
            leading += len(decorators[0].leading_lines)
            k += len(decorators)  # one line each (a decorator spans lines only in brackets)
            if k >= n or text.startswith("@", tops[k]):
                return None
        elif decorators:
            return None
        k += 1
        line = bisect_right(starts, first) - leading
        if line < 1:
            return None
        found.append(starts[line - 1])
    while k < n and _CLAUSE.match(text, tops[k]):
        k += 1
    return found if k == n else None


def _whole_pass(
    module: cst.Module,
    nodes: Collection[cst.CSTNode],
    spans: Collection[cst.CSTNode],
    source: SourceMap | None = None,
) -> Layout:
    state = _WantedPositionsState(module, nodes, spans)
    module._codegen(state)
    if source is not None:
        code = state.code()
        if code != source.parsed:
            source = aligned(code, source)
    return state.resolve(0, source)


_DROPPABLE = " \t\x0c\\\r\n"


def aligned(code: str, source: SourceMap) -> SourceMap | None:
    """``source`` with more cuts, for ``code`` (LibCST's code of the module) that is not
    ``source.parsed``: LibCST gives back a few odd lines without some of their blanks, form
    feeds and backslash continuations that its parse kept out of every node. Each run of
    those, where ``code`` skips it, becomes a cut; None (positions in the code itself) when
    ``code`` differs in anything else (nothing is guessed)."""
    parsed = source.parsed
    extra: list[tuple[int, int]] = []
    i = j = 0
    while True:
        n = _common_prefix(code, i, parsed, j)
        i, j = i + n, j + n
        if i == len(code):
            if j < len(parsed):
                if parsed[j:].strip(_DROPPABLE):
                    return None
                extra.append((j, len(parsed)))
            break
        k = j
        while k < len(parsed) and parsed[k] != code[i] and parsed[k] in _DROPPABLE:
            k += 1
        if k == j or k == len(parsed) or parsed[k] != code[i]:
            return None
        extra.append((j, k))
        j = k
    cuts = sorted(
        [*source.cuts, *((source.to_text(a, False), source.to_text(b, False)) for a, b in extra)]
    )
    merged: list[tuple[int, int]] = []
    for a, b in cuts:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    result = SourceMap(source.text, merged, source.starts)
    return result if result.parsed == code else None


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``, by bisection over slice
    comparisons (C speed)."""
    low, high = 0, min(len(a) - i, len(b) - j)
    while low < high:
        mid = (low + high + 1) // 2
        if a[i + low : i + mid] == b[j + low : j + mid]:
            low = mid
        else:
            high = mid - 1
    return low


class _Placer:
    """Where top-level statements start in a module's text, asked in increasing order."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self.module = module
        self.text = text
        self.number = 0  # the statement that starts at `self.offset` (or later ones do)
        self.offset = len(_plain_code(module, module.header))

    def place(self, number: int, code: str) -> int | None:
        text = self.text
        at = text.find(code, self.offset)  # the statement starts at or after self.offset
        if at < 0:
            return None
        if text.find(code, at + 1) >= 0:  # more than once: which occurrence is statement `number`
            found = self._counted(number, code, at)
            if found is None:
                found = self.offset  # count the code of the statements before it
                for statement in self.module.body[self.number : number]:
                    found += len(_plain_code(self.module, [statement]))
            at = found
            if not text.startswith(code, at):
                return None
        self.number, self.offset = number + 1, at + len(code)
        return at

    def _counted(self, number: int, code: str, at: int) -> int | None:
        """The occurrence of ``code`` (from ``at`` on) that follows exactly the statements
        ``self.number .. number - 1``, counted by Python's own parser on the text between
        occurrences (each piece parsed once); None when that parser refuses a piece."""
        wanted = 0  # the statements before it, as ast counts them (`a; b` is two)
        for statement in self.module.body[self.number : number]:
            wanted += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        text, seen, begin = self.text, 0, self.offset
        while at >= 0:
            if at == 0 or text[at - 1] in "\r\n":  # a statement's code starts a line
                try:
                    piece = python_ast(text[begin:at])
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return None
                seen += len(piece.body)
                if seen == wanted:
                    return at
                if seen > wanted:
                    return None
                begin = at
            at = text.find(code, at + 1)
        return None


def _plain_code(module: cst.Module, nodes: Sequence[cst.CSTNode]) -> str:
    state = CodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline
    )
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)


def all_positions(module: cst.Module):
    """Every node's range, through LibCST's own PositionProvider (e.g. for every comment)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
