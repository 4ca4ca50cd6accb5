"""The per-device batch: where a DataLoader's `batch_size` lives, and what values are called.

A *place* holds the per-device batch: ("name", assignment ids) for a local name, or ("attr", key)
for `args.batch_size`, `self.bs@Trainer`, `config[batch_size]`. The places are found once per
module (backwards from every DataLoader's `batch_size`, through plain copies and helper
arguments; forwards through names copied from them). *Roles* say what a name or a log message
calls a value: GLOBAL (`total_batch_size`, "Global batch size: {}") or SAMPLES (`samples_per_sec`,
"tokens seen").
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property, lru_cache
from typing import Any, NamedTuple, Union

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.common import (
    _LOADER_SPELLINGS,
    Provider,
    _AnyOf,
    _names_batch_or_accumulation,
    _Spellings,
)
from distlint.analysis.index import Assignment, Index, string_value, target_key
from distlint.analysis.records import BatchUse, Param

_WORD_RE = re.compile(r"[a-z]+|[A-Z][a-z]*|\d+")
_PERCENT_RE = re.compile(
    r"%(?:\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]"
)
# "Total train batch size", "global batch", "batch size (effective)": the global word is close to
# the batch word, so "global step 3, batch size" does not count.
_MESSAGE_GLOBAL_BATCH_RE = re.compile(
    r"\b(total|global|effective|observed|overall)\W+(?:\w+\W+)?(batch|bs\b|bsz\b)"
    r"|\b(batch|bs|bsz)\b[\w\s]{0,6}\W+(total|global|effective|observed|overall)\b"
)
_MESSAGE_LOCAL_RE = re.compile(
    r"per[\s_-]*(device|gpu|process|proc|rank|core|replica|worker|tpu)|\blocal\b|\bmicro"
)
_MESSAGE_RATE_RE = re.compile(
    r"^\W*(samples|sample|examples|images|imgs|img|tokens|toks|seqs|sequences)\s*(/|per\b)"
)
_MESSAGE_SEEN_RE = re.compile(
    r"\b(samples|examples|images|tokens|sequences)\b.*\b(seen|processed|consumed)\b|throughput"
)

GLOBAL, SAMPLES = "global", "samples"


def _words(identifier: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(identifier)]


def name_role(identifier: str) -> str | None:
    """GLOBAL for `total_batch_size`, SAMPLES for `samples_per_sec` / `tokens_seen`, else None."""
    words = _words(identifier)
    if any(w in K.BATCH_LOCAL_WORDS for w in words):
        return None
    if any(w in K.BATCH_GLOBAL_WORDS for w in words) and any(w in K.BATCH_WORDS for w in words):
        return GLOBAL
    if (
        any(w in K.BATCH_SAMPLE_WORDS for w in words)
        and "batch" not in words
        and "batches" not in words
    ):
        return SAMPLES
    return None


def message_role(before: str, after: str, multiplied: bool) -> str | None:
    """Role of a value in a log message, from the text around its placeholder."""
    before, after = before.lower(), after.lower()
    if _MESSAGE_LOCAL_RE.search(before) or _MESSAGE_LOCAL_RE.search(after.split("\n")[0][:20]):
        return None
    if after.strip().startswith(("x", "*", "\u00d7", "times")):
        return None  # "{bs} x {world_size} = ...": the factor is shown next to it
    if _MESSAGE_GLOBAL_BATCH_RE.search(before):
        return GLOBAL
    if multiplied and (_MESSAGE_RATE_RE.search(after) or _MESSAGE_SEEN_RE.search(before)):
        return SAMPLES
    return None


Place = tuple[str, Union[str, "frozenset[str]", "frozenset[int]"]]  # a path, or binding ids


class Use(NamedTuple):
    node: cst.BaseExpression  # the per-device batch as written at the use
    expr: cst.BaseExpression  # the whole arithmetic expression it is part of
    others: list[cst.BaseExpression]  # the other operands multiplied/added along the way


def target_role(target: cst.BaseExpression) -> str | None:
    """The role the name of an assignment target gives its value."""
    if isinstance(target, cst.Name):
        return name_role(target.value)
    if isinstance(target, cst.Attribute):
        return name_role(target.attr.value)
    if isinstance(target, cst.Subscript):
        key = target_key(target)
        if key and key.endswith("]"):
            return name_role(key.rsplit("[", 1)[1][:-1])
    return None


def place_of(index: Index, node: cst.CSTNode) -> Place | None:
    if isinstance(node, cst.Name):
        bindings = index.bindings_of(node)
        ids = frozenset(id(b) for b in bindings) if bindings else frozenset({f"free:{node.value}"})
        return ("name", ids)
    if isinstance(node, (cst.Attribute, cst.Subscript)):
        key = target_key(node)
        if key is None:
            return None
        if key.startswith(("self.", "cls.")):
            cls = index.enclosing_class_name(node)
            if cls is not None:
                key = f"{key}@{cls}"
        return ("attr", key)
    return None


def matches(place: Place | None, places: Sequence[Place]) -> bool:
    if place is None:
        return False
    for kind, value in places:
        if kind == place[0] and (value == place[1] if kind == "attr" else value & place[1]):  # type: ignore[operator]
            return True
    return False


def copied_value(index: Index, value: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The place a value is a plain copy of (`x`, `args.bs`, `int(cfg["bs"])`), else None."""
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        return value
    if isinstance(value, cst.Call) and len(value.args) == 1 and is_numeric_wrapper(index, value):
        return copied_value(index, value.args[0].value)
    return None


