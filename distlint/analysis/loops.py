"""Training loops: what a loop's body does, and where its batches come from."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.facts import Facts
from distlint.analysis.index import walk


def runs_training_step(loop: cst.For | cst.While) -> bool:
    """The loop body runs a backward pass (`loss.backward()`, `accelerator.backward(loss)`)."""
    for node in walk(loop.body):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in K.TRAINING_STEP_METHODS
        ):
            return True
    return False


def iterators_drawn_in(facts: Facts, loop: cst.For | cst.While) -> list[cst.Call]:
    """The `iter(...)` calls whose iterators `next(...)` draws from in the loop's body."""
    index = facts.index
    out: list[cst.Call] = []
    for node in walk(loop.body):
        if not (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "next"
            and node.args
            and not index.bindings_of(node.func)
        ):
            continue
        drawn = node.args[0].value
        if isinstance(drawn, cst.Call):
            values: list[cst.BaseExpression | None] = [drawn]
        elif isinstance(drawn, cst.Name):
            values = [a.value for a in index.bindings_of(drawn) if a.op == "="]
        elif isinstance(drawn, cst.Attribute):
            values = [a.value for a in index.attribute_assignments(drawn) if a.op == "="]
        else:
            continue
        out.extend(
            v for v in values if isinstance(v, cst.Call) and facts.iterator_of(v) is not None
        )
    return out
