"""DL203 loss-divided-for-accumulation."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index, Op, iter_children
from distlint.analysis.facts import Facts
from distlint.fixes import FixPlan
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid


def _source_texts(index: Index, expr: cst.CSTNode, depth: int = 2) -> set[str]:
    """Texts of ``expr`` and of what it was assigned from: `grad_accum = args.grad_accum` makes
    `grad_accum` and `args.grad_accum` the same setting. Literals are left out (a `/ 2` that
    averages two losses is not the accumulation)."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return set()
    texts = {index.module.code_for_node(expr).strip()}
    if depth > 0 and isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
        for value in index.values_of(expr):
            if value is not None:
                texts |= _source_texts(index, value, depth - 1)
    return texts


def _is_accelerator_backward(facts: Facts, call: cst.Call) -> bool:
    """`accelerator.backward(loss)` on an Accelerator made anywhere (or an untraced parameter)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "backward" or not call.args:
        return False
    return facts.is_accelerator(func.value) or not facts.traceable(func.value)


class LossDividedForAccumulation(Rule):
    """
    ## What it does
    Flags a loss divided by the gradient accumulation steps (`loss = loss / accum_steps`,
    `loss /= args.gradient_accumulation_steps`, `accelerator.backward(loss / accum)`) before
    `accelerator.backward`, in a script whose `Accelerator` was configured with
    `gradient_accumulation_steps` (or a `GradientAccumulationPlugin` / `DeepSpeedPlugin` with
    accumulation).

    The divisor is recognised as the accumulation steps when it is the same setting the
    Accelerator was given (also through an assignment), `accelerator.gradient_accumulation_steps`,
    or a value named for accumulation (`grad_accum`, `accumulation_steps`, ...).

    Not reported: a division by hand when the Accelerator was *not* given accumulation steps (the
    older Accelerate examples accumulate that way, and it is right there), or when it was given 1;
    a division that only feeds logging; `loss.backward()` without Accelerate.

    ## Why is this bad?
    When the Accelerator knows the accumulation steps, `accelerator.backward(loss)` already
    divides the loss by them, on every call, inside `accelerator.accumulate` or not. Dividing by
    hand as well scales every gradient down twice: with SGD the effective learning rate is
    `gradient_accumulation_steps` times too small; with Adam-family optimizers the update is
    distorted through epsilon and gradient clipping thresholds are hit at the wrong scale.

    ## Fix safety
    The fix removes the hand-written division (the whole `loss /= ...` or `loss = loss / ...`
    statement, or the division inside an expression). It is unsafe: it multiplies the gradients
    by the accumulation steps, which is the intended scale but changes the training numerics a
    user may have tuned the learning rate around, and a loss logged after the removed division
    now shows the undivided value.

    ## References
    - Accelerate, "Performing gradient accumulation with Accelerate".
    - `accelerate.Accelerator.backward`.
    """

    CODE = "DL203"
    NAME = "loss-divided-for-accumulation"
    MESSAGE = (
        "loss divided by the accumulation steps, but `accelerator.backward` already divides it"
    )
    FIX_TITLE = "Remove the division by the accumulation steps"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("backward",)

    VALID = (
        # the Accelerator does not know about accumulation: dividing by hand is right
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator()\naccum = 4\n\n"
            "def step(model, batch):\n    loss = model(batch)\n    loss = loss / accum\n    accelerator.backward(loss)\n"
        ),
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=4)\n\n"
            "def step(model, batch):\n    with accelerator.accumulate(model):\n        loss = model(batch)\n"
            "        accelerator.backward(loss)\n"
        ),
        # averaging two losses is not the accumulation
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=2)\n\n"
            "def step(a, b):\n    loss = (a + b) / 2\n    accelerator.backward(loss)\n"
        ),
        # the division only feeds logging
        Valid(
            "from accelerate import Accelerator\n\nGA = 8\naccelerator = Accelerator(gradient_accumulation_steps=GA)\n\n"
            "def step(loss, logs):\n    accelerator.backward(loss)\n    logs.append(loss.item() / GA)\n"
        ),
        # accumulation of 1, and plain torch backward
        Valid(
            "import accelerate\n\nacc = accelerate.Accelerator(gradient_accumulation_steps=1)\n\n"
            "def step(loss, accum):\n    acc.backward(loss / accum)\n"
        ),
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(gradient_accumulation_steps=4)\n\n"
            "def step(loss, grad_accum):\n    (loss / grad_accum).backward()\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\n\nGRADIENT_ACCUMULATION_STEPS = 4\n"
            "accelerator = Accelerator(gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS)\n\n"
            "def step(model, batch):\n    with accelerator.accumulate(model):\n        loss = model(batch)\n"
            "        loss = loss / GRADIENT_ACCUMULATION_STEPS\n        accelerator.backward(loss)\n",
            fixed=(
                "from accelerate import Accelerator\n\nGRADIENT_ACCUMULATION_STEPS = 4\n"
                "accelerator = Accelerator(gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS)\n\n"
                "def step(model, batch):\n    with accelerator.accumulate(model):\n        loss = model(batch)\n"
                "        accelerator.backward(loss)\n"
            ),
            range="9:16-9:50",
        ),
        Invalid(
            "import accelerate\n\ndef train(args, model, batch):\n"
            "    acc = accelerate.Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)\n"
            "    loss = model(batch).loss\n    loss /= args.gradient_accumulation_steps\n    acc.backward(loss)\n",
            fixed=(
                "import accelerate\n\ndef train(args, model, batch):\n"
                "    acc = accelerate.Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)\n"
                "    loss = model(batch).loss\n    acc.backward(loss)\n"
            ),
            range="6:5-6:45",
        ),
        # inline division, divisor read back from the accelerator
        Invalid(
            "from accelerate import Accelerator as A\n\nclass Trainer:\n    def __init__(self, steps):\n"
            "        self.accelerator = A(gradient_accumulation_steps=steps)\n"
            "    def step(self, loss):\n        self.accelerator.backward(loss / self.accelerator.gradient_accumulation_steps)\n",
            fixed=(
                "from accelerate import Accelerator as A\n\nclass Trainer:\n    def __init__(self, steps):\n"
                "        self.accelerator = A(gradient_accumulation_steps=steps)\n"
                "    def step(self, loss):\n        self.accelerator.backward(loss)\n"
            ),
            range="7:35-7:86",
        ),
        # a GradientAccumulationPlugin, and a local alias of the setting
        Invalid(
            "from accelerate import Accelerator\nfrom accelerate.utils import GradientAccumulationPlugin\n\n"
            "def main(cfg, model, batch):\n    plugin = GradientAccumulationPlugin(num_steps=cfg['accum'])\n"
            "    accelerator = Accelerator(gradient_accumulation_plugin=plugin)\n    n = cfg['accum']\n"
            "    loss = model(batch) / n\n    accelerator.backward(loss)\n",
            fixed=(
                "from accelerate import Accelerator\nfrom accelerate.utils import GradientAccumulationPlugin\n\n"
                "def main(cfg, model, batch):\n    plugin = GradientAccumulationPlugin(num_steps=cfg['accum'])\n"
                "    accelerator = Accelerator(gradient_accumulation_plugin=plugin)\n    n = cfg['accum']\n"
                "    loss = model(batch)\n    accelerator.backward(loss)\n"
            ),
            range="8:12-8:28",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        settings = facts.accumulation_settings
        if not settings:
            return
        setting_texts: set[str] = set()
        for value in settings:
            setting_texts |= _source_texts(index, value)
        reported: set[cst.CSTNode] = set()
        for call in index.calls:
            if not _is_accelerator_backward(facts, call):
                continue
            for division in self._divisions_into(facts, call.args[0].value, setting_texts):
                if division not in reported:
                    reported.add(division)
                    text = index.module.code_for_node(_divisor(division)).strip()
                    message = (
                        f"the loss is divided by `{text}` before `accelerator.backward`, which "
                        "already divides it: gradients are scaled down twice"
                    )
                    ctx.report(division, message, self._fix(index, division))

    def _divisions_into(
        self, facts: Facts, expr: cst.BaseExpression, setting_texts: set[str]
    ) -> list[cst.CSTNode]:
        """Divisions by the accumulation steps on the loss's way into ``backward`` (same function)."""
        found: list[cst.CSTNode] = []
        seen: set[int] = set()
        stack: list[cst.CSTNode] = [expr]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, cst.Name):
                stack.extend(self._assigned_to(facts, node, setting_texts, found))
            elif (
                isinstance(node, cst.BinaryOperation)
                and isinstance(node.operator, cst.Divide)
                and self._is_accumulation(facts, node.right, setting_texts)
            ):
                found.append(node)
                stack.append(node.left)
            elif isinstance(node, cst.Attribute):
                stack.append(node.value)  # `model(batch).loss`: what it is read from
            elif not isinstance(node, (cst.Call, cst.Subscript)):
                # (`model(batch)`, `outputs["loss"]`: the loss is produced there, not divided)
                stack.extend(_children(node))
        return found

    def _assigned_to(
        self, facts: Facts, name: cst.Name, setting_texts: set[str], found: list[cst.CSTNode]
    ) -> list[cst.CSTNode]:
        """The values assigned to the loss's name in its function (the loss is computed in the
        function that calls backward); a `loss /= steps` among them goes into ``found``."""
        index = facts.index
        values: list[cst.CSTNode] = []
        for b in index.bindings_of(name):
            if b.scope is not index.scope(name):
                continue
            if b.op is Op.DIVIDE and isinstance(b.node, cst.AugAssign):
                if self._is_accumulation(facts, b.node.value, setting_texts):
                    found.append(b.node)
            elif b.op is Op.ASSIGN and b.value is not None:
                values.append(b.value)
        return values

    @staticmethod
    def _is_accumulation(
        facts: Facts, divisor: cst.BaseExpression, setting_texts: set[str]
    ) -> bool:
        index = facts.index
        # `accelerator.gradient_accumulation_steps` (the Accelerator's own setting)
        if (
            isinstance(divisor, cst.Attribute)
            and divisor.attr.value == "gradient_accumulation_steps"
        ):
            return True
        if facts.is_untraced_accumulation(divisor):
            return True
        return bool(_source_texts(index, divisor) & setting_texts)

    @staticmethod
    def _fix(index: Index, division: cst.CSTNode) -> FixPlan:
        fix = FixPlan()
        if isinstance(division, cst.AugAssign):
            _remove_statement(index, division, fix)
            return fix
        assert isinstance(division, cst.BinaryOperation)
        parent = index.parent(division)
        # `loss = loss / n`: the whole statement goes
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
            and isinstance(division.left, cst.Name)
            and parent.targets[0].target.value == division.left.value
        ):
            _remove_statement(index, parent, fix)
            return fix
        fix.replace[division] = division.left
        return fix


def _divisor(division: cst.CSTNode) -> cst.CSTNode:
    return division.value if isinstance(division, cst.AugAssign) else division.right  # type: ignore[attr-defined]


def _children(node: cst.CSTNode):
    return iter_children(node)


def _remove_statement(index: Index, small: cst.CSTNode, fix: FixPlan) -> None:
    line = index.parent(small)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) > 1:
        fix.replace[small] = cst.RemovalSentinel.REMOVE
        return
    block = index.parent(line) if line is not None else None
    body = getattr(block, "body", ())
    if line is not None and len(body) > 1:
        fix.replace[line] = cst.RemovalSentinel.REMOVE
    else:
        fix.replace[small] = cst.Pass()
