"""Targeted tests for DL204 (accumulation-without-accumulate), DL205
(backward-bypasses-accelerator) and DL304 (sampler-epoch-not-set), and the providers they ask
(analysis/loops.py, analysis/accumulation.py).

Lint cases are snapshotted (tests/snapshots/test_accumulation_epoch_rules/): position, code and
message of every finding and the diff of every fix; `pytest --update-snapshots` writes them.
"""

import textwrap

import libcst as cst
import pytest
from helpers import lint_snippet

from distlint.analysis import Index
from distlint.analysis.facts import facts_for

ACC = "from accelerate import Accelerator\n"


def facts_of(code):
    return facts_for(Index(cst.parse_module(textwrap.dedent(code))))


# ------------------------------------------------------------------------------------ providers
def test_training_loops_are_the_innermost_loops_that_run_backward_through_helpers():
    facts = facts_of(
        """
        def step(model, batch):
            model(batch).backward()

        def fit(model, loader, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    step(model, batch)
                for batch in loader:
                    print(batch)
        """
    )
    loops = facts.loops.training_loops
    assert len(loops) == 1 and isinstance(loops[0], cst.For)
    assert facts.index.module.code_for_node(loops[0].target) == "batch"
    epoch = facts.loops.epoch_loop(loops[0])
    assert epoch is not None and facts.index.module.code_for_node(epoch.target) == "epoch"


def test_epoch_loop_of_a_helper_is_the_loop_around_its_call():
    facts = facts_of(
        """
        def one_epoch(model, loader):
            for x in loader:
                model(x).backward()

        def main(model, loader):
            for epoch in range(3):
                one_epoch(model, loader)
        """
    )
    (loop,) = facts.loops.training_loops
    epoch = facts.loops.epoch_loop(loop)
    assert epoch is not None and facts.index.module.code_for_node(epoch.target) == "epoch"


@pytest.mark.parametrize(
    "body,accumulates",
    [
        pytest.param(
            "with accelerator.accumulate(model):\n        loss.backward()", True, id="accumulate"
        ),
        pytest.param(
            "ctx = model.no_sync if i % 2 else nullcontext\n    loss.backward()",
            True,
            id="no_sync-picked",
        ),
        pytest.param(
            "if accelerator.sync_gradients:\n        opt.step()", True, id="sync_gradients"
        ),
        pytest.param(
            "do = (i + 1) % k == 0\n    if do:\n        opt.step()", True, id="modulo-through-name"
        ),
        pytest.param("if i % 100 == 0:\n        print(i)", False, id="modulo-for-logging"),
        pytest.param("print('%d' % i)\n    opt.step()", False, id="string-format"),
    ],
)
def test_accumulation_done_by_the_module(body, accumulates):
    facts = facts_of(f"for i, batch in enumerate(loader):\n    {body}\n")
    assert facts.accumulation.done_by_the_module is accumulates


# ------------------------------------------------------------------------------------ DL204
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


def test_dl204_step_taken_around_the_micro_batch_loop_is_accumulation_by_hand(snapshot):
    code = (
        ACC
        + "def train(model, opt, batches):\n    accelerator = Accelerator(gradient_accumulation_steps=4)\n"
        "    model, opt = accelerator.prepare(model, opt)\n"
        "    for group in batches:\n        for batch in group:\n            accelerator.backward(model(batch))\n"
        "        opt.step()\n"
    )
    linted = snapshot(lint_snippet("DL204", code))
    assert linted.findings == ()


@pytest.mark.parametrize("value", ["1", "0"])
def test_dl204_steps_of_one_are_silent(value):
    code = ACC + (
        f"accelerator = Accelerator(gradient_accumulation_steps={value})\n"
        "for batch in loader:\n    accelerator.backward(batch)\n    opt.step()\n"
    )
    assert lint_snippet("DL204", code).findings == ()


# ------------------------------------------------------------------------------------ DL205
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


