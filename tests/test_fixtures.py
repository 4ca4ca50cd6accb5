"""Script-level tests driven by fixtures/.

- fixtures/<CODE>/bad.py: every finding is marked inline with `# expect: CODE` (all rules run);
  bad.fixed.py is the exact output of `fix --unsafe-fixes`; good.py has no finding.
- fixtures/scripts/*.py: whole training scripts in the styles found in the wild, marked the same
  way; the set of findings must equal the set of expectations exactly (no miss, no false positive).
For every fixed output: it parses and compiles, every name is bound, a second fix changes nothing,
and no fixable finding remains (the same checks as the rule snippets': helpers.assert_fix_is_sound).
`pytest --update-snapshots` (or its old name `--update-fixtures`) regenerates bad.fixed.py files.
"""

import os
import subprocess
import sys

import pytest
from helpers import FIXTURES, assert_fix_is_sound, expected_findings, lint_text

from distlint.api import Config

RULE_DIRS = sorted(p for p in FIXTURES.glob("DL[0-9][0-9][0-9]") if p.is_dir())
SCRIPTS = sorted((FIXTURES / "scripts").glob("*.py"))
ALL_FILES = [p / n for p in RULE_DIRS for n in ("bad.py", "good.py") if (p / n).exists()] + SCRIPTS
CONFIG = Config(select=("ALL",))


def _ids(paths):
    return [str(p.relative_to(FIXTURES)) for p in paths]


def lint(path, fix=False):
    return lint_text(path.read_bytes(), str(path), CONFIG, fix=fix)


@pytest.mark.parametrize("path", ALL_FILES, ids=_ids(ALL_FILES))
def test_findings_match_inline_expectations(path):
    source = path.read_text(encoding="utf-8")
    result = lint(path)
    found = {(f.line, f.code) for f in result.findings}
    expected = expected_findings(source)
    missed = sorted(expected - found)
    false_positives = sorted(
        (f.line, f.code, f.message) for f in result.findings if (f.line, f.code) not in expected
    )
    assert not missed and not false_positives, f"missed={missed} false_positives={false_positives}"


@pytest.mark.parametrize("rule_dir", RULE_DIRS, ids=[p.name for p in RULE_DIRS])
def test_rule_fixture_set_is_complete(rule_dir):
    assert (rule_dir / "bad.py").exists() and (rule_dir / "good.py").exists()
    bad = (rule_dir / "bad.py").read_text()
    assert any(code == rule_dir.name for _, code in expected_findings(bad))
    assert not expected_findings((rule_dir / "good.py").read_text())


@pytest.mark.parametrize("rule_dir", RULE_DIRS, ids=[p.name for p in RULE_DIRS])
def test_fixed_output_is_exact(rule_dir, update_fixtures):
    bad = rule_dir / "bad.py"
    expected_path = rule_dir / "bad.fixed.py"
    result = lint(bad, fix=True)
    fixed = result.fixed_source if result.fixed_source is not None else bad.read_text()
    if update_fixtures:
        expected_path.write_text(fixed)
    assert expected_path.exists(), (
        f"{expected_path} missing: run python -m pytest tests/test_fixtures.py --update-snapshots"
    )
    assert fixed == expected_path.read_text()


@pytest.mark.parametrize("path", ALL_FILES, ids=_ids(ALL_FILES))
def test_fix_is_valid_idempotent_and_complete(path):
    result = lint(path, fix=True)
    assert_fix_is_sound(path.read_text(encoding="utf-8"), result, str(path), CONFIG, all_bound=True)


def test_good_files_stay_unchanged():
    for rule_dir in RULE_DIRS:
        good = rule_dir / "good.py"
        result = lint(good, fix=True)
        assert result.fixed_source is None, good


# Runnable scripts whose fix changes them: the fixed script must still run. (Scripts the fix
# leaves unchanged are covered by test_good_files_stay_unchanged / the expectations above.)
RUNNABLE = [
    p
    for p in SCRIPTS
    if "# distlint-fixture: runnable" in p.read_text()
    and lint(p, fix=True).fixed_source is not None
]


def test_some_runnable_scripts_are_fixed():
    assert len(RUNNABLE) >= 8, [p.name for p in RUNNABLE]


@pytest.mark.parametrize("path", RUNNABLE, ids=_ids(RUNNABLE))
def test_fixed_runnable_scripts_still_run(path, tmp_path):
    # torch comes with the verify extra, which CI installs: a missing torch is a failure here
    import torch  # noqa: F401

    result = lint(path, fix=True)
    target = tmp_path / path.name
    target.write_text(result.fixed_source)
    env = dict(os.environ, ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(target)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
