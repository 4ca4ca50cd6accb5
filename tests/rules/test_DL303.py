"""DL303 ignored-split-batches-keyword (rules/ignored_split_batches_keyword.py):
its snippets, fixtures/DL303/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL303/.
"""

import textwrap

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

from distlint.model import Applicability


class TestDL303(SnippetTests, FixtureTests):
    CODE = "DL303"


def test_existing_import_from_top_level_accelerate_is_reused(snapshot):
    code = """
    from accelerate import Accelerator, DataLoaderConfiguration
    acc = Accelerator(split_batches=True)
    """
    linted = snapshot(lint_snippet("DL303", code))
    assert linted.fixed_source == textwrap.dedent(
        """
        from accelerate import Accelerator, DataLoaderConfiguration
        acc = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))
        """
    )


@pytest.mark.parametrize(
    "code,applicability",
    [
        pytest.param(
            """
            from accelerate import Accelerator
            Accelerator(split_batches=True)
            """,
            Applicability.UNSAFE,
            id="moved-unsafe",
        ),
        pytest.param(
            """
            from accelerate import Accelerator
            from accelerate.utils import DataLoaderConfiguration as C
            Accelerator(split_batches=True, dataloader_config=C(split_batches=True))
            """,
            Applicability.SAFE,
            id="dropped-safe",
        ),
    ],
)
def test_fix_safety_levels(code, applicability, snapshot):
    linted = snapshot(lint_snippet("DL303", code))
    assert linted.findings[0].fix.applicability is applicability


def test_non_literal_value_is_not_moved_into_a_distant_configuration(snapshot):
    code = """
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    config = DataLoaderConfiguration(even_batches=False)

    def build(args):
        return Accelerator(dataloader_config=config, split_batches=args.split)
    """
    linted = snapshot(lint_snippet("DL303", code))
    assert len(linted.findings) == 1 and linted.findings[0].fix is None
