"""Precision of every rule on the shipped fixtures, as a markdown table.

Lints fixtures/scripts/*.py and fixtures/DL*/{bad,good}.py with all rules (opt-in ones where
they are chosen: see ``config_for``) and compares the
findings with the inline `# expect: CODE` markers: per rule, how many findings were expected,
found (expected and reported), missed, and reported without being expected (false positives).

    python benchmarks/precision_table.py
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from distlint.config import Config
from distlint.registry import all_rules
from distlint.runner import lint_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>DL\d{3}(?:\s*,\s*DL\d{3})*)")


@dataclass
class Row:
    expected: int = 0
    found: int = 0
    missed: list[str] = field(default_factory=list)  # "path:line"
    false_positives: list[str] = field(default_factory=list)


def fixture_files(root: Path = FIXTURES) -> list[Path]:
    files = sorted((root / "scripts").glob("*.py"))
    for rule_dir in sorted(p for p in root.glob("DL[0-9][0-9][0-9]") if p.is_dir()):
        files += [rule_dir / name for name in ("bad.py", "good.py") if (rule_dir / name).exists()]
    return files


def expectations(source: str) -> set[tuple[int, str]]:
    out = set()
    for lineno, line in enumerate(source.splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            out.update((lineno, code) for code in re.split(r"\s*,\s*", m.group("codes")))
    return out


def config_for(path: Path, expected: set[tuple[int, str]]) -> Config:
    """Every rule, opt-in ones only where they are chosen: in their own fixtures and in a file
    that expects them. An opt-in rule reports what many correct scripts do on purpose (DL403:
    the main process logs its own loss), so the other fixtures are not its corpus."""
    opt_in = {rule.CODE for rule in all_rules() if not rule.DEFAULT_ENABLED}
    chosen = {code for _, code in expected} | {path.parent.name}
    return Config(select=("ALL",), ignore=tuple(sorted(opt_in - chosen)))


def measure(files: Iterable[Path]) -> dict[str, Row]:
    """Rule code -> Row, for every registered rule (rules without fixtures get a zero row)."""
    table: dict[str, Row] = {rule.CODE: Row() for rule in all_rules() if rule.DEFAULT_ENABLED}
    for path in files:
        source = path.read_text(encoding="utf-8")
        result = lint_source(source, str(path), config_for(path, expectations(source)))
        if result.errors:
            raise RuntimeError(f"{path}: {result.errors}")
        found = {(f.line, f.code) for f in result.findings}
        expected = expectations(source)
        where = path.relative_to(FIXTURES) if path.is_relative_to(FIXTURES) else path
        for line, code in expected:
            row = table.setdefault(code, Row())
            row.expected += 1
            if (line, code) in found:
                row.found += 1
            else:
                row.missed.append(f"{where}:{line}")
        for line, code in sorted(found - expected):
            table.setdefault(code, Row()).false_positives.append(f"{where}:{line}")
    return table


def markdown(table: dict[str, Row], n_files: int) -> str:
    lines = [
        f"Precision on {n_files} fixture files (fixtures/scripts, fixtures/DL*/bad.py and good.py)",
        "",
        "| rule | expected | found | missed | false positives |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    total = Row()
    for code in sorted(table):
        row = table[code]
        lines.append(
            f"| {code} | {row.expected} | {row.found} | {len(row.missed)} | {len(row.false_positives)} |"
        )
        total.expected += row.expected
        total.found += row.found
        total.missed += row.missed
        total.false_positives += row.false_positives
    lines.append(
        f"| **all** | {total.expected} | {total.found} | {len(total.missed)} | {len(total.false_positives)} |"
    )
    details = [f"- missed {code}: {w}" for code in sorted(table) for w in table[code].missed]
    details += [
        f"- false positive {code}: {w}"
        for code in sorted(table)
        for w in table[code].false_positives
    ]
    if details:
        lines += [""] + details
    return "\n".join(lines) + "\n"


def main() -> int:
    files = fixture_files()
    table = measure(files)
    sys.stdout.write(markdown(table, len(files)))
    clean = all(not row.missed and not row.false_positives for row in table.values())
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
