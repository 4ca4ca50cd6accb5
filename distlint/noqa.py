"""Suppression comments, in one place: parse `# noqa` directives, decide what they suppress,
write new ones (``--add-noqa``, the language server's action, each finding's suppression edit)
and find the unused ones (DL001 unused-noqa, an engine post-pass after suppression).

- ``# noqa`` (blanket) or ``# noqa: DL101, DL201`` on the reported line, or on the first line of
  the reported node's statement, suppresses the finding;
- ``# distlint: noqa`` (whole file) or ``# distlint: noqa: DL101`` (those codes, whole file).

No LibCST here: comments are found with the tokenizer (a ``#`` inside a string is no comment).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Mapping, Sequence

from distlint.edits import LineIndex
from distlint.model import Applicability, Edit, Finding, Fix, Range

# a code (DL101, E501) or a rule's kebab-case name (seed-only-torch)
_CODE = r"(?:[A-Za-z]+[0-9]+|[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)"
_CODES = rf"{_CODE}(?:[\s,]+{_CODE})*"
NOQA_RE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
FILE_NOQA_RE = re.compile(rf"#\s*distlint:\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_CODED_NOQA_RE = re.compile(rf"#\s*noqa:\s*(?P<codes>{_CODES})", re.IGNORECASE)
_DL_CODE = re.compile(r"DL\d{3}")

UNUSED_CODE = "DL001"
UNUSED_NAME = "unused-noqa"
UNUSED_MESSAGE = "Unused `noqa` directive"
UNUSED_FIX_TITLE = "Remove the unused codes from the `noqa` directive"


def split_codes(text: str) -> list[str]:
    return [c for c in re.split(r"[\s,]+", text) if c]


def code_of(token: str, names: Mapping[str, str] = {}) -> str:
    """The code a directive's token means: a rule's name (``names``: lower-case name -> code,
    given by the engine, which knows the rules) is its code; a code is upper-cased (another
    tool's code, ``E501``, stays what it is)."""
    return names.get(token.lower(), token.upper())


class Directives:
    """The suppression comments of one file, and which of their codes suppressed something."""

    __slots__ = ("lines", "file_codes", "file_blanket", "used", "names")

    def __init__(self, names: Mapping[str, str] = {}) -> None:
        self.lines: dict[int, frozenset[str] | None] = {}  # None = blanket
        self.file_codes: frozenset[str] | None = None  # set by `# distlint: noqa: CODES`
        self.file_blanket = False
        self.used: dict[int, set[str]] = {}
        self.names = names  # rule name (lower case) -> code: names are read as their codes

    @classmethod
    def scan(cls, text: str, names: Mapping[str, str] = {}) -> Directives:
        """The directives of ``text``; ``names`` maps each rule's name (lower case) to its
        code, so that `# noqa: seed-only-torch` means DL101 (the engine knows the rules)."""
        result = cls(names)
        if "noqa" not in text and "NOQA" not in text and "Noqa" not in text:
            return result
        for lineno, line in enumerate(_lines(text), start=1):
            if "#" not in line:
                continue
            m = FILE_NOQA_RE.search(line)
            if m:
                if m.group("codes"):
                    codes = frozenset(code_of(c, names) for c in split_codes(m.group("codes")))
                    result.file_codes = (result.file_codes or frozenset()) | codes
                else:
                    result.file_blanket = True
                continue
            m = NOQA_RE.search(line)
            if m:
                codes_text = m.group("codes")
                result.lines[lineno] = (
                    frozenset(code_of(c, names) for c in split_codes(codes_text))
                    if codes_text
                    else None
                )
        return result

    def suppresses(self, code: str, lines: Sequence[int]) -> bool:
        """Does a directive suppress ``code`` reported at ``lines`` (reported line, statement
        start)? Records the use, for DL001."""
        if self.file_blanket or (self.file_codes and code in self.file_codes):
            return True
        for line in lines:
            if line in self.lines:
                codes = self.lines[line]
                if codes is None or code in codes:
                    self.used.setdefault(line, set()).add(code)
                    return True
        return False


def _lines(text: str) -> list[str]:
    """Lines split where LibCST and the tokenizer split them (\\r\\n, \\r, \\n)."""
    return re.split(r"\r\n?|\n", text)


# ------------------------------------------------------------------------------------------
# Writing directives
# ------------------------------------------------------------------------------------------


class Placement:
    """Which lines of a text can take a trailing comment, and where each statement starts."""

    def __init__(self, text: str) -> None:
        self.blocked: set[int] = set()
        self.statement_start: dict[int, int] = {}
        start: int | None = None
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
                kind = tok.type
                if (
                    kind in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1))
                    and tok.end[0] > tok.start[0]
                ):
                    self.blocked.update(range(tok.start[0], tok.end[0]))
                if kind in (
                    tokenize.COMMENT,
                    tokenize.NL,
                    tokenize.INDENT,
                    tokenize.DEDENT,
                    tokenize.ENCODING,
                ):
                    continue
                if start is None:
                    start = tok.start[0]
                if kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
                    for line in range(start, tok.end[0] + 1):
                        self.statement_start.setdefault(line, start)
                    start = None
        except (tokenize.TokenError, SyntaxError):
            pass
        for number, physical in enumerate(_lines(text), start=1):
            if physical.endswith("\\"):
                self.blocked.add(number)

    def target(self, line: int, statement_line: int | None = None) -> int | None:
        """The line a directive for a finding reported at ``line`` goes on: that line, else
        the first line of its statement (the two places suppression looks), else None."""
        if line not in self.blocked:
            return line
        start = statement_line or self.statement_start.get(line, line)
        return start if start not in self.blocked else None


