"""What a module seeds, and what it draws from unseeded generators (``facts.seeding``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _SEEDERS,
)
from distlint.analysis.index import Index, ScopeKind, call_keyword
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
        self.facts = facts
        # What each call does, from the knowledge base alone; a call of a project helper that
        # may seed is left open (None) until a question needs its summary (`_resolved`): a
        # module whose draws no seed could cover never parses the helpers it calls.
        # (call, what it seeds or None, what it draws when it seeds nothing)
        self._calls: list[tuple[cst.Call, Seeds | None, Seeds]] = []
        # an upper bound of `draws`: what the module draws if no helper seeds anything
        self.may_draw = Seeds.NONE
        # what each call of a project helper seeds: asked by every seeding question
        self._helper_kinds: dict[cst.Call, Seeds] = {}
        # the calls that draw from a global generator, unless a helper they call seeds (few)
        self._drawing: list[tuple[cst.Call, Seeds]] = []
        index = facts.index
        for call in index.calls:
            q = index.qualname(call.func)
            kind = self.known_kind(q)
            if kind is Seeds.NONE:
                drawn = self._drawn(call, q)
                self._calls.append((call, None, drawn))
                if drawn is not Seeds.NONE:
                    self._drawing.append((call, drawn))
                    self.may_draw |= drawn
            else:
                self._calls.append((call, kind, Seeds.NONE))

    @cached_property
    def _resolved(self) -> tuple[dict[Seeds, list[cst.Call]], list[cst.Call], Seeds]:
        facts = self.facts
        by_kind: dict[Seeds, list[cst.Call]] = {
            s: [] for s in (Seeds.TORCH, Seeds.PYTHON, Seeds.NUMPY, Seeds.XLA)
        }
        full: list[cst.Call] = []  # helpers that seed everything
        draws = Seeds.NONE
        for call, known, drawn in self._calls:
            kind = known if known is not None else self._helper_kind(call)
            if kind is not Seeds.NONE and facts.on_one_process(call):
                continue
            if kind is Seeds.ALL:
                full.append(call)
            elif kind is not Seeds.NONE:
                for flag in list(by_kind):  # a project helper may seed several generators
                    if kind & flag:  # type: ignore[operator]  # (Flag members: mypy sees Literals)
                        by_kind[flag].append(call)
            else:
                draws |= drawn
        return by_kind, full, draws

    @property
    def by_kind(self) -> dict[Seeds, list[cst.Call]]:
        """The calls that seed each generator (a helper seeding several: under each)."""
        return self._resolved[0]

    @property
    def full(self) -> list[cst.Call]:
        """The calls of helpers that seed everything."""
        return self._resolved[1]

    @cached_property
    def draws(self) -> Seeds:
        """The global generators the module's calls draw from: those of the drawing calls
        that seed nothing (a project helper that seeds is a seeding call, whatever it draws),
        so only the drawing calls' helpers are asked."""
        if "_resolved" in self.__dict__:
            return self._resolved[2]
        draws = Seeds.NONE
        for call, drawn in self._drawing:
            if self._helper_kind(call) is Seeds.NONE:
                draws |= drawn
        return draws

    def seeds(self, flag: Seeds, helpers: bool = True) -> bool:
        """Some call that runs on every process seeds generator ``flag``: ``by_kind[flag]``
        is not empty (``Seeds.ALL``: ``full`` is not). The calls the knowledge base knows are
        asked first, then the project helpers until one does: a question the script's own
        seeding answers summarises no helper. ``helpers=False``: the known calls only (all
        calls once every helper was asked)."""
        if "_resolved" in self.__dict__:
            return bool(self.full if flag is Seeds.ALL else self.by_kind[flag])
        on_one_process = self.facts.on_one_process
        for call, known, _drawn in self._calls:
            if known is not None and _counts(known, flag) and not on_one_process(call):
                return True
        if not helpers:
            return False
        for call, known, _drawn in self._calls:
            if known is None and _counts(self._helper_kind(call), flag):
                if not on_one_process(call):
                    return True
        return False

    def _drawn(self, call: cst.Call, q: str | None) -> Seeds:
        if q is not None:
            return self._draws_of(call, q)
        if self._shuffles_a_dataset(call):
            return Seeds.NUMPY
        return Seeds.NONE

    def _draws_of(self, call: cst.Call, q: str) -> Seeds:
        """The global generators ``call`` (resolved to ``q``) draws from when it runs."""
        if q.startswith("random.") and q.count(".") == 1:
            return Seeds.NONE if q[7:] in K.PYTHON_NON_DRAWING else Seeds.PYTHON
        if q.startswith("numpy.random.") and q.count(".") == 2:
            return Seeds.NONE if q[13:] in K.NUMPY_NON_DRAWING else Seeds.NUMPY
        drawn = _library_draws(q)
        if q.startswith("datasets.") and self._shuffles_a_dataset(call):
            drawn |= Seeds.NUMPY
        if self._draws_on_device(call, q):
            drawn |= Seeds.XLA
        return drawn

    def _shuffles_a_dataset(self, call: cst.Call) -> bool:
        """`ds.shuffle()` / `ds["train"].train_test_split(...)` on a `datasets` dataset without
        `seed=` / `generator=`: it draws its seed from numpy's global generator."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in K.DATASETS_NUMPY_DRAWS:
            return False
        if call_keyword(call, "seed") is not None or call_keyword(call, "generator") is not None:
            return False
        index = self.facts.index
        receivers: list[cst.CSTNode] = [func.value]
        for _ in range(4):  # a split (`raw["train"]`), a name bound to one
            node = receivers[-1]
            if isinstance(node, cst.Subscript):
                receivers.append(node.value)
            elif isinstance(node, cst.Name):
                values = index.values_of(node)
                if len(values) != 1 or values[0] is None:
                    break
                receivers.append(values[0])
            else:
                break
        return any(
            (index.qualname(r) or "").startswith("datasets.")
            for r in receivers
            if isinstance(r, (cst.Name, cst.Attribute, cst.Call))
        )

    @staticmethod
    def _draws_on_device(call: cst.Call, q: str) -> bool:
        """``call`` draws from a device generator (the XLA one in a torch_xla script): a
        dropout, a random factory given a device or shaped like a device tensor, a library
        model whose layers hold dropout."""
        if K.XLA_DRAW_LAYERS.match(q):
            return True
        if q.startswith("torch.") and q.count(".") == 1:
            name = q[6:]
            if name in K.TORCH_RANDOM_LIKE:
                return True
            return name in K.TORCH_RANDOM_FACTORIES and call_keyword(call, "device") is not None
        return q.startswith(K.PRETRAINED_LIBRARIES) and q.rstrip("()").endswith(".from_pretrained")

    def per_rank(self, call: cst.Call) -> bool:
        """The seed given to ``call`` differs by process (`seed + rank`, `process_index`)."""
        arg = Index.argument(call, keyword="seed", position=0)
        return arg is not None and self.facts.models._is_rank(arg.value)

    def kind_of(self, call: cst.Call, q: str | None) -> Seeds:
        kind = self.known_kind(q)
        return self._helper_kind(call) if kind is Seeds.NONE else kind

    @staticmethod
    def known_kind(q: str | None) -> Seeds:
        """What a call of ``q`` seeds, by the knowledge base."""
        return _KNOWN_KINDS.get(q, Seeds.NONE)

    @cached_property
    def seeds_torch(self) -> bool:
        """Some call that runs in order with a function's (or the module's) code seeds torch's
        generator (``kind_of`` is TORCH or ALL: a known seeder, or a project helper that
        seeds). Without one, no order of seeding and model building can matter: `Ordering`'s
        seeding events are such calls. (Calls in class bodies, decorators of methods and
        lambdas are not asked: the order leaves them out, and asking would summarise helpers
        it never needs; nor are they while a known seeder answers.)"""
        torch = (Seeds.TORCH, Seeds.ALL)
        if any(known in torch for _call, known, _drawn in self._calls):
            return True
        index = self.facts.index
        for call, known, _drawn in self._calls:
            if known is None:
                scope = index.scope(call)
                while scope.kind is ScopeKind.COMPREHENSION:
                    scope = scope.parent  # type: ignore[assignment]
                if scope.kind is ScopeKind.FUNCTION or scope.kind is ScopeKind.MODULE:
                    if self._helper_kind(call) in torch:
                        return True
        return False

    def _helper_kind(self, call: cst.Call) -> Seeds:
        found = self._helper_kinds.get(call)
        if found is None:
            found = self._helper_kinds[call] = self._external_kind(call)
        return found

    def _external_kind(self, call: cst.Call) -> Seeds:
        if not self.helpers_may_seed:
            return Seeds.NONE
        external = self.facts.summaries._external_summary(call, _SEEDERS)
        if external is not None:
            return external.seeds  # what a helper of another module seeds (ALL, some, none)
        return Seeds.NONE

    @cached_property
    def helpers_may_seed(self) -> bool:
        if getattr(self.facts.project, "name_may_write", None) is not None:
            return True  # each helper's own text is read instead (`Summaries._may_reach`)
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


def _counts(kind: Seeds, flag: Seeds) -> bool:
    """A call seeding ``kind`` is one of ``by_kind[flag]`` (``Seeds.ALL``: of ``full``)."""
    if flag is Seeds.ALL or kind is Seeds.ALL:
        return kind is flag
    return bool(kind & flag)  # type: ignore[operator]  # (Flag members: mypy sees Literals)


# What a call of each seeding function of the knowledge base seeds (a name in two sets: the
# later one here, as `known_kind` asked them: a full seeder is not also a torch one)
_KNOWN_KINDS: dict[str | None, Seeds] = {
    q: kind
    for names, kind in (
        (K.XLA_SEEDERS, Seeds.XLA),
        (K.NUMPY_SEEDERS, Seeds.NUMPY),
        (K.PYTHON_SEEDERS, Seeds.PYTHON),
        (K.TORCH_SEEDERS, Seeds.TORCH),
        (K.FULL_SEEDERS, Seeds.ALL),
    )
    for q in names
}
_LIBRARY_PREFIXES = tuple(K.LIBRARY_DRAWS)


def _library_draws(q: str) -> Seeds:
    """The global generators a call of a known library (resolved to ``q``) draws from."""
    if not q.startswith(_LIBRARY_PREFIXES):
        return Seeds.NONE  # (most calls: no library's name begins it)
    drawn = Seeds.NONE
    for prefix, kinds in K.LIBRARY_DRAWS.items():
        if q == prefix or q.startswith(prefix + ".") or q.startswith(prefix + "("):
            if "python" in kinds:
                drawn |= Seeds.PYTHON
            if "numpy" in kinds:
                drawn |= Seeds.NUMPY
    return drawn
