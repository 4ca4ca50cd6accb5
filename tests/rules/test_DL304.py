"""DL304 sampler-epoch-not-set (rules/sampler_epoch_not_set.py): its snippets, fixtures/DL304/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL304(SnippetTests, FixtureTests):
    CODE = "DL304"
