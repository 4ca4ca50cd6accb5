"""Renderers for lint results: text (default), json, github, sarif, junit.

Each renderer is ``render(results, stream, context) -> None``; ``results`` is the list of
:class:`~distlint.model.FileResult` of the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Callable, NamedTuple, TextIO

from distlint.escape import printable
from distlint.model import FileResult, RuleInfo

__all__ = ["FORMATS", "FORMATS_WITH_RULES", "ReportContext", "printable", "renderer"]

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