def is_numeric_wrapper(index: Index, call: cst.Call) -> bool:
    func = call.func
    if (
        isinstance(func, cst.Name)
        and func.value in K.NUMERIC_WRAPPERS
        and not index.bindings_of(func)
    ):
        return True
    return index.qualname(func) in K.ROUNDING_FUNCTIONS


def per_device_places(index: Index, values: Sequence[cst.BaseExpression]) -> list[Place]:
    """Every place that holds one of ``values`` (the `batch_size` given to a DataLoader)."""
    places: list[Place] = []
    pending: list[cst.CSTNode] = list(values)
    seen: set[int] = set()
    # backwards: plain copies the DataLoader's value was taken from, helper-function arguments
    while pending:
        node = pending.pop()
        if id(node) in seen or len(seen) > 200:
            continue
        seen.add(id(node))
        copied = copied_value(index, node)
        if copied is None:
            continue  # a literal or an expression (e.g. global // world_size): nothing to follow
        place = place_of(index, copied)
        if place is None:
            continue
        places.append(place)
        pending.extend(_copy_sources(index, copied))
    _add_plain_copies(index, places)
    return places


def _copy_sources(index: Index, copied: cst.BaseExpression) -> list[cst.CSTNode]:
    """What the place ``copied`` holds a plain copy of: the values a parameter is called with,
    or the value of the one plain assignment of a name or attribute."""
    if isinstance(copied, cst.Name):
        bindings = index.bindings_of(copied)
        if all(b.op == "param" for b in bindings):
            return [v for v in index.values_of(copied) if v is not None]
        if len(bindings) == 1:
            capped = _capped_self(index, bindings[0], copied.value)
            if capped is not None:
                return [capped]
        if len(bindings) == 1 and bindings[0].op == "=":
            return [v for v in [bindings[0].value] if v is not None]
        return []
    assigns = index.attribute_assignments(copied)
    if len(assigns) == 1 and assigns[0].op == "=" and assigns[0].value is not None:
        return [assigns[0].value]
    return []


def _capped_self(index: Index, binding: Assignment, name: str) -> cst.Name | None:
    """``binding`` rebinds ``name`` to itself capped by other values
    (`batch_size = min(batch_size, len(dataset))`): the earlier ``name`` it caps, which the
    value still is wherever the cap does not bite."""
    value = binding.value
    if binding.op != "=" or not isinstance(value, cst.Call):
        return None
    func = value.func
    if (
        not isinstance(func, cst.Name)
        or func.value not in K.CAPPING_BUILTINS
        or index.bindings_of(func)
    ):
        return None
    for arg in value.args:
        if isinstance(arg.value, cst.Name) and arg.value.value == name and not arg.star:
            return arg.value
    return None


def _add_plain_copies(index: Index, places: list[Place]) -> None:
    """Forwards: add to ``places`` the names and attributes that are plain copies of one."""
    changed = True
    while changed:
        changed = False
        for assignment in index.assignments():
            if assignment.op != "=" or assignment.target is None:
                continue
            copied = copied_value(index, assignment.value)
            if copied is None or not matches(place_of(index, copied), places):
                continue
            target = assignment.target
            new: Place | None
            if isinstance(target, cst.Name):
                new = ("name", frozenset({id(assignment)}))
            else:
                new = place_of(index, target)
            if new is not None and not matches(new, places):
                places.append(new)
                changed = True


# ------------------------------------------------------------------------------------------
# Log messages: the text before and after the value's placeholder
# ------------------------------------------------------------------------------------------


