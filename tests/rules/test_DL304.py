"""DL304 sampler-epoch-not-set (rules/sampler_epoch_not_set.py):
its snippets, fixtures/DL304/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL304/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests


class TestDL304(SnippetTests, FixtureTests):
    CODE = "DL304"
    # the epoch set by the framework, or one pass only: silent
    VALID = {
        "fabric-setup-dataloaders-sets-the-epoch": (
            "import lightning as L\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
            "def main(model, data):\n    fabric = L.Fabric(devices=2)\n"
            "    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
            "    loader = fabric.setup_dataloaders(loader, use_distributed_sampler=False)\n"
            "    for epoch in range(3):\n        for batch in loader:\n            fabric.backward(model(batch))\n"
        ),
        "single-pass-loader": (
            "from torch.utils.data import DataLoader, DistributedSampler\n\n"
            "def main(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
            "    for batch in loader:\n        model(batch).backward()\n"
        ),
    }


def test_dl304_batch_sampler_and_timm_repeat_aug(snapshot):
    code = (
        "from timm.data.distributed_sampler import RepeatAugSampler\n"
        "from torch.utils.data import BatchSampler, DataLoader\n\n"
        "def main(model, data):\n    sampler = RepeatAugSampler(data, num_repeats=3)\n"
        "    loader = DataLoader(data, batch_sampler=BatchSampler(sampler, 8, drop_last=True))\n"
        "    for epoch in range(3):\n        for batch in loader:\n            model(batch).backward()\n"
    )
    linted = snapshot(lint_snippet("DL304", code))
    assert "    for epoch in range(3):\n        sampler.set_epoch(epoch)\n" in linted.fixed_source
