"""``--add-noqa``: write a ``# noqa: CODE`` comment for every current finding.

Teams adopting distlint on an existing code base use it to start from a clean run and catch only
new hazards. The comment goes on the reported line, or, where that line cannot hold a comment
(it ends inside a multi-line string or with a backslash continuation), on the first line of the
statement: the two places the suppression check looks.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from distlint.model import Finding
from distlint.runner import NOQA_RE


def _line_info(text: str) -> tuple[set[int], dict[int, int]]:
    """Lines that can take a trailing comment, and the first line of the statement of each line."""
    blocked: set[int] = set()
    statement_start: dict[int, int] = {}
    start: int | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tok.type
            if (
                kind in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1))
                and tok.end[0] > tok.start[0]
            ):
                blocked.update(range(tok.start[0], tok.end[0]))
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
                    statement_start.setdefault(line, start)
                start = None
    except (tokenize.TokenError, SyntaxError):
        pass
    for number, line in enumerate(text.split("\n"), start=1):
        if line.rstrip("\r").endswith("\\"):
            blocked.add(number)
    return blocked, statement_start


def add_noqa(text: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """``text`` with ``# noqa`` comments for ``findings``; also the number of lines changed."""
    blocked, statement_start = _line_info(text)
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        target = finding.line
        if target in blocked:
            target = statement_start.get(finding.line, target)
            if target in blocked:
                continue  # nowhere to put it: leave the finding visible
        codes = wanted.setdefault(target, [])
        if finding.code not in codes:
            codes.append(finding.code)
    lines = text.split("\n")
    changed = 0
    for number, codes in wanted.items():
        if number > len(lines):
            continue
        raw = lines[number - 1]
        body, cr = (raw[:-1], "\r") if raw.endswith("\r") else (raw, "")
        m = NOQA_RE.search(body)
        if m is not None:
            if not m.group("codes"):
                continue  # a blanket `# noqa` already suppresses everything
            present = [c for c in re.split(r"[\s,]+", m.group("codes")) if c]
            new = [c for c in codes if c.upper() not in {p.upper() for p in present}]
            if not new:
                continue
            body = body[: m.start()] + "# noqa: " + ", ".join(present + new) + body[m.end() :]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(codes)
        lines[number - 1] = body + cr
        changed += 1
    return "\n".join(lines), changed
