"""DL205 backward-bypasses-accelerator (rules/backward_bypasses_accelerator.py):
its snippets, fixtures/DL205/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL205/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\n"


class TestDL205(SnippetTests, FixtureTests):
    CODE = "DL205"
    # a backward where nothing was prepared: silent
    VALID = {
        "function-that-prepares-nothing": (
            ACC
            + "def baseline(model, batch):\n    accelerator = Accelerator()\n    model.to(accelerator.device)\n"
            "    model(batch).backward()\n\n"
            "def train(model, opt):\n    accelerator = Accelerator()\n    model, opt = accelerator.prepare(model, opt)\n"
            "    accelerator.backward(model(1))\n"
        ),
    }


def test_dl205_clip_value_and_torch_only_keywords(snapshot):
    code = (
        "import torch\nfrom torch.nn.utils import clip_grad_value_\n"
        + ACC
        + "def train(model, opt):\n    accelerator = Accelerator()\n"
        "    model, opt = accelerator.prepare(model, opt)\n    accelerator.backward(model(1))\n"
        "    clip_grad_value_(model.parameters(), 0.5)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)\n"
    )
    linted = snapshot(lint_snippet("DL205", code))
    assert [f.fix is not None for f in linted.findings] == [True, False]


def test_dl205_prepared_in_init_backward_in_a_method(snapshot):
    code = (
        ACC
        + "class Trainer:\n    def __init__(self, model, opt):\n        self.accelerator = Accelerator()\n"
        "        self.model, self.opt = self.accelerator.prepare(model, opt)\n\n"
        "    def step(self, batch):\n        loss = self.model(batch)\n        loss.backward()\n        self.opt.step()\n"
    )
    linted = snapshot(lint_snippet("DL205", code))
    assert "self.accelerator.backward(loss)" in linted.fixed_source