def directive_edit(lines: LineIndex, line: int, codes: Sequence[str]) -> Edit | None:
    """The edit that makes ``line`` carry ``# noqa`` for ``codes`` (None: it already does)."""
    start, end = lines.line_start(line), lines.content_end(line)
    body = lines.text[start:end]
    m = NOQA_RE.search(body)
    if m is not None:
        if not m.group("codes"):
            return None  # a blanket noqa comment already suppresses everything
        present = split_codes(m.group("codes"))
        upper = {code_of(p) for p in present}
        new = [c for c in codes if c.upper() not in upper]
        if not new:
            return None
        at = start + m.end("codes")
        return lines.edit(at, at, ", " + ", ".join(new))
    kept = len(body.rstrip())
    return lines.edit(start + kept, end, "  # noqa: " + ", ".join(codes))


def suppression_edit(
    lines: LineIndex, placement: Placement, code: str, line: int, statement_line: int | None
) -> Edit | None:
    target = placement.target(line, statement_line)
    if target is None:
        return None
    return directive_edit(lines, target, [code])


def add_noqa(text: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """``text`` with ``# noqa`` comments for ``findings`` (each at the line of its suppression
    edit; all codes of one line in one comment); also the number of lines changed."""
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        if finding.suppression is None or finding.cell is not None:
            continue  # nowhere to put it: leave the finding visible
        codes = wanted.setdefault(finding.suppression.range.line, [])
        if finding.code not in codes:
            codes.append(finding.code)
    lines = LineIndex(text)
    edits = [e for line, codes in wanted.items() if (e := directive_edit(lines, line, codes))]
    edits.sort(key=lambda e: e.start)
    from distlint.edits import splice

    return splice(text, edits), len(edits)


# ------------------------------------------------------------------------------------------
# DL001 unused-noqa
# ------------------------------------------------------------------------------------------


def unused_codes(
    directives: Directives, enabled: Iterable[str], known: Iterable[str]
) -> dict[int, tuple[list[str], list[str]]]:
    """Per line: (enabled codes that suppressed nothing, DL codes that do not exist)."""
    enabled, known = set(enabled), set(known)
    out: dict[int, tuple[list[str], list[str]]] = {}
    for line, codes in directives.lines.items():
        if not codes:
            continue  # a blanket noqa comment: may be meant for any tool
        used = directives.used.get(line, ())
        unused = sorted(c for c in codes if c in enabled and c != UNUSED_CODE and c not in used)
        unknown = sorted(c for c in codes if _DL_CODE.fullmatch(c) and c not in known)
        if unused or unknown:
            out[line] = (unused, unknown)
    return out


def unused_noqa(
    path: str,
    text: str,
    directives: Directives,
    enabled: Iterable[str],
    known: Iterable[str],
    applicability: Applicability = Applicability.SAFE,
) -> list[Finding]:
    """A DL001 finding, with its fix, for each `# noqa: ...` comment whose DL codes are unused."""
    per_line = unused_codes(directives, enabled, known)
    if not per_line:
        return []
    lines = LineIndex(text)
    out: list[Finding] = []
    for line, col, comment in _comments(text, set(per_line)):
        unused, unknown = per_line[line]
        parts = []
        if unused:
            parts.append("unused: " + ", ".join(f"`{c}`" for c in unused))
        if unknown:
            parts.append("unknown: " + ", ".join(f"`{c}`" for c in unknown))
        start = lines.offset(line, col)
        end = start + len(comment)
        drop = set(unused) | set(unknown)
        edit = _without_codes(lines, line, start, end, comment, drop, directives.names)
        fix = Fix(UNUSED_FIX_TITLE, applicability, (edit,)) if edit is not None else None
        # the directive, not the whole comment: `# noqa: DL101  # why` points at `# noqa: DL101`
        directive = NOQA_RE.search(comment)
        first, last = directive.span() if directive is not None else (0, len(comment))
        rng = Range(line, col + 1 + first, line, col + 1 + last)
        message = f"{UNUSED_MESSAGE} ({'; '.join(parts)})"
        out.append(Finding(path, rng, UNUSED_CODE, UNUSED_NAME, message, fix))
    return out


def _comments(text: str, wanted: set[int]) -> list[tuple[int, int, str]]:
    """(line, 0-based column, text) of the real comments on ``wanted`` lines that say noqa."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if (
                tok.type == tokenize.COMMENT
                and tok.start[0] in wanted
                and "noqa" in tok.string.lower()
            ):
                out.append((tok.start[0], tok.start[1], tok.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _without_codes(
    lines: LineIndex,
    line: int,
    start: int,
    end: int,
    comment: str,
    drop: set[str],
    names: Mapping[str, str],
) -> Edit | None:
    m = _CODED_NOQA_RE.search(comment)
    if m is None:
        return None
    kept = [c for c in split_codes(m.group("codes")) if code_of(c, names) not in drop]
    if kept:
        new_text = comment[: m.start()] + "# noqa: " + ", ".join(kept) + comment[m.end() :]
    else:
        new_text = (comment[: m.start()] + comment[m.end() :]).strip()
    if new_text and new_text != "#":
        if not new_text.startswith("#"):
            new_text = "# " + new_text.lstrip("# ")
        return lines.edit(start, end, new_text)
    line_start = lines.line_start(line)
    before = lines.text[line_start:start]
    if not before.strip():
        # a comment on its own line: the whole line goes
        return lines.edit(line_start, lines.line_start(line + 1), "")
    return lines.edit(line_start + len(before.rstrip()), end, "")
