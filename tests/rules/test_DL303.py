"""DL303 ignored-split-batches-keyword (rules/ignored_split_batches_keyword.py): its snippets, fixtures/DL303/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL303(SnippetTests, FixtureTests):
    CODE = "DL303"
