"""DL001 unused-noqa.

The check itself runs in the runner, after every other rule has reported and the `# noqa`
comments have been matched against the findings: only then is it known which codes of a
suppression comment suppressed nothing. This module holds the rule's identity, docs, snippets
and that comment analysis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import libcst as cst

from distlint.fixes import Fix
from distlint.model import Applicability, Range
from distlint.rule import Invalid, Rule, RuleContext, Valid

CODE = "DL001"
_NOQA_RE = re.compile(
    r"#\s*noqa:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)", re.IGNORECASE
)
_DL_CODE = re.compile(r"DL\d{3}")


class UnusedNoqa(Rule):
    """
    ## What it does
    Flags `# noqa: DLxxx` comments whose distlint codes suppress nothing: the finding they were
    written for is gone (the code was fixed or moved), or the code does not exist.

    Only distlint's own codes are looked at (`# noqa: E501` belongs to another tool), blanket
    `# noqa` comments are left alone for the same reason, and a code of a rule that is not
    enabled for the file is not reported (the comment may be meant for a run that selects it).
    Like ruff's RUF100, this rule is opt-in: select it with `--extend-select DL001` or
    `extend-select = ["DL001"]`. It is not reported under `--ignore-noqa`.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line: if someone later writes an
    unscaled learning rate or a per-device batch size on a line that still carries an old
    `# noqa: DL201`, the multi-GPU run silently diverges from the single-GPU one and nobody is
    told.

    ## Fix safety
    The fix removes the unused codes from the comment (the whole `# noqa` part when none is
    left, keeping any other comment text). It is safe: it only edits a comment.

    ## References
    - ruff, RUF100 unused-noqa.
    """

    CODE = CODE
    NAME = "unused-noqa"
    MESSAGE = "Unused `noqa` directive"
    FIX_TITLE = "Remove the unused codes from the `noqa` directive"
    FIX_SAFETY = Applicability.SAFE
    TRIGGERS = ("noqa", "NOQA")
    DEFAULT_ENABLED = False

    VALID = (
        Valid("x = 1  # noqa\n"),
        Valid("import os  # noqa: F401\n"),
        Valid("x = 1  # noqa: DL101\n"),  # DL101 is not enabled when this rule runs alone
    )
    INVALID = (
        Invalid("x = 1  # noqa: DL000\n", fixed="x = 1\n"),
        Invalid(
            "import os  # noqa: F401, DL000  # kept for the CLI\n",
            fixed="import os  # noqa: F401  # kept for the CLI\n",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        """Nothing to do here: the runner calls :func:`unused_noqa` after suppression."""


def unused_codes(
    lines: Mapping[int, frozenset[str] | None],
    used: Mapping[int, set[str]],
    enabled: Iterable[str],
    known: Iterable[str],
) -> dict[int, tuple[list[str], list[str]]]:
    """Per line: (enabled codes that suppressed nothing, DL codes that do not exist)."""
    enabled, known = set(enabled), set(known)
    out: dict[int, tuple[list[str], list[str]]] = {}
    for line, codes in lines.items():
        if not codes:
            continue  # blanket `# noqa`: may be meant for any tool
        unused = sorted(
            c for c in codes if c in enabled and c != CODE and c not in used.get(line, ())
        )
        unknown = sorted(c for c in codes if _DL_CODE.fullmatch(c) and c not in known)
        if unused or unknown:
            out[line] = (unused, unknown)
    return out


class _Comments(cst.CSTVisitor):
    """The comment owners (trailing whitespace or an own-line comment) on the given lines."""

    def __init__(self, positions, lines: set[int]) -> None:
        super().__init__()
        self.positions = positions
        self.lines = lines
        self.found: list[tuple[int, cst.CSTNode, cst.Comment]] = []

    def _visit(self, node) -> None:
        comment = node.comment
        if comment is not None and "noqa" in comment.value.lower():
            pos = self.positions.get(comment)
            if pos is not None and pos.start.line in self.lines:
                self.found.append((pos.start.line, node, comment))

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self._visit(node)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self._visit(node)


def unused_noqa(
    module: cst.Module, positions, noqa, enabled: Iterable[str], known: Iterable[str]
) -> list[tuple[Range, str, Fix]]:
    """(range of the comment, message, fix) for each `# noqa: ...` comment with unused DL codes."""
    per_line = unused_codes(noqa.lines, noqa.used, enabled, known)
    if not per_line:
        return []
    visitor = _Comments(positions, set(per_line))
    module.visit(visitor)
    out: list[tuple[Range, str, Fix]] = []
    for line, owner, comment in visitor.found:
        unused, unknown = per_line[line]
        parts = []
        if unused:
            parts.append("unused: " + ", ".join(f"`{c}`" for c in unused))
        if unknown:
            parts.append("unknown: " + ", ".join(f"`{c}`" for c in unknown))
        pos = positions[comment]
        rng = Range(pos.start.line, pos.start.column + 1, pos.end.line, pos.end.column + 1)
        fix = Fix(title=UnusedNoqa.FIX_TITLE)
        fix.replace[owner] = _without_codes(owner, comment, set(unused) | set(unknown))
        out.append((rng, f"{UnusedNoqa.MESSAGE} ({'; '.join(parts)})", fix))
    return out


def _without_codes(owner: cst.CSTNode, comment: cst.Comment, drop: set[str]):
    text = comment.value
    m = _NOQA_RE.search(text)
    if m is None:
        return owner
    codes = [c for c in re.split(r"[\s,]+", m.group("codes")) if c]
    kept = [c for c in codes if c.upper() not in drop]
    if kept:
        new_text = text[: m.start()] + "# noqa: " + ", ".join(kept) + text[m.end() :]
    else:
        new_text = (text[: m.start()] + text[m.end() :]).strip()
    if new_text and new_text != "#":
        if not new_text.startswith("#"):
            new_text = "# " + new_text.lstrip("# ")
        return owner.with_changes(comment=cst.Comment(new_text))
    if isinstance(owner, cst.EmptyLine):
        return cst.RemovalSentinel.REMOVE
    return owner.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
