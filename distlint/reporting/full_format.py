"""``--format full`` (ruff's ``--output-format full``): each finding's line as in the text
format, then the source lines around it with a caret under the reported range, the fix's
title and its edits as a diff; the same summary as the text format.

The source comes with the results (the command line asks the engine to keep the text it linted
when this format is chosen): nothing is read again here. A finding whose text is not at hand (a
followed module, a cached result without its text) is shown as in the text format.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import TextIO

from distlint.model import Applicability, FileResult, Finding, Fix
from distlint.reporting import ReportContext, printable
from distlint.reporting.text_format import Painter, finding_line, summary

CONTEXT = 2  # lines shown before and after the reported range, and around each change
MAX_RANGE_LINES = 6  # a longer range shows its first lines and says how many more


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    paint = Painter(context.color)
    first = True
    for result in results:
        if not result.findings:
            continue
        text = result.source_text
        cells: list[str] | None = None
        for finding in result.findings:
            stream.write(("" if first else "\n") + finding_line(finding, context, paint) + "\n")
            first = False
            source = text
            if finding.cell is not None:
                if cells is None:
                    cells = _code_cells(text)
                index = finding.cell - 1
                source = cells[index] if 0 <= index < len(cells) else None
            if source is not None:
                stream.write(snippet(source, finding, paint))
            stream.write(_fix_section(source if finding.cell is None else None, finding, paint))
    summary(results, stream, context, paint)


def snippet(text: str, finding: Finding, paint: Painter) -> str:
    """The lines around ``finding`` with a caret line under each line of its range."""
    lines = text.splitlines()
    rng = finding.range
    last_marked = min(rng.end_line, rng.line + MAX_RANGE_LINES - 1)
    first = max(1, rng.line - CONTEXT)
    last = min(len(lines), last_marked + CONTEXT)
    if first > len(lines):
        return ""
    width = len(str(last))
    gutter = paint(" " * width + " |", "gutter")
    out = [gutter]
    for number in range(first, last + 1):
        line = lines[number - 1]
        shown = _visible(line)
        out.append(paint(f"{number:>{width}} |", "gutter") + (" " + shown if line else ""))
        if rng.line <= number <= last_marked:
            start = rng.column - 1 if number == rng.line else len(line) - len(line.lstrip())
            end = rng.end_column - 1 if number == rng.end_line else len(line)
            end = max(end, start + 1)
            pad = "".join(c if c == "\t" else " " * len(_visible(c)) for c in line[:start])
            label = f" {finding.code}" if number == last_marked else ""
            out.append(gutter + " " + pad + paint("^" * (end - start) + label, "caret"))
    if rng.end_line > last_marked:
        more = rng.end_line - last_marked
        out.append(gutter + f" ... and {more} more line{'s' if more != 1 else ''} of the range")
    out.append(gutter)
    return "\n".join(out) + "\n"


def _fix_section(text: str | None, finding: Finding, paint: Painter) -> str:
    fix = finding.fix
    if fix is None:
        return ""
    kind = "safe fix" if fix.applicability is Applicability.SAFE else "unsafe fix"
    out = [paint("  = help:", "help") + f" {fix.title} ({kind})"]
    if text is not None and fix.edits:
        out += _diff(text, fix, paint)
    return "\n".join(out) + "\n"


def _diff(text: str, fix: Fix, paint: Painter) -> list[str]:
    from distlint.edits import splice

    try:
        new = splice(text, sorted(fix.edits, key=lambda e: (e.start, e.end)))
    except ValueError:
        return []
    old_lines, new_lines = text.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(CONTEXT))
    if not groups:
        return []
    width = len(str(max(len(old_lines), len(new_lines))))
    gutter = paint(" " * width + " |", "gutter")
    out = [gutter]
    for n, group in enumerate(groups):
        if n:
            out.append(paint(" " * width + " :", "gutter"))
        for tag, i1, i2, j1, j2 in group:
            # ruff's numbering: the lines of the fixed text; a removed line has none
            if tag == "equal":
                for k in range(j1, j2):
                    line = new_lines[k]
                    out.append(
                        paint(f"{k + 1:>{width}} |", "gutter") + (" " + line if line else "")
                    )
                continue
            for k in range(i1, i2):
                out.append(paint(f"{'':>{width}} - {_visible(old_lines[k])}".rstrip(), "removed"))
            for k in range(j1, j2):
                out.append(paint(f"{k + 1:>{width}} + {_visible(new_lines[k])}".rstrip(), "added"))
    out.append(gutter)
    return out


def _visible(text: str) -> str:
    """A source line as the terminal may show it: tabs kept, control characters escaped."""
    return printable(text)


def _code_cells(text: str | None) -> list[str]:
    """The sources of a notebook's code cells, in order (findings number them from 1)."""
    if text is None:
        return []
    try:
        notebook = json.loads(text)
    except ValueError:
        return []
    out = []
    for cell in notebook.get("cells", []) if isinstance(notebook, dict) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            out.append("".join(source) if isinstance(source, list) else str(source))
    return out
