"""Helpers the training-fact providers share (spellings of distributed setups and seeders,
small questions about parameters, dictionary entries and names visible at a node)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import (
    CANONICAL_PREFIXES,
    Index,
    Op,
    Scope,
    ScopeKind,
    call_keyword,
    string_value,
    target_key,
)
from distlint.analysis.records import (
    Optimizer,
)

if TYPE_CHECKING:
    from distlint.analysis.facts import Facts

_IN_PROGRESS = object()


class Provider:
    """One part of the facts of a module (``facts.<provider>``), computed once per module. It
    asks the other parts through ``facts``, never by importing them."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.index = facts.index
        self.flow = facts.flow
        self.path = facts.path
        self.project = facts.project


class _Spellings(NamedTuple):
    """How the dotted names of some callables can be written: (first, last) part of each name
    and of each alias of it (``CANONICAL_PREFIXES``). A module reaches one of the callables
    only through texts that write both parts (an import, an attribute of one, a re-export),
    in itself or in the project modules it imports. ``folded``: words that count on their own
    whatever their case (`RANK`, `Rank`: what the analysis compares lower-cased); ``shape``:
    the spellings matter only for a definition whose own code (strings blanked; not what it
    calls) it accepts, such as a function that yields (no spellings: the shape decides)."""

    pairs: frozenset[tuple[str, str]]
    words: frozenset[str]  # every part of ``pairs``
    folded: frozenset[str] = frozenset()
    shape: Callable[[str], bool] | None = None

    @classmethod
    def of(cls, names: frozenset[str]) -> _Spellings:
        forms = set(names)
        for alias, to in CANONICAL_PREFIXES.items():
            for name in names:
                if name == to or name.startswith((to + ".", to + "(")):
                    forms.add(alias + name[len(to) :])
        pairs = frozenset((f.split(".")[0], f.rsplit(".", 1)[-1]) for f in forms)
        return cls(pairs, frozenset(word for pair in pairs for word in pair))

    @classmethod
    def any_of(cls, words: set[str]) -> _Spellings:
        """Any one of ``words`` written (each is both parts of its own pair)."""
        return cls(frozenset((w, w) for w in words), frozenset(words))

    def among(self, written: frozenset[str]) -> frozenset[str]:
        """The words of ``written`` (identifiers of a text) that spell a part of a name."""
        found = written & self.words
        folded = self.folded
        if not folded:
            return found
        alone = [w for w in written if w.lower() in folded]
        return found.union(alone) if alone else found

    def written_in(self, words: frozenset[str]) -> bool:
        present = self.words.intersection(words)  # (most texts write none of them)
        if present and any(first in present and last in present for first, last in self.pairs):
            return True
        folded = self.folded
        return bool(folded) and any(w.lower() in folded for w in words)


class _AnyOf(NamedTuple):
    """Needs met by any one of ``options`` (see ``Summaries._may_reach``); ``method``: what is
    asked is that method of the class (its code, not the class's own shape, decides)."""

    options: tuple[_Spellings, ...]
    method: str | None = None


# What makes a module hold an Accelerator (a state, a Fabric) or train data-parallel (`mode`),
# and what seeds a generator (`seeding`).
_DISTRIBUTED = _Spellings.of(
    frozenset(
        {
            K.ACCELERATOR,
            *K.STATE_CLASSES,
            K.FABRIC,
            *K.DDP_WRAPPERS,
            *K.XLA_MULTIPROCESS,
            "deepspeed.initialize",
        }
    )
)
_SEEDERS = _Spellings.of(
    K.FULL_SEEDERS | K.TORCH_SEEDERS | K.PYTHON_SEEDERS | K.NUMPY_SEEDERS | K.XLA_SEEDERS
)
# What a module must write to make a DataLoader (see `Loaders`, `BatchFlow`).
_LOADER_SPELLINGS = _Spellings.of(K.DATALOADERS)
# What a module must write to build an optimizer (see `Optimizers._optimizer`): a library
# optimizer's package, class or factory, the optimizer base class, or an `lr=` keyword (an
# optimizer recognised by its parameters and LR); a config instantiation, by its package and
# its name (`hydra` and `call`: a `call` alone is any method's name).
_OPTIMIZING_WORDS = _Spellings.any_of(
    {p.rstrip(".").rsplit(".", 1)[-1] for p in K.OPTIMIZER_PACKAGES}
    | {q.rsplit(".", 1)[-1] for q in K.OPTIMIZER_CLASSES | K.OPTIMIZER_BASES}
    | {q.rsplit(".", 1)[-1] for q in (*K.OPTIMIZER_FACTORIES, *K.OPTIMIZER_FACTORIES_READING)}
    | {q.rsplit(".", 1)[-1] for q in K.IMPORT_BY_NAME}  # a project's own `instantiate()`
    | {"lr"}
)
_CONFIG_CALLS = _Spellings.of(K.CONFIG_INSTANTIATE)
_OPTIMIZING = _Spellings(
    _OPTIMIZING_WORDS.pairs | _CONFIG_CALLS.pairs, _OPTIMIZING_WORDS.words | _CONFIG_CALLS.words
)


# What a module must write to build a DataLoader (`Loaders.loaders`): its class's name.
_LOADER_SPELLINGS = _Spellings.of(K.DATALOADERS)


