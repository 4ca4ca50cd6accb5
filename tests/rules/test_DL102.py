"""DL102 seed-after-model-init (rules/seed_after_model_init.py): its snippets, fixtures/DL102/ and its own cases."""

from rule_tests import FixtureTests, SnippetTests


class TestDL102(SnippetTests, FixtureTests):
    CODE = "DL102"
