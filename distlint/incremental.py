"""Re-parsing an edited text by re-parsing only the top-level statements the edit touched.

The language server lints the same document again at every pause in typing, and most edits
change one statement. :class:`Document` keeps the last text, its module and where each of the
module's top-level statements starts; :meth:`Document.update` re-parses the statements around
the changed span (one more on each side: an edit can change which statement a comment line
belongs to) and splices them into the old module. The result is checked, not trusted: the
re-parsed statements, generated with the module's own indentation and newline, must give back
exactly the new text between the unchanged parts, else the whole text is parsed again. Edits in
the module's header or footer, and files without a final newline, are parsed whole.

An edit inside one function (a training script's ``main()`` is often most of the file) goes
deeper: the statements around it in the innermost indented block holding it are re-parsed, as
the body of as many ``if 1:`` lines as the block is deep (so their indentation, continuation
lines and strings are read exactly as in the file), and spliced into that block. Where each
statement inside a top-level one starts is learnt from the same code generation that gives the
top-level offsets, once per statement text (:meth:`Document.prepare`, between lints).

The offsets also let :func:`distlint.positions.layout` generate only the statements that hold a
reported node, instead of the whole module.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any, NamedTuple

import libcst as cst

from distlint._libcst_compat import CodegenState
from distlint.collector import free

# How a piece of an edited text is parsed: its module, or None (refused, or not parsed)
Parser = Callable[[str], "cst.Module | None"]


class Edit(NamedTuple):
    """What :meth:`Document.update` replaced to make the new module from the old one: the
    statements ``removed`` (consecutive ones of one block, or of the module) became ``added``,
    and each node holding them, up to the module, was rebuilt around them (``rebuilt``: pairs
    of (old node, new node), the module's first). Every other node of the new module is the
    old module's own (:mod:`distlint.analysis.reindex` reuses what the index knew of them)."""

    rebuilt: Sequence[tuple[cst.CSTNode, cst.CSTNode]]
    removed: Sequence[cst.CSTNode]
    added: Sequence[cst.CSTNode]


# how many statements beyond those the edit touched are re-parsed, on each side
MARGIN = 1


def _code(module: cst.Module, nodes: list, indent: Sequence[str] = ()) -> list[str]:
    out = []
    for node in nodes:
        state = CodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        state.indent_tokens = list(indent)
        node._codegen(state)
        out.append("".join(state.tokens))
    return out


# Where each statement inside one top-level statement starts and ends, from the start of that
# statement's code: id(statement) -> (start, end).
Spans = dict[int, tuple[int, int]]


class _Marking(CodegenState):
    """LibCST's codegen state, noting where each statement's tokens start and end."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.marks: dict[int, list[int]] = {}

    def before_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.marks[id(node)] = [len(self.tokens)]

    def after_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.marks[id(node)].append(len(self.tokens))


def _code_and_spans(module: cst.Module, node: cst.CSTNode) -> tuple[str, Spans]:
    """The code of top-level statement ``node`` and the spans of the statements inside it."""
    state = _Marking(module)
    node._codegen(state)
    at = list(accumulate(map(len, state.tokens), initial=0))
    spans = {key: (at[start], at[end]) for key, (start, end) in state.marks.items()}
    return "".join(state.tokens), spans


def statement_offsets(module: cst.Module, spans: dict[int, Any] | None = None) -> list[int] | None:
    """Where each top-level statement starts in ``module.code``, then where the last one ends
    (None for a module without a final newline: its last statement's code is not its text).
    ``spans``: filled with id(statement) -> (statement, its :data:`Spans`)."""
    if not module.has_trailing_newline and module.body:
        return None
    header = "".join(_code(module, list(module.header)))
    offsets = [len(header)]
    for node in module.body:
        code, inner = _code_and_spans(module, node)
        if spans is not None:
            spans[id(node)] = (node, inner)
        offsets.append(offsets[-1] + len(code))
    return offsets


class Document:
    """One document's last text, its module and its statement offsets (see module doc)."""

    def __init__(
        self, text: str = "", module: cst.Module | None = None, offsets: list[int] | None = None
    ) -> None:
        self.text = text
        self.module = module
        self._offsets = offsets
        # id(top-level statement) -> (the statement, the spans of the statements inside it)
        self._spans: dict[int, tuple[cst.CSTNode, Spans]] = {}
        self.reparsed = 0  # statements re-parsed by the last update (tests, benchmarks)
        self.nested = False  # the last update re-parsed statements inside a block
        self.edit: Edit | None = None  # what the last update replaced (see Edit)
        # the analysis index of `module`, kept for the next edit (by the engine: see
        # distlint.analysis.reindex), and released with the document's module
        self.index: Any = None

    def reset(self, text: str, module: cst.Module | None) -> None:
        """A text parsed whole: the document starts again from it (None: from no module; an
        edit of it is then parsed whole)."""
        self.text, self.module, self._offsets = text, module, None
        self._spans = {}
        self.reparsed = 0
        self.nested = False
        self.edit = None
        self.let_go()

    def let_go(self) -> None:
        """Release the index kept (its cycles broken: see `Index.release`), now or, in the
        language server's worker, once the reply is sent (:func:`distlint.collector.free`)."""
        index, self.index = self.index, None
        if index is not None:
            free(index)

    @property
    def offsets(self) -> list[int] | None:
        if self._offsets is None and self.module is not None:
            self._spans = {}
            self._offsets = statement_offsets(self.module, self._spans)
        return self._offsets

    def prepare(self) -> None:
        """Compute what the next edit needs (the offsets, the spans inside each top-level
        statement) now, between lints: the language server's worker calls this when idle."""
        if self.offsets is None or self.module is None:
            return
        body = self.module.body
        kept = {id(node) for node in body}
        self._spans = {k: v for k, v in self._spans.items() if k in kept}
        for node in body:
            if id(node) not in self._spans:
                self._spans[id(node)] = (node, _code_and_spans(self.module, node)[1])

    def _spans_of(self, node: cst.CSTNode) -> Spans | None:
        found = self._spans.get(id(node))
        return found[1] if found is not None and found[0] is node else None

    def update(
        self, text: str, parser: Parser | None = None
    ) -> tuple[cst.Module, list[int]] | None:
        """The module of ``text`` (an edit of this document's text) and its offsets, from the
        old module with the edited statements re-parsed; None when the text must be parsed
        whole (or does not parse: the caller's own parse reports it). ``parser``: how a piece
        of text is parsed, None when it is refused or does not parse (the lint's is
        :func:`distlint.parse.parse_piece`, the guard first; by default LibCST's parse)."""
        old, module, offsets = self.text, self.module, self.offsets
        if module is None or offsets is None or not module.body:
            return None
        body = module.body
        self.nested = False
        self.edit = None
        found = self._update_inside(text, module, offsets, parser)
        if found is not None:
            return found
        edited = _edited_statements(old, text, offsets, len(body))
        if edited is None:
            return None  # the header or the footer changed
        first, last = edited
        begin, end = offsets[first], offsets[last + 1]
        delta = len(text) - len(old)
        piece = text[begin : end + delta]
        sub = _parse_piece(piece, parser, module, first, last, begin)
        if sub is None:
            return None
        statements = list(sub.body)
        header = list(module.header)
        if sub.header:  # comment lines the piece starts with: the module's, or the statement's
            if first == 0:
                header += sub.header
            elif statements:
                statements[0] = statements[0].with_changes(
                    leading_lines=[*sub.header, *statements[0].leading_lines]
                )
            else:
                return None
        codes = _code(module, statements)
        if "".join(_code(module, list(sub.header)) if first == 0 else ()) + "".join(codes) != piece:
            return None  # parsed differently alone: parse it whole
        new_module = module.with_changes(
            header=header, body=[*body[:first], *statements, *body[last + 1 :]]
        )
        new_offsets = offsets[: first + 1]
        if first == 0:
            new_offsets[0] += sum(map(len, _code(module, list(sub.header))))
        for code in codes:
            new_offsets.append(new_offsets[-1] + len(code))
        new_offsets += [o + delta for o in offsets[last + 2 :]]
        self.text, self.module, self._offsets = text, new_module, new_offsets
        self.reparsed = len(statements)
        self.edit = Edit([(module, new_module)], list(body[first : last + 1]), statements)
        return new_module, new_offsets

    def _update_inside(
        self,
        text: str,
        module: cst.Module,
        offsets: list[int],
        parser: Parser | None,
    ) -> tuple[cst.Module, list[int]] | None:
        """:meth:`update` for an edit inside one indented block of one top-level statement:
        the statements of that block around it re-parsed; None when the edit is not inside one
        block, the spans are not known yet, or the piece does not read as it does in place."""
        old = self.text
        start, tail = _common_ends(old, text)
        old_end = len(old) - tail
        k = bisect_right(offsets, start) - 1
        if k < 0 or k >= len(module.body) or old_end > offsets[k + 1]:
            return None
        top = module.body[k]
        spans = self._spans_of(top)
        if spans is None or not isinstance(top, cst.BaseCompoundStatement):
            return None
        base = offsets[k]
        path = _innermost_block(top, spans, start - base, old_end - base)
        if not path:
            return None
        block = path[-1][1]
        kids = block.body
        i, j = path[-1][2], path[-1][3]
        a, b = max(0, i - MARGIN), min(len(kids) - 1, j + MARGIN)
        begin, end = base + spans[id(kids[a])][0], base + spans[id(kids[b])][1]
        delta = len(text) - len(old)
        piece = text[begin : end + delta]
        indent = [
            step[1].indent if step[1].indent is not None else module.default_indent for step in path
        ]
        statements = _parse_block_piece(piece, indent, module, parser)
        if statements is None:
            return None
        if "".join(_code(module, statements, indent)) != piece:
            return None  # parsed differently in place: re-parse the whole statements
        rebuilt = _replaced(path, [*kids[:a], *statements, *kids[b + 1 :]])
        new_top = rebuilt[0][1]
        new_module = module.with_changes(body=[*module.body[:k], new_top, *module.body[k + 1 :]])
        new_offsets = offsets[: k + 1] + [o + delta for o in offsets[k + 1 :]]
        self.text, self.module, self._offsets = text, new_module, new_offsets
        self.reparsed = len(statements)
        self.nested = True
        self.edit = Edit([(module, new_module), *rebuilt], list(kids[a : b + 1]), statements)
        return new_module, new_offsets


# The nodes of a compound statement that hold an indented block of it (`else:`, `except:`, an
# `elif` (an If in `orelse`), `finally:`, a `case`).
_HOLDERS = (
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def _blocks(node: cst.CSTNode) -> Iterator[tuple[cst.IndentedBlock, list[cst.CSTNode]]]:
    """The indented blocks of compound statement ``node`` (not those of statements inside
    them), each with the nodes from ``node`` down to it."""
    todo: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = [(node, [node])]
    while todo:
        holder, way = todo.pop(0)
        for child in _held(holder):
            if isinstance(child, cst.IndentedBlock):
                yield child, way
            elif isinstance(child, _HOLDERS):
                todo.append((child, [*way, child]))


def _held(node: cst.CSTNode) -> Iterator[Any]:
    """What ``node``'s fields hold, lists spread (its child nodes among them): LibCST's
    ``children`` would build a copy of the node to list them."""
    names = _FIELD_NAMES.get(type(node))
    if names is None:
        names = _FIELD_NAMES[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    for name in names:
        value = getattr(node, name)
        if type(value) is list or type(value) is tuple:
            yield from value
        else:
            yield value


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _innermost_block(
    top: cst.CSTNode, spans: Spans, start: int, end: int
) -> list[tuple[list[cst.CSTNode], cst.IndentedBlock, int, int]]:
    """The indented blocks, from ``top`` inwards, whose statements hold the edited span
    ``[start, end)`` (offsets from the start of ``top``'s code): for each, the nodes from the
    statement owning it down to it, the block, and the first and last of its statements the
    edit touched. Empty when no block of ``top`` holds the whole span."""
    path: list[tuple[list[cst.CSTNode], cst.IndentedBlock, int, int]] = []
    node: cst.CSTNode = top
    while isinstance(node, cst.BaseCompoundStatement):
        for block, way in _blocks(node):
            kids = block.body
            if kids and spans[id(kids[0])][0] <= start and end <= spans[id(kids[-1])][1]:
                break
        else:
            break
        starts = [spans[id(kid)][0] for kid in kids]
        i = bisect_right(starts, start) - 1
        j = bisect_right(starts, max(end - 1, start)) - 1
        path.append((way, block, i, j))
        if i != j:
            break
        node = kids[i]
    return path


def _parse_block_piece(
    piece: str,
    indent: list[str],
    module: cst.Module,
    parser: Parser | None,
) -> list[cst.BaseStatement] | None:
    """The statements of ``piece`` (whole lines of statements of a block nested
    ``len(indent)`` deep, ``indent`` the indentation each level adds), parsed as the body of
    that many ``if 1:`` lines; None when they do not parse as exactly that."""
    newline = module.default_newline
    lines = ["".join(indent[:depth]) + "if 1:" + newline for depth in range(len(indent))]
    sub = _parsed("".join(lines) + piece, parser)
    if sub is None or sub.header or sub.footer or len(sub.body) != 1:
        return None
    sub = _with_defaults_of(module, sub)
    node: cst.CSTNode = sub
    statements: Sequence[cst.CSTNode] = sub.body
    for _ in indent:
        if len(statements) != 1 or not isinstance(statements[0], cst.If):
            return None
        wrapper = statements[0]
        body = wrapper.body
        if wrapper.orelse is not None or not isinstance(body, cst.IndentedBlock) or body.footer:
            return None
        node, statements = body, body.body
    if node is sub or not statements:
        return None
    return [s for s in statements if isinstance(s, cst.BaseStatement)]


def _replaced(
    path: list[tuple[list[cst.CSTNode], cst.IndentedBlock, int, int]], body: list
) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """The top-level statement of ``path`` with its innermost block's statements ``body``:
    each node from that block up to the statement rebuilt with its new child; (old node, new
    node) for each, the top-level statement first."""
    chain: list[cst.CSTNode] = []  # from the top-level statement down to the innermost block
    for way, block, _, _ in path:
        chain += [*way, block]
    old: cst.CSTNode = chain[-1]
    new: cst.CSTNode = path[-1][1].with_changes(body=body)
    rebuilt = [(old, new)]
    for parent in reversed(chain[:-1]):
        new, old = _with_child(parent, old, new), parent
        rebuilt.append((old, new))
    rebuilt.reverse()
    return rebuilt


def _with_child(parent: cst.CSTNode, old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    """``parent`` with its child ``old`` replaced by ``new`` (a field, or an item of one)."""
    for field in dataclasses.fields(parent):
        value = getattr(parent, field.name)
        if value is old:
            return parent.with_changes(**{field.name: new})
        if isinstance(value, (list, tuple)) and any(v is old for v in value):
            items = [new if v is old else v for v in value]
            return parent.with_changes(**{field.name: type(value)(items)})
    raise ValueError("not a child")  # pragma: no cover - the path was read from the tree


def _edited_statements(
    old: str, text: str, offsets: list[int], count: int
) -> tuple[int, int] | None:
    """The first and last of the ``count`` top-level statements (starting at ``offsets`` in
    ``old``) that the edit of ``old`` into ``text`` touched, with :data:`MARGIN` more on each
    side; None when it touched the module's header or footer."""
    start, tail = _common_ends(old, text)
    old_end = len(old) - tail
    if start < offsets[0] or old_end > offsets[-1]:
        return None
    first = bisect_right(offsets, start) - 1
    last = bisect_right(offsets, max(old_end - 1, start)) - 1
    return max(0, first - MARGIN), min(count - 1, last + MARGIN)


def _parse_piece(
    piece: str,
    parser: Parser | None,
    module: cst.Module,
    first: int,
    last: int,
    begin: int,
) -> cst.Module | None:
    """``piece`` (statements ``first`` to ``last`` of ``module``'s edited text, from offset
    ``begin``) parsed alone, written with ``module``'s defaults; None when it is refused, does
    not parse, or does not parse as a run of whole statements like the module's."""
    sub = _parsed(piece, parser)
    if sub is None or not sub.has_trailing_newline or sub.footer:
        return None
    if not _same_defaults(module, sub, first, last, begin):
        return None
    return _with_defaults_of(module, sub)


def _parsed(source: str, parser: Parser | None) -> cst.Module | None:
    """``source`` parsed; None when it is refused or does not parse."""
    if parser is not None:
        return parser(source)
    try:
        return cst.parse_module(source)
    except Exception:
        return None


def _with_defaults_of(module: cst.Module, sub: cst.Module) -> cst.Module:
    """``sub`` (a piece parsed alone) as ``module``'s parse would hold it (see `_Defaults`)."""
    if (sub.default_indent, sub.default_newline) == (
        module.default_indent,
        module.default_newline,
    ):
        return sub
    return sub.visit(_Defaults(sub, module))


class _Defaults(cst.CSTTransformer):
    """A piece parsed alone, written as the module's parse would hold it: LibCST leaves a
    block's indentation (a newline) unset when it is the file's default, which the piece
    detected from itself."""

    def __init__(self, piece: cst.Module, module: cst.Module) -> None:
        super().__init__()
        self.piece, self.module = piece, module

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        wanted = _unless_default(
            updated_node.indent, self.piece.default_indent, self.module.default_indent
        )
        return (
            updated_node
            if wanted == updated_node.indent
            else updated_node.with_changes(indent=wanted)
        )

    def leave_Newline(self, original_node: cst.Newline, updated_node: cst.Newline) -> cst.Newline:
        wanted = _unless_default(
            updated_node.value, self.piece.default_newline, self.module.default_newline
        )
        return (
            updated_node
            if wanted == updated_node.value
            else updated_node.with_changes(value=wanted)
        )


def _unless_default(value: str | None, piece_default: str, module_default: str) -> str | None:
    """A node's own indent / newline (None: the piece's default), as the module should hold
    it: None where it is the module's default."""
    actual = value if value is not None else piece_default
    return None if actual == module_default else actual


def _common_ends(a: str, b: str) -> tuple[int, int]:
    """(length of the common prefix of ``a`` and ``b``, length of their common suffix after
    it), by bisection over slice comparisons (C speed)."""
    limit = min(len(a), len(b))
    low, high = 0, limit  # a[:low] == b[:low]
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    prefix = low
    room = limit - prefix
    low, high = 0, room  # the last `low` characters agree
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid : len(a) - low] == b[len(b) - mid : len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return prefix, low


def _has_block(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.BaseCompoundStatement) and isinstance(
        statement.body, cst.IndentedBlock
    )


def _same_defaults(module: cst.Module, sub: cst.Module, first: int, last: int, begin: int) -> bool:
    """Would a parse of the whole new text detect the module's default indentation and newline?
    LibCST takes the indentation from the first indented block, the newline from the first
    line: the piece decides them only when nothing before it does."""
    body = module.body
    block = next((i for i, s in enumerate(body) if _has_block(s)), None)
    if block is None or block >= first:  # no indented block before the piece
        if any(_has_block(s) for s in sub.body):
            if sub.default_indent != module.default_indent:
                return False
        elif block is not None and block <= last:
            return False  # the first block is gone: the next one decides
    if begin == 0 and sub.default_newline != module.default_newline:
        return False
    return True
