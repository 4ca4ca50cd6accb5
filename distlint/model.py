"""Plain data shared by every part of distlint: findings, fixes, results.

Everything here is an immutable record (a ``NamedTuple``) so results can be cached, compared in
tests and sent between processes without surprises. Not dataclasses: creating one costs
0.2-0.4 ms at import, which every run of the command pays (see CONTRIBUTING.md).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple


class Applicability(str, enum.Enum):
    """ruff's meaning: an unsafe fix may change behaviour the user relied on."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


class Range(NamedTuple):
    """1-based lines, 1-based columns; end is exclusive on the column, as editors expect."""

    line: int
    column: int
    end_line: int
    end_column: int


class Edit(NamedTuple):
    """Replace ``[start, end)`` of the decoded source text by ``content``.

    Offsets count code points of the text the finding was computed on; ``range`` is the same
    span as 1-based lines and 1-based columns (end exclusive), for editors and JSON consumers.
    An insertion has ``start == end``; a deletion has empty ``content``.
    """

    start: int
    end: int
    content: str
    range: Range

    def to_json(self) -> dict[str, Any]:
        """ruff's shape: ``content``, ``location`` / ``end_location`` as ``{row, column}``."""
        return {
            "content": self.content,
            "location": {"row": self.range.line, "column": self.range.column},
            "end_location": {"row": self.range.end_line, "column": self.range.end_column},
        }


class Fix(NamedTuple):
    """What a finding's fix does, as text edits of the linted text (ruff's ``Fix``).

    Two fixes of one ``isolation`` group are never applied in the same round; ``None`` means
    the fix is only kept apart from fixes whose edits overlap its own.
    """

    title: str
    applicability: Applicability
    edits: tuple[Edit, ...] = ()
    isolation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "applicability": self.applicability.value,
            "title": self.title,
            "edits": [e.to_json() for e in self.edits],
        }


class Finding(NamedTuple):
    path: str
    range: Range
    code: str
    name: str
    message: str
    fix: Fix | None = None
    severity: Severity = Severity.ERROR
    # For notebooks: the 1-based code cell the finding is in (lines are then cell-relative).
    cell: int | None = None
    # The edit that writes a noqa comment naming CODE where it suppresses this finding (None: nowhere can).
    suppression: Edit | None = None

    @property
    def line(self) -> int:
        return self.range.line

    @property
    def column(self) -> int:
        return self.range.column

    @property
    def end_line(self) -> int:
        return self.range.end_line

    @property
    def end_column(self) -> int:
        return self.range.end_column

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def to_json(self) -> dict[str, Any]:
        """The fixed JSON schema of `--format json` (issue #2); keep the keys exactly."""
        fix = None
        if self.fix is not None:
            # notebook edits are in the coordinates of the joined cells, not of the file
            fix = self.fix.to_json() if self.cell is None else _cell_fix_json(self.fix)
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fix": fix,
        }


def _cell_fix_json(fix: Fix) -> dict[str, Any]:
    return {"applicability": fix.applicability.value, "title": fix.title, "edits": None}


class FileError(NamedTuple):
    """A file that could not be read, parsed or fixed: reported with path and line, exit 2."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return f"{loc}: error: {self.message}"


class FileResult(NamedTuple):
    """Outcome of linting (and maybe fixing) one file."""

    path: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    # Set when fixes were computed: the new source text (None = unchanged).
    fixed_source: str | None = None
    # The decoded text the findings were computed on, when the caller asked to keep it
    # (`--diff`, `--add-noqa`: they render from it instead of reading the file again).
    source_text: str | None = None
    # fixed_source encoded like the input file (encoding, BOM), when the input was bytes.
    fixed_bytes: bytes | None = None
    # How many fixes were applied to produce fixed_source.
    fixes_applied: int = 0
    # How many noqa comments --add-noqa wrote.
    noqa_added: int = 0
    # Suppressed findings (kept for --ignore-noqa / unused-noqa bookkeeping and statistics).
    suppressed: tuple[Finding, ...] = ()
    # (path, sha256) of the other project modules and config files the analysis consulted:
    # part of the cache key, and what the language server re-lints dependents on.
    dependencies: tuple[tuple[str, str], ...] = ()
    # The project modules (of ``dependencies``) whose analysis a fact of this file flowed
    # through: what the file reaches, not every module its imports name (see follow-imports).
    reached: tuple[str, ...] = ()
    # A project module reported because a linted file imports it (not given on the command line)
    followed: bool = False


class RuleInfo(NamedTuple):
    """What a report says about a rule (SARIF's rule descriptors): handed to the renderers,
    which never import the rules themselves."""

    code: str
    name: str
    summary: str
    message: str
    docs: str
    default_enabled: bool
    fix_safety: Applicability | None = None
    url: str | None = None
