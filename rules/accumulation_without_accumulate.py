"""DL204 accumulation-without-accumulate."""

from __future__ import annotations

import libcst as cst

from distlint.analysis.facts import Mode
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, factor_expression


class AccumulationWithoutAccumulate(Rule):
    """
    ## What it does
    Flags a training loop (a loop that runs `accelerator.backward`) in a script whose
    `Accelerator` is given `gradient_accumulation_steps` (a literal other than 1, an argument, a
    configuration value, or a `GradientAccumulationPlugin`) when nothing in the script ever
    accumulates: no `with accelerator.accumulate(model):`, no `no_sync()`, no read of
    `accelerator.sync_gradients`, and no optimizer step taken only every k-th micro-batch
    (`if (step + 1) % k == 0: optimizer.step()`).

    Not reported: an Accelerator configured with DeepSpeed (its engine accumulates by itself), a
    training loop that lives in another module, a setting of 1.

    ## Why is this bad?
    `accelerator.backward(loss)` divides every loss by the accumulation steps, inside
    `accelerator.accumulate` or not; but the prepared optimizer skips its step only while
    `accelerator.sync_gradients` is False, which only `accelerator.accumulate(...)` sets. Without
    it the optimizer steps on every micro-batch with a loss divided by the steps: accumulation
    never happens, the observed batch is `gradient_accumulation_steps` times smaller than
    planned, and the learning rate is effectively divided by the steps. Processes also
    synchronise gradients on every micro-batch.

    ## Fix safety
    The fix wraps the body of the training loop in `with accelerator.accumulate(model):`, with
    the prepared model the loop calls. It is unsafe: the optimizer then steps once every
    `gradient_accumulation_steps` micro-batches, which changes the number of optimizer steps,
    the schedule and what is logged per step. It is offered only when the accelerator and a
    prepared model are visible at the loop.

    ## References
    - Accelerate, "Performing gradient accumulation with Accelerate".
    - `accelerate.Accelerator.accumulate`, `accelerate.Accelerator.backward`.
    """

    CODE = "DL204"
    NAME = "accumulation-without-accumulate"
    MESSAGE = (
        "the Accelerator is given gradient accumulation steps, but the training loop never "
        "enters `accelerator.accumulate(...)`"
    )
    FIX_TITLE = "Wrap the loop body in `with accelerator.accumulate(model):`"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("gradient_accumulation",)

    VALID = (
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=4)\n"
            "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "for batch in loader:\n    with accelerator.accumulate(model):\n"
            "        accelerator.backward(model(batch))\n        optimizer.step()\n        optimizer.zero_grad()\n"
        ),
        # accumulation by hand: step every k micro-batches
        Valid(
            "from accelerate import Accelerator\n\ndef train(args, model, optimizer, loader):\n"
            "    accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for step, batch in enumerate(loader):\n        accelerator.backward(model(batch))\n"
            "        if (step + 1) % args.grad_accum == 0:\n            optimizer.step()\n            optimizer.zero_grad()\n"
        ),
        # no_sync by hand
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=2)\n"
            "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "for i, batch in enumerate(loader):\n    with accelerator.no_sync(model):\n"
            "        accelerator.backward(model(batch))\n"
        ),
        # accumulation of 1, and DeepSpeed's engine accumulating by itself
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=1)\n"
            "for batch in loader:\n    accelerator.backward(model(batch))\n    optimizer.step()\n"
        ),
        Valid(
            "from accelerate import Accelerator\nfrom accelerate.utils import DeepSpeedPlugin\n\n"
            "plugin = DeepSpeedPlugin(gradient_accumulation_steps=8)\n"
            "accelerator = Accelerator(deepspeed_plugin=plugin, gradient_accumulation_steps=8)\n"
            "for batch in loader:\n    accelerator.backward(model(batch))\n    optimizer.step()\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
            "    accelerator = Accelerator(gradient_accumulation_steps=4)\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for batch in loader:\n        loss = model(batch)\n        accelerator.backward(loss)\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed=(
                "from accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
                "    accelerator = Accelerator(gradient_accumulation_steps=4)\n"
                "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "    for batch in loader:\n        with accelerator.accumulate(model):\n"
                "            loss = model(batch)\n            accelerator.backward(loss)\n"
                "            optimizer.step()\n            optimizer.zero_grad()\n"
            ),
            range="7:18-7:24",
        ),
        # an argument, a plugin; the loop in a function with the accelerator as an attribute
        Invalid(
            "import accelerate\nfrom accelerate.utils import GradientAccumulationPlugin\n\n"
            "class Trainer:\n    def __init__(self, args, model, optimizer, loader):\n"
            "        plugin = GradientAccumulationPlugin(num_steps=args.accum)\n"
            "        self.accelerator = accelerate.Accelerator(gradient_accumulation_plugin=plugin)\n"
            "        self.model, self.optimizer, self.loader = self.accelerator.prepare(model, optimizer, loader)\n\n"
            "    def fit(self):\n        for batch in self.loader:\n"
            "            self.accelerator.backward(self.model(batch))\n            self.optimizer.step()\n",
            fixed=(
                "import accelerate\nfrom accelerate.utils import GradientAccumulationPlugin\n\n"
                "class Trainer:\n    def __init__(self, args, model, optimizer, loader):\n"
                "        plugin = GradientAccumulationPlugin(num_steps=args.accum)\n"
                "        self.accelerator = accelerate.Accelerator(gradient_accumulation_plugin=plugin)\n"
                "        self.model, self.optimizer, self.loader = self.accelerator.prepare(model, optimizer, loader)\n\n"
                "    def fit(self):\n        for batch in self.loader:\n"
                "            with self.accelerator.accumulate(self.model):\n"
                "                self.accelerator.backward(self.model(batch))\n                self.optimizer.step()\n"
            ),
            range="11:22-11:33",
        ),
        # the model is not visible at the loop: report only
        Invalid(
            "from accelerate import Accelerator\n\ndef step(accelerator, optimizer, batch):\n"
            "    accelerator.backward(batch)\n    optimizer.step()\n\n"
            "def main(args):\n    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)\n"
            "    while True:\n        step(accelerator, args.optimizer, next(batches))\n",
            range="9:11-9:15",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        if facts.mode is not Mode.ACCELERATE:
            return
        accumulation = facts.accumulation
        settings = accumulation.settings
        if not settings or accumulation.done_by_the_module:
            return
        setting = ctx.index.module.code_for_node(settings[0]).strip()
        for loop in facts.loops.training_loops:
            if not facts.loops.steps(loop.body):
                continue  # the step is taken around the micro-batch loop: accumulation by hand
            message = (
                f"`{setting}` accumulation steps are configured, but this loop never enters "
                "`accelerator.accumulate(...)`: it steps every micro-batch"
            )
            where = loop.iter if isinstance(loop, cst.For) else loop.test
            ctx.report(where, message, self._fix(ctx, loop))

    @staticmethod
    def _fix(ctx: RuleContext, loop: cst.For | cst.While) -> FixPlan | None:
        facts = ctx.facts
        body = loop.body
        if not isinstance(body, cst.IndentedBlock):
            return None
        accelerator = facts.accelerator_expr(loop)
        model = facts.accumulation.prepared_model_in(body)
        if accelerator is None or model is None:
            return None
        model_text = ctx.index.module.code_for_node(model)
        call = factor_expression(f"{accelerator}.accumulate({model_text})")
        inner = cst.With(
            items=[cst.WithItem(item=call)],
            body=cst.IndentedBlock(body=body.body, footer=body.footer),
        )
        new_body = body.with_changes(body=[inner], footer=[])
        return FixPlan(replace={loop: loop.with_changes(body=new_body)})
