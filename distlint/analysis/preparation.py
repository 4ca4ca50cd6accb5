"""What goes through ``accelerator.prepare`` (or Fabric's setup), which names hold an
Accelerator or a Fabric, and values read from configuration files.

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.preparation``), computed once per
module."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    Provider,
    _visible_names,
)
from distlint.analysis.flow import Nodes
from distlint.analysis.index import (
    dotted_name,
)
from distlint.analysis.records import (
    Made,
    Mode,
    ProcessCount,
)

if TYPE_CHECKING:
    pass


class Preparation(Provider):
    """What goes through ``accelerator.prepare`` (or Fabric's setup), which names hold an
    Accelerator or a Fabric, and values read from configuration files."""

    def is_prepare_call(self, node: cst.CSTNode) -> bool:
        """`accelerator.prepare(...)` (and `prepare_data_loader`, `prepare_scheduler`) on an
        Accelerator made anywhere, or `accelerate.utils.prepare_data_loader(...)`."""
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        if self.index.qualname(func) in K.PREPARE_FUNCTIONS:
            return True
        if not isinstance(func, cst.Attribute):
            return False
        name = func.attr.value
        if name in K.PREPARE_METHODS:
            return self.facts.processes.is_accelerator(
                func.value
            ) or not self.facts.processes.traceable(func.value)
        if name in K.FABRIC_SETUP_METHODS:
            q = self.index.qualname(func.value)
            if q == K.FABRIC + "()":
                return True
            return q is None and (
                self.facts.processes.is_accelerator(func.value)
                or not self.facts.processes.traceable(func.value)
            )
        return False

    @cached_property
    def prepare_calls(self) -> list[cst.Call]:
        found = self._own_prepare_calls
        if not found and self.facts.processes.mode not in (Mode.NONE, Mode.XLA_SPMD):
            found = list(
                self.facts.processes._training_calls
            )  # `E2Trainer(model, optimizer)` prepares them
        return found

    @cached_property
    def _own_prepare_calls(self) -> list[cst.Call]:
        return [c for c in self.index.calls if self.is_prepare_call(c)]

    @cached_property
    def prepared(self) -> Nodes:
        """Everything that flows into an argument of a prepare call (one closure for all)."""
        roots = [arg.value for call in self.prepare_calls for arg in call.args]
        return self.flow.closure(roots, depth=4)

    def is_prepared(self, node: cst.CSTNode) -> bool:
        """Does ``node``'s value flow into an argument of a prepare call (``node in
        prepared``)? An argument itself, or the value a name given as one was assigned
        (`opt = SGD(...)` ... `prepare(model, opt)`), is answered without the closure."""
        return id(node) in self._prepared_directly or node in self.prepared

    @cached_property
    def _prepared_directly(self) -> set[int]:
        found: set[int] = set()
        for call in self.prepare_calls:
            for arg in call.args:
                found.add(id(arg.value))
                if isinstance(arg.value, cst.Name):
                    found.update(id(b.value) for b in self.index.bindings_of(arg.value))
        return found  # ids of nodes the index holds: they stay theirs

    @cached_property
    def prepared_texts(self) -> set[str]:
        """What each prepare call is given, as :meth:`text_of` spells it."""
        return {self.text_of(arg.value) for c in self.prepare_calls for arg in c.args}

    def text_of(self, node: cst.CSTNode) -> str:
        """``a.b.c`` for a dotted name (parentheses and spaces aside), else the node's code."""
        if isinstance(node, (cst.Name, cst.Attribute)):
            dotted = dotted_name(node)
            if dotted is not None:
                return dotted
        return self.index.module.code_for_node(node).strip()

    def accelerator_expr(self, at: cst.CSTNode) -> str | None:
        """Source text of an Accelerator visible at ``at`` (``accelerator``, ``self.facts.accelerator``,
        an accelerator parameter), for fixes; None when there is none."""
        index = self.index
        scope = index.scope(at)
        order = index.order(at)
        for name, inner in self._accelerator_names(scope):
            # a name of the innermost scope counts once it is bound before `at`
            if not inner or any(a.order < order for a in scope.bindings[name]):
                return name
        cls = index.enclosing_class_name(at)
        if cls is not None:
            for key, assigns in index.attr_assignments.items():
                if (
                    key.endswith(f"@{cls}")
                    and assigns
                    and all(
                        a.value is not None and self._made_accelerator(a.value) for a in assigns
                    )
                ):
                    return key.split("@", 1)[0]
        return None

    def _accelerator_names(self, scope: Any) -> Iterator[tuple[str, bool]]:
        """The names visible in ``scope`` that hold an Accelerator wherever they are bound, in
        the order fixes prefer them (innermost scope first), each with whether it is bound in
        ``scope`` itself. Each scope's own names are judged once (a file with many findings
        asks for every one of them), so this is linear in the bindings of the file."""
        shadows = [scope]  # the scopes between here and an outer name, which could rebind it
        for name in self._accelerator_names_of(scope, True):
            yield name, True
        here = scope.parent
        while here is not None:
            for name in self._accelerator_names_of(here, False):
                if not any(name in s.bindings for s in shadows):
                    yield name, False
            if here.kind != "class":
                shadows.append(here)
            here = here.parent

    def _accelerator_names_of(self, scope: Any, first: bool) -> Iterator[str]:
        """The names bound in ``scope`` that hold an Accelerator (a class scope is seen only
        from inside its own body, as Python resolves names), in binding order. Lazily, each
        name judged once: a fix needs the first one, and a module binds thousands of names."""
        if scope.kind == "class" and not first:
            return
        memo: dict[str, bool] = self.facts.__dict__.setdefault("_acc_names", {}).setdefault(
            id(scope), {}
        )
        index = self.index
        for name in scope.bindings:
            held = memo.get(name)
            if held is None:
                held = memo[name] = self._holds_accelerator(index.lookup(name, scope))
            if held:
                yield name

    def _holds_accelerator(self, bindings: Sequence[Any]) -> bool:
        if not bindings or not all(b.op in ("=", "with", "param", "unpack") for b in bindings):
            return False
        values = [b.value for b in bindings if b.value is not None]
        if values and all(self._made_accelerator(v) for v in values):
            return True
        node = bindings[-1].target
        return (
            isinstance(node, cst.Name)
            and all(b.op == "param" for b in bindings)
            and self.facts.processes.is_accelerator(node)
        )

    def process_count_at(self, at: cst.CSTNode) -> ProcessCount | None:
        """For fixes: how to spell the number of processes at ``at`` in this mode; None when
        there is no right spelling."""
        mode = self.facts.processes.mode
        if mode is Mode.ACCELERATE:
            acc = self.accelerator_expr(at)
            return ProcessCount(expression=f"{acc}.num_processes") if acc else None
        if mode is Mode.DDP:
            return ProcessCount(function="torch.distributed.get_world_size")
        if mode is Mode.XLA_MULTIPROCESS:
            return ProcessCount(function="torch_xla.runtime.world_size")
        if mode is Mode.FABRIC:
            fabric = self.fabric_expr(at)
            return ProcessCount(expression=f"{fabric}.world_size") if fabric else None
        return None

    def fabric_expr(self, at: cst.CSTNode) -> str | None:
        """A name bound to `Fabric(...)` visible at ``at``, for fixes."""
        index = self.index
        for name in _visible_names(index, at):
            assigns = index.lookup(name, index.scope(at))
            if assigns and all(
                a.op == "=" and a.value is not None and index.qualname(a.value) == K.FABRIC + "()"
                for a in assigns
            ):
                return name
        return None

    def _made_accelerator(self, value: cst.CSTNode) -> bool:
        q = self.index.qualname(value)
        if q == K.ACCELERATOR + "()":
            return True
        return isinstance(value, cst.Call) and (
            Made.ACCELERATOR in self.facts.summaries._external_makes(value)
            or (
                self.index.local_function(value.func) is not None
                and self.facts.processes.is_accelerator(value)
            )
        )

    def config_origin(self, expr: cst.CSTNode) -> str | None:
        """Where the value of ``expr`` is written when it is read from a configuration file
        (or is an argparse default the script declares): ``conf/optimizer/adamw.yaml:2:
        optimizer.lr = 3e-4``, the file relative to the project root; None without a project
        or when the value cannot be traced (nothing is guessed)."""
        if self.project is None:
            return None
        from distlint.analysis.configsource import config_value

        found = config_value(self, expr, self.project, self.path)
        if found is None:
            return None
        described: str = found.describe(getattr(self.project, "root", None))
        return described
