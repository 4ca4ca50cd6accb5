"""DL203 loss-divided-for-accumulation (rules/loss_divided_for_accumulation.py): its snippets,
fixtures/DL203/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL203/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import fixed_and_bound, lint_snippet
from rule_tests import FixtureTests, SnippetTests


class TestDL203(SnippetTests, FixtureTests):
    CODE = "DL203"
    # a divisor that is not the accumulation steps, or out of reach: silent
    VALID = {
        "literal-divisor-is-not-assumed-to-be-the-accumulation": """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=4)
    def f(loss):
        accelerator.backward(loss / 4)
    """,
        "division-in-another-function-is-not-followed": """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=2)
    def f(loss):
        accelerator.backward(loss)
    def g(out, grad_accum):
        f(out / grad_accum)
    """,
    }


def test_dl203_deepspeed_plugin_accumulation(snapshot):
    code = """
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin

    accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(gradient_accumulation_steps=8))

    def step(loss, grad_accum_steps):
        accelerator.backward(loss / grad_accum_steps)
    """
    snapshot(lint_snippet("DL203", code))


def test_dl203_fix_in_a_line_with_several_statements(snapshot):
    code = """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=2)
    def f(loss, accum_steps):
        loss /= accum_steps; accelerator.backward(loss)
    """
    fixed_and_bound(snapshot(lint_snippet("DL203", code)))
