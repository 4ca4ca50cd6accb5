"""DL403 loss-logged-from-one-process (rules/loss_logged_from_one_process.py): its snippets,
fixtures/DL403/ and its own cases. The rule is opt-in.

The reported cases are snapshotted in tests/rules/snapshots/test_DL403/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

from distlint.api import lint_source
from distlint.config import Config

ACC = "from accelerate import Accelerator\n"


def accelerate_loop(after_backward, imports=""):
    return (
        imports + ACC + "\ndef train(model, optimizer, loader):\n    accelerator = Accelerator()\n"
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "    for batch in loader:\n        loss = model(**batch).loss\n"
        "        accelerator.backward(loss)\n        optimizer.step()\n"
        + "".join(f"        {line}\n" for line in after_backward)
    )


class TestDL403(SnippetTests, FixtureTests):
    CODE = "DL403"
    VALID = {
        "gathered-per-sample-losses": accelerate_loop(
            [
                "avg = accelerator.gather(loss.repeat(8)).mean()",
                "total = avg.item()",
                "accelerator.log({'loss': total})",
            ]
        ),
        "reduced-in-place-by-torch-distributed": accelerate_loop(
            [
                "value = loss.detach().clone()",
                "dist.all_reduce(value)",
                "accelerator.print(value.item())",
            ],
            "import torch.distributed as dist\n",
        ),
        "every-process-prints-its-own": accelerate_loop(["print(loss.item())"]),
        "progress-bar-only": accelerate_loop(
            ["bar.set_postfix(loss=loss.item())"], "from tqdm import tqdm\nbar = tqdm()\n"
        ),
        "main-process-logs-something-else": accelerate_loop(
            ["if accelerator.is_main_process:", "    print('lr', optimizer.param_groups[0]['lr'])"]
        ),
        "not-data-parallel": (
            "import torch\n\ndef train(model, optimizer, loader, writer):\n"
            "    for x, y in loader:\n        loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        writer.add_scalar('loss', loss.item())\n"
        ),
        "accumulation-steps-logged-not-the-loss": accelerate_loop(
            ["accelerator.print(f'accumulating {args.accum} steps')"]
        ).replace("backward(loss)", "backward(loss / args.accum)"),
        "training-loader-not-sharded": (
            ACC + "from torch.utils.data import DataLoader\n\ndef train(model, optimizer, data):\n"
            "    accelerator = Accelerator()\n    loader = DataLoader(data, batch_size=8)\n"
            "    model, optimizer = accelerator.prepare(model, optimizer)\n"
            "    for x, y in loader:\n        loss = model(x, y)\n        accelerator.backward(loss)\n"
            "        optimizer.step()\n        accelerator.print(loss.item())\n"
        ),
        # the name of the training loss reused for one validation batch's loss
        "validation-loss-in-a-reused-name": accelerate_loop(
            [
                "with torch.no_grad():",
                "    loss = model(**next(iter(loader))).loss",
                "accelerator.log({'valid_loss': loss.item()})",
            ],
            "import torch\n",
        ),
        # sequence parallelism: the loss that goes to backward is made of every rank's shard
        "loss-built-from-gathered-shards": accelerate_loop(
            ["accelerator.log({'loss': loss.item()})"], "import torch.distributed as dist\n"
        ).replace(
            "        loss = model(**batch).loss\n",
            "        parts = dist.nn.functional.all_gather(model(**batch).loss)\n"
            "        loss = sum(parts) / len(parts)\n",
        ),
        # Accelerate's Megatron-LM integration averages the loss over the data-parallel group
        "megatron-lm-backend": accelerate_loop(
            [
                "if accelerator.distributed_type == DistributedType.MEGATRON_LM:",
                "    accelerator.log({'loss': loss.item()})",
            ],
            "from accelerate import DistributedType\n",
        ),
        "fabric-all-reduce": (
            "from lightning import Fabric\n\ndef train(model, optimizer, loader):\n"
            "    fabric = Fabric()\n    model, optimizer = fabric.setup(model, optimizer)\n"
            "    loader = fabric.setup_dataloaders(loader)\n    for x, y in loader:\n"
            "        loss = model(x, y)\n        fabric.backward(loss)\n        optimizer.step()\n"
            "        fabric.log('loss', fabric.all_reduce(loss.detach(), reduce_op='mean'))\n"
        ),
    }


def test_dl403_is_opt_in():
    code = accelerate_loop(["accelerator.log({'loss': loss.item()})"])
    default = lint_source(code, "train.py", Config())
    assert not [f for f in default.findings if f.code == "DL403"]
    chosen = lint_source(code, "train.py", Config(extend_select=("DL403",)))
    assert [f.code for f in chosen.findings] == ["DL403"]


def test_dl403_a_helper_that_runs_backward_returns_the_loss(snapshot):
    code = """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel


    def step(model, optimizer, batch):
        loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        return loss


    def main(model, optimizer, loader, writer):
        dist.init_process_group("nccl")
        model = DistributedDataParallel(model)
        for i, batch in enumerate(loader):
            loss = step(model, optimizer, batch)
            if dist.get_rank() == 0:
                writer.add_scalar("train/loss", loss.item(), i)
    """
    (finding,) = snapshot(lint_snippet("DL403", code)).findings
    assert finding.line == 19


def test_dl403_a_running_meter_and_a_dict_carry_the_loss(snapshot):
    code = """
    from lightning import Fabric


    def train(model, optimizer, loader, meter):
        fabric = Fabric(devices=2)
        model, optimizer = fabric.setup(model, optimizer)
        loader = fabric.setup_dataloaders(loader)
        for x, y in loader:
            loss = model(x, y)
            fabric.backward(loss)
            optimizer.step()
            meter.update(loss.detach())
        metrics = {"train_loss": meter.compute().item()}
        fabric.log_dict(metrics)
    """
    (finding,) = snapshot(lint_snippet("DL403", code)).findings
    assert finding.line == 15


def test_dl403_loss_summed_before_it_is_rescaled_for_backward(snapshot):
    code = """
    from accelerate import Accelerator


    def train(model, optimizer, loader, steps):
        accelerator = Accelerator(log_with="all")
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        total_loss = 0
        for batch in loader:
            loss = model(**batch).loss
            total_loss += loss.detach().float()
            loss = loss / steps
            accelerator.backward(loss)
            optimizer.step()
        accelerator.log({"train_loss": total_loss.item() / len(loader)})
    """
    (finding,) = snapshot(lint_snippet("DL403", code)).findings
    assert finding.line == 15


def test_dl403_an_untraced_fabric_handed_in_writes_on_rank_zero(snapshot):
    code = """
    import lightning as L


    def fit(fabric, model, optimizer, loader):
        for batch in loader:
            loss = model(batch)
            fabric.backward(loss)
            optimizer.step()
            fabric.print(f"loss {loss.item():.4f}")


    def main(model, optimizer, loader):
        fabric = L.Fabric(devices=2, strategy="ddp")
        fabric.launch(fit, model, optimizer, fabric.setup_dataloaders(loader))
    """
    (finding,) = snapshot(lint_snippet("DL403", code)).findings
    assert finding.line == 10
