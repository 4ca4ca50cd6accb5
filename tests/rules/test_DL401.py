"""DL401 metric-not-gathered (rules/metric_not_gathered.py):
its snippets, fixtures/DL401/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL401/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\n"


class TestDL401(SnippetTests, FixtureTests):
    CODE = "DL401"
    # reduced by a helper, or an evaluation loader that is not sharded: silent
    VALID = {
        "helper-named-for-reducing-counts-as-a-collective": (
            "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "from utils import reduce_tensor\n\n"
            "def test(model, data):\n    dist.init_process_group('nccl')\n"
            "    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
            "    correct = 0\n    for x, y in loader:\n        correct += (model(x).argmax(-1) == y).sum()\n"
            "    return reduce_tensor(correct)\n"
        ),
        "unsharded-evaluation-loader": (
            "import evaluate\n"
            + ACC
            + "\ndef test(model, loader):\n    accelerator = Accelerator()\n"
            "    model = accelerator.prepare(model)\n    metric = evaluate.load('accuracy')\n"
            "    for x, y in loader:\n        metric.add_batch(predictions=model(x), references=y)\n"
        ),
    }