def message_context(index: Index, expr: cst.BaseExpression) -> tuple[str, str] | None:
    parent = index.parent(expr)
    if isinstance(parent, cst.FormattedStringExpression):
        fstring = index.parent(parent)
        return _around(_pieces(_outermost_string(index, fstring)), parent)
    # "... %d" % value  /  "... %d %d" % (a, value)
    container = parent
    position = 0
    if isinstance(parent, cst.Element) and isinstance(index.parent(parent), cst.Tuple):
        tup = index.parent(parent)
        assert isinstance(tup, cst.Tuple)
        position = [e.value for e in tup.elements].index(expr)
        container = index.parent(tup)
        expr = tup
    if (
        isinstance(container, cst.BinaryOperation)
        and isinstance(container.operator, cst.Modulo)
        and container.right is expr
    ):
        text = _literal_text(container.left)
        return None if text is None else _percent_around(text, position)
    if isinstance(parent, cst.Arg) and parent.value is expr:
        return _argument_context(index, parent)
    return None


def _argument_context(index: Index, argument: cst.Arg) -> tuple[str, str] | None:
    """The text around ``argument`` in the message of the call it is passed to."""
    call = index.parent(argument)
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    # "...{}...".format(value)
    if isinstance(func, cst.Attribute) and func.attr.value == "format":
        text = _literal_text(func.value)
        if text is None:
            return None
        return _format_around(text, call, argument)
    args = list(call.args)
    position = args.index(argument)
    first = _literal_text(args[0].value) if args and args[0].keyword is None else None
    # logger.info("... %d", value)
    if first is not None and position > 0 and _PERCENT_RE.search(first.replace("%%", "")):
        return _percent_around(first, position - 1)
    return _printed_around(args, position)


def _printed_around(args: list[cst.Arg], position: int) -> tuple[str, str] | None:
    """print("Total batch size:", value): the literal arguments next to ``args[position]``."""
    before = ""
    for arg in reversed(args[:position]):
        text = _literal_text(arg.value) if arg.keyword is None else None
        if text is None:
            break
        before = text + " " + before
    after = ""
    if position + 1 < len(args) and args[position + 1].keyword is None:
        after = _literal_text(args[position + 1].value) or ""
    if before or after:
        return before, after
    return None


def _outermost_string(index: Index, node: cst.CSTNode | None) -> cst.CSTNode | None:
    while isinstance(index.parent(node), cst.ConcatenatedString):  # type: ignore[arg-type]
        node = index.parent(node)  # type: ignore[arg-type]
    return node


def _pieces(node: cst.CSTNode | None) -> list[str | cst.CSTNode]:
    """A string literal as a sequence of literal text and placeholders (f-string expressions)."""
    if isinstance(node, cst.ConcatenatedString):
        return _pieces(node.left) + _pieces(node.right)
    if isinstance(node, cst.FormattedString):
        return [p.value if isinstance(p, cst.FormattedStringText) else p for p in node.parts]
    if isinstance(node, cst.SimpleString):
        text = string_value(node)
        return [text] if text is not None else []
    return []


def _around(pieces: list[str | cst.CSTNode], placeholder: cst.CSTNode) -> tuple[str, str] | None:
    for i, piece in enumerate(pieces):
        if piece is placeholder:
            before, after = "", ""
            for p in reversed(pieces[:i]):
                if not isinstance(p, str):
                    break
                before = p + before
            for p in pieces[i + 1 :]:
                if not isinstance(p, str):
                    break
                after += p
            return before, after
    return None


def _literal_text(node: cst.CSTNode) -> str | None:
    """Text of a string literal; an f-string's placeholders become `{}`."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        pieces = _pieces(node)
        return "".join(p if isinstance(p, str) else "{}" for p in pieces) if pieces else None
    return None


def _percent_around(text: str, position: int) -> tuple[str, str] | None:
    segments = _PERCENT_RE.split(text.replace("%%", "%"))
    if position + 1 >= len(segments):
        return None
    return segments[position], segments[position + 1]


def _format_around(text: str, call: cst.Call, arg: cst.Arg) -> tuple[str, str] | None:
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return None
    positional = [a for a in call.args if a.keyword is None]
    automatic = 0
    for i, (literal, field_name, _spec, _conv) in enumerate(fields):
        if field_name is None:
            continue
        if field_name == "":
            index_ = automatic
            automatic += 1
            hit = arg.keyword is None and positional.index(arg) == index_
        elif field_name.isdigit():
            hit = arg.keyword is None and positional.index(arg) == int(field_name)
        else:
            hit = (
                arg.keyword is not None
                and arg.keyword.value == field_name.split(".")[0].split("[")[0]
            )
        if hit:
            after = fields[i + 1][0] if i + 1 < len(fields) else ""
            return literal, after
    return None


# ------------------------------------------------------------------------------------------
# How the per-device value is used
# ------------------------------------------------------------------------------------------


def uses_of(index: Index, places: Sequence[Place]) -> Iterator[Use]:
    may_be_at = _may_be_at(index, places)
    for node in index.nodes_of(cst.Name, cst.Attribute, cst.Subscript):
        if not may_be_at(node):
            continue
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
            continue  # part of a longer place (`args` in `args.batch_size`)
        if is_target(index, node) or not matches(place_of(index, node), places):
            continue
        if isinstance(node, cst.BaseExpression):
            yield extend_use(index, node)


def _may_be_at(index: Index, places: Sequence[Place]) -> Callable[[cst.CSTNode], bool]:
    """A quick test of what cannot be at one of ``places``, passed over before its bindings
    are looked up: a name not called as a place's is, an attribute or a subscript not written
    in a place's path."""
    names = _place_names(index, places)
    paths = [str(held) for kind, held in places if kind == "attr"]
    subscripts = any("[" in path for path in paths)

    def may_be_at(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name):  # (an exact type: a fast test)
            return names is None or node.value in names
        if isinstance(node, cst.Attribute):
            attr = "." + node.attr.value
            return any(attr in path for path in paths)
        return subscripts

    return may_be_at


