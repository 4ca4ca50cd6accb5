"""Human-readable output: ``path:line:col: CODE [*] message`` and a summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from distlint.escape import printable
from distlint.model import Applicability, FileResult, Finding
from distlint.reporting import ReportContext


def location(finding: Finding) -> str:
    if finding.cell is not None:
        return f"{finding.path}:cell {finding.cell}:{finding.line}:{finding.column}"
    return f"{finding.path}:{finding.line}:{finding.column}"


# ANSI styles, ruff's palette; used only when the report goes to a terminal (NO_COLOR unset)
STYLES = {
    "path": "1",  # bold
    "code": "1;31",  # bold red
    "fixable": "36",  # cyan
    "gutter": "1;34",  # bold blue
    "caret": "1;31",
    "help": "1;36",
    "added": "32",
    "removed": "31",
}


class Painter:
    """Wraps text in an ANSI style when colour is on; returns it unchanged otherwise."""

    __slots__ = ("on",)

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, style: str) -> str:
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m" if self.on and text else text


def _fixable(f: Finding, context: ReportContext) -> bool:
    """`[*]`: fixable by `distlint fix` as configured (not unsafe-only)."""
    return f.fix is not None and (f.fix.applicability is Applicability.SAFE or context.unsafe_fixes)


def finding_line(f: Finding, context: ReportContext, paint: Painter) -> str:
    marker = paint("[*]", "fixable") + " " if _fixable(f, context) else ""
    # file names and messages never reach the terminal raw (control characters escaped)
    where, message = printable(location(f)), printable(f.message)
    return f"{paint(where, 'path')}: {paint(f.code, 'code')} {marker}{message}"


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    paint = Painter(context.color)
    if not context.show_statistics:  # --statistics prints the table instead (ruff's way)
        for f in (f for r in results for f in r.findings):
            stream.write(finding_line(f, context, paint) + "\n")
    summary(results, stream, context, paint)


def summary(
    results: Sequence[FileResult], stream: TextIO, context: ReportContext, paint: Painter
) -> None:
    """The statistics table (--statistics), what was fixed, how many findings remain, and how
    many more a fix run would fix."""
    findings = [f for r in results for f in r.findings]
    if context.show_statistics and findings:
        _statistics(findings, stream, context, paint)
    fixed = sum(r.fixes_applied for r in results)
    if fixed:
        verb = "Would fix" if context.diff else "Fixed"
        stream.write(f"{verb} {fixed} finding{'s' if fixed != 1 else ''}.\n")
    if not findings:
        if not fixed and not any(r.errors for r in results) and not context.show_statistics:
            stream.write("All checks passed!\n")
        return
    stream.write(f"\nFound {len(findings)} finding{'s' if len(findings) != 1 else ''}.\n")
    followed = sorted({r.path for r in results if r.followed and r.findings})
    if followed:
        n = sum(len(r.findings) for r in results if r.followed)
        stream.write(
            f"{n} in {printable(', '.join(followed))}, imported by the files checked and training "
            "data-parallel itself: run `distlint fix` on it to fix them "
            '(`follow-imports = "silent"` hides them).\n'
        )
    _fixable_hint(findings, stream, context)


def _statistics(
    findings: list[Finding], stream: TextIO, context: ReportContext, paint: Painter
) -> None:
    """One line per rule: how many findings, whether a fix run fixes them, the rule's name."""
    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter(f.code for f in findings if _fixable(f, context))
    width = len(str(max(counts.values())))
    for (code, name), n in sorted(counts.items()):
        mark = paint("[*]", "fixable") if fixable[code] else "   "
        stream.write(f"{n:>{width}}\t{paint(code, 'code')}\t{mark} {name}\n")


def _fixable_hint(findings: list[Finding], stream: TextIO, context: ReportContext) -> None:
    """How many of ``findings`` `distlint fix` would fix, and how many more with
    ``--unsafe-fixes``."""
    safe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE
    )
    unsafe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE
    )
    if context.unsafe_fixes and safe + unsafe:
        stream.write(f"[*] {safe + unsafe} fixable with `distlint fix --unsafe-fixes`.\n")
    elif not context.unsafe_fixes:
        if safe:
            stream.write(f"[*] {safe} fixable with `distlint fix`.\n")
        if unsafe:
            stream.write(
                f"{unsafe} more fixable with `--unsafe-fixes` (unsafe fixes can change behaviour: review them).\n"
            )
