"""Across the rule set: every rule has snippets, docs and its own test file
(tests/rules/test_<CODE>.py, which runs its VALID / INVALID snippets and its fixtures; see
tests/rule_tests.py), and the snippet checks can fail."""

import ast

import pytest
from helpers import FIXTURES, ROOT
from rule_tests import assert_invalid

from distlint.registry import all_rules
from distlint.rule import Invalid

RULE_TESTS = ROOT / "tests" / "rules"


def _test_class_bases(code):
    """The base classes of ``class Test<CODE>`` in tests/rules/test_<CODE>.py, and its CODE."""
    path = RULE_TESTS / f"test_{code}.py"
    assert path.exists(), f"{code} has no test file {path.relative_to(ROOT)}"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == f"Test{code}":
            declared = [
                s.value.value
                for s in node.body
                if isinstance(s, ast.Assign)
                and [getattr(t, "id", None) for t in s.targets] == ["CODE"]
                and isinstance(s.value, ast.Constant)
            ]
            return {getattr(b, "id", None) for b in node.bases}, declared
    raise AssertionError(f"{path.relative_to(ROOT)} has no class Test{code}")


def test_every_rule_has_snippets_and_docs():
    for rule in all_rules():
        assert rule.VALID and rule.INVALID, rule.CODE
        docs = rule.docs()
        for section in (
            "## What it does",
            "## Why is this bad?",
            "## Example",
            "## Fix safety",
            "## Options",
        ):
            assert section in docs, (rule.CODE, section)
        if rule.FIX_SAFETY is not None:
            assert any(s.fixed is not None for s in rule.INVALID), (
                f"{rule.CODE} has a fix but no fixed snippet"
            )


def test_every_rule_has_its_test_file_running_its_snippets_and_fixtures():
    codes = {rule.CODE for rule in all_rules()}
    for code in sorted(codes):
        bases, declared = _test_class_bases(code)
        assert declared == [code], (code, declared)
        assert "SnippetTests" in bases, code
        assert ("FixtureTests" in bases) == (FIXTURES / code).is_dir(), code
    folders = {p.name for p in FIXTURES.glob("DL[0-9][0-9][0-9]") if p.is_dir()}
    assert folders <= codes, f"fixture folders of no rule: {sorted(folders - codes)}"


SNIPPET = "import torch\nfrom accelerate import Accelerator\nacc = Accelerator()\nopt = torch.optim.SGD([], lr=0.1)\n"
FIXED = SNIPPET.replace("lr=0.1", "lr=0.1 * acc.num_processes")


@pytest.mark.parametrize(
    "snippet",
    [
        pytest.param(Invalid(SNIPPET, fixed=FIXED, range="4:30-4:33"), id="right"),
        pytest.param(Invalid(SNIPPET, fixed=FIXED, range="4:29-4:33"), id="column-off"),
        pytest.param(Invalid(SNIPPET, fixed=FIXED, range="3:30-3:33"), id="line-off"),
        pytest.param(Invalid(SNIPPET, fixed=FIXED, range=("4:30-4:33",) * 2), id="one-too-many"),
        pytest.param(Invalid(SNIPPET, fixed=FIXED), id="no-range"),
        pytest.param(Invalid(SNIPPET, range="4:30-4:33"), id="fix-not-expected"),
    ],
)
def test_an_invalid_snippet_passes_only_at_its_range_with_its_fix(snippet, request):
    if request.node.callspec.id == "right":
        assert_invalid("DL201", snippet)
    else:
        with pytest.raises(AssertionError):
            assert_invalid("DL201", snippet)


def test_count_and_ranges_must_agree():
    assert Invalid("x", range=("1:1-1:2", "2:1-2:2")).count == 2
    assert Invalid("x", count=3).count == 3 and Invalid("x").count == 1
    with pytest.raises(ValueError, match="count=1 but 2 ranges"):
        Invalid("x", count=1, range=("1:1-1:2", "2:1-2:2"))
