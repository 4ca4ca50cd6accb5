"""Training losses written out by the main process only (``Facts.logged_losses``).

Each process of a data-parallel run computes the loss of its own shard. A loss that goes to the
console, a log or a tracker from the main process only (under `if accelerator.is_main_process:`,
`if rank == 0:`, or through a call that writes on the main process by itself: `accelerator.log`,
`accelerator.print`, Accelerate's logger, `fabric.log`, `xm.master_print`) is that process's
shard's, unless it went through a collective first (`accelerator.reduce`, `gather`,
`dist.all_reduce`, ...).

What is the loss is decided by use: the value a training loop passes to a backward pass, what a
helper that runs the backward pass returns, and everything the loop's function computes from
them (`loss.item()`, `total_loss += loss.detach()`, `meter.update(loss.item())`, a dict of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import call_keyword, dotted_name, walk
from distlint.analysis.loops import body_nodes
from distlint.analysis.records import Origin

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

_DEPTH = 8  # how many bindings back a logged value is followed
# How a name is bound: computed from something (`=`), folded into (`+=`, `.append(x)`,
# `.update(x)`), returned by a helper that runs the backward pass, or out of a collective.
_ASSIGNED, _FOLDED, _LOSS, _COMBINED = range(4)
_Binding = tuple[int, int, cst.CSTNode | None]  # order, how, the value


class _Values:
    """One function's bindings and the backward passes that take a value, by source order."""

    __slots__ = ("backward", "bindings", "combined")

    def __init__(self) -> None:
        self.backward: dict[str, list[int]] = {}
        self.bindings: dict[str, list[_Binding]] = {}
        # (key, at, depth) -> `LoggedLosses._combined` (asked again for every read followed)
        self.combined: dict[tuple[str, int, int], bool] = {}

    def bind(self, key: str, order: int, kind: int, value: cst.CSTNode | None) -> None:
        self.bindings.setdefault(key, []).append((order, kind, value))

    def reaches_backward(self, key: str, since: int) -> bool:
        """A backward pass takes what ``key`` holds after ``since``: before it is bound again,
        or after a rebinding that rescales it (`loss = loss / accumulation_steps`)."""
        later = sorted((b for b in self.bindings.get(key, ()) if b[0] > since), key=lambda b: b[0])
        for order, _kind, value in later:
            if any(since < b < order for b in self.backward.get(key, ())):
                return True
            if not (
                _kind == _FOLDED or (isinstance(value, cst.BaseExpression) and key in _roots(value))
            ):
                return False
            since = order
        return any(b > since for b in self.backward.get(key, ()))

    def last_binding(self, key: str, at: int) -> _Binding | None:
        before = [b for b in self.bindings.get(key, ()) if b[0] < at]
        return max(before, key=lambda b: b[0]) if before else None


