"""Renderers for lint results: text (default), json, github, sarif, junit.

Each renderer is ``render(results, stream, context) -> None``; ``results`` is the list of
:class:`~distlint.model.FileResult` of the run.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Callable, NamedTuple, TextIO

from distlint.model import FileResult, RuleInfo

# "concise" is ruff's name for the text format; "full" adds the source lines and the fix's diff
FORMATS = ("text", "concise", "full", "json", "github", "sarif", "junit")
_MODULES = {"concise": "text"}
# Formats that describe every rule: the caller passes ReportContext.rules (see api.rule_metadata).
# The others never need them, so a run answered from the cache does not load the rules.
FORMATS_WITH_RULES = frozenset({"sarif"})


class ReportContext(NamedTuple):
    fix_mode: bool = False  # results are what remains after fixes were applied
    unsafe_fixes: bool = False
    show_statistics: bool = False
    diff: bool = False
    color: bool = False  # ANSI colours (a terminal, NO_COLOR unset)
    rules: tuple[RuleInfo, ...] = ()  # every rule of the run, for FORMATS_WITH_RULES


def renderer(fmt: str) -> Callable[[Sequence[FileResult], TextIO, ReportContext], None]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    module = importlib.import_module(f"distlint.reporting.{_MODULES.get(fmt, fmt)}_format")
    render: Callable[[Sequence[FileResult], TextIO, ReportContext], None] = module.render
    return render


# Characters that must not reach a terminal or a report raw: C0 and C1 controls (ANSI escape
# sequences start with ESC), DEL, lone surrogates (undecodable bytes of a file name), the
# bidirectional overrides (text that reads differently from what it is) and the two XML
# non-characters. Tab stays.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_UNPRINTABLE_KEEP_NEWLINES = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``): a file name or
    a message never moves the cursor, colours the terminal, breaks a line or an XML document.
    ``newlines``: keep line breaks (a format that escapes them its own way)."""
    pattern = _UNPRINTABLE_KEEP_NEWLINES if newlines else _UNPRINTABLE
    return pattern.sub(_escape, text) if pattern.search(text) else text
