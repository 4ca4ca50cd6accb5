"""DL302 dataloader-not-sharded (rules/dataloader_not_sharded.py): its snippets, fixtures/DL302/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL302(SnippetTests, FixtureTests):
    CODE = "DL302"
