"""DL205 backward-bypasses-accelerator."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.facts import Facts, Mode
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid, factor_expression


class BackwardBypassesAccelerator(Rule):
    """
    ## What it does
    In a script that prepares its model and optimizer with Accelerate (or sets them up with
    Lightning Fabric), flags `loss.backward()` where `accelerator.backward(loss)`
    (`fabric.backward(loss)`) belongs, and `torch.nn.utils.clip_grad_norm_` /
    `clip_grad_value_` where `accelerator.clip_grad_norm_` / `clip_grad_value_`
    (`fabric.clip_gradients`) belongs.

    Not reported: a backward in a function that also calls the framework's backward (a
    branch for another setup), clipping after the gradients were unscaled by hand
    (`accelerator.unscale_gradients()`, `scaler.unscale_(optimizer)`), a script that prepares
    nothing, code where no accelerator or Fabric is visible.

    ## Why is this bad?
    `accelerator.backward` is where Accelerate applies what the launch configuration asks for:
    with fp16 it scales the loss with the gradient scaler (the prepared optimizer then unscales
    gradients that were never scaled, and skips steps it thinks overflowed); with gradient
    accumulation it divides the loss by the steps; with DeepSpeed it runs the engine's backward
    and step. `loss.backward()` silently skips all of it, so the same script trains differently
    under `accelerate launch --mixed_precision fp16` or a DeepSpeed config than on one plain
    GPU. Clipping with torch's function clips the *scaled* gradients under fp16 (the threshold
    is off by the loss scale), and under FSDP clips each shard by its local norm.

    ## Fix safety
    The fix replaces `loss.backward(...)` with `accelerator.backward(loss, ...)` (Fabric:
    `fabric.backward(loss, ...)`) and `torch.nn.utils.clip_grad_norm_(...)` with
    `accelerator.clip_grad_norm_(...)` (the same arguments). It is unsafe: under mixed precision
    or accumulation the gradients change scale, which is the point but changes training. No fix
    for a loss computed inline (`scaler.scale(loss).backward()`) or for Fabric's clipping
    (which takes the module and optimizer).

    ## References
    - Accelerate, "Migrating your code to Accelerate" and `Accelerator.backward`,
      `Accelerator.clip_grad_norm_`.
    - Lightning Fabric, `Fabric.backward` and `Fabric.clip_gradients`.
    """

    CODE = "DL205"
    NAME = "backward-bypasses-accelerator"
    MESSAGE = "`loss.backward()` bypasses `accelerator.backward(loss)`"
    FIX_TITLE = "Call the framework's backward / clipping"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("backward", "clip_grad")

    VALID = (
        Valid(
            "from accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
            "    accelerator = Accelerator()\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for batch in loader:\n        loss = model(batch)\n        accelerator.backward(loss)\n"
            "        accelerator.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n"
        ),
        # a helper chooses the framework's backward when there is one
        Valid(
            "from accelerate import Accelerator\n\n\ndef backward(loss, accelerator=None):\n"
            "    if accelerator is not None:\n        accelerator.backward(loss)\n    else:\n        loss.backward()\n\n\n"
            "def train(model, optimizer):\n    accelerator = Accelerator()\n"
            "    model, optimizer = accelerator.prepare(model, optimizer)\n"
            "    backward(model(1), accelerator)\n"
        ),
        # clipping after unscaling by hand
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\n\ndef train(model, optimizer):\n"
            "    accelerator = Accelerator()\n    model, optimizer = accelerator.prepare(model, optimizer)\n"
            "    accelerator.backward(model(1))\n    accelerator.unscale_gradients()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        ),
        # an Accelerator used only for its device, nothing prepared
        Valid(
            "from accelerate import Accelerator\n\n\ndef train(model, batch):\n"
            "    accelerator = Accelerator()\n    model.to(accelerator.device)\n    model(batch).backward()\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
            "    accelerator = Accelerator()\n"
            "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
            "    for batch in loader:\n        loss = model(batch)\n        loss.backward()\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\n\ndef train(model, optimizer, loader):\n"
                "    accelerator = Accelerator()\n"
                "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "    for batch in loader:\n        loss = model(batch)\n        accelerator.backward(loss)\n"
                "        accelerator.clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n"
            ),
            range=("10:9-10:22", "11:9-11:39"),
        ),
        # Lightning Fabric, keyword arguments kept
        Invalid(
            "import lightning as L\n\n\ndef train(model, optimizer, batch):\n"
            "    fabric = L.Fabric(devices=2)\n    model, optimizer = fabric.setup(model, optimizer)\n"
            "    loss = model(batch)\n    loss.backward(retain_graph=True)\n",
            fixed=(
                "import lightning as L\n\n\ndef train(model, optimizer, batch):\n"
                "    fabric = L.Fabric(devices=2)\n    model, optimizer = fabric.setup(model, optimizer)\n"
                "    loss = model(batch)\n    fabric.backward(loss, retain_graph=True)\n"
            ),
            range="8:5-8:18",
        ),
        # a scaled loss by hand: report only
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\n\ndef train(model, optimizer, scaler):\n"
            "    accelerator = Accelerator()\n    model, optimizer = accelerator.prepare(model, optimizer)\n"
            "    scaler.scale(model(1)).backward()\n",
            range="8:5-8:36",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        if facts.mode not in (Mode.ACCELERATE, Mode.FABRIC) or not facts.prepare_calls:
            return
        fabric = facts.mode is Mode.FABRIC
        self._check_backward(ctx, fabric)
        self._check_clipping(ctx, fabric)

    @staticmethod
    def _check_backward(ctx: RuleContext, fabric: bool) -> None:
        """`loss.backward()` on a prepared model's loss, where the framework's backward scales
        and divides it."""
        facts = ctx.facts
        framework_backward = [c for c in facts.loops.backward_calls if _is_framework(facts, c)]
        own = {ctx.index.enclosing_function(c) for c in framework_backward}
        for call in facts.loops.backward_calls:
            if call in framework_backward or _positional(call):
                continue
            if ctx.index.enclosing_function(call) in own:
                continue  # the same function calls the framework's backward: another branch
            owner = facts.fabric_expr(call) if fabric else facts.accelerator_expr(call)
            if owner is None or not facts.accumulation.uses_prepared(call):
                continue
            assert isinstance(call.func, cst.Attribute)
            loss = call.func.value
            text = ctx.index.module.code_for_node(loss)
            message = (
                f"`{text}.backward()` bypasses `{owner}.backward({text})`: no fp16 loss scaling, "
                "no division for accumulation"
            )
            ctx.report(call.func, message, _backward_fix(ctx, call, owner))

    @staticmethod
    def _check_clipping(ctx: RuleContext, fabric: bool) -> None:
        """`torch.nn.utils.clip_grad_norm_` on a prepared model's gradients that nothing
        unscaled first."""
        facts = ctx.facts
        for call in facts.calls_to(frozenset(K.CLIP_FUNCTIONS)):
            owner = facts.fabric_expr(call) if fabric else facts.accelerator_expr(call)
            if (
                owner is None
                or not facts.accumulation.uses_prepared(call)
                or facts.accumulation.unscaled_before(call)
            ):
                continue
            method = K.CLIP_FUNCTIONS[ctx.index.qualname(call.func) or ""]
            replacement = "clip_gradients" if fabric else method
            message = (
                f"`{ctx.index.module.code_for_node(call.func)}` clips a prepared model's gradients "
                f"by hand (still scaled under fp16); use `{owner}.{replacement}(...)`"
            )
            fix = None
            if not fabric and not any(
                a.keyword is not None and a.keyword.value in K.CLIP_TORCH_ONLY_KEYWORDS
                for a in call.args
            ):
                fix = FixPlan(replace={call.func: factor_expression(f"{owner}.{method}")})
            ctx.report(call.func, message, fix)


def _is_framework(facts: Facts, call: cst.Call) -> bool:
    """`accelerator.backward(loss)` / `fabric.backward(loss)` (also an untraced accelerator)."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    return facts.is_accelerator(receiver) or (not facts.traceable(receiver) and _positional(call))


def _positional(call: cst.Call) -> bool:
    """`x.backward(loss)`: a framework's (or an engine's) backward takes the loss; a tensor's
    takes none (`loss.backward()`, `loss.backward(retain_graph=True)`)."""
    return any(a.keyword is None and not a.star for a in call.args)


def _backward_fix(ctx: RuleContext, call: cst.Call, owner: str) -> FixPlan | None:
    assert isinstance(call.func, cst.Attribute)
    loss = call.func.value
    if not isinstance(loss, (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    text = ctx.index.module.code_for_node(loss)
    rest = "".join(", " + ctx.index.module.code_for_node(a).rstrip(", ") for a in call.args)
    return FixPlan(replace={call: factor_expression(f"{owner}.backward({text}{rest})")})
