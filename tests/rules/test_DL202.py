"""DL202 scheduler-length-per-process (rules/scheduler_length_per_process.py): its snippets, fixtures/DL202/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL202(SnippetTests, FixtureTests):
    CODE = "DL202"
