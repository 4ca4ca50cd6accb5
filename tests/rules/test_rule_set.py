"""Every rule's VALID / INVALID snippets, each run with that rule alone (helpers.lint_snippet).

The snippets are the rule docs' examples; the exact fixed text lives with the snippet
(`Invalid.fixed`), so this checks counts and fixes, not snapshots.
"""

import pytest
from helpers import lint_snippet, undefined_names

from distlint.registry import all_rules

VALID = [(r, i, v) for r in all_rules() for i, v in enumerate(r.VALID)]
INVALID = [(r, i, v) for r in all_rules() for i, v in enumerate(r.INVALID)]


@pytest.mark.parametrize(
    "rule_cls,i,snippet", VALID, ids=[f"{r.CODE}-valid-{i}" for r, i, _ in VALID]
)
def test_valid_snippet_has_no_finding(rule_cls, i, snippet):
    linted = lint_snippet(rule_cls.CODE, snippet.code, snippet.options, path="snippet.py")
    assert [f.message for f in linted.findings] == []


@pytest.mark.parametrize(
    "rule_cls,i,snippet", INVALID, ids=[f"{r.CODE}-invalid-{i}" for r, i, _ in INVALID]
)
def test_invalid_snippet_is_reported_and_fixed(rule_cls, i, snippet):
    # lint_snippet also checks the fix is sound: it compiles, a second fix changes nothing
    linted = lint_snippet(rule_cls.CODE, snippet.code, snippet.options, path="snippet.py")
    assert [f.code for f in linted.findings] == [rule_cls.CODE] * snippet.count
    if snippet.fixed is None:
        assert linted.fixed_source is None, "a fix was applied where the snippet expects none"
        assert all(f.fix is None for f in linted.findings)
        return
    assert linted.fixed_source == snippet.fixed
    assert linted.fix.findings == ()
    assert undefined_names(linted.fixed_source) == []


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
