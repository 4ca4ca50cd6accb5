"""DL001 unused-noqa (rules/unused_noqa.py): its snippets and its own cases (no fixtures: it reports
`# noqa` comments of the other rules; tests/test_noqa.py covers the suppressions)."""

from rule_tests import SnippetTests


class TestDL001(SnippetTests):
    CODE = "DL001"
