"""Optimizers and where their learning rates come from (a literal, a parameter, a
factory of another module, a config file), and the LR schedulers.

A provider of :class:`~distlint.analysis.facts.Facts` (``facts.optimization``), computed once per
module."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _OPTIMIZING,
    Provider,
    _is_call,
)
from distlint.analysis.index import (
    Index,
    call_keyword,
    string_value,
    target_key,
)
from distlint.analysis.records import (
    FactoryLR,
    How,
    Made,
    Optimizer,
    Scheduler,
    Summary,
)

if TYPE_CHECKING:
    pass


class Optimizers(Provider):
    """Optimizers and where their learning rates come from (a literal, a parameter, a
    factory of another module, a config file), and the LR schedulers."""

    @cached_property
    def optimizers(self) -> list[Optimizer]:
        return [opt for call in self.index.calls for opt in self._optimizers_at(call)]

    def _optimizers_in(self, node: cst.CSTNode) -> list[Optimizer]:
        """The optimizers built inside ``node`` (a function or class): only its own calls are
        examined, so summarising it does not summarise everything its module calls."""
        if "optimizers" in self.facts.__dict__:
            return [o for o in self.optimizers if self.index.is_inside(o.call, node)]
        return [
            opt
            for call in self.index.calls
            if self.index.is_inside(call, node)
            for opt in self._optimizers_at(call)
        ]

    def _optimizers_at(self, call: cst.Call) -> list[Optimizer]:
        found = self._optimizer(call)
        if found is None or found.how is not How.FACTORY or not found.lr_inside:
            return [found] if found is not None else []
        # a factory or Trainer class of another module: one per optimizer it builds
        external = self.facts.summaries._external_summary(call, _OPTIMIZING)
        if external is not None and external.lrs:
            if external.trained_there:
                return []  # reported in that module
            return [self._factory_reading(call, lr) for lr in external.lrs]
        return [found]

    def _optimizer(self, call: cst.Call) -> Optimizer | None:
        index = self.index
        q = index.qualname(call.func)
        found = self._known_optimizer(call, q)
        if found is not None or q in K.OPTIMIZER_FACTORIES or q in K.CONFIG_INSTANTIATE:
            return found
        external = self.facts.summaries._external_summary(call, _OPTIMIZING)
        if self._project_instantiate(call, external):
            return self._instantiated_optimizer(call) or self._unresolved_optimizer(call)
        if external is not None and (Made.OPTIMIZER in external.makes or external.lrs):
            if self._wraps_an_optimizer(call):
                return None  # a wrapper of another module given the optimizer, not parameters
            return Optimizer(call, How.FACTORY, None, None, lr_inside=True)
        local = index.local_function(call.func) is not None or (
            isinstance(call.func, cst.Name)
            and any(b.op == "class" for b in index.bindings_of(call.func))
        )
        if local or (q is not None and q.startswith(("torch.", "accelerate.", "transformers."))):
            return None
        return self._unresolved_optimizer(call)

    def _known_optimizer(self, call: cst.Call, q: str | None) -> Optimizer | None:
        """A library optimizer class or factory, a project subclass of `Optimizer`, a class
        picked from candidates, a config node naming an optimizer class."""
        index = self.index

        def made(how: How) -> Optimizer | None:
            # `AdamW(params, **opt_args)` with `opt_args = dict(lr=args.lr, ...)`
            if self._wraps_an_optimizer(call):
                return None  # `Lookahead(optimizer)`, `LARS(base, ...)`: the inner one's LR matters
            lr = Index.argument(call, "lr", 1)
            params = Index.argument(call, "params", 0)
            value = lr.value if lr else self._unpacked_lr(call)
            return Optimizer(call, how, value, params.value if params else None)

        if K.is_optimizer_class(q):
            return made(How.LIBRARY_CLASS)
        if q in K.OPTIMIZER_FACTORIES:
            keyword, position = K.OPTIMIZER_FACTORIES[q]
            arg = Index.argument(call, keyword, position)
            return Optimizer(call, How.FACTORY, arg.value if arg else None, None)
        if q in K.OPTIMIZER_FACTORIES_READING:
            short = q.rsplit(".", 1)[-1]
            read = FactoryLR(K.OPTIMIZER_FACTORIES_READING[q], False, f"{short}()")
            return self._factory_reading(call, read)
        if isinstance(call.func, cst.Name):
            for b in index.bindings_of(call.func):
                if b.op == "class" and self._is_optimizer_class_def(b.node, set()):
                    return made(How.PROJECT_CLASS)
        if q is None and self._picked_optimizer_class(call.func):
            return made(How.PICKED)
        if q in K.CONFIG_INSTANTIATE:
            return self._instantiated_optimizer(call) or self._unresolved_optimizer(call)
        return None

    def _project_instantiate(self, call: cst.Call, external: Summary | None) -> bool:
        """``call`` calls the project's own `instantiate()` (it imports what a config node's
        `_component_` / `_target_` names); ``external``: the callee's summary, if any."""
        if len(call.args) < 2:
            return False  # `instantiate(cfg.optimizer, model.parameters())`
        local = self.index.local_function(call.func)
        if local is not None:
            found = self.instantiates_component(local)
        else:
            found = external is not None and Made.CONFIGURED in external.makes
        return found and any(self._parameters(a.value) for a in call.args[1:])

    def instantiates_component(self, fn: cst.CSTNode) -> bool:
        """``fn`` builds what a config node names: it reads the node's `_target_` /
        `_component_` and imports it (`importlib.import_module` + `getattr`, `pydoc.locate`)."""
        if not isinstance(fn, cst.FunctionDef):
            return False
        index = self.index
        keys = any(index.is_inside(s, fn) for s in self._component_keys)
        return keys and self._imports_by_name(fn, 2)

    @cached_property
    def _component_keys(self) -> list[cst.CSTNode]:
        if not any(k in self.index.source for k in K.COMPONENT_KEYS):
            return []
        return [
            s
            for s in self.index.nodes_of(cst.SimpleString)
            if isinstance(s, cst.SimpleString)
            and any(k in s.value for k in K.COMPONENT_KEYS)  # cheap before evaluating it
            and string_value(s) in K.COMPONENT_KEYS
        ]

    def _imports_by_name(self, fn: cst.CSTNode, depth: int) -> bool:
        """``fn`` (or a helper of this module it calls) imports something by its dotted name."""
        index = self.index
        for call in index.calls:
            if not index.is_inside(call, fn):
                continue
            if index.qualname(call.func) in K.IMPORT_BY_NAME:
                return True
            helper = index.local_function(call.func) if depth > 1 else None
            if helper is not None and helper is not fn and self._imports_by_name(helper, depth - 1):
                return True
        return False

    def _unresolved_optimizer(self, call: cst.Call) -> Optimizer | None:
        """A call nothing resolves (a registry, a config object built at run time, an unknown
        library) given the model's parameters: an optimizer when it gets an `lr` too, or when
        its result is then used as an optimizer (stepped and zeroed, or scheduled)."""
        if not call.args:
            return None  # given no parameters
        keyword_lr = call_keyword(call, "lr")
        if keyword_lr is None and self._optimizer_place(call) not in self._used_as_optimizers:
            return None
        given = call_keyword(call, "params")
        source = self._given_parameters(call, given)
        if source is None or self._wraps_an_optimizer(call):
            return None  # `LARS(base, lr=...)`: parameters only through the wrapped one
        first = call.args[0].value if call.args and call.args[0].keyword is None else None
        if keyword_lr is not None and (source is first or source is given):
            return Optimizer(call, How.PARAMETERS_AND_LR, keyword_lr, source)
        if self._optimizer_place(call) in self._used_as_optimizers:
            return Optimizer(call, How.BY_USE, keyword_lr, source)
        return None

    def _given_parameters(
        self, call: cst.Call, given: cst.BaseExpression | None
    ) -> cst.BaseExpression | None:
        """The model parameters ``call`` is given: its `params=` keyword, else one of its first
        two positional arguments; None when none is parameters."""
        sources = (
            [given]
            if given is not None
            else [a.value for a in call.args if not a.star and a.keyword is None][:2]
        )
        return next((v for v in sources if self._parameters(v)), None)

    def _optimizer_place(self, call: cst.Call) -> tuple[str, int] | None:
        """Where ``call``'s result is kept: a name of a scope, or a dotted place."""
        index = self.index
        parent = index.parent(call)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return None
        return _place(index, parent.targets[0].target)

    @cached_property
    def _used_as_optimizers(self) -> set[tuple[str, int] | None]:
        """The places (see `_optimizer_place`) whose value is used as optimizers are: stepped,
        and zeroed, read for its `param_groups` or handed to an LR scheduler."""
        index = self.index
        uses: dict[tuple[str, int], set[str]] = {}
        if ".step(" not in index.source:
            return set()
        for node in index.nodes_of(cst.Attribute):
            assert isinstance(node, cst.Attribute)
            if node.attr.value in ("step", "zero_grad", "param_groups"):
                place = _place(index, node.value)
                if place is not None:
                    uses.setdefault(place, set()).add(node.attr.value)
        for call in index.calls:
            first = Index.argument(call, "optimizer", 0)
            if first is not None and (index.qualname(call.func) or "").startswith(
                K.SCHEDULER_MODULES
            ):
                place = _place(index, first.value)
                if place is not None:
                    uses.setdefault(place, set()).add("scheduled")
        return {
            place
            for place, used in uses.items()
            if "step" in used and used & {"zero_grad", "param_groups", "scheduled"}
        }

    def scaled_on_the_way(self, opt: Optimizer) -> bool:
        """Something on the way to an optimizer built from an unreadable config depends on the
        process count: an argument of the call, or a field of the config objects it reads
        (`cfg.optimizer.lr = cfg.optimizer.lr * world_size` before `cfg.optimizer.build(...)`)."""
        processes = self.facts.processes
        call = opt.call
        if any(processes.reads_process_count(a.value) for a in call.args):
            return True
        func = call.func
        roots = [func.value] if isinstance(func, cst.Attribute) else []
        roots += [a.value for a in call.args]
        bases = {k for r in roots if (k := target_key(r)) is not None}
        for key, assigns in self.index.attr_assignments.items():
            if not any(key.startswith((b + ".", b + "[")) for b in bases):
                continue
            if any(a.value is not None and processes.reads_process_count(a.value) for a in assigns):
                return True
        return False

    @staticmethod
    def _factory_reading(call: cst.Call, lr: FactoryLR) -> Optimizer:
        """The optimizer a factory call returns, its LR as the factory reads it: from its
        parameter (`make(args)` reading `args.lr` has the attribute ".lr", `make(lr)` has "")
        or set inside."""
        where = lr.where
        if lr.param is None:
            opt = Optimizer(call, How.FACTORY, None, None, lr_inside=True, where=where)
            opt.lr_scaled = lr.scaled
            return opt
        name, position, suffix = lr.param
        arg = Index.argument(call, name, position)
        if arg is None:  # the factory's own default
            return Optimizer(call, How.FACTORY, None, None, lr_inside=True, where=where)
        value, rest = _through_keywords(arg.value, suffix)
        opt = Optimizer(call, How.FACTORY, value, None, where=where)
        if rest != suffix and isinstance(value, cst.Attribute):
            # `OptimizerCfg(lr=args.lr)`: the factory reads `args.lr`, as other readers may
            # (a schedule given `args.lr` too): the key says so, and the fix scales it once
            opt.lr_key = target_key(value)
        else:
            base = target_key(value) if rest else None
            opt.lr_key = base + rest if base is not None else None
        return opt

    def _unpacked_lr(self, call: cst.Call) -> cst.BaseExpression | None:
        """The `lr` of `**opt_args` bound to a dict literal / `dict(...)`, unless the dict's
        `lr` is assigned elsewhere (`opt_args["lr"] *= world_size`): then nothing is known."""
        found = self.facts.processes.accelerator_keyword(call, "lr")
        if found is None:
            return None
        for arg in call.args:
            base = target_key(arg.value) if arg.star == "**" else None
            if base is not None and self.index.attr_assignments.get(f"{base}[lr]"):
                return None
        return found

    def _wraps_an_optimizer(self, call: cst.Call) -> bool:
        """``call`` is given an optimizer (not parameters): it wraps that optimizer
        (`AcceleratedOptimizer(optimizer)`, `DeepSpeedOptimizerWrapper(opt)`, an
        optimizer-in-backward wrapper), and the wrapped one's LR is the one that matters."""
        return any(
            arg.star == "" and self._wraps_optimizer(arg.value)
            for arg in call.args
            if not (isinstance(arg.value, cst.Call) and self._parameters(arg.value))
        )

    def _wraps_optimizer(self, expr: cst.BaseExpression) -> bool:
        """``expr`` (the first argument of an optimizer class) holds an optimizer itself."""
        busy = self.facts.__dict__.setdefault("_wrapper_checks", set())
        if expr in busy:
            return False
        busy.add(expr)
        try:
            values = (
                [expr, *self.index.values_of(expr)] if not isinstance(expr, cst.Call) else [expr]
            )
            return any(isinstance(v, cst.Call) and self._optimizer(v) is not None for v in values)
        finally:
            busy.discard(expr)

    def _instantiated_optimizer(self, call: cst.Call) -> Optimizer | None:
        """`config.instantiate(cfg.optimizer, params)` / hydra's `instantiate` of a config node
        whose `_component_` / `_target_` is an optimizer class: its LR is the node's `lr`,
        unless the call passes one."""
        if self.project is None:
            return None
        from distlint.analysis.configsource import config_component

        component = config_component(self, call, self.project, self.path, any_callee=True)
        if component is None or not K.is_optimizer_class(component.target):
            return None
        params = call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None
        given = call_keyword(call, "lr")
        if given is not None:
            return Optimizer(call, How.CONFIG_COMPONENT, given, params)
        opt = Optimizer(call, How.CONFIG_COMPONENT, None, params)
        value = component.kwargs.get("lr")
        if value is not None:
            opt.lr_config = value.describe(getattr(self.project, "root", None))
            base = target_key(call.args[0].value) if call.args else None
            opt.lr_key = f"{base}.lr" if base is not None else None
        return opt

    def _is_optimizer_class_def(self, cls: cst.CSTNode, seen: set[cst.CSTNode]) -> bool:
        if not isinstance(cls, cst.ClassDef) or cls in seen:
            return False
        seen.add(cls)
        for base in cls.bases:
            q = self.index.qualname(base.value)
            if q in K.OPTIMIZER_BASES or K.is_optimizer_class(q):
                return True
            if isinstance(base.value, cst.Name):
                for b in self.index.bindings_of(base.value):
                    if b.op == "class" and self._is_optimizer_class_def(b.node, seen):
                        return True
                    if b.op == "import":
                        summary = self.facts.summaries._imported_summary(base.value, _OPTIMIZING)
                        if summary is not None and Made.OPTIMIZER in summary.makes:
                            return True
        return False

    def _picked_optimizer_class(self, func: cst.BaseExpression) -> bool:
        """`opt_cls = bnb.optim.AdamW8bit if args.use_8bit else torch.optim.AdamW`; one
        optimizer candidate among the values is enough."""
        if not isinstance(func, (cst.Name, cst.Attribute, cst.Subscript)):
            return False

        def is_class(node: cst.CSTNode, q: str | None) -> bool:
            return not isinstance(node, cst.Call) and K.is_optimizer_class(q)

        return self.flow.reaches(func, is_class, key="optimizer-class", prune=_is_call, depth=4)

    def _parameters(self, expr: cst.CSTNode) -> bool:
        """``expr`` holds model parameters: `model.parameters()`, named params, param groups."""

        def is_params(node: cst.CSTNode, _q: str | None) -> bool:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                return node.func.attr.value in ("parameters", "named_parameters")
            if isinstance(node, cst.DictElement):
                return string_value(node.key) == "params"
            return False

        return self.flow.reaches(expr, is_params, key="parameters", depth=4)

    @cached_property
    def schedulers(self) -> list[Scheduler]:
        out: list[Scheduler] = []
        for call in self.index.calls:
            q = self.index.qualname(call.func)
            if q is None:
                continue
            kind = q.replace("transformers.optimization.", "transformers.")
            if kind not in K.SCHEDULER_LENGTHS:
                continue
            peak = None
            if kind in K.PEAK_LR_SCHEDULERS:
                arg = Index.argument(call, "max_lr", 1)
                peak = arg.value if arg is not None else None
            out.append(Scheduler(call, kind, peak))
        return out

    def scheduler_lengths(self, sched: Scheduler) -> list[tuple[cst.BaseExpression, str]]:
        """The arguments that count the schedule's steps, with their role (total / warmup)."""
        out: list[tuple[cst.BaseExpression, str]] = []
        for position, keyword, role in K.SCHEDULER_LENGTHS[sched.kind]:
            arg = Index.argument(sched.call, keyword, position)
            if arg is None:
                continue
            if role == "lambda":
                # `LambdaLR(opt, warmup_decay(warmup, total))`: the factory's arguments
                if isinstance(arg.value, cst.Call):
                    out.extend((a.value, "total") for a in arg.value.args if not a.star)
                else:
                    out.append((arg.value, "total"))
            elif isinstance(arg.value, (cst.List, cst.Tuple)):
                out.extend((el.value, role) for el in arg.value.elements)
            else:
                out.append((arg.value, role))
        return out


def _place(index: Index, node: cst.CSTNode) -> tuple[str, int] | None:
    """A name by its spelling and scope (rebinding it from `accelerator.prepare(...)` keeps
    the place), a dotted place (`self.optimizer`) by its text."""
    if isinstance(node, cst.Name):
        return (node.value, id(index.scope(node)))
    if isinstance(node, cst.Attribute):
        key = target_key(node)
        return (key, 0) if key is not None else None
    return None


def _through_keywords(value: cst.BaseExpression, suffix: str) -> tuple[cst.BaseExpression, str]:
    """The factory reads ``suffix`` (".lr") of the argument ``value``: where the argument is
    a constructor call (`OptimizerCfg(lr=args.lr, ...)`, `dict(lr=...)`), the LR is what its
    keyword of that name is given (`args.lr`), not the whole call."""
    while suffix.startswith(".") and isinstance(value, cst.Call):
        head, _, rest = suffix[1:].partition(".")
        given = call_keyword(value, head) if head.isidentifier() else None
        if given is None:
            break
        value, suffix = given, f".{rest}" if rest else ""
    return value, suffix
