"""DL402 gather-keeps-duplicates (rules/gather_keeps_duplicates.py):
its snippets, fixtures/DL402/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL402/; the cases that must stay
silent are valid snippets (``VALID``).
"""

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\n"


def gather_script(config):
    return (
        "from accelerate import Accelerator, DataLoaderConfiguration\n\n"
        f"def main(model, loader):\n    accelerator = Accelerator({config})\n"
        "    model, loader = accelerator.prepare(model, loader)\n    out = []\n"
        "    for x in loader:\n        out.append(accelerator.gather(model(x)))\n    return out\n"
    )


class TestDL402(SnippetTests, FixtureTests):
    CODE = "DL402"
    # no padding duplicates when even batches are off: silent
    VALID = {
        "even-batches-off-in-the-dataloader-configuration": gather_script(
            "dataloader_config=DataLoaderConfiguration(even_batches=False)"
        ),
    }


def test_dl402_loader_passed_to_an_evaluation_function_of_the_module(snapshot):
    code = (
        ACC + "def evaluate(accelerator, model, loader):\n    out = []\n    for x, y in loader:\n"
        "        out.append(accelerator.gather(model(x)))\n    return out\n\n"
        "def main(model, loader):\n    accelerator = Accelerator()\n"
        "    model, loader = accelerator.prepare(model, loader)\n    return evaluate(accelerator, model, loader)\n"
    )
    linted = snapshot(lint_snippet("DL402", code))
    assert "accelerator.gather_for_metrics(model(x))" in linted.fixed_source


@pytest.mark.parametrize(
    "config",
    [
        pytest.param("dataloader_config=DataLoaderConfiguration(even_batches=True)", id="even-on"),
        pytest.param("", id="default"),
    ],
)
def test_dl402_even_batches_off_in_the_dataloader_configuration(config, snapshot):
    """Even batches (the default) pad the last batch: reported; off, it is a valid snippet."""
    assert snapshot(lint_snippet("DL402", gather_script(config))).findings
