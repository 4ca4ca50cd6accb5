"""DL403 loss-logged-from-one-process (opt-in)."""

from __future__ import annotations

from distlint.analysis.facts import Mode
from distlint.rule import Invalid, Rule, RuleContext, Valid

_DATA_PARALLEL = (Mode.ACCELERATE, Mode.FABRIC, Mode.DDP, Mode.XLA_MULTIPROCESS)


class LossLoggedFromOneProcess(Rule):
    """
    ## What it does
    Flags, in a data-parallel script, a training loss written to the console, a log or a
    tracker by the main process only, when it never went through a reduce or a gather. The
    loss is found by what the code does with it: the value a training loop passes to a backward
    pass (or that a helper running the backward pass returns), and what the loop's function
    computes from it (`loss.item()`, `total_loss += loss.detach()`, `meter.update(loss.item())`,
    a dict holding it). It is written by the main process only when the call runs under a test
    that holds on one process (`if accelerator.is_main_process:`, `if rank == 0:`,
    `if fabric.is_global_zero:`) or writes on the main process by itself
    (`accelerator.log`, `accelerator.print`, Accelerate's `get_logger` logger,
    `fabric.log` / `fabric.log_dict` / `fabric.print`, `xm.master_print`).

    Not reported: a loss that went through `accelerator.reduce` / `gather`, `dist.all_reduce`,
    `fabric.all_reduce` (or a helper of another package whose name says it reduces, gathers or
    synchronises) before it is written, or that is made of gathered values (sequence
    parallelism); a loss every process prints; a progress bar; a training loader that is not
    sharded (every process then computes the same loss); Accelerate's Megatron-LM backend
    (the loss it returns is already averaged over the data-parallel group).

    This rule is opt-in: turn it on with `--select DL403` or `extend-select = ["DL403"]`.
    What it reports is almost always so, but most training scripts do it on purpose (a
    collective per logged step costs time), so it is for runs whose curves are compared across
    process counts, not a default.

    ## Why is this bad?
    Each process computes the loss of its own shard of the batch. The curve the main process
    logs is one shard's: it is noisier than the loss of the whole batch and differs from the
    curve the same script logs on one process, so two runs with different process counts cannot
    be compared by their logs. Training itself is not affected (the gradients are averaged);
    many scripts log the main process's loss on purpose to save a collective per step. Reduce
    the loss across processes before logging it when the curve is compared across runs.

    ## Fix safety
    This rule has no fix: a reduce is a collective that every process must reach, so it cannot
    be added inside the main-process branch; where to put it, and how often to pay for it, is
    the script's choice.

    ## References
    - Accelerate, `Accelerator.reduce` and `Accelerator.gather`; Lightning Fabric,
      `Fabric.all_reduce`; PyTorch, `torch.distributed.all_reduce`.
    """

    CODE = "DL403"
    NAME = "loss-logged-from-one-process"
    MESSAGE = "a training loss is logged from the main process only: the curve is one shard's"
    DEFAULT_ENABLED = False
    TRIGGERS = ("backward",)

    VALID = (
        Valid(
            "from accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
            "    accelerator = Accelerator(log_with='wandb')\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for batch in loader:\n        loss = model(**batch).loss\n"
            "        accelerator.backward(loss)\n        optimizer.step()\n        optimizer.zero_grad()\n"
            "        mean_loss = accelerator.reduce(loss.detach(), reduction='mean')\n"
            "        accelerator.log({'train_loss': mean_loss.item()})\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
            "    accelerator = Accelerator(log_with='wandb')\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for batch in loader:\n        loss = model(**batch).loss\n"
            "        accelerator.backward(loss)\n        optimizer.step()\n        optimizer.zero_grad()\n"
            "        accelerator.log({'train_loss': loss.item()})\n",
            range="12:9-12:24",
        ),
        Invalid(
            "import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
            "def train(model, optimizer, loader, loss_fn):\n    dist.init_process_group('nccl')\n"
            "    model = DDP(model)\n    rank = dist.get_rank()\n"
            "    for step, (x, y) in enumerate(loader):\n        loss = loss_fn(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n"
            "        if rank == 0 and step % 100 == 0:\n"
            "            print(f'step {step}: loss {loss.item():.4f}')\n",
            range="15:13-15:18",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        if facts.mode not in _DATA_PARALLEL:
            return
        for sink in facts.logged_losses.sinks:
            code = ctx.index.module.code_for_node(sink.func).strip()
            message = f"`{code}` logs a training loss of the main process only: one shard's curve"
            ctx.report(sink.func, message)