class LoggedLosses:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index = facts.index

    @cached_property
    def sinks(self) -> list[cst.Call]:
        """Output calls that write a training loss, uncombined, from the main process only."""
        loops = self.facts.loops
        out: list[cst.Call] = []
        seen: set[int] = set()
        for loop in loops.training_loops:
            if isinstance(loop, cst.For):
                origins = loops.loader_origins(loops.iterated(loop))
                if origins and all(o is Origin.UNSHARDED for o in origins):
                    continue  # every process trains on all of it: one loss is every loss
            function = self.index.enclosing_function(loop) or self.index.module
            if id(function) in seen:
                continue
            seen.add(id(function))
            values = self._loss_values(function)
            for node in body_nodes(function):
                if (
                    isinstance(node, cst.Call)
                    and self.writes_on_main_process_only(node)
                    and self._carries(node, values, self.index.order(node), _DEPTH)
                ):
                    out.append(node)
        return out if out and not self._backend_reduces_loss() else []

    def _backend_reduces_loss(self) -> bool:
        index = self.index
        return any(
            isinstance(n, cst.Attribute) and index.qualname(n) in K.LOSS_REDUCING_BACKENDS
            for n in walk(index.module)
        )

    # ------------------------------------------------------------------ what carries the loss
    def _loss_values(self, function: cst.CSTNode) -> _Values:
        """Where ``function`` names the loss (its backward passes) and binds values."""
        values = _Values()
        for node in body_nodes(function):
            if isinstance(node, cst.Call):
                self._scan_call(node, values)
            elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                self._scan_assignment(node, values)
        _names_of_the_backward_value(values)
        return values

    def _scan_call(self, call: cst.Call, values: _Values) -> None:
        """The backward pass names the loss; a collective combines its arguments in place;
        `losses.append(x)` / `meter.update(x)` folds ``x`` into the receiver."""
        func = call.func
        order = self.index.order(call)
        if isinstance(func, cst.Attribute) and func.attr.value == K.BACKWARD_METHOD:
            positional = [a for a in call.args if a.keyword is None]
            for key in _roots(positional[0].value if positional else func.value):
                values.backward.setdefault(key, []).append(order)
        elif self.facts.metrics.is_collective(call):
            for key in (k for a in call.args for k in _roots(a.value)):
                values.bind(key, order, _COMBINED, None)
        elif isinstance(func, cst.Attribute) and func.attr.value in K.ACCUMULATE_INTO_METHODS:
            receiver = dotted_name(func.value)
            if receiver is not None:
                values.bind(receiver, order, _FOLDED, call)

    def _scan_assignment(
        self, node: cst.Assign | cst.AugAssign | cst.AnnAssign, values: _Values
    ) -> None:
        value = node.value
        if value is None:
            return
        order = self.index.order(node)
        if _contains_collective(self, value):
            kind = _COMBINED
        elif isinstance(value, cst.Call) and self.facts.loops.runs_backward_in_helper(value):
            kind = _LOSS  # `loss = train_step(batch)`
        else:
            kind = _FOLDED if isinstance(node, cst.AugAssign) else _ASSIGNED
        for key in (_target_key(t) for t in _targets(node)):
            if key is not None:
                values.bind(key, order, kind, value)

    def _carries(self, node: cst.CSTNode, values: _Values, at: int, depth: int) -> bool:
        """``node``, run at ``at``, reads the loss (outside a collective call)."""
        if depth <= 0:
            return False
        for n in _reads(node, self):
            key = dotted_name(n)
            if key is not None and self._holds_loss(key, values, at, depth):
                return True
        return False

    def _holds_loss(self, key: str, values: _Values, at: int, depth: int) -> bool:
        """``key`` holds the loss at ``at``: a backward pass takes what it was last bound to
        (before or after ``at``: `total += loss.detach()` may come first), or its last binding computed it from the loss (`lossf = loss.item()`,
        `total += loss.detach()`, `meter.update(loss)`)."""
        last = values.last_binding(key, at)
        if last is not None and self._combined(key, values, at, depth):
            return False  # a loss made of gathered values (sequence parallelism) is the run's
        if values.reaches_backward(key, last[0] if last is not None else -1):
            return True
        if last is None:
            # bound only later in the loop, or never: the back edge brings what a backward
            # pass took
            return key in values.backward and not values.bindings.get(key)
        order, kind, value = last
        if kind == _LOSS:
            return True
        if kind == _COMBINED or value is None:
            return False
        if kind == _FOLDED and self._holds_loss(key, values, order, depth - 1):
            return True  # `total += x` keeps what `total` held
        return self._carries(value, values, order, depth - 1)

    def _combined(self, key: str, values: _Values, at: int, depth: int) -> bool:
        """What ``key`` holds at ``at`` came out of a collective, or was computed from one."""
        known = values.combined.get((key, at, depth))
        if known is None:
            known = values.combined[(key, at, depth)] = self._combined_now(key, values, at, depth)
        return known

    def _combined_now(self, key: str, values: _Values, at: int, depth: int) -> bool:
        last = values.last_binding(key, at)
        if last is None or depth <= 0:
            return False
        order, kind, value = last
        if kind == _COMBINED:
            return True
        if kind != _ASSIGNED or value is None:
            return False
        reads = [k for n in _reads(value, self) if (k := dotted_name(n)) is not None]
        return any(self._combined(k, values, order, depth - 1) for k in reads)

    # ------------------------------------------------------------------ where it goes
    def writes_on_main_process_only(self, call: cst.Call) -> bool:
        """``call`` writes to the console, a log or a tracker, and only the main process runs
        it (by itself, or under a test that holds on one process)."""
        q = self.index.qualname(call.func)
        if q in K.MAIN_PROCESS_OUTPUT:
            return True
        func = call.func
        if (
            q is None
            and isinstance(func, cst.Attribute)
            and func.attr.value in K.MAIN_PROCESS_OUTPUT_METHODS
            and (dotted_name(func.value) or "").rsplit(".", 1)[-1] in K.MAIN_PROCESS_RECEIVER_NAMES
        ):
            return True  # `self.accelerator.log(...)`, a Fabric handed in: untraced, named
        if q is not None and q.startswith(K.MAIN_PROCESS_LOGGER):
            flag = call_keyword(call, K.MAIN_PROCESS_ONLY_KEYWORD)
            if flag is None or self.index.constant_value(flag) is not False:
                return True
        return self.writes_out(call, q) and self.facts.on_one_process(call)

    def writes_out(self, call: cst.Call, q: str | None) -> bool:
        func = call.func
        if isinstance(func, cst.Name):
            return func.value == "print" and not self.index.bindings_of(func)
        if not isinstance(func, cst.Attribute) or func.attr.value not in K.OUTPUT_METHODS:
            return False
        if q is None or not self.facts.traceable(func.value):
            return True  # a logger or writer handed in: its method's name says it writes
        return any(q == p or q.startswith((p + ".", p + "(")) for p in K.OUTPUT_PACKAGES)


