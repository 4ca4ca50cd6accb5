"""Re-parsing an edited text by re-parsing only the top-level statements the edit touched.

The language server lints the same document again at every pause in typing, and most edits
change one statement. :class:`Document` keeps the last text, its module and where each of the
module's top-level statements starts; :meth:`Document.update` re-parses the statements around
the changed span (one more on each side: an edit can change which statement a comment line
belongs to) and splices them into the old module. The result is checked, not trusted: the
re-parsed statements, generated with the module's own indentation and newline, must give back
exactly the new text between the unchanged parts, else the whole text is parsed again. Edits in
the module's header or footer, and files without a final newline, are parsed whole.

The offsets also let :func:`distlint.positions.layout` generate only the statements that hold a
reported node, instead of the whole module.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

import libcst as cst

from distlint._libcst_compat import CodegenState

# how many statements beyond those the edit touched are re-parsed, on each side
MARGIN = 1


def _code(module: cst.Module, nodes: list) -> list[str]:
    out = []
    for node in nodes:
        state = CodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        node._codegen(state)
        out.append("".join(state.tokens))
    return out


def statement_offsets(module: cst.Module) -> list[int] | None:
    """Where each top-level statement starts in ``module.code``, then where the last one ends
    (None for a module without a final newline: its last statement's code is not its text)."""
    if not module.has_trailing_newline and module.body:
        return None
    header = "".join(_code(module, list(module.header)))
    offsets = [len(header)]
    for code in _code(module, list(module.body)):
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
        self.reparsed = 0  # statements re-parsed by the last update (tests, benchmarks)

    def reset(self, text: str, module: cst.Module | None) -> None:
        """A text parsed whole: the document starts again from it (None: from no module; an
        edit of it is then parsed whole)."""
        self.text, self.module, self._offsets = text, module, None
        self.reparsed = 0

    @property
    def offsets(self) -> list[int] | None:
        if self._offsets is None and self.module is not None:
            self._offsets = statement_offsets(self.module)
        return self._offsets

    def update(
        self, text: str, safe: Callable[[str], bool] | None = None
    ) -> tuple[cst.Module, list[int]] | None:
        """The module of ``text`` (an edit of this document's text) and its offsets, from the
        old module with the edited statements re-parsed; None when the text must be parsed
        whole (or does not parse: the caller's own parse reports it). ``safe``: is a piece of
        text safe to give LibCST (:func:`distlint.guard.check_source`)?"""
        old, module, offsets = self.text, self.module, self.offsets
        if module is None or offsets is None or not module.body:
            return None
        body = module.body
        edited = _edited_statements(old, text, offsets, len(body))
        if edited is None:
            return None  # the header or the footer changed
        first, last = edited
        begin, end = offsets[first], offsets[last + 1]
        delta = len(text) - len(old)
        piece = text[begin : end + delta]
        sub = _parse_piece(piece, safe, module, first, last, begin)
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
        return new_module, new_offsets


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
    safe: Callable[[str], bool] | None,
    module: cst.Module,
    first: int,
    last: int,
    begin: int,
) -> cst.Module | None:
    """``piece`` (statements ``first`` to ``last`` of ``module``'s edited text, from offset
    ``begin``) parsed alone, written with ``module``'s defaults; None when it is not safe to
    parse, does not parse, or does not parse as a run of whole statements like the module's."""
    if safe is not None and not safe(piece):
        return None
    try:
        sub = cst.parse_module(piece)
    except Exception:
        return None
    if not sub.has_trailing_newline or sub.footer:
        return None
    if not _same_defaults(module, sub, first, last, begin):
        return None
    if (sub.default_indent, sub.default_newline) != (
        module.default_indent,
        module.default_newline,
    ):
        sub = sub.visit(_Defaults(sub, module))
    return sub


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
