"""DL402 gather-keeps-duplicates (rules/gather_keeps_duplicates.py): its snippets, fixtures/DL402/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL402(SnippetTests, FixtureTests):
    CODE = "DL402"
