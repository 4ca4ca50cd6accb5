"""Models built with fresh random weights, random splits, and what runs on one process
only.

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.models``), computed once per
module."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    Provider,
    _int_value,
    _is_model_base,
    _last_name,
)
from distlint.analysis.index import (
    Index,
)

if TYPE_CHECKING:
    pass


class Models(Provider):
    """Models built with fresh random weights, random splits, and what runs on one process
    only."""

    @cached_property
    def trains(self) -> bool:
        """The module runs backward passes or optimizer steps (or hands off to a Lightning fit)."""
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("backward", "step", "fit")
            for c in self.index.calls
        )

    def builds_model(self, call: cst.Call, q: str | None) -> bool:
        """``call`` draws random initial weights (a layer, a model class, a task head)."""
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_adapter":
            # `unet.add_adapter(LoraConfig(...))`: fresh LoRA weights are drawn here.
            return any(self._is_peft_config(arg.value) for arg in call.args)
        if q is None:
            return False
        if K.TORCH_LAYER.match(q) or q in K.MODEL_FACTORIES:
            return True
        if q.startswith("torchvision.models.") and q.rsplit(".", 1)[1][:1].islower():
            return True
        top = q.split(".", 1)[0]
        if top not in ("transformers", "diffusers"):
            return False
        parts = q.split(".")
        if parts[-1] == "from_config" and K.HF_MODEL_CLASS.search(parts[-2]):
            return True
        if parts[-1] == "from_pretrained":
            # Loads checkpoint weights; only a task head missing from the checkpoint is drawn, and
            # that matters when the script trains (an inference script loads a fine-tuned head).
            head = (
                bool(K.PRETRAINED_WITHOUT_HEAD.search(parts[-2]))
                or Index.argument(call, "num_labels") is not None
            )
            return head and self.trains
        return bool(K.HF_MODEL_CLASS.search(parts[-1])) and parts[-1][:1].isupper()

    @cached_property
    def may_build(self) -> bool:
        """Some call of the module builds a model or splits a dataset at random
        (`builds_model`, `is_random_split`), or the module defines a model class: the only
        sources of the order's model events (`Ordering`). Without one, no seeding can come
        after a model was built."""
        index = self.index
        for call in index.calls:
            if self.builds_model(call, index.qualname(call.func)) or self.is_random_split(call):
                return True
        return any(
            isinstance(cls, cst.ClassDef) and self.is_model_class(cls)
            for cls in index.nodes_of(cst.ClassDef)
        )

    def _is_peft_config(self, expr: cst.BaseExpression) -> bool:
        values = [expr] + [v for v in self.index.values_of(expr) if v is not None]
        return any(
            isinstance(v, cst.Call) and (self.index.qualname(v.func) or "").startswith("peft.")
            for v in values
        )

    def on_one_process(self, node: cst.CSTNode) -> bool:
        """``node`` runs only under a test that holds on one process of the run (``if
        accelerator.is_main_process:``, ``if rank == 0:``, ``if args.local_rank in (-1, 0):``,
        ``if xm.is_master_ordinal():``) in its own function: what it does is not what the run
        does on every process."""
        child = node
        for anc in self.index.ancestors(node):
            if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False  # called from elsewhere: its callers' tests are not followed
            if (
                isinstance(anc, cst.If)
                and child is anc.body
                and self._holds_on_one_process(anc.test)
            ):
                return True
            child = anc
        return False

    def _holds_on_one_process(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.BooleanOperation):
            return isinstance(test.operator, cst.And) and (
                self._holds_on_one_process(test.left) or self._holds_on_one_process(test.right)
            )
        qualname = self.index.qualname(test)
        if qualname in K.MAIN_PROCESS_FLAGS:
            return True
        flag = test.func if isinstance(test, cst.Call) else test
        if qualname is None and isinstance(flag, cst.Attribute):
            return flag.attr.value in K.MAIN_PROCESS_ATTRIBUTES  # an untraceable receiver
        return isinstance(test, cst.Comparison) and self._rank_is_zero(test)

    def _rank_is_zero(self, test: cst.Comparison) -> bool:
        """`rank == 0`, `0 == rank`, `rank in (0, -1)`: true on one process only."""
        if len(test.comparisons) != 1:
            return False
        left, (target,) = test.left, test.comparisons
        right = target.comparator
        if isinstance(target.operator, cst.Equal):
            return (_int_value(right) == 0 and self._is_rank(left)) or (
                _int_value(left) == 0 and self._is_rank(right)
            )
        if isinstance(target.operator, cst.In) and isinstance(
            right, (cst.Tuple, cst.List, cst.Set)
        ):
            values = {_int_value(e.value) for e in right.elements}
            return 0 in values and values <= {0, -1} and self._is_rank(left)
        return False

    def _is_rank(self, expr: cst.BaseExpression) -> bool:
        """The value of ``expr`` is this process's rank (traced to where it is read)."""
        return self.flow.reaches(expr, self._reads_rank, key="rank", depth=6)

    def _reads_rank(self, node: cst.CSTNode, qualname: str | None) -> bool:
        if qualname is not None and qualname in K.RANK_VALUES:
            return True
        last = _last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        return last is not None and last.lower() in K.RANK_NAMES

    def is_random_split(self, call: cst.Call) -> bool:
        """`random_split(...)` without its own generator: draws from the global generator."""
        if self.index.qualname(call.func) not in K.RANDOM_SPLITS:
            return False
        return Index.argument(call, keyword="generator", position=2) is None

    def is_model_class(self, cls: cst.ClassDef) -> bool:
        """A class of this module that subclasses a model base (`nn.Module`, ...)."""
        return self._subclasses(cls, _is_model_base, set())

    def is_iterable_dataset_class(self, cls: cst.ClassDef) -> bool:
        """A class of this module that subclasses torch's `IterableDataset`."""
        return self._subclasses(cls, K.ITERABLE_DATASETS.__contains__, set())

    def _subclasses(
        self, cls: cst.ClassDef, is_base: Callable[[str], bool], seen: set[cst.CSTNode]
    ) -> bool:
        """``cls`` has a base, or a base of a class of this module it derives from, whose
        qualified name ``is_base`` accepts."""
        if cls in seen:
            return False
        seen.add(cls)
        for base in cls.bases:
            q = self.index.qualname(base.value)
            if q is not None and is_base(q):
                return True
            if isinstance(base.value, cst.Name):
                for b in self.index.bindings_of(base.value):
                    if b.op == "class" and self._subclasses(b.node, is_base, seen):  # type: ignore[arg-type]
                        return True
        return False
