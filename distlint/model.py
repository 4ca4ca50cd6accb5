"""Plain data shared by every part of distlint: findings, fixes, results.

Everything here is a frozen dataclass so results can be cached, compared in tests and sent
between processes without surprises.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Applicability(str, enum.Enum):
    """ruff's meaning: an unsafe fix may change behaviour the user relied on."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Range:
    """1-based lines, 1-based columns; end is exclusive on the column, as editors expect."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class FixInfo:
    """What a user sees of a fix: whether it is safe and what it does."""

    applicability: Applicability
    title: str

    def to_json(self) -> dict:
        return {"applicability": self.applicability.value, "title": self.title}


@dataclass(frozen=True)
class Finding:
    path: str
    range: Range
    code: str
    name: str
    message: str
    fix: FixInfo | None = None
    severity: Severity = Severity.ERROR
    # For notebooks: the 1-based code cell the finding is in (lines are then cell-relative).
    cell: int | None = None
    # Stable id of the fix inside the file's fix plan (used by fix application and the LSP).
    fix_id: int | None = field(default=None, compare=False)

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

    def to_json(self) -> dict:
        """The fixed JSON schema of `--format json` (issue #2); keep the keys exactly."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fix": self.fix.to_json() if self.fix else None,
        }


@dataclass(frozen=True)
class FileError:
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


@dataclass(frozen=True)
class FileResult:
    """Outcome of linting (and maybe fixing) one file."""

    path: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    # Set when fixes were computed: the new source text (None = unchanged).
    fixed_source: str | None = None
    # fixed_source encoded like the input file (encoding, BOM), when the input was bytes.
    fixed_bytes: bytes | None = None
    # How many fixes were applied to produce fixed_source.
    fixes_applied: int = 0
    # Suppressed findings (kept for --ignore-noqa / unused-noqa bookkeeping and statistics).
    suppressed: tuple[Finding, ...] = ()
    # (path, sha256) of the other project modules and config files the analysis consulted:
    # part of the cache key, and what the language server re-lints dependents on.
    dependencies: tuple[tuple[str, str], ...] = ()
