"""What a module seeds, and what it draws from unseeded generators (``facts.seeding``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _SEEDERS,
)
from distlint.analysis.records import (
    Seeds,
)

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts


class SeedingFacts:
    """What the module seeds, and what it draws from unseeded generators. A seeding call that
    runs on one process only (``Facts.on_one_process``: a generator made on the main process to
    sample images) does not seed the run."""

    def __init__(self, facts: Facts) -> None:
        index = facts.index
        self.facts = facts
        self.by_kind: dict[Seeds, list[cst.Call]] = {
            s: [] for s in (Seeds.TORCH, Seeds.PYTHON, Seeds.NUMPY, Seeds.XLA)
        }
        self.full: list[cst.Call] = []  # helpers that seed everything
        self.draws = Seeds.NONE
        for call in index.calls:
            q = index.qualname(call.func)
            kind = self.kind_of(call, q)
            if kind is not Seeds.NONE and facts.on_one_process(call):
                continue
            if kind is Seeds.ALL:
                self.full.append(call)
            elif kind is not Seeds.NONE:
                for flag in list(self.by_kind):  # a project helper may seed several generators
                    if kind & flag:  # type: ignore[operator]  # (Flag members: mypy sees Literals)
                        self.by_kind[flag].append(call)
            elif q is not None:
                if q.startswith("random.") and q.count(".") == 1:
                    if q[7:] not in K.PYTHON_NON_DRAWING:
                        self.draws |= Seeds.PYTHON
                elif q.startswith("numpy.random.") and q.count(".") == 2:
                    if q[13:] not in K.NUMPY_NON_DRAWING:
                        self.draws |= Seeds.NUMPY

    def kind_of(self, call: cst.Call, q: str | None) -> Seeds:
        if q in K.FULL_SEEDERS:
            return Seeds.ALL
        if q in K.TORCH_SEEDERS:
            return Seeds.TORCH
        if q in K.PYTHON_SEEDERS:
            return Seeds.PYTHON
        if q in K.NUMPY_SEEDERS:
            return Seeds.NUMPY
        if q in K.XLA_SEEDERS:
            return Seeds.XLA
        if not self.helpers_may_seed:
            return Seeds.NONE
        external = self.facts.summaries._external_summary(call)
        if external is not None:
            return external.seeds  # what a helper of another module seeds (ALL, some, none)
        return Seeds.NONE

    @cached_property
    def helpers_may_seed(self) -> bool:
        return self.facts.imports_may_reach(_SEEDERS)

    def seeds_in(self, fn: cst.CSTNode) -> Seeds:
        index = self.facts.index
        seeds = Seeds.NONE
        if self.full and any(index.is_inside(c, fn) for c in self.full):
            return Seeds.ALL
        for kind, calls in self.by_kind.items():
            if any(index.is_inside(c, fn) for c in calls):
                seeds |= kind
        return seeds


# ------------------------------------------------------------------ helpers
