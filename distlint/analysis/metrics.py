"""Evaluation metrics and the collectives that combine them across processes (``Facts.metrics``).

An evaluation loop over a sharded loader sees one process's shard: a metric computed from it is
that shard's until its values go through a collective (`accelerator.gather_for_metrics`,
`gather`, `reduce`, `torch.distributed.all_reduce`, ...). A prepared loader also pads the last
batch so every process gets one (``even_batches``): `accelerator.gather` keeps those duplicates,
`gather_for_metrics` drops them.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import call_keyword, dotted_name
from distlint.analysis.loops import body_nodes

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts


class Metrics:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index = facts.index

    @cached_property
    def sharded_evaluation_loops(self) -> list[cst.For]:
        """Evaluation loops whose loader is split across processes."""
        loops = self.facts.loops
        return [
            loop for loop in loops.evaluation_loops if loops.is_sharded_loader(loops.iterated(loop))
        ]

    # ------------------------------------------------------------------ collectives
    @cached_property
    def combines_across_processes(self) -> bool:
        """Somewhere in the module values are gathered or reduced across processes (any
        collective: a tensor's `.gather(dim, index)` is counted too, which can only silence)."""
        return any(self.is_collective(call) for call in self.index.calls)

    def is_collective(self, call: cst.Call) -> bool:
        """``call`` gathers or reduces values across processes: a known collective, a
        `.gather` / `.reduce` / `.all_reduce` method, or a helper of another package whose name
        says it gathers, reduces or synchronises."""
        index = self.index
        q = index.qualname(call.func)
        if q in K.GATHER_FUNCTIONS or q in K.GATHER_WITH_DUPLICATES:
            return True
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in K.GATHER_METHODS:
            return True
        if index.local_function(func) is not None:
            return False
        if q is not None and q.split(".")[0] in K.KNOWN_LIBRARIES:
            return False  # a known library's call is judged by the tables above
        last = (dotted_name(func) or "").rsplit(".", 1)[-1].lower()
        return any(w in last for w in K.GATHER_NAME_WORDS)

    @cached_property
    def may_keep_duplicates(self) -> bool:
        """Some call of the module has the form of `duplicate_keeping_gathers` (in any loop):
        `accelerate.utils.gather(x)` or `<x>.gather(y)`. Without one no evaluation loop
        keeps duplicates, whichever loops are sharded."""
        index = self.index
        for call in index.calls:
            if not call.args:
                continue
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == K.GATHER_METHOD:
                return True
            if index.qualname(func) in K.GATHER_WITH_DUPLICATES:
                return True
        return False

    def duplicate_keeping_gathers(self, loop: cst.CSTNode) -> list[cst.Call]:
        """`accelerator.gather(x)` (and `accelerate.utils.gather(x)`) calls in ``loop``."""
        facts, index = self.facts, self.index
        out = []
        for n in body_nodes(loop):
            if not isinstance(n, cst.Call) or not n.args:
                continue
            if index.qualname(n.func) in K.GATHER_WITH_DUPLICATES:
                out.append(n)
                continue
            func = n.func
            if isinstance(func, cst.Attribute) and func.attr.value == K.GATHER_METHOD:
                receiver = func.value
                if facts.is_accelerator(receiver) or (
                    not facts.traceable(receiver)
                    and "accelerator" in (dotted_name(receiver) or "").lower()
                ):
                    out.append(n)
        return out

    @cached_property
    def pads_last_batch(self) -> bool:
        """Accelerate pads the last batch of prepared loaders (unless `even_batches=False`)."""
        facts, index = self.facts, self.index
        for acc in facts.accelerators:
            values = [facts.accelerator_keyword(acc, K.EVEN_BATCHES)]
            config = facts.accelerator_keyword(acc, "dataloader_config")
            if config is not None:
                for value in [config, *index.values_of(config)]:
                    if facts.is_dataloader_configuration(value):
                        assert isinstance(value, cst.Call)
                        values.append(call_keyword(value, K.EVEN_BATCHES))
            if any(v is not None and index.constant_value(v) is False for v in values):
                return False
        return True

    def deduplicated_by_hand(self, node: cst.CSTNode) -> bool:
        """The function around ``node`` cuts gathered values to the dataset's length
        (`preds[: len(eval_dataset) - samples_seen]`, `torch.cat(losses)[: len(dataset)]`)."""
        function = self.index.enclosing_function(node) or self.index.module
        for n in body_nodes(function):
            if isinstance(n, cst.Slice):
                for bound in (n.lower, n.upper):
                    if bound is not None and _reads_length(bound):
                        return True
        return False

    # ------------------------------------------------------------------ metric sinks
    @cached_property
    def may_have_sinks(self) -> bool:
        """Some node of the module has the form of a metric sink (`sinks`, for any loop): a
        call of an `sklearn.metrics`-like function, `.add_batch` / `.add`, a mean function or
        `.mean()`, `x += <a count of matches>`, `sum(xs) / len(ys)` or `<x> / len(<y>.dataset)`.
        Without one no loop has a sink, so nothing needs to know which loops are sharded
        evaluation loops (the loaders' origins) or whether anything is gathered."""
        index = self.index
        for call in index.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and (
                func.attr.value in K.METRIC_ADD_METHODS or func.attr.value == K.MEAN_METHOD
            ):
                return True
            q = index.qualname(func)
            if q is not None and (
                q.startswith(K.METRIC_FUNCTION_PREFIXES) or q in K.MEAN_FUNCTIONS
            ):
                return True
        for n in index.nodes_of(cst.AugAssign):
            assert isinstance(n, cst.AugAssign)
            if isinstance(n.operator, cst.AddAssign) and _counts_matches(n.value):
                return True
        for n in index.nodes_of(cst.BinaryOperation):
            assert isinstance(n, cst.BinaryOperation)
            if isinstance(n.operator, cst.Divide) and (
                _is_dataset_length(n.right) or _builtin_call_of(n.left, "sum", None)
            ):
                return True
        return False

    def sinks(self, loop: cst.For) -> list[cst.CSTNode]:
        """Where values of ``loop`` reach a metric, in the loop or after it in its function:
        `metric.add_batch(...)` on an `evaluate` metric, an `sklearn.metrics` function, a count
        of matches (`correct += (pred == y).sum()`), an average of what the loop collected
        (`np.mean(losses)`, `torch.stack(losses).mean()`, `sum(accs) / len(accs)`)."""
        index = self.index
        function = index.enclosing_function(loop) or index.module
        collected = _collected_in(loop)
        return [n for n in body_nodes(function) if self._is_sink(n, loop, collected)]

    def _is_sink(self, n: cst.CSTNode, loop: cst.For, collected: frozenset[str]) -> bool:
        index = self.index
        after = index.order(n) > index.order(loop) and not index.is_inside(n, loop)
        if collected and after and self._averages(n, collected):
            return True  # a running average shown in the loop is progress, not the metric
        if isinstance(n, cst.Call):
            return self._is_metric_call(n, loop)
        if isinstance(n, cst.AugAssign) and isinstance(n.operator, cst.AddAssign):
            return index.is_inside(n, loop) and _counts_matches(n.value)
        # `total_loss / len(loader.dataset)`: a local sum over the whole set
        return (
            isinstance(n, cst.BinaryOperation)
            and isinstance(n.operator, cst.Divide)
            and index.order(n) > index.order(loop)
            and _is_dataset_length(n.right)
            and self._summed_in(n.left, loop)
        )

    def _is_metric_call(self, n: cst.Call, loop: cst.For) -> bool:
        """An `sklearn.metrics`-like function after the loop, or `metric.add_batch(...)` on an
        `evaluate` metric inside it."""
        index = self.index
        q = index.qualname(n.func) or ""
        if q.startswith(K.METRIC_FUNCTION_PREFIXES) and index.order(n) > index.order(loop):
            return True
        return (
            isinstance(n.func, cst.Attribute)
            and n.func.attr.value in K.METRIC_ADD_METHODS
            and index.is_inside(n, loop)
            and self._is_metric(n.func.value)
        )

    def _averages(self, n: cst.CSTNode, collected: frozenset[str]) -> bool:
        """``n`` averages a list the loop collected: `np.mean(xs)`, `statistics.mean(xs)`,
        `torch.cat(xs).mean()`, `sum(xs) / len(xs)`: one shard's average."""
        if isinstance(n, cst.Call):
            func = n.func
            if self.index.qualname(func) in K.MEAN_FUNCTIONS:
                return bool(n.args) and _mentions(n.args[0].value, collected)
            # `losses.mean()`, and `losses.mean(0)` over a table filled by index
            return (
                isinstance(func, cst.Attribute)
                and func.attr.value == K.MEAN_METHOD
                and _mentions(func.value, collected)
            )
        return (
            isinstance(n, cst.BinaryOperation)
            and isinstance(n.operator, cst.Divide)
            and _builtin_call_of(n.left, "sum", collected)
            and _builtin_call_of(n.right, "len", collected)
        )

    def _summed_in(self, expr: cst.BaseExpression, loop: cst.For) -> bool:
        """``expr`` is a name the loop adds to (`total += loss.item() * x.size(0)`)."""
        if not isinstance(expr, cst.Name):
            return False
        return any(
            b.op == "+=" and self.index.is_inside(b.node, loop)
            for b in self.index.scope(expr).bindings.get(expr.value, ())
        )

    def _is_metric(self, expr: cst.BaseExpression) -> bool:
        """``expr`` holds an `evaluate.load(...)` metric."""
        return self.facts.flow.reaches(
            expr, lambda _n, q: q is not None and q.rstrip("()") in K.METRIC_LOADERS, key="metric"
        )


def _reads_length(node: cst.CSTNode) -> bool:
    for n in body_nodes(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len":
            return True
        if isinstance(n, cst.Name) and ("seen" in n.value or "num_samples" in n.value):
            return True
    return False


def _is_dataset_length(node: cst.BaseExpression) -> bool:
    """`len(<x>.dataset)`: the size of the whole dataset behind a loader."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "len"
        and len(node.args) == 1
        and isinstance(node.args[0].value, cst.Attribute)
        and node.args[0].value.attr.value == "dataset"
    )


def _counts_matches(value: cst.CSTNode) -> bool:
    """`(pred == y).sum()`, `pred.eq(y).sum().item()`: a count of correct predictions."""
    for n in body_nodes(value):
        if isinstance(n, cst.Comparison) and any(
            isinstance(c.operator, cst.Equal) for c in n.comparisons
        ):
            return True
        if (
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "eq"
        ):
            return True
    return False


def _collected_in(loop: cst.For) -> frozenset[str]:
    """Names of the lists ``loop`` appends its values to (`losses.append(loss.item())`) and of
    the tables it fills by index (`losses[k] = loss.item()` into a `torch.zeros(n)` made before
    the loop, as lit-gpt's `validate` does)."""
    names = set()
    for n in body_nodes(loop.body):
        if (
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and n.func.attr.value in K.COLLECT_METHODS
            and isinstance(n.func.value, cst.Name)
        ):
            names.add(n.func.value.value)
        elif isinstance(n, cst.Assign):
            for target in n.targets:
                if isinstance(target.target, cst.Subscript) and isinstance(
                    target.target.value, cst.Name
                ):
                    names.add(target.target.value.value)
    return frozenset(names)


def _mentions(node: cst.CSTNode, names: frozenset[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names for n in body_nodes(node))


def _builtin_call_of(node: cst.BaseExpression, builtin: str, names: frozenset[str] | None) -> bool:
    """`sum(xs)` / `len(xs)` of a collected list ``xs`` (None: of any name)."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == builtin
        and len(node.args) == 1
        and isinstance(node.args[0].value, cst.Name)
        and (names is None or node.args[0].value.value in names)
    )
