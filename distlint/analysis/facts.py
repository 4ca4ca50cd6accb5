"""One model of the training setup of a module, computed once and queried by every rule.

``facts_for(index, path, project)`` builds it (memoised in ``project.memo`` when a project is
given). What it knows comes from the module's :class:`Index`, its :class:`Flow` and the declared
knowledge base (:mod:`distlint.analysis.knowledge`); what lives in other modules of the project
comes from their own Facts, through :class:`Summary` objects of their functions and classes.

Recognition is by value: an optimizer is a library optimizer class, a class that subclasses
``torch.optim.Optimizer``, a factory returning one, a class picked from candidates, or any call
given the model's parameters and an ``lr``; the process count is whatever reads
``get_world_size()`` / ``WORLD_SIZE`` / ``num_processes`` / ``xr.world_size()`` /
``fabric.world_size``, however it is wrapped (a helper returning it is a process count wherever
it is called). Names are consulted only for values that cannot be traced at all.

:class:`Facts` is a thin facade over providers, one module each, each computed once per module
(``facts.<provider>``) and asking the others through the facade: :mod:`~.processes` (the mode
and the process count), :mod:`~.optimizers` (optimizers, LR sources, schedulers),
:mod:`~.preparation` (what is prepared, the Accelerator's names, config values), :mod:`~.loaders`
(DataLoaders and sharding), :mod:`~.models` (models, random splits, one-process code),
:mod:`~.seeding`, :mod:`~.loops`, :mod:`~.accumulation`, :mod:`~.metrics` and
:mod:`~.summaries` (what functions and classes return, composed across modules). Their records
are in :mod:`~.records`; what they share in :mod:`~.common`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import _Spellings
from distlint.analysis.flow import Nodes
from distlint.analysis.index import Index, Op
from distlint.analysis.loaders import Loaders
from distlint.analysis.models import Models
from distlint.analysis.optimizers import Optimizers
from distlint.analysis.preparation import Preparation
from distlint.analysis.processes import Processes
from distlint.analysis.records import (
    FactoryLR,
    How,
    Made,
    Mode,
    Optimizer,
    Origin,
    ProcessCount,
    ProjectLike,
    Scheduler,
    Seeds,
    Summary,
)
from distlint.analysis.seeding import SeedingFacts
from distlint.analysis.summaries import Summaries

if TYPE_CHECKING:
    from distlint.analysis.accumulation import Accumulation
    from distlint.analysis.logged import LoggedLosses
    from distlint.analysis.loops import Loops
    from distlint.analysis.metrics import Metrics
    from distlint.analysis.reach import Reach


# The records are re-exported: rules import them from here, with the facts.
__all__ = [
    "Facts",
    "facts_for",
    "FactoryLR",
    "How",
    "Made",
    "Mode",
    "Optimizer",
    "Origin",
    "ProcessCount",
    "ProjectLike",
    "Scheduler",
    "Seeds",
    "Summary",
]


def facts_for(index: Index, path: str | None = None, project: ProjectLike | None = None) -> Facts:
    """The Facts of a module, built once (per project when one is given)."""
    if project is not None and path is not None:
        key = ("facts", path, id(index))
        found = project.memo.get(key)
        if found is None:
            found = project.memo[key] = Facts(index, path, project)
        handed_out = getattr(project, "handed_out", None)
        if handed_out is not None:  # what their cached answers consulted counts (see Project)
            handed_out(path, found)
        return found
    cached = getattr(index, "_facts", None)
    if cached is None:
        cached = Facts(index, path, project)
        index._facts = cached  # type: ignore[attr-defined]
    return cached


class Facts:
    def __init__(
        self, index: Index, path: str | None = None, project: ProjectLike | None = None
    ) -> None:
        self.index = index
        self.flow = index.flow
        self.path = path
        self.project = project

    # ============================================================== qualified-name queries
    def release(self) -> None:
        """Drop what these facts hold (they and their parts point at each other, and at the
        index): see :meth:`Index.release`. Unusable afterwards."""
        _release(self)

    def calls_to(self, names: frozenset[str] | set[str]) -> list[cst.Call]:
        """The calls of any of ``names`` (qualified names), in source order."""
        by_name = self._calls_by_qualname
        found = [by_name[n] for n in names if n in by_name]
        if len(found) < 2:
            return list(found[0]) if found else []
        return sorted((c for calls in found for c in calls), key=self.index.order)

    @cached_property
    def _calls_by_qualname(self) -> dict[str | None, list[cst.Call]]:
        """Each callee's qualified name -> its calls in source order (the walk's): a module's
        questions ask it for a dozen sets of names, each once a pass over every call."""
        qualname = self.index.qualname
        out: dict[str | None, list[cst.Call]] = {}
        for call in self.index.calls:
            out.setdefault(qualname(call.func), []).append(call)
        return out

    def imports_module(self, top: str) -> bool:
        for scope in self.index.scopes:
            for assigns in scope.bindings.values():
                for a in assigns:
                    q = a.qualname if a.op is Op.IMPORT else None
                    if q and (q == top or q.startswith(top + ".")):
                        return True
        return False

    DATALOADER_CONFIGURATION = K.DATALOADER_CONFIGURATION  # for fixes that build one

    # ============================================================== seeding
    @cached_property
    def seeding(self) -> SeedingFacts:
        return SeedingFacts(self)

    def _facts_of(self, path: str, quiet: bool = False, kept: bool = False) -> Facts | None:
        """The facts of project module ``path``. ``quiet``: not a dependency of the lint
        asking again (it was counted where the answer that led here was made). ``kept``:
        these facts keep them beyond the question (see `Project.handed_out`)."""
        assert self.project is not None
        project: Any = self.project
        if quiet and getattr(project, "tracks_dependencies", False):
            info = project.module(path, touch=False)
        else:
            info = project.module(path)
        if info is None:
            return None
        found = facts_for(info.index, path, self.project)
        if kept and hasattr(project, "handed_out"):
            project.handed_out(path, found, escapes=True, holder=self)
        return found

    # ============================================================== the providers (one module each)
    @cached_property
    def processes(self) -> Processes:
        return Processes(self)

    @cached_property
    def optimization(self) -> Optimizers:
        return Optimizers(self)

    @cached_property
    def preparation(self) -> Preparation:
        return Preparation(self)

    @cached_property
    def data(self) -> Loaders:
        return Loaders(self)

    @cached_property
    def models(self) -> Models:
        return Models(self)

    @cached_property
    def summaries(self) -> Summaries:
        return Summaries(self)

    @cached_property
    def loops(self) -> Loops:
        """Training / evaluation / epoch loops (analysis/loops.py)."""
        from distlint.analysis.loops import Loops

        return Loops(self)

    @cached_property
    def accumulation(self) -> Accumulation:
        """Gradient accumulation as the loops do it (analysis/accumulation.py)."""
        from distlint.analysis.accumulation import Accumulation

        return Accumulation(self)

    @cached_property
    def metrics(self) -> Metrics:
        """Evaluation metrics and cross-process collectives (analysis/metrics.py)."""
        from distlint.analysis.metrics import Metrics

        return Metrics(self)

    @cached_property
    def reach(self) -> Reach:
        """What the module's run reaches, who calls its functions in the run, and whether the
        run refuses several processes (analysis/reach.py)."""
        from distlint.analysis.reach import Reach

        return Reach(self)

    @cached_property
    def logged_losses(self) -> LoggedLosses:
        """Training losses written out by the main process only (analysis/logged.py)."""
        from distlint.analysis.logged import LoggedLosses

        return LoggedLosses(self)

    # ============================================================== what rules ask
    # The facade's questions, each answered by the provider that computes it (rules and the
    # other analysis modules ask the facts; the providers ask each other through the facts).
    # ------------------------------------------------ asked of Processes
    def is_dataloader_configuration(self, node: cst.CSTNode | None) -> bool:
        return self.processes.is_dataloader_configuration(node)

    @property
    def accelerators(self) -> list[cst.Call]:
        return self.processes.accelerators

    @property
    def creates_accelerator(self) -> bool:
        return self.processes.creates_accelerator

    def imports_may_reach(self, callables: _Spellings, path: str | None = None) -> bool:
        return self.processes.imports_may_reach(callables, path)

    @property
    def uses_xla(self) -> bool:
        return self.processes.uses_xla

    @property
    def xla_spmd(self) -> bool:
        return self.processes.xla_spmd

    @property
    def mode(self) -> Mode:
        return self.processes.mode

    @property
    def trains_data_parallel(self) -> bool:
        return self.processes.trains_data_parallel

    def accelerator_keyword(self, call: cst.Call, name: str) -> cst.BaseExpression | None:
        return self.processes.accelerator_keyword(call, name)

    @property
    def split_batches(self) -> bool:
        return self.processes.split_batches

    @property
    def scheduler_stepped_once(self) -> bool:
        return self.processes.scheduler_stepped_once

    @property
    def model_parallel(self) -> bool:
        return self.processes.model_parallel

    @property
    def accumulation_settings(self) -> list[cst.BaseExpression]:
        return self.processes.accumulation_settings

    def is_process_count(self, node: cst.CSTNode, qualname: str | None) -> bool:
        return self.processes.is_process_count(node, qualname)

    def key_reads_process_count(self, key: str) -> bool:
        return self.processes.key_reads_process_count(key)

    def reads_process_count(self, expr: cst.CSTNode, prune: Any = None, depth: int = 10) -> bool:
        return self.processes.reads_process_count(expr, prune, depth)

    def traceable(self, node: cst.CSTNode) -> bool:
        return self.processes.traceable(node)

    def is_untraced_accumulation(self, node: cst.CSTNode) -> bool:
        return self.processes.is_untraced_accumulation(node)

    def is_accelerator(self, expr: cst.CSTNode) -> bool:
        return self.processes.is_accelerator(expr)

    def divided_by_process_count(self, expr: cst.CSTNode, depth: int = 4) -> bool:
        return self.processes.divided_by_process_count(expr, depth)

    @property
    def global_batch_held_constant(self) -> bool:
        return self.processes.global_batch_held_constant

    # ------------------------------------------------ asked of Optimizers
    @property
    def optimizers(self) -> list[Optimizer]:
        return self.optimization.optimizers

    @property
    def schedulers(self) -> list[Scheduler]:
        return self.optimization.schedulers

    def scheduler_lengths(self, sched: Scheduler) -> list[tuple[cst.BaseExpression, str]]:
        return self.optimization.scheduler_lengths(sched)

    # ------------------------------------------------ asked of Preparation
    def is_prepare_call(self, node: cst.CSTNode) -> bool:
        return self.preparation.is_prepare_call(node)

    @property
    def prepare_calls(self) -> list[cst.Call]:
        return self.preparation.prepare_calls

    @property
    def prepared(self) -> Nodes:
        return self.preparation.prepared

    def is_prepared(self, node: cst.CSTNode) -> bool:
        return self.preparation.is_prepared(node)

    @property
    def prepared_texts(self) -> set[str]:
        return self.preparation.prepared_texts

    def text_of(self, node: cst.CSTNode) -> str:
        return self.preparation.text_of(node)

    def accelerator_expr(self, at: cst.CSTNode) -> str | None:
        return self.preparation.accelerator_expr(at)

    def process_count_at(self, at: cst.CSTNode) -> ProcessCount | None:
        return self.preparation.process_count_at(at)

    def fabric_expr(self, at: cst.CSTNode) -> str | None:
        return self.preparation.fabric_expr(at)

    def config_origin(self, expr: cst.CSTNode) -> str | None:
        return self.preparation.config_origin(expr)

    # ------------------------------------------------ asked of Loaders
    @property
    def loaders(self) -> list[cst.Call]:
        return self.data.loaders

    def is_dataloader(self, q: str | None) -> bool:
        return self.data.is_dataloader(q)

    def is_device_loader(self, q: str | None) -> bool:
        return self.data.is_device_loader(q)

    def passes_batches_through(self, func: cst.BaseExpression) -> bool:
        return self.data.passes_batches_through(func)

    def iterator_of(self, call: cst.Call) -> cst.BaseExpression | None:
        return self.data.iterator_of(call)

    def sampler_shards(self, sampler: cst.BaseExpression) -> bool | None:
        return self.data.sampler_shards(sampler)

    def loader_origins(
        self, expr: cst.CSTNode, depth: int = 6, position: int | None = None
    ) -> list[Origin]:
        return self.data.loader_origins(expr, depth, position)

    def data_sharded_by_rank(self, expr: cst.CSTNode) -> bool:
        return self.data.data_sharded_by_rank(expr)

    def is_sharded_by_rank(self, node: cst.CSTNode, qualname: str | None) -> bool:
        return self.data.is_sharded_by_rank(node, qualname)

    # ------------------------------------------------ asked of Models
    @property
    def trains(self) -> bool:
        return self.models.trains

    def builds_model(self, call: cst.Call, q: str | None) -> bool:
        return self.models.builds_model(call, q)

    @property
    def may_build_model(self) -> bool:
        return self.models.may_build

    def on_one_process(self, node: cst.CSTNode) -> bool:
        return self.models.on_one_process(node)

    def is_random_split(self, call: cst.Call) -> bool:
        return self.models.is_random_split(call)

    def is_model_class(self, cls: cst.ClassDef) -> bool:
        return self.models.is_model_class(cls)

    def is_iterable_dataset_class(self, cls: cst.ClassDef) -> bool:
        return self.models.is_iterable_dataset_class(cls)

    # ------------------------------------------------ asked of Summaries
    def summary(self, fn: cst.CSTNode) -> Summary:
        return self.summaries.summary(fn)

    def summary_of(self, name: str) -> Summary | None:
        return self.summaries.summary_of(name)


def _release(facts: Facts) -> None:
    """See :meth:`Facts.release`."""
    for provider in (
        "seeding",
        "loops",
        "accumulation",
        "metrics",
        "processes",
        "optimization",
        "preparation",
        "data",
        "models",
        "summaries",
        "reach",
    ):
        held = facts.__dict__.get(provider)
        if held is not None:
            held.__dict__.clear()
    facts.__dict__.clear()
