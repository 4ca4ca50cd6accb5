"""DL205 backward-bypasses-accelerator (rules/backward_bypasses_accelerator.py): its snippets, fixtures/DL205/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL205(SnippetTests, FixtureTests):
    CODE = "DL205"
