"""DL201 unscaled-learning-rate (rules/unscaled_learning_rate.py): its snippets, fixtures/DL201/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL201(SnippetTests, FixtureTests):
    CODE = "DL201"