def _distributed_sampler(node: cst.CSTNode, q: str | None) -> bool:
    return q is not None and K.DISTRIBUTED_SAMPLER_WORD in q


def _whole_dataset_sampler(node: cst.CSTNode, q: str | None) -> bool:
    return q is not None and q.rstrip("()") in K.WHOLE_DATASET_SAMPLERS


def _is_call(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call)


def _node_in(calls: list[Optimizer]) -> Callable[[cst.CSTNode, str | None], bool]:
    wanted = {id(o.call) for o in calls}
    return lambda node, _q: id(node) in wanted


def _param_reached(
    index: Index, fn: cst.CSTNode, expr: cst.CSTNode
) -> tuple[str, int | None, str] | None:
    """The parameter of ``fn`` a value comes from (name, position), e.g. `lr` or `args`."""
    if not isinstance(fn, cst.FunctionDef):
        return None
    params = list(fn.params.posonly_params) + list(fn.params.params)
    names = [p.name.value for p in params]
    if index.scope(fn).kind is ScopeKind.CLASS and names and names[0] in ("self", "cls"):
        names = names[1:]
    kwonly = [p.name.value for p in fn.params.kwonly_params]
    found: list[tuple[str, str]] = []

    def hit(node: cst.CSTNode, _q: str | None) -> bool:
        key = (
            target_key(node) if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) else None
        )
        if key is None:
            return False
        head = key.split(".", 1)[0].split("[", 1)[0]
        if head in names or head in kwonly:
            base = node
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
            if isinstance(base, cst.Name) and any(
                b.op is Op.PARAM for b in index.bindings_of(base)
            ):
                found.append((head, key[len(head) :]))
                return True
        return False

    path = _access_path(index, expr, set(names) | set(kwonly), 6)
    if path is not None:
        found.append(path)
    else:
        index.reaches(expr, hit, depth=4)
    if not found:
        return None
    name, suffix = found[0]
    return name, (names.index(name) if name in names else None), suffix


def _access_path(
    index: Index, expr: cst.CSTNode, params: set[str], depth: int
) -> tuple[str, str] | None:
    """The parameter and the attribute path a value is read through, composed across local
    copies: `cfg = config.optimizer.params; lr = cfg.learning_rate` gives
    ("config", ".optimizer.params.learning_rate"). None when the value is computed."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        return _name_path(index, expr, params, depth)
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        return _member_path(index, expr, params, depth)
    return None


def _name_path(
    index: Index, expr: cst.Name, params: set[str], depth: int
) -> tuple[str, str] | None:
    """A parameter itself, or a local name bound once to an access path."""
    bindings = index.bindings_of(expr)
    if expr.value in params and any(b.op is Op.PARAM for b in bindings):
        return expr.value, ""
    if len(bindings) != 1 or bindings[0].op is not Op.ASSIGN or bindings[0].value is None:
        return None
    return _access_path(index, bindings[0].value, params, depth - 1)


def _member_path(
    index: Index, expr: cst.Attribute | cst.Subscript, params: set[str], depth: int
) -> tuple[str, str] | None:
    """`base.attr` / `base["key"]`: the base's path, one step longer."""
    whole, base = target_key(expr), target_key(expr.value)
    if whole is None or base is None:
        return None
    inner = _access_path(index, expr.value, params, depth - 1)
    if inner is None and whole.startswith("self."):
        # `self.lr` set once from a constructor parameter (`self.lr = lr`)
        assigns = index.attribute_assignments(expr)
        if len(assigns) == 1 and assigns[0].op is Op.ASSIGN and assigns[0].value is not None:
            return _access_path(index, assigns[0].value, params, depth - 1)
    return None if inner is None else (inner[0], inner[1] + whole[len(base) :])


def _dict_entry(index: Index, value: cst.CSTNode | None, name: str) -> cst.BaseExpression | None:
    if isinstance(value, cst.Dict):
        for el in value.elements:
            if isinstance(el, cst.DictElement) and string_value(el.key) == name:
                return el.value
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "dict"
    ):
        return call_keyword(value, name)
    return None


def _names_batch_or_accumulation(name: str) -> bool:
    lowered = name.lower()
    return "accum" in lowered or ("batch" in lowered and "batches" not in lowered)


def _is_model_base(qualname: str) -> bool:
    return qualname in K.MODEL_BASES or (
        qualname.startswith("transformers.") and qualname.endswith("PreTrainedModel")
    )


def _int_value(node: cst.CSTNode) -> int | None:
    """An integer literal's value (``-1`` included); None for anything else."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _int_value(node.expression)
        return None if inner is None else -inner
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    return None


def _last_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript):
        key = target_key(node)
        if key is not None and key.endswith("]"):
            return key.rsplit("[", 1)[1][:-1]
    return None


def _visible_names(index: Index, at: cst.CSTNode) -> list[str]:
    names: list[str] = []
    scope: Scope | None = index.scope(at)
    first = True
    while scope is not None:
        if scope.kind is not ScopeKind.CLASS or first:
            for name, assigns in scope.bindings.items():
                if first and not any(a.order < index.order(at) for a in assigns):
                    continue
                names.append(name)
        scope = scope.parent
        first = False
    return names
