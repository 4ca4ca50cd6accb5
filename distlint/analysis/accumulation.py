"""Gradient accumulation as the script configures and does it (``Facts.accumulation``).

Accelerate divides every loss given to ``accelerator.backward`` by the accumulation steps it was
configured with, and its prepared optimizer skips the step only while
``gradient_state.sync_gradients`` is False, which only ``accelerator.accumulate(...)`` sets.
Accumulation done by hand (``no_sync``, reading ``sync_gradients``, stepping on ``step % k``) is
the other way to get it right.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import call_keyword
from distlint.analysis.loops import body_nodes

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

_DEEPSPEED = "deepspeed_plugin"  # DeepSpeed's engine accumulates by itself


class Accumulation:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index = facts.index

    @cached_property
    def settings(self) -> list[cst.BaseExpression]:
        """The accumulation steps an Accelerator of this module is given (not 1 nor 0), unless
        DeepSpeed (which accumulates in its engine) is configured there too."""
        facts, index = self.facts, self.index
        out: list[cst.BaseExpression] = []
        for acc in facts.accelerators:
            if facts.accelerator_keyword(acc, _DEEPSPEED) is not None:
                continue
            candidates = [facts.accelerator_keyword(acc, "gradient_accumulation_steps")]
            for plugin_qual, (keyword, fieldname) in K.ACCUMULATION_PLUGINS.items():
                plugin = facts.accelerator_keyword(acc, keyword)
                if plugin is None or keyword == _DEEPSPEED:
                    continue
                for value in [plugin, *index.values_of(plugin)]:
                    if isinstance(value, cst.Call) and index.qualname(value.func) == plugin_qual:
                        candidates.append(call_keyword(value, fieldname))
            for value in candidates:
                known = index.constant_value(value) if value is not None else None
                if value is not None and not (isinstance(known, int) and known <= 1):
                    out.append(value)
        return out

    @cached_property
    def done_by_the_module(self) -> bool:
        """Somewhere in the module gradients are accumulated: `accelerator.accumulate(...)` or
        `no_sync()` is entered, a synchronisation flag (`sync_gradients`) is read, or an
        optimizer step is taken only on every k-th micro-batch (`if step % k == 0: ...step()`)."""
        for node in self.index.nodes_of(cst.Attribute):
            assert isinstance(node, cst.Attribute)
            name = node.attr.value
            if name in K.SYNC_FLAGS:
                return True
            if name in K.ACCUMULATION_CONTEXTS:  # entered, or picked (`ctx = model.no_sync if ...`)
                return True
        for node in self.index.nodes_of(cst.If):
            assert isinstance(node, cst.If)
            if self._reads_modulo(node.test) and self.facts.loops.steps(node.body):
                return True
        return False

    def _reads_modulo(self, test: cst.CSTNode, depth: int = 2) -> bool:
        """The test computes `a % k`, itself or through names it reads (`do_step = ... % k`)."""
        for n in body_nodes(test):
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo):
                if not isinstance(n.left, (cst.SimpleString, cst.ConcatenatedString)):
                    return True
            if depth > 0 and isinstance(n, cst.Name):
                for value in self.index.values_of(n):
                    if value is not None and self._reads_modulo(value, depth - 1):
                        return True
        return False

    def prepared_model_in(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """A prepared object that ``node`` calls (`outputs = model(**batch)`): the model to
        accumulate over."""
        for n in body_nodes(node):
            if isinstance(n, cst.Call) and isinstance(n.func, (cst.Name, cst.Attribute)):
                if self.is_prepared_name(n.func):
                    return n.func
        return None

    def is_prepared_name(self, expr: cst.Name | cst.Attribute) -> bool:
        """``expr`` is bound (only) to what a prepare call returns, alone or unpacked."""
        index, facts = self.index, self.facts
        if isinstance(expr, cst.Name):
            bindings = index.bindings_of(expr)
        else:
            bindings = index.attribute_assignments(expr)
        if not bindings:
            return False
        for b in bindings:
            value = b.value
            if b.op == "unpack" and isinstance(b.node, cst.Assign):
                value = b.node.value
            if not (b.op in ("=", "unpack") and value is not None and facts.is_prepare_call(value)):
                return False
        return True

    def unscaled_before(self, call: cst.CSTNode) -> bool:
        """In ``call``'s function, gradients are unscaled by hand before it
        (`accelerator.unscale_gradients()`, `scaler.unscale_(optimizer)`): clipping by hand
        after that sees the true gradients."""
        index = self.index
        function = index.enclosing_function(call)
        where = index.order(call)
        return any(
            isinstance(c.func, cst.Attribute)
            and c.func.attr.value in K.UNSCALE_METHODS
            and index.enclosing_function(c) is function
            and index.order(c) < where
            for c in index.calls
        )

    def uses_prepared(self, node: cst.CSTNode) -> bool:
        """The function around ``node`` prepares something, or uses a name bound to what a
        prepare call returned (`self.model` prepared in `__init__`)."""
        function = self.index.enclosing_function(node) or self.index.module
        for n in body_nodes(function):
            if isinstance(n, cst.Call) and self.facts.is_prepare_call(n):
                return True
            if isinstance(n, (cst.Name, cst.Attribute)) and self._is_load(n):
                if self.is_prepared_name(n):
                    return True
        return False

    def _is_load(self, n: cst.Name | cst.Attribute) -> bool:
        parent = self.index.parent(n)
        return not (isinstance(parent, cst.Attribute) and parent.attr is n)