def _place_names(index: Index, places: Sequence[Place]) -> set[str] | None:
    """The identifiers a name must have to be at one of ``places``: a name's place holds the
    ids of its bindings (or "free:<name>"), and a binding is listed under its own name in its
    scope. None when a place holds a binding this module's scopes do not list."""
    names: set[str] = set()
    key_of: dict[int, str] | None = None
    for kind, held in places:
        if kind != "name":
            continue
        for item in held:
            if isinstance(item, str):
                names.add(item.removeprefix("free:"))
                continue
            if key_of is None:
                key_of = {
                    id(a): key for s in index.scopes for key, bs in s.bindings.items() for a in bs
                }
            if item not in key_of:
                return None
            names.add(key_of[item])
    return names


def is_target(index: Index, node: cst.CSTNode) -> bool:
    parent = index.parent(node)
    if (
        isinstance(parent, cst.AssignTarget)
        or isinstance(parent, (cst.Param, cst.Arg))
        and getattr(parent, "keyword", None) is node
    ):
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and parent.target is node:
        return True
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node:
        return True
    return isinstance(parent, (cst.Tuple, cst.List)) and is_target(index, parent)


def extend_use(index: Index, node: cst.BaseExpression) -> Use:
    """Grow the use through the arithmetic it takes part in, as a count (not as a divisor)."""
    expr = node
    others: list[cst.BaseExpression] = []
    while True:
        parent = index.parent(expr)
        if isinstance(parent, cst.BinaryOperation):
            op = type(parent.operator).__name__
            if op == "Power" or (
                parent.right is expr and op in ("Divide", "FloorDivide", "Modulo")
            ):
                break
            if op not in ("Multiply", "Divide", "FloorDivide", "Add", "Subtract"):
                break
            others.append(parent.right if parent.left is expr else parent.left)
            expr = parent
            continue
        if isinstance(parent, cst.Arg):
            call = index.parent(parent)
            if (
                isinstance(call, cst.Call)
                and len(call.args) == 1
                and is_numeric_wrapper(index, call)
            ):
                expr = call
                continue
        break
    return Use(node, expr, others)


# ------------------------------------------------------------------------------------------
# The batch through helpers: what functions and classes do with a batch size or a loader's
# batches (summarised for their callers, in this module and in others)
# ------------------------------------------------------------------------------------------


def _as_written(qualname: str) -> str:
    """The dotted name a text reading ``qualname`` writes, up to the word that says what it is:
    `torch.distributed.get_rank()` -> `torch.distributed.get_rank`, and a `.size()` by what
    it is the size of (`torch.distributed.GroupMember.WORLD.size()`: `x.size()` is written
    everywhere)."""
    parts = qualname.replace("()", "").split(".")
    while len(parts) > 2 and parts[-1] in ("size", "WORLD"):
        parts.pop()
    return ".".join(parts)


# What a function's definition (followed into what it calls, across modules) must write for its
# `BatchUse` to hold anything its callers read: a DataLoader it builds (`loader_params`,
# `divides`: `loaders`, derived classes and imported ones are spelled by their base), a rank or
# a process count its slices are taken with (`slices`, `slices_items_of`: what
# `Loaders.is_sharded_by_rank` and `Processes.is_process_count` accept, names compared
# lower-cased as they are there; an environment variable by its key, as every module reads
# `os.environ`), or a batch or accumulation attribute it sets on what it returns (`shares`:
# only those are read, by `shares_held`).
_RANK_OR_COUNT = _Spellings.of(
    frozenset(
        _as_written(q)
        for q in (
            *K.RANK_VALUES,
            *K.PROCESS_COUNT,
            *K.DEVICE_COUNTS,
            K.DEVICE_MESH,
            *K.DATASET_SHARDERS,
        )
        if not q.endswith("]")
    )
)
_ENVIRONMENT = frozenset(
    {
        *(
            ("environ", q[:-1].rpartition("[")[2])
            for q in K.RANK_VALUES | K.PROCESS_COUNT
            if q.endswith("]")
        ),
        *((_as_written(r).rsplit(".", 1)[-1], K.ENV_WORLD_SIZE) for r in K.ENV_READERS),
    }
)


