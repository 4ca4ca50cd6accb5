"""Shared test helpers: inline expectations and name-binding checks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

EXPECT_RE = re.compile(r"#\s*expect:\s*(?P<codes>DL\d{3}(?:\s*,\s*DL\d{3})*)")


def expected_findings(source: str) -> set[tuple[int, str]]:
    """(line, code) pairs marked with `# expect: DL101[, DL201]` at the end of a line."""
    out = set()
    for lineno, line in enumerate(source.splitlines(), start=1):
        m = EXPECT_RE.search(line)
        if m:
            for code in re.split(r"\s*,\s*", m.group("codes")):
                out.add((lineno, code))
    return out


def undefined_names(source: str, filename: str = "<fixed>") -> list[str]:
    """Names used but never bound, according to pyflakes (compiles the source too)."""
    import io

    from pyflakes import api as pyflakes_api
    from pyflakes import reporter as pyflakes_reporter

    out, err = io.StringIO(), io.StringIO()
    pyflakes_api.check(source, filename, pyflakes_reporter.Reporter(out, err))
    problems = [line for line in out.getvalue().splitlines() if "undefined name" in line]
    problems += [line for line in err.getvalue().splitlines() if line.strip()]
    return problems
