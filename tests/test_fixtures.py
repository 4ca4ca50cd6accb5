"""Whole training scripts: fixtures/scripts/*.py, in the styles found in the wild, every rule.

Every finding is marked inline with `# expect: CODE`; the set of findings must equal the set of
expectations exactly (no miss, no false positive). The fixed output parses and compiles, every
name is bound, a second fix changes nothing, and no fixable finding remains (the same checks as
the rule snippets': helpers.assert_fix_is_sound); the runnable ones still run once fixed.
Each rule's own fixtures/<CODE>/ (bad.py, bad.fixed.py, good.py) are tested in its file,
tests/rules/test_<CODE>.py.
"""

import os
import subprocess
import sys

import pytest
from helpers import (
    FIXTURES,
    assert_fix_is_sound,
    expected_findings,
    fixture_config,
    lint_text,
)

from distlint.api import Config

SCRIPTS = sorted((FIXTURES / "scripts").glob("*.py"))
CONFIG = Config(select=("ALL",))


def _ids(paths):
    return [str(p.relative_to(FIXTURES)) for p in paths]


def lint(path, fix=False):
    config = fixture_config(path, path.read_text(encoding="utf-8"))
    return lint_text(path.read_bytes(), str(path), config, fix=fix)


@pytest.mark.parametrize("path", SCRIPTS, ids=_ids(SCRIPTS))
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


@pytest.mark.parametrize("path", SCRIPTS, ids=_ids(SCRIPTS))
def test_fix_is_valid_idempotent_and_complete(path):
    result = lint(path, fix=True)
    assert_fix_is_sound(path.read_text(encoding="utf-8"), result, str(path), CONFIG, all_bound=True)


# Runnable scripts whose fix changes them: the fixed script must still run. (Scripts the fix
# leaves unchanged are covered by the expectations above.)
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
