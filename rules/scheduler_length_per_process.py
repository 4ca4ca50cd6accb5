"""DL202 scheduler-length-per-process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis.facts import Facts, Scheduler
from distlint.analysis.prepared import returned_by_prepare
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, scaled_expression

if TYPE_CHECKING:
    from typing_extensions import TypeGuard  # typing.TypeGuard is Python 3.10+


class SchedulerLengthPerProcess(Rule):
    """
    ## What it does
    Flags an LR scheduler that is passed to `accelerator.prepare` and whose length (total or
    warmup steps: `num_training_steps`, `T_max`, `total_iters`, `total_steps`, arguments of an
    `lr_lambda` factory, ...) is counted from the length of a DataLoader *after* it was prepared,
    without a factor of `accelerator.num_processes`.

    Not reported: schedules counted from the DataLoader before `prepare` (single-device steps,
    the idiom of the Accelerate and `*_no_trainer` examples), lengths multiplied by the number of
    processes, schedulers that are not prepared, `Accelerator(step_scheduler_with_optimizer=False)`
    and `DataLoaderConfiguration(split_batches=True)`.

    ## Why is this bad?
    A prepared DataLoader yields only its shard: `len(loader)` is the number of steps *each
    process* takes. A prepared scheduler, however, is stepped `num_processes` times per optimizer
    step (Accelerate counts schedules in single-device steps, to match the larger observed
    batch). A schedule sized from the per-process length therefore ends N times too early: a
    cosine or linear decay reaches its minimum after 1/N of training and the rest of the run
    trains at the final learning rate; warmup is N times too short.

    ## Fix safety
    The fix multiplies the per-process length argument(s) by `<accelerator>.num_processes`. It is
    unsafe: it changes the learning-rate schedule of every multi-process run (to the one the script
    meant), and a script that compensated elsewhere (for example by stepping the scheduler by hand)
    would be changed too. No fix when no accelerator is visible at the scheduler.

    ## References
    - Accelerate, "Comparing performance across distributed setups": learning rates
      (the prepared scheduler is stepped once per process).
    - `accelerate.scheduler.AcceleratedScheduler`.
    """

    CODE = "DL202"
    NAME = "scheduler-length-per-process"
    MESSAGE = "scheduler length counts per-process steps: multiply by `accelerator.num_processes`"
    FIX_TITLE = "Count the schedule in single-device steps (multiply by the number of processes)"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("prepare",)

    VALID = (
        # counted before prepare: single-device steps
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator()\nloader = DataLoader(range(64), batch_size=8)\n"
            "opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1 * accelerator.num_processes)\n"
            "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3 * len(loader))\n"
            "opt, loader, sched = accelerator.prepare(opt, loader, sched)\n"
        ),
        # after prepare, multiplied by the number of processes
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n"
            "from transformers import get_scheduler\n\n"
            "accelerator = Accelerator()\nopt = torch.optim.SGD([torch.zeros(1)], lr=0.1)\n"
            "opt, loader = accelerator.prepare(opt, DataLoader(range(64), batch_size=8))\n"
            "steps = 2 * len(loader)\n"
            "sched = get_scheduler('linear', opt, num_warmup_steps=0, num_training_steps=steps * accelerator.num_processes)\n"
            "sched = accelerator.prepare(sched)\n"
        ),
        # step_scheduler_with_optimizer=False: stepped once per call, per-process count is right
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator(step_scheduler_with_optimizer=False)\n"
            "opt, loader = accelerator.prepare(torch.optim.SGD([torch.zeros(1)], lr=0.1), torch.utils.data.DataLoader(range(8)))\n"
            "sched = accelerator.prepare(torch.optim.lr_scheduler.LinearLR(opt, total_iters=len(loader)))\n"
        ),
        # the scheduler is not prepared: the user steps it once per optimizer step
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "opt, loader = accelerator.prepare(torch.optim.SGD([torch.zeros(1)], lr=0.1), torch.utils.data.DataLoader(range(8)))\n"
            "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(loader))\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration as DLC\n\n"
            "accelerator = Accelerator(dataloader_config=DLC(split_batches=True))\n"
            "opt, loader = accelerator.prepare(torch.optim.SGD([torch.zeros(1)], lr=0.1), torch.utils.data.DataLoader(range(8)))\n"
            "sched = accelerator.prepare(torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=len(loader)))\n"
        ),
        # the length after prepare is only used for the epoch count, after the scheduler exists
        Valid(
            "import math\nimport torch\nfrom accelerate import Accelerator\nfrom transformers import get_scheduler\n\n"
            "def main(args, loader, opt):\n    accelerator = Accelerator()\n"
            "    args.max_train_steps = args.epochs * len(loader)\n"
            "    sched = get_scheduler('linear', opt, num_warmup_steps=0, num_training_steps=args.max_train_steps)\n"
            "    loader, sched = accelerator.prepare(loader, sched)\n"
            "    args.max_train_steps = args.epochs * math.ceil(len(loader))\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "opt, loader = accelerator.prepare(torch.optim.SGD([torch.zeros(1)], lr=0.1), torch.utils.data.DataLoader(range(8)))\n"
            "max_steps = 3 * len(loader)\n"
            "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_steps)\n"
            "sched = accelerator.prepare(sched)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
                "opt, loader = accelerator.prepare(torch.optim.SGD([torch.zeros(1)], lr=0.1), torch.utils.data.DataLoader(range(8)))\n"
                "max_steps = 3 * len(loader)\n"
                "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_steps * accelerator.num_processes)\n"
                "sched = accelerator.prepare(sched)\n"
            ),
            range="7:63-7:72",
        ),
        # transformers helper, warmup and total both per process; `import accelerate` form
        Invalid(
            "import math\nimport accelerate\nimport transformers\n\n"
            "def train(model, opt, loader, epochs):\n    acc = accelerate.Accelerator()\n"
            "    model, opt, loader = acc.prepare(model, opt, loader)\n"
            "    total = epochs * math.ceil(len(loader) / 4)\n"
            "    sched = transformers.get_linear_schedule_with_warmup(opt, total // 10, total)\n"
            "    sched = acc.prepare(sched)\n",
            fixed=(
                "import math\nimport accelerate\nimport transformers\n\n"
                "def train(model, opt, loader, epochs):\n    acc = accelerate.Accelerator()\n"
                "    model, opt, loader = acc.prepare(model, opt, loader)\n"
                "    total = epochs * math.ceil(len(loader) / 4)\n"
                "    sched = transformers.get_linear_schedule_with_warmup(opt, total // 10 * acc.num_processes, total * acc.num_processes)\n"
                "    sched = acc.prepare(sched)\n"
            ),
            range="9:76-9:81",
        ),
        # a LambdaLR factory receives the per-process length; trainer class with self.accelerator
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\n"
            "def warmup_decay(total):\n    return lambda step: max(0.0, 1 - step / total)\n\n"
            "class Trainer:\n    def __init__(self, model, loader):\n        self.accelerator = Accelerator()\n"
            "        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3 * self.accelerator.num_processes)\n"
            "        self.opt, self.loader = self.accelerator.prepare(self.opt, loader)\n"
            "        sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_decay(10 * len(self.loader)))\n"
            "        self.sched = self.accelerator.prepare(sched)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\n"
                "def warmup_decay(total):\n    return lambda step: max(0.0, 1 - step / total)\n\n"
                "class Trainer:\n    def __init__(self, model, loader):\n        self.accelerator = Accelerator()\n"
                "        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3 * self.accelerator.num_processes)\n"
                "        self.opt, self.loader = self.accelerator.prepare(self.opt, loader)\n"
                "        sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_decay(10 * len(self.loader) * self.accelerator.num_processes))\n"
                "        self.sched = self.accelerator.prepare(sched)\n"
            ),
            range="12:74-12:95",
        ),
        # SequentialLR wrapper prepared: the inner schedulers are stepped N times too
        Invalid(
            "from torch.optim.lr_scheduler import CosineAnnealingLR, SequentialLR, LinearLR\n"
            "from accelerate import Accelerator as A\n\n"
            "def setup(model, opt, loader):\n    accelerator = A()\n"
            "    model, opt, loader = accelerator.prepare(model, opt, loader)\n"
            "    sched = SequentialLR(opt, [LinearLR(opt, total_iters=5), CosineAnnealingLR(opt, T_max=len(loader))], milestones=[5])\n"
            "    return accelerator.prepare(sched)\n",
            fixed=(
                "from torch.optim.lr_scheduler import CosineAnnealingLR, SequentialLR, LinearLR\n"
                "from accelerate import Accelerator as A\n\n"
                "def setup(model, opt, loader):\n    accelerator = A()\n"
                "    model, opt, loader = accelerator.prepare(model, opt, loader)\n"
                "    sched = SequentialLR(opt, [LinearLR(opt, total_iters=5), CosineAnnealingLR(opt, T_max=len(loader) * accelerator.num_processes)], milestones=[5])\n"
                "    return accelerator.prepare(sched)\n"
            ),
            range="7:91-7:102",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        if not facts.accelerators or facts.split_batches or facts.scheduler_stepped_once:
            return
        if not facts.prepare_calls:
            return
        for sched in facts.schedulers:
            if not facts.is_prepared(sched.call):  # one closure over every prepare argument
                continue
            lengths = facts.scheduler_lengths(sched)
            per_process = [v for v, _role in lengths if _per_process(facts, sched, v)]
            if not per_process:
                continue
            totals = [v for v, role in lengths if role != "warmup" and v in per_process]
            report_at = totals[0] if totals else per_process[0]
            text = ctx.index.module.code_for_node(report_at).strip()
            subject = f"`{text}`" if len(text) <= 40 else "the schedule length"
            message = (
                f"{subject} counts per-process steps, but the scheduler steps on every "
                "process: multiply by `accelerator.num_processes`"
            )
            ctx.report(report_at, message, _fix(facts, sched.call, per_process))


def _is_len(node: cst.CSTNode) -> TypeGuard[cst.Call]:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"
    )


def _per_process(facts: Facts, sched: Scheduler, value: cst.BaseExpression) -> bool:
    index = facts.index
    call = sched.call

    def prepared_length(node: cst.CSTNode, _q: str | None) -> bool:
        if not _is_len(node) or not node.args:
            return False
        # a length taken later in the same function (e.g. to recount epochs) is not the one
        # the scheduler was built with
        later = index.order(node) > index.order(call) and not index.is_inside(node, call)
        if later and index.enclosing_function(node) is index.enclosing_function(call):
            return False
        return returned_by_prepare(facts, node.args[0].value, index.order(node))

    # `len(loader)` is where the count comes from: how the loader was built does not matter
    if not index.reaches(value, prepared_length, prune=_is_len):
        return False
    return not facts.reads_process_count(value, prune=_is_len)


def _fix(facts: Facts, sched: cst.Call, values: list[cst.BaseExpression]) -> FixPlan | None:
    acc = facts.accelerator_expr(sched)
    if acc is None:
        return None
    fix = FixPlan()
    for value in values:
        fix.replace[value] = scaled_expression(value, f"{acc}.num_processes")
    return fix
