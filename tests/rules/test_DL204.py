"""DL204 accumulation-without-accumulate (rules/accumulation_without_accumulate.py):
its snippets, fixtures/DL204/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL204/; the cases that must stay
silent are valid snippets (``VALID``).
"""

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\n"


class TestDL204(SnippetTests, FixtureTests):
    CODE = "DL204"
    # accumulation done by hand, or none configured: silent
    VALID = {
        "step-taken-around-the-micro-batch-loop-is-accumulation-by-hand": (
            ACC
            + "def train(model, opt, batches):\n    accelerator = Accelerator(gradient_accumulation_steps=4)\n"
            "    model, opt = accelerator.prepare(model, opt)\n"
            "    for group in batches:\n        for batch in group:\n            accelerator.backward(model(batch))\n"
            "        opt.step()\n"
        ),
    }


def test_dl204_literal_steps_fix_wraps_the_loop_body(snapshot):
    code = (
        ACC
        + "def train(model, opt, dl):\n    accelerator = Accelerator(gradient_accumulation_steps=8)\n"
        "    model, opt, dl = accelerator.prepare(model, opt, dl)\n"
        "    for epoch in range(2):\n        for batch in dl:\n            # forward\n"
        "            loss = model(**batch).loss\n            accelerator.backward(loss)\n"
        "            opt.step()\n            opt.zero_grad()\n"
    )
    linted = snapshot(lint_snippet("DL204", code))
    assert "with accelerator.accumulate(model):\n                # forward\n" in linted.fixed_source


@pytest.mark.parametrize("value", ["1", "0"])
def test_dl204_steps_of_one_are_silent(value):
    code = ACC + (
        f"accelerator = Accelerator(gradient_accumulation_steps={value})\n"
        "for batch in loader:\n    accelerator.backward(batch)\n    opt.step()\n"
    )
    assert lint_snippet("DL204", code).findings == ()
