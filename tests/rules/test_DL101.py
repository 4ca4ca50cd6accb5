"""DL101 seed-only-torch (rules/seed_only_torch.py): its snippets, fixtures/DL101/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL101(SnippetTests, FixtureTests):
    CODE = "DL101"
