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


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    findings = [f for r in results for f in r.findings]
    for f in findings:
        marker = ""
        if f.fix is not None and (
            f.fix.applicability is Applicability.SAFE or context.unsafe_fixes
        ):
            marker = "[*] "
        stream.write(printable(f"{location(f)}: {f.code} {marker}{f.message}") + "\n")
    fixed = sum(r.fixes_applied for r in results)
    if context.show_statistics and findings:
        stream.write("\n")
        counts = Counter((f.code, f.name) for f in findings)
        fixable = Counter(  # `[*]`: fixable by `distlint fix` as configured (not unsafe-only)
            f.code
            for f in findings
            if f.fix is not None
            and (f.fix.applicability is Applicability.SAFE or context.unsafe_fixes)
        )
        for (code, name), n in sorted(counts.items()):
            mark = "[*]" if fixable[code] else "   "
            stream.write(f"{n:5d}\t{code}\t{mark} {name}\n")
    safe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE
    )
    unsafe = sum(
        1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE
    )
    if fixed:
        verb = "Would fix" if context.diff else "Fixed"
        stream.write(f"{verb} {fixed} finding{'s' if fixed != 1 else ''}.\n")
    if not findings:
        if not fixed and not any(r.errors for r in results):
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
    if context.unsafe_fixes and safe + unsafe:
        stream.write(f"[*] {safe + unsafe} fixable with `distlint fix --unsafe-fixes`.\n")
    elif not context.unsafe_fixes:
        if safe:
            stream.write(f"[*] {safe} fixable with `distlint fix`.\n")
        if unsafe:
            stream.write(
                f"{unsafe} more fixable with `--unsafe-fixes` (unsafe fixes can change behaviour: review them).\n"
            )