def test_dl205_function_that_prepares_nothing_is_not_reported(snapshot):
    code = (
        ACC
        + "def baseline(model, batch):\n    accelerator = Accelerator()\n    model.to(accelerator.device)\n"
        "    model(batch).backward()\n\n"
        "def train(model, opt):\n    accelerator = Accelerator()\n    model, opt = accelerator.prepare(model, opt)\n"
        "    accelerator.backward(model(1))\n"
    )
    assert snapshot(lint_snippet("DL205", code)).findings == ()


def test_dl205_prepared_in_init_backward_in_a_method(snapshot):
    code = (
        ACC
        + "class Trainer:\n    def __init__(self, model, opt):\n        self.accelerator = Accelerator()\n"
        "        self.model, self.opt = self.accelerator.prepare(model, opt)\n\n"
        "    def step(self, batch):\n        loss = self.model(batch)\n        loss.backward()\n        self.opt.step()\n"
    )
    linted = snapshot(lint_snippet("DL205", code))
    assert "self.accelerator.backward(loss)" in linted.fixed_source


# ------------------------------------------------------------------------------------ DL304
def test_dl304_fabric_setup_dataloaders_sets_the_epoch(snapshot):
    code = (
        "import lightning as L\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
        "def main(model, data):\n    fabric = L.Fabric(devices=2)\n"
        "    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
        "    loader = fabric.setup_dataloaders(loader, use_distributed_sampler=False)\n"
        "    for epoch in range(3):\n        for batch in loader:\n            fabric.backward(model(batch))\n"
    )
    assert snapshot(lint_snippet("DL304", code)).findings == ()


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


def test_dl304_single_pass_loader_is_not_reported(snapshot):
    code = (
        "from torch.utils.data import DataLoader, DistributedSampler\n\n"
        "def main(model, data):\n    loader = DataLoader(data, sampler=DistributedSampler(data))\n"
        "    for batch in loader:\n        model(batch).backward()\n"
    )
    assert snapshot(lint_snippet("DL304", code)).findings == ()


# ------------------------------------------------------------------------------------ DL401 / DL402
def test_dl401_helper_named_for_reducing_counts_as_a_collective(snapshot):
    code = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "from utils import reduce_tensor\n\n"
        "def test(model, data):\n    dist.init_process_group('nccl')\n"
        "    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False))\n"
        "    correct = 0\n    for x, y in loader:\n        correct += (model(x).argmax(-1) == y).sum()\n"
        "    return reduce_tensor(correct)\n"
    )
    assert snapshot(lint_snippet("DL401", code)).findings == ()


def test_dl401_unsharded_evaluation_loader_is_not_reported(snapshot):
    code = (
        "import evaluate\n" + ACC + "\ndef test(model, loader):\n    accelerator = Accelerator()\n"
        "    model = accelerator.prepare(model)\n    metric = evaluate.load('accuracy')\n"
        "    for x, y in loader:\n        metric.add_batch(predictions=model(x), references=y)\n"
    )
    assert snapshot(lint_snippet("DL401", code)).findings == ()


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
    "config,reported",
    [
        pytest.param(
            "dataloader_config=DataLoaderConfiguration(even_batches=False)", False, id="even-off"
        ),
        pytest.param(
            "dataloader_config=DataLoaderConfiguration(even_batches=True)", True, id="even-on"
        ),
        pytest.param("", True, id="default"),
    ],
)
def test_dl402_even_batches_off_in_the_dataloader_configuration(config, reported, snapshot):
    code = (
        "from accelerate import Accelerator, DataLoaderConfiguration\n\n"
        f"def main(model, loader):\n    accelerator = Accelerator({config})\n"
        "    model, loader = accelerator.prepare(model, loader)\n    out = []\n"
        "    for x in loader:\n        out.append(accelerator.gather(model(x)))\n    return out\n"
    )
    assert bool(snapshot(lint_snippet("DL402", code)).findings) is reported
