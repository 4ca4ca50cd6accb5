"""DL202 scheduler-length-per-process (rules/scheduler_length_per_process.py): its snippets,
fixtures/DL202/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL202/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import fixed_and_bound, lint_snippet
from rule_tests import FixtureTests, SnippetTests


class TestDL202(SnippetTests, FixtureTests):
    CODE = "DL202"
    # a length taken before `prepare`, or no accelerator: silent
    VALID = {
        "length-taken-before-the-loader-was-prepared": """
    import torch
    from accelerate import Accelerator

    def main(model, optimizer, loader):
        accelerator = Accelerator()
        steps = 3 * len(loader)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        scheduler = accelerator.prepare(torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=steps))
    """,
        "only-with-an-accelerator": """
    import torch
    def main(optimizer, loader, fabric):
        loader = fabric.setup_dataloaders(loader)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(loader))
    """,
    }


def test_dl202_prepared_loader_passed_to_a_helper(snapshot):
    code = """
    import torch
    from accelerate import Accelerator

    def make_scheduler(optimizer, loader, epochs):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))

    def main(model, optimizer, loader):
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        scheduler = make_scheduler(optimizer, loader, 3)
        scheduler = accelerator.prepare(scheduler)
    """
    linted = snapshot(lint_snippet("DL202", code))
    assert linted.findings[0].fix is None  # no accelerator visible inside the helper


def test_dl202_diffusers_get_scheduler_positions(snapshot):
    code = """
    from diffusers.optimization import get_scheduler
    from accelerate import Accelerator

    def main(model, optimizer, loader, args):
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        total = args.epochs * len(loader)
        sched = get_scheduler("cosine", optimizer, None, 100, total)
        sched = accelerator.prepare(sched)
    """
    fixed_and_bound(snapshot(lint_snippet("DL202", code)))
