"""DL301 per-device-batch-as-global (rules/per_device_batch_as_global.py): its snippets, fixtures/DL301/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL301(SnippetTests, FixtureTests):
    CODE = "DL301"
