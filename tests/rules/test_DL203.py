"""DL203 loss-divided-for-accumulation (rules/loss_divided_for_accumulation.py): its snippets, fixtures/DL203/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL203(SnippetTests, FixtureTests):
    CODE = "DL203"
