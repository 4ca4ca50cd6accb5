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
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Union

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.index import Assignment, Index, string_value, target_key

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


def per_device_places(index: Index, loaders: Sequence[cst.Call]) -> list[Place]:
    """Every place that holds the `batch_size` given to one of ``loaders``."""
    places: list[Place] = []
    pending: list[cst.CSTNode] = []
    for call in loaders:
        arg = index.argument(call, "batch_size", 1)
        if arg is not None:
            pending.append(arg.value)
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
        if isinstance(copied, cst.Name):
            bindings = index.bindings_of(copied)
            if all(b.op == "param" for b in bindings):
                pending.extend(v for v in index.values_of(copied) if v is not None)
            elif len(bindings) == 1 and bindings[0].op == "=":
                pending.extend(v for v in [bindings[0].value] if v is not None)
        else:
            assigns = index.attribute_assignments(copied)
            if len(assigns) == 1 and assigns[0].op == "=" and assigns[0].value is not None:
                pending.append(assigns[0].value)
    # forwards: names and attributes that are plain copies of a per-device place
    changed = True
    while changed:
        changed = False
        for assignment in _all_assignments(index):
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
    return places


def _all_assignments(index: Index) -> Iterator[Assignment]:
    for scope in index.scopes:
        for assigns in scope.bindings.values():
            yield from assigns
    for assigns in index.attr_assignments.values():
        yield from assigns


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
        call = index.parent(parent)
        if not isinstance(call, cst.Call):
            return None
        func = call.func
        # "...{}...".format(value)
        if isinstance(func, cst.Attribute) and func.attr.value == "format":
            text = _literal_text(func.value)
            if text is None:
                return None
            return _format_around(text, call, parent)
        args = list(call.args)
        position = args.index(parent)
        first = _literal_text(args[0].value) if args and args[0].keyword is None else None
        # logger.info("... %d", value)
        if first is not None and position > 0 and _PERCENT_RE.search(first.replace("%%", "")):
            return _percent_around(first, position - 1)
        # print("Total batch size:", value)
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
    for node in index.nodes_of(cst.Name, cst.Attribute, cst.Subscript):
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
            continue  # part of a longer place (`args` in `args.batch_size`)
        if is_target(index, node) or not matches(place_of(index, node), places):
            continue
        if isinstance(node, cst.BaseExpression):
            yield extend_use(index, node)


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
