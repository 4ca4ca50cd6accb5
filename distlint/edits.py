"""Text edits: positions in a text, choosing compatible fixes, splicing edits into the text.

Pure text, no LibCST: a warm cache, the language server and the CLI apply a finding's edits
without parsing anything. Edits are applied to the ORIGINAL text (ruff's model), so every byte
outside an edited span stays as it was, whatever LibCST would do with it when re-serialising.
"""

from __future__ import annotations

import io
import re
import tokenize
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from distlint.model import Applicability, Edit, Finding, Fix, Range

# Where LibCST, the tokenizer and LSP clients break lines.
NEWLINE = re.compile(r"\r\n?|\n")


class LineIndex:
    """Offsets of the line starts of one text: (line, column) <-> offset."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in NEWLINE.finditer(text)]

    def offset(self, line: int, column0: int) -> int:
        """Offset of 1-based ``line``, 0-based ``column0`` (clamped to the text)."""
        if line < 1:
            return 0
        if line > len(self.starts):
            return len(self.text)
        return min(self.starts[line - 1] + column0, self.content_end(line))

    def content_end(self, line: int) -> int:
        """Offset where ``line``'s content ends (before its line ending)."""
        if line >= len(self.starts):
            return len(self.text)
        end = self.starts[line]
        text = self.text
        if end >= 2 and text[end - 2 : end] == "\r\n":
            return end - 2
        return end - 1

    def line_start(self, line: int) -> int:
        if line > len(self.starts):
            return len(self.text)
        return self.starts[max(line, 1) - 1]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and 1-based column of ``offset``."""
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    def range(self, start: int, end: int) -> Range:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Range(line, column, end_line, end_column)

    def edit(self, start: int, end: int, content: str) -> Edit:
        return Edit(start, end, content, self.range(start, end))


def decode(data: bytes) -> tuple[str, str]:
    """Decode Python source bytes as the interpreter would (PEP 263 cookie, BOM): (text, codec).

    ``text.encode(codec)`` gives the bytes back (``utf-8-sig`` restores a BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):  # a BOM under a `# coding: utf-8` cookie
        text, encoding = text[1:], "utf-8-sig"
    return text, encoding


# ------------------------------------------------------------------------------------------
# Choosing and applying fixes
# ------------------------------------------------------------------------------------------


def _overlaps(a: Edit, b: Edit) -> bool:
    """Two edits overlap when their spans share a character, or one inserts strictly inside
    the other's span. Insertions at the same point, or at the boundary of a replaced span,
    do not overlap: they apply in order."""
    if a.start == a.end and b.start == b.end:
        return False
    if a.start == a.end:
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


def choose(fixes: Sequence[Fix]) -> tuple[list[Fix], list[Fix]]:
    """The fixes of ``fixes`` that apply together in one round (first come first served), and
    the deferred rest: an edit overlapping an edit already chosen (an identical edit, such as
    the same import added by two fixes, is shared, not a conflict), or a second fix of one
    isolation group."""
    chosen: list[Fix] = []
    deferred: list[Fix] = []
    claimed: list[Edit] = []
    claimed_set: set[tuple[int, int, str]] = set()
    groups: set[str] = set()
    for fix in fixes:
        if fix.isolation is not None and fix.isolation in groups:
            deferred.append(fix)
            continue
        own = [e for e in fix.edits if (e.start, e.end, e.content) not in claimed_set]
        if any(_overlaps(e, c) for e in own for c in claimed) or _self_overlap(own):
            deferred.append(fix)
            continue
        chosen.append(fix)
        claimed.extend(own)
        claimed_set.update((e.start, e.end, e.content) for e in own)
        if fix.isolation is not None:
            groups.add(fix.isolation)
    return chosen, deferred


def _self_overlap(edits: Sequence[Edit]) -> bool:
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    return any(_overlaps(a, b) for a, b in zip(ordered, ordered[1:]))


def ordered_edits(fixes: Iterable[Fix]) -> list[Edit]:
    """Every edit of ``fixes`` once, sorted by position; insertions at one point keep the order
    of their fixes, and of an insertion repeated by several fixes the last place is kept (the
    blank line that closes an import block comes after every import added there)."""
    seq: list[tuple[int, Edit]] = []
    for fix in fixes:
        for edit in fix.edits:
            seq.append((len(seq), edit))
    last: dict[tuple[int, int, str], int] = {}
    for i, edit in seq:
        last[(edit.start, edit.end, edit.content)] = i
    unique = [(i, e) for i, e in seq if last[(e.start, e.end, e.content)] == i]
    unique.sort(key=lambda item: (item[1].start, item[1].end != item[1].start, item[0]))
    return [e for _, e in unique]


def merged(edits: Sequence[Edit]) -> list[Edit]:
    """One fix's edits for a consumer that wants one edit per place (an LSP client, a SARIF
    viewer): sorted, and the insertions at one point folded into the edit that starts there."""
    out: list[Edit] = []
    for edit in ordered_edits([Fix("", _ANY, tuple(edits))]):
        last = out[-1] if out else None
        if last is not None and last.start == last.end == edit.start:
            out[-1] = Edit(
                last.start,
                edit.end,
                last.content + edit.content,
                Range(
                    last.range.line, last.range.column, edit.range.end_line, edit.range.end_column
                ),
            )
        else:
            out.append(edit)
    return out


def splice(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with sorted, non-overlapping ``edits`` applied."""
    out: list[str] = []
    pos = 0
    for edit in edits:
        if edit.start < pos:
            raise ValueError("overlapping edits")
        out.append(text[pos : edit.start])
        out.append(edit.content)
        pos = edit.end
    out.append(text[pos:])
    return "".join(out)


def untouched_equal(before: str, after: str, edits: Sequence[Edit]) -> bool:
    """Is every character of ``before`` outside the (sorted) ``edits`` unchanged in ``after``?

    The promise a fix keeps: it changes its edited spans and nothing else. Checked on every
    fixed text before it is written, whatever produced it."""
    pos_before = pos_after = 0
    for edit in edits:
        gap = before[pos_before : edit.start]
        if after[pos_after : pos_after + len(gap)] != gap:
            return False
        pos_after += len(gap)
        if after[pos_after : pos_after + len(edit.content)] != edit.content:
            return False
        pos_after += len(edit.content)
        pos_before = edit.end
    return after[pos_after:] == before[pos_before:]


class OutsideEdits(ValueError):
    """A fixed text differs from its input outside the edited spans: it is never written."""


def apply_fixes(text: str, fixes: Sequence[Fix]) -> tuple[str, list[Edit]]:
    """Apply compatible ``fixes`` (see :func:`choose`) to ``text``: (new text, edits applied).

    Raises :class:`OutsideEdits` when the result differs from ``text`` anywhere but in the
    edited spans (splicing keeps that by design; the check guards every fixed text anyway)."""
    edits = ordered_edits(fixes)
    new = splice(text, edits)
    if not untouched_equal(text, new, edits):
        raise OutsideEdits("the fixed text differs from the input outside the edited spans")
    return new, edits


_ANY = Applicability.SAFE


def fixes_to_apply(findings: Iterable[Finding], unsafe: bool) -> list[Fix]:
    return [
        f.fix
        for f in findings
        if f.fix is not None
        and f.fix.edits
        and f.cell is None
        and (unsafe or f.fix.applicability is Applicability.SAFE)
    ]