def _names_of_the_backward_value(values: _Values) -> None:
    """`loss_all = loss_sum` and then `scaler.scale(loss_all).backward()`: the backward pass
    takes the value `loss_sum` holds too (VITS logs the discriminator loss by its first name)."""
    changed = True
    while changed:
        changed = False
        for key, bindings in list(values.bindings.items()):
            for order, kind, value in bindings:
                source = dotted_name(value) if isinstance(value, cst.BaseExpression) else None
                if kind != _ASSIGNED or source is None or source == key:
                    continue
                if not values.reaches_backward(key, order):
                    continue
                rebound = min((b[0] for b in bindings if b[0] > order), default=None)
                taken = values.backward.setdefault(source, [])
                later = [
                    b
                    for b in values.backward.get(key, ())
                    if order < b and (rebound is None or b < rebound) and b not in taken
                ]
                if later:
                    taken.extend(later)
                    changed = True


def _roots(expr: cst.BaseExpression) -> Iterator[str]:
    """The value a loss expression is made of: `loss` in `loss / accum`, `loss.mean()`,
    `scaler.scale(loss)`, `outputs.loss` in `outputs.loss * 2`."""
    while True:
        if isinstance(expr, cst.BinaryOperation):
            expr = expr.left
        elif isinstance(expr, cst.UnaryOperation):
            expr = expr.expression
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and not (
                expr.args and func.attr.value == K.SCALE_METHOD
            ):
                expr = func.value  # `loss.mean()`, `loss.detach()`
            elif expr.args:
                expr = expr.args[0].value  # `scaler.scale(loss)`, `torch.mean(loss)`
            else:
                return
        else:
            break
    key = dotted_name(expr)
    if key is not None:
        yield key


def _targets(node: cst.Assign | cst.AugAssign | cst.AnnAssign) -> Iterator[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                yield from (e.value for e in t.target.elements)
            else:
                yield t.target
    else:
        yield node.target


def _target_key(target: cst.BaseExpression) -> str | None:
    """`logs["loss"] = ...` puts the loss in `logs`."""
    while isinstance(target, cst.Subscript):
        target = target.value
    return dotted_name(target)


def _reads(node: cst.CSTNode, owner: LoggedLosses) -> Iterator[cst.BaseExpression]:
    """Names and dotted names ``node`` reads, collective calls left out. (The index's child
    lists, not LibCST's `children`, which runs a visitor over the node each time it is asked:
    asked again for every read followed, a long training step was seconds of it.)"""
    children = owner.index.children
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and owner.facts.metrics.is_collective(n):
            continue
        if isinstance(n, (cst.Name, cst.Attribute)):
            yield n
        if isinstance(n, cst.Attribute):
            stack.append(n.value)
            continue
        stack.extend(c for c in children(n) if not isinstance(c, (cst.FunctionDef, cst.ClassDef)))


def _contains_collective(owner: LoggedLosses, value: cst.CSTNode) -> bool:
    return any(
        isinstance(n, cst.Call) and owner.facts.metrics.is_collective(n) for n in body_nodes(value)
    )
