"""DL401 metric-not-gathered (rules/metric_not_gathered.py):
its snippets, fixtures/DL401/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL401/; the cases that must stay
silent are valid snippets (``VALID``).
"""

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\n"


# an evaluation over a prepared loader that collects per-batch losses, then ...
def collected_losses(collect, after, imports="import numpy as np\nimport torch\n"):
    return (
        imports + ACC + "\ndef evaluate(model, loader):\n    accelerator = Accelerator()\n"
        "    model, loader = accelerator.prepare(model, loader)\n"
        f"    losses = [0.0]\n    for batch in loader:\n        losses.{collect}\n    {after}\n"
    )


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
        # an average of one batch, a running average shown during the loop, an average of
        # another list: not the metric of what the loop collected
        "mean-of-each-batch-in-the-loop": collected_losses(
            "append(model(batch).loss.mean())", "return losses"
        ),
        "running-mean-shown-in-the-loop": collected_losses(
            "append(model(batch).loss.item()); print(np.mean(losses))", "return losses"
        ),
        "mean-of-another-list": collected_losses(
            "append(model(batch).loss.item())", "return np.mean([1.0, 2.0])"
        ),
    }


@pytest.mark.parametrize(
    "collect,after",
    [
        pytest.param(
            "append(model(batch).loss)", "return torch.stack(losses).mean()", id="stack-mean"
        ),
        pytest.param(
            "append(model(batch).loss.item())", "return sum(losses) / len(losses)", id="sum-len"
        ),
        pytest.param(
            "extend(model(batch).losses)", "print(np.array(losses).mean())", id="extend-array-mean"
        ),
        pytest.param(
            "append(model(batch).loss.item())",
            "return statistics.median(losses)",
            id="statistics-median",
        ),
    ],
)
def test_an_average_of_what_the_loop_collected_is_one_shards(collect, after, snapshot):
    code = collected_losses(collect, after, "import statistics\nimport numpy as np\nimport torch\n")
    (finding,) = snapshot(lint_snippet("DL401", code)).findings
    assert finding.line == 12  # the line after the loop
