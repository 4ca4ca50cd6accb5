"""Every rule's VALID / INVALID snippets, each run with that rule alone."""

import pytest
from helpers import undefined_names

from distlint.config import Config
from distlint.registry import all_rules
from distlint.runner import lint_source

VALID = [(r, i, v) for r in all_rules() for i, v in enumerate(r.VALID)]
INVALID = [(r, i, v) for r in all_rules() for i, v in enumerate(r.INVALID)]


def _lint(rule_cls, snippet, fix=False):
    rule = rule_cls(snippet.options)
    return lint_source(
        snippet.code, "snippet.py", Config(), fix=fix, unsafe_fixes=True, rules=[rule]
    )


@pytest.mark.parametrize(
    "rule_cls,i,snippet", VALID, ids=[f"{r.CODE}-valid-{i}" for r, i, _ in VALID]
)
def test_valid_snippet_has_no_finding(rule_cls, i, snippet):
    result = _lint(rule_cls, snippet)
    assert not result.errors, result.errors
    assert [f.message for f in result.findings] == []


@pytest.mark.parametrize(
    "rule_cls,i,snippet", INVALID, ids=[f"{r.CODE}-invalid-{i}" for r, i, _ in INVALID]
)
def test_invalid_snippet_is_reported_and_fixed(rule_cls, i, snippet):
    result = _lint(rule_cls, snippet)
    assert not result.errors, result.errors
    assert [f.code for f in result.findings] == [rule_cls.CODE] * snippet.count
    fixed = _lint(rule_cls, snippet, fix=True)
    if snippet.fixed is None:
        assert fixed.fixed_source is None, "a fix was applied where the snippet expects none"
        assert all(f.fix is None for f in result.findings)
        return
    assert fixed.fixed_source == snippet.fixed
    assert fixed.findings == ()
    assert undefined_names(fixed.fixed_source) == []
    again = lint_source(
        fixed.fixed_source,
        "snippet.py",
        Config(),
        fix=True,
        unsafe_fixes=True,
        rules=[rule_cls(snippet.options)],
    )
    assert again.fixed_source is None, "the fix is not idempotent"


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
