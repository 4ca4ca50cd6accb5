"""Precision, measured: every rule x (expected, found, missed, false positives) on all fixtures.

The corpus is fixtures/scripts/*.py plus fixtures/DL*/bad.py and good.py, with their inline
`# expect: CODE` markers, linted with every rule; an opt-in rule only where it is chosen (its own
fixtures, a file that expects it), as a user turns it on. The whole table must show zero missed findings and zero false
positives; benchmarks/precision_table.py prints the same table for the notes.
"""

import functools
import subprocess
import sys
from collections import Counter

from helpers import FIXTURES, ROOT, expected_findings, fixture_config, lint_text

from distlint.registry import all_rules

FILES = sorted((FIXTURES / "scripts").glob("*.py")) + [
    d / name
    for d in sorted(FIXTURES.glob("DL[0-9][0-9][0-9]"))
    for name in ("bad.py", "good.py")
    if (d / name).exists()
]


@functools.cache
def _table():
    expected, found, missed, false_positives = Counter(), Counter(), [], []
    for path in FILES:
        source = path.read_text(encoding="utf-8")
        marked = expected_findings(source)
        result = lint_text(source, str(path), fixture_config(path, source))
        reported = {(f.line, f.code) for f in result.findings}
        where = path.relative_to(FIXTURES)
        for line, code in marked:
            expected[code] += 1
            if (line, code) in reported:
                found[code] += 1
            else:
                missed.append(f"{code} {where}:{line}")
        false_positives += [f"{code} {where}:{line}" for line, code in sorted(reported - marked)]
    return expected, found, tuple(missed), tuple(false_positives)


def test_corpus_is_large_and_mixed():
    scripts = sorted((FIXTURES / "scripts").glob("*.py"))
    correct = [p for p in scripts if not expected_findings(p.read_text(encoding="utf-8"))]
    assert len(scripts) >= 40
    assert len(correct) * 2 >= len(scripts), "at least half the scripts must be correct code"


def test_every_enabled_rule_is_measured():
    expected, _, _, _ = _table()
    for rule in all_rules():
        if rule.DEFAULT_ENABLED:
            assert expected[rule.CODE] > 0, f"{rule.CODE} has no expected finding in the fixtures"


def test_zero_missed_and_zero_false_positives():
    expected, found, missed, false_positives = _table()
    assert sum(found.values()) == sum(expected.values()) - len(missed)
    assert not missed and not false_positives, f"missed={missed}\nfalse_positives={false_positives}"


def test_benchmark_script_prints_the_same_totals():
    expected, found, missed, false_positives = _table()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "precision_table.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == (1 if missed or false_positives else 0), proc.stderr
    total = next(line for line in proc.stdout.splitlines() if line.startswith("| **all**"))
    cells = [c.strip() for c in total.strip("|").split("|")][1:]
    assert cells == [
        str(sum(expected.values())),
        str(sum(found.values())),
        str(len(missed)),
        str(len(false_positives)),
    ]