# The shapes below are asked of the same helpers' code at every lint of the scripts calling
# them (the language server re-lints at each pause in typing): pure functions of the text,
# memoised.
@lru_cache(maxsize=32)
def _may_slice(code: str) -> bool:
    """A definition that may give per-rank slices (see `BatchFlow._slicing`): it yields (an
    iterator), or returns a subscript of a name, or binds a name to one (`part = batch[...]`;
    `return part`); a class only by yielding (from `__iter__`)."""
    if "yield" in code:
        return True
    return _CLASS.match(code) is None and _SUBSCRIPT_OF_NAME.search(code) is not None


_SUBSCRIPT_OF_NAME = re.compile(r"(?:\breturn[ \t(]+|=[ \t(]*)[A-Za-z_]\w*\s*\[")
_CLASS = re.compile(r"\s*(?:@[^\n]*\n\s*)*class\b")


@lru_cache(maxsize=32)
def _may_share(code: str) -> bool:
    """A definition that may set a batch or accumulation attribute to a share."""
    return "/" in code and _BATCHY.search(code) is not None


_BATCHY = re.compile(r"batch|accum", re.I)  # a superset of `_names_batch_or_accumulation`
_BATCH_USE = _AnyOf(
    (
        _LOADER_SPELLINGS,
        _Spellings(
            _RANK_OR_COUNT.pairs | _ENVIRONMENT,
            _RANK_OR_COUNT.words | {w for pair in _ENVIRONMENT for w in pair},
            frozenset(
                {
                    *K.RANK_NAMES,
                    *K.PROCESS_COUNT_NAMES,
                    *(f"get_{n}" for n in K.PROCESS_COUNT_NAMES),
                    *K.PROCESS_COUNT_ATTRIBUTES,
                    *K.SHARD_METHODS,
                }
            ),
            shape=_may_slice,
        ),
        _Spellings(frozenset(), frozenset(), shape=_may_share),
    )
)


