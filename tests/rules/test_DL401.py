"""DL401 metric-not-gathered (rules/metric_not_gathered.py): its snippets, fixtures/DL401/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL401(SnippetTests, FixtureTests):
    CODE = "DL401"
