"""DL204 accumulation-without-accumulate (rules/accumulation_without_accumulate.py): its snippets, fixtures/DL204/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL204(SnippetTests, FixtureTests):
    CODE = "DL204"