class BatchFlow(Provider):
    """Where the per-device batch goes through calls, and where a global batch is held
    constant by a helper: a loader builder that divides the batch it is given by the world
    size, an iterator that keeps each rank's slice of every global batch, an argument helper
    that sets `args.batch_size` to a world-size share. A provider of the facts
    (``facts.data.batch``), computed once per module."""

    # -------------------------------------------------------------- summaries, for callers
    def use_of(self, fn: cst.CSTNode) -> BatchUse:
        """What ``fn`` (a function or class of this module) does with batches."""
        index = self.index
        if not isinstance(fn, (cst.FunctionDef, cst.ClassDef)):
            return BatchUse()
        items_of, slices = self._slicing(fn)
        if isinstance(fn, cst.ClassDef):
            return BatchUse(slices_items_of=items_of)
        loaders = [c for c in self.facts.data.loaders if index.is_inside(c, fn)]
        given = [a.value for c in loaders for a in [Index.argument(c, "batch_size", 1)] if a]
        params: list[Param] = []
        for place in per_device_places(index, given) if given else ():
            if place[0] != "name":
                continue
            for b in self._param_bindings(fn):
                if id(b) in place[1] and b.key not in [p[0] for p in params]:
                    params.append(_as_param(index, fn, b.key))
        return BatchUse(
            loader_params=tuple(params),
            divides=self._divides_inside(fn, loaders),
            slices_items_of=items_of,
            slices=slices,
            shares=self._returned_shares(fn),
        )

    def _param_bindings(self, fn: cst.FunctionDef) -> list[Assignment]:
        scope = self.index.scope(fn.body)
        return [b for assigns in scope.bindings.values() for b in assigns if b.op == "param"]

    def _divides_inside(self, fn: cst.FunctionDef, loaders: Sequence[cst.Call]) -> bool:
        """A DataLoader built in ``fn`` (or by a function it calls) gets a world-size share of
        its batch."""
        processes = self.facts.processes
        for call in loaders:
            arg = Index.argument(call, "batch_size", 1)
            if arg is not None and processes.divided_by_process_count(arg.value):
                return True
        index = self.index
        if not self.facts.data.loaders:
            return False
        # through the loader builders of this module (`build_batch_data_loader(...)`)
        return any(
            callee is not None and callee is not fn and self._local_use(callee).divides
            for call in index.calls_inside(fn)
            for callee in [index.local_function(call.func)]
        )

    def _returned_shares(
        self, fn: cst.FunctionDef
    ) -> tuple[tuple[str, bool, tuple[str, ...]], ...]:
        """`args.batch_size = args.global_batch_size // (args.devices * args.num_nodes)` on
        the `args` that ``fn`` returns."""
        index = self.index
        returned = {
            r.value.value for r in index.returns.get(fn, ()) if isinstance(r.value, cst.Name)
        }
        out = []
        for key, assigns in index.attr_assignments.items():
            head, _, attr = key.partition(".")
            if head not in returned or not attr.isidentifier():
                continue
            for a in assigns:
                if a.op == "=" and a.value is not None and index.is_inside(a.node, fn):
                    share = self._share(a.value, head)
                    if share is not None:
                        out.append((attr, *share))
        return tuple(out)

    def _share(self, value: cst.BaseExpression, head: str) -> tuple[bool, tuple[str, ...]] | None:
        """For `x // divisor` (or `int(x / divisor)`): whether the divisor is the process count,
        and the attribute paths of ``head`` it reads (".devices"); None for anything else."""
        while isinstance(value, cst.Call) and len(value.args) == 1:
            value = value.args[0].value  # int(...), math.ceil(...)
        if not isinstance(value, cst.BinaryOperation) or not isinstance(
            value.operator, (cst.Divide, cst.FloorDivide)
        ):
            return None
        divisors = tuple(
            k[len(head) :]
            for n in [value.right, *_descendants(self.index, value.right)]
            if isinstance(n, cst.Attribute)
            for k in [target_key(n)]
            if k is not None and k.startswith(head + ".")
        )
        counted = self.facts.processes.reads_process_count(value.right)
        return (counted, divisors) if counted or divisors else None

    # -------------------------------------------------------------- per-rank slices
    def _slicing(
        self, fn: cst.FunctionDef | cst.ClassDef
    ) -> tuple[tuple[Param, ...], tuple[Param, ...]]:
        """(parameters whose items ``fn`` yields as per-rank slices, parameters it returns a
        per-rank slice of). A class answers for its constructor's parameters."""
        init = fn if isinstance(fn, cst.FunctionDef) else _method(fn, "__init__")
        if init is None:
            return (), ()
        param_ids = {id(b): b.key for b in self._param_bindings(init)}
        if not param_ids:
            return (), ()
        items_of = self._iterated_slices(fn, init, param_ids)
        slices = self._returned_slices(fn, param_ids) if isinstance(fn, cst.FunctionDef) else ()
        return items_of, slices

    def _iterated_slices(
        self, fn: cst.CSTNode, init: cst.FunctionDef, param_ids: dict[int, str]
    ) -> tuple[Param, ...]:
        """An iterator: the parameters it loops over, yielding each item's per-rank slice."""
        index = self.index
        if "yield" not in index.source or not any(
            index.is_inside(y, fn) for y in index.nodes_of(cst.Yield)
        ):
            return ()
        loops = [
            n
            for n in index.nodes_of(cst.For, cst.CompFor)
            if isinstance(n, (cst.For, cst.CompFor)) and index.is_inside(n, fn)
        ]
        items_of: list[Param] = []
        for loop in loops:
            source = self._param_source(loop.iter, param_ids)
            if source is None or _as_param(index, init, source) in items_of:
                continue
            if self._yields_rank_slice(fn, self._derived_loops(loop, loops)):
                items_of.append(_as_param(index, init, source))
        return tuple(items_of)

    def _returned_slices(self, fn: cst.FunctionDef, param_ids: dict[int, str]) -> tuple[Param, ...]:
        """The parameters ``fn`` returns a per-rank slice of (`return batch[rank::world]`)."""
        index = self.index
        slices: list[Param] = []
        for ret in index.returns.get(fn, ()):
            value = ret.value
            if isinstance(value, cst.Name):  # `part = batch[...]; return part`
                bound = index.bindings_of(value)
                value = bound[0].value if len(bound) == 1 else None
            if not isinstance(value, cst.Subscript) or not isinstance(value.value, cst.Name):
                continue
            for b in index.bindings_of(value.value):
                if id(b) in param_ids and self._is_rank_slice_of(value, lambda n: True):
                    slices.append(_as_param(index, fn, b.key))
        return tuple(dict.fromkeys(slices))

    def _param_source(self, expr: cst.CSTNode, param_ids: dict[int, str]) -> str | None:
        """The parameter (of the function, or of the class's constructor) ``expr`` iterates."""
        found: list[str] = []

        def is_param(node: cst.CSTNode, _q: str | None) -> bool:
            if isinstance(node, cst.Name):
                for b in self.index.bindings_of(node):
                    if id(b) in param_ids:
                        found.append(param_ids[id(b)])
                        return True
            return False

        target = expr
        if (
            isinstance(expr, cst.Call)
            and expr.args
            and self.facts.data.passes_batches_through(expr.func)
        ):
            target = expr.args[0].value  # enumerate(loader), tqdm(loader)
        self.flow.reaches(target, is_param, depth=3)
        return found[0] if found else None

    def _derived_loops(self, loop: cst.CSTNode, loops: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
        """``loop`` and the loops and comprehensions over what it binds
        (`{k: v[...] for k, v in batch.items()}`)."""
        derived = [loop]
        changed = True
        while changed:
            changed = False
            for other in loops:
                if other in derived:
                    continue
                assert isinstance(other, (cst.For, cst.CompFor))
                if any(self._bound_by(n, derived) for n in _names_in(self.index, other.iter)):
                    derived.append(other)
                    changed = True
        return derived

    def _bound_by(self, name: cst.Name, loops: list[cst.CSTNode]) -> bool:
        """``name`` is a target of one of ``loops`` (`batch` in `for batch in loader`, `v` in
        `for k, v in batch.items()`)."""
        bindings = self.index.bindings_of(name)
        if bindings:
            return any(b.op in ("for", "unpack") and b.node in loops for b in bindings)
        # a comprehension's element reads its own targets
        for loop in loops:
            owner = self.index.parent(loop)
            if isinstance(loop, cst.CompFor) and owner and self.index.is_inside(name, owner):
                if any(n.value == name.value for n in _names_in(self.index, loop.target)):
                    return True
        return False

    def _yields_rank_slice(self, fn: cst.CSTNode, derived: list[cst.CSTNode]) -> bool:
        index = self.index
        for node in index.nodes_of(cst.Yield):
            assert isinstance(node, cst.Yield)
            if node.value is None or not index.is_inside(node, fn):
                continue
            if self._is_rank_slice_of(node.value, lambda n: self._bound_by(n, derived)):
                return True
        return False

    def _is_rank_slice_of(self, expr: cst.CSTNode, binds: Any) -> bool:
        """A value flowing into ``expr`` is a per-rank slice of a name ``binds`` accepts
        (`batch[rank::world_size]`, `batch.chunk(world_size)[rank]`, `slice(batch, rank, ws)`
        of a helper that returns a per-rank slice)."""

        def of_name(node: cst.CSTNode) -> bool:
            return isinstance(node, cst.Name) and binds(node)

        def rank_slice(node: cst.CSTNode, _q: str | None) -> bool:
            if isinstance(node, cst.Subscript):
                base = node.value
                if isinstance(base, cst.Call):  # batch.chunk(world_size)[rank]
                    func = base.func
                    parts = [a.value for a in base.args]
                    if isinstance(func, cst.Attribute):
                        parts.append(func.value)
                    if not any(of_name(p) for p in parts):
                        return False
                elif not of_name(base):
                    return False
                return any(self.facts.data.data_sharded_by_rank(c) for c in _slice_parts(node))
            if isinstance(node, cst.Call) and any(of_name(a.value) for a in node.args):
                use = self.callee_use(node)
                if use is not None and use.slices:
                    return any(
                        of_name(arg.value)
                        for name, position in use.slices
                        for arg in [Index.argument(node, name, position)]
                        if arg is not None
                    )
            return False

        return self.flow.reaches(expr, rank_slice, depth=4)

    # -------------------------------------------------------------- this module's calls
    def callee_use(self, call: cst.Call) -> BatchUse | None:
        """What the function or class ``call`` calls does with batches (this module or another
        of the project)."""
        index = self.index
        func = call.func
        if isinstance(func, cst.Name):
            for b in index.bindings_of(func):
                if b.op in ("def", "class") and isinstance(b.node, (cst.FunctionDef, cst.ClassDef)):
                    return self._local_use(b.node)
        fn = index.local_function(func)
        if fn is not None:
            return self._local_use(fn)
        # a helper of another module is parsed only when its text can spell what a BatchUse holds
        summary = self.facts.summaries._external_summary(call, _BATCH_USE)
        return summary.batch if summary is not None else None

    def _local_use(self, fn: cst.CSTNode) -> BatchUse:
        """`use_of` for a function or class of this module, once (not its whole summary)."""
        memo = self.__dict__.setdefault("_uses", {})
        if fn not in memo:
            memo[fn] = BatchUse()  # a cycle: nothing known
            memo[fn] = self.use_of(fn)
        found: BatchUse = memo[fn]
        return found

    @cached_property
    def _calls_with_use(self) -> list[tuple[cst.Call, BatchUse]]:
        out = []
        for call in self.index.calls:
            if not call.args and not _assigned_names(self.index, call):
                continue  # gives nothing, keeps nothing
            if self.facts.data.is_dataloader(self.index.qualname(call.func)):
                continue
            use = self.callee_use(call)
            if use is not None and use != BatchUse():
                out.append((call, use))
        return out

    @cached_property
    def sliced_loaders(self) -> list[cst.Call]:
        """DataLoaders of this module whose batches a helper slices per rank: their batch is
        the global batch, each rank keeps its share."""
        loaders = self.facts.data.loaders
        if not loaders:
            return []
        found: list[cst.Call] = []
        for call, use in self._calls_with_use:
            for name, position in use.slices_items_of:
                arg = Index.argument(call, name, position)
                if arg is None:
                    continue
                for loader in loaders:
                    if loader not in found and self.flow.reaches(
                        arg.value, _node_is(loader), depth=6
                    ):
                        found.append(loader)
        return found

    @cached_property
    def per_device_values(self) -> list[cst.BaseExpression]:
        """The values that become a per-device batch: the `batch_size` of this module's
        DataLoaders (not those whose batches are sliced per rank) and the arguments a
        loader helper (of this module or another) gives its DataLoader as `batch_size`."""
        out: list[cst.BaseExpression] = []
        sliced = self.sliced_loaders
        for loader in self.facts.data.loaders:
            if loader in sliced:
                continue
            arg = Index.argument(loader, "batch_size", 1)
            if arg is not None:
                out.append(arg.value)
        for call, use in self._calls_with_use:
            if self.index.local_function(call.func) is not None:
                continue  # followed by per_device_places through the parameter
            for name, position in use.loader_params:
                arg = Index.argument(call, name, position)
                if arg is not None:
                    out.append(arg.value)
        return out

    @cached_property
    def held_constant_by_helpers(self) -> bool:
        """A helper holds the global batch constant for this module: a loader builder divides
        the batch it is given by the world size, or an iterator slices each batch of this
        module's loader per rank, or the caller divides what it gives a loader builder."""
        if self.sliced_loaders:
            return True
        processes = self.facts.processes
        for call, use in self._calls_with_use:
            if use.divides:
                return True
            for name, position in use.loader_params:
                arg = Index.argument(call, name, position)
                if arg is not None and processes.divided_by_process_count(arg.value):
                    return True
        return False

    def shares_held(self, launch_places: frozenset[Any]) -> bool:
        """An argument helper returns an object whose batch attribute it set to a share of the
        process count, or of what this module gives its launcher (`Fabric(devices=args.devices)`)."""
        for call, use in self._calls_with_use:
            for attr, counted, divisors in use.shares:
                if not _names_batch_or_accumulation(attr):
                    continue
                if counted:
                    return True
                for name in _assigned_names(self.index, call):
                    if any(f"{name}{d}" in launch_places for d in divisors):
                        return True
        return False


def _node_is(wanted: cst.CSTNode) -> Any:
    return lambda node, _q: node is wanted


def _as_param(index: Index, fn: cst.FunctionDef, name: str) -> Param:
    params = [p.name.value for p in [*fn.params.posonly_params, *fn.params.params]]
    if index.scope(fn).kind == "class" and params and params[0] in ("self", "cls"):
        params = params[1:]
    return (name, params.index(name) if name in params else None)


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for st in cls.body.body:
        if isinstance(st, cst.FunctionDef) and st.name.value == name:
            return st
    return None


def _slice_parts(node: cst.Subscript) -> Iterator[cst.BaseExpression]:
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            yield part.value
        elif isinstance(part, cst.Slice):
            yield from (p for p in (part.lower, part.upper, part.step) if p is not None)


def _descendants(index: Index, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in index.children(node):
        yield child
        yield from _descendants(index, child)


def _names_in(index: Index, node: cst.CSTNode) -> Iterator[cst.Name]:
    for n in [node, *_descendants(index, node)]:
        if isinstance(n, cst.Name):
            yield n


def _assigned_names(index: Index, call: cst.Call) -> list[str]:
    """The names the result of ``call`` is assigned to (`args = parse_args()`)."""
    parent = index.parent(call)
    if isinstance(parent, cst.Assign) and parent.value is call:
        return [t.target.value for t in parent.targets if isinstance(t.target, cst.Name)]
    if isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and isinstance(parent.target, cst.Name):
        return [parent.target.value]
    return []
