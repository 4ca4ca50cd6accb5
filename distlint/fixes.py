"""Fix plans, and how they become text edits.

A rule describes its fix as a plan over the CST (:class:`FixPlan`, importable as ``Fix``): node
replacements (keyed by node identity), statements to insert before an anchor statement, and
imports it needs. The engine turns each plan into text edits ONCE, in the pass that computes
positions (:func:`plan_edits`): every statement the plan touches is regenerated alone, with the
indentation in effect there, and replaces that statement's span of the original text; an
inserted statement or an added import is one insertion edit. Before an edit is made, the text
it replaces is checked against the code the plan meant to change (:class:`TargetMismatch`).

Fixing a text (:func:`fixed_point`) chooses the findings' compatible fixes, applies their
edits to the text (:mod:`distlint.edits`: pure text, which the cache and the language server
use without LibCST), re-parses the result (:func:`gate`: a fix whose result does not parse is
dropped), lints it again and repeats to a fixed point. Writing a file atomically, with its
on-disk state re-checked just before the rename, lives here too.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, TypeVar, Union, cast

import libcst as cst

from distlint._libcst_compat import CodegenState
from distlint.edits import LineIndex, OutsideEdits, apply_fixes, choose, fixes_to_apply
from distlint.model import Applicability, Edit, FileError, Finding
from distlint.model import Fix as TextFix

if TYPE_CHECKING:  # pragma: no cover
    from distlint.analysis import Index
    from distlint.positions import SourceMap, Span

Replacement = Union[cst.CSTNode, cst.RemovalSentinel, "cst.FlattenSentinel[cst.CSTNode]"]


class ImportSpec(NamedTuple):
    module: str
    name: str | None = None  # None: `import module`
    asname: str | None = None


class FixPlan:
    """One finding's fix, as a rule describes it. ``applicability`` None means the rule's
    FIX_SAFETY; ``isolation``: fixes of one group never apply in the same round."""

    __slots__ = ("replace", "insert_before", "imports", "applicability", "title", "isolation")

    def __init__(
        self,
        replace: dict[cst.CSTNode, Replacement] | None = None,
        insert_before: dict[cst.CSTNode, list[cst.BaseStatement]] | None = None,
        imports: list[ImportSpec] | None = None,
        applicability: Applicability | None = None,
        title: str = "",
        isolation: str | None = None,
    ) -> None:
        self.replace: dict[cst.CSTNode, Replacement] = {} if replace is None else replace
        self.insert_before: dict[cst.CSTNode, list[cst.BaseStatement]] = (
            {} if insert_before is None else insert_before
        )
        self.imports: list[ImportSpec] = [] if imports is None else imports
        self.applicability = applicability
        self.title = title
        self.isolation = isolation


def import_name(
    index: Index, qualname: str, at: cst.CSTNode | None = None
) -> tuple[str, ImportSpec | None]:
    """How to refer to ``qualname`` at ``at``: reuse an existing binding, else import it.

    Returns the expression text to use and the import to add (None when already bound).
    ``accelerate.utils.set_seed`` -> (``set_seed``, ``from accelerate.utils import set_seed``),
    or (``set_seed``, None) when the file already imports it, or ``accelerate_set_seed`` when the
    file binds ``set_seed`` to something else.
    """
    existing = index.binding_for(qualname, at)
    if existing is not None:
        return existing, None
    module, _, name = qualname.rpartition(".")
    if not index.is_bound(name, at) and name not in _module_level_names(index):
        return name, ImportSpec(module, name)
    alias = f"{module.split('.')[0]}_{name}"
    return alias, ImportSpec(module, name, alias)


def _module_level_names(index: Index) -> set[str]:
    names: set[str] = set()
    for scope in index.scopes:
        names.update(scope.bindings)
    return names


class _ApplyTransformer(cst.CSTTransformer):
    def __init__(
        self,
        replace: dict[cst.CSTNode, Replacement],
        inserts: dict[cst.CSTNode, list[cst.BaseStatement]],
    ):
        super().__init__()
        self.replace = replace
        self.inserts = inserts

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        result = self.replace.get(original_node, updated_node)
        inserted = self.inserts.get(original_node)
        if inserted:
            if isinstance(result, cst.RemovalSentinel):
                return cst.FlattenSentinel(inserted)
            if isinstance(result, cst.FlattenSentinel):
                return cst.FlattenSentinel([*inserted, *result.nodes])
            return cst.FlattenSentinel([*inserted, result])
        return result


# ------------------------------------------------------------------------------------------
# Plans -> edits
# ------------------------------------------------------------------------------------------


class _Layout:
    """What :func:`plan_edits` needs from the module: the statements each plan touches."""

    def __init__(
        self,
        module: cst.Module,
        index: Index,
        plans: Sequence[FixPlan],
        source: SourceMap | None = None,
    ) -> None:
        self.module = module
        self.index = index
        self.source = source
        # each plan's entries are keyed by the plan itself (its id: the list keeps it alive)
        self.plans = list(plans)
        self.tops: dict[int, tuple[list[cst.CSTNode], list[cst.CSTNode]] | None] = {}
        # per plan, per top statement: the replaced nodes whose own span is rewritten (None:
        # the statement is regenerated as a whole)
        self.pieces: dict[int, dict[cst.CSTNode, list[cst.CSTNode] | None]] = {}
        self.spans_wanted: set[cst.CSTNode] = set()
        self.imports_block: tuple[int, int] | None = None  # (first, end) of module.body
        for plan in self.plans:
            if id(plan) not in self.tops:
                self.tops[id(plan)] = self._tops(plan)
        if any(plan.imports for plan in plans):
            first, end = _import_block(module)
            self.imports_block = (first, end)
            body = module.body
            self.spans_wanted.update(body[: min(end + 1, len(body))])

    def _tops(self, plan: FixPlan) -> tuple[list[cst.CSTNode], list[cst.CSTNode]] | None:
        """(statements to regenerate, anchors to insert before), or None: no statement known."""
        index = self.index
        touched: list[cst.CSTNode] = []
        for node in plan.replace:
            stmt = index.statement(node)
            if stmt is None:
                self.pieces[id(plan)] = {}
                return None
            if stmt not in touched:
                touched.append(stmt)
        top_set = set(touched)
        tops = [s for s in touched if not any(a in top_set for a in index.ancestors(s))]
        top_set = set(tops)
        anchors = []
        inner_anchors: set[cst.CSTNode] = set()  # anchors regenerated with their statement
        for anchor in plan.insert_before:
            if anchor in top_set:
                inner_anchors.add(anchor)
                continue
            top_of = next((a for a in index.ancestors(anchor) if a in top_set), None)
            if top_of is not None:
                inner_anchors.add(top_of)
                continue  # inserted by regenerating the statement that holds it
            if index.statement(anchor) is not anchor:
                self.pieces[id(plan)] = {}
                return None
            anchors.append(anchor)
        self.pieces[id(plan)] = self._pieces(plan, tops, inner_anchors)
        self.spans_wanted.update(tops)
        self.spans_wanted.update(anchors)
        return tops, anchors

    def _pieces(
        self, plan: FixPlan, tops: list[cst.CSTNode], inner_anchors: set[cst.CSTNode]
    ) -> dict[cst.CSTNode, list[cst.CSTNode] | None]:
        """For each top statement, the outermost replaced nodes in it, when each can be
        rewritten on its own span (its code does not depend on its parent: an expression or a
        whole statement, replaced by a node, not removed or flattened); None: regenerate the
        statement. Both give the same text; rewriting pieces skips visiting and generating
        everything else in the statement."""
        found: dict[cst.CSTNode, list[cst.CSTNode] | None] = {top: [] for top in tops}
        for holder in inner_anchors:
            found[holder] = None
        for node, new in plan.replace.items():
            top = self._top_of_replaced(plan, node, found)
            if top is None:
                continue
            pieces = found[top]
            if pieces is None:
                continue
            if node is not top and not (
                isinstance(new, cst.CSTNode) and _context_free(node) and _context_free(new)
            ):
                found[top] = None
                continue
            pieces.append(node)
        for top, pieces in found.items():
            if pieces:
                self.spans_wanted.update(pieces)
        return found

    def _top_of_replaced(
        self, plan: FixPlan, node: cst.CSTNode, found: Mapping[cst.CSTNode, object]
    ) -> cst.CSTNode | None:
        """The statement of ``found`` holding ``node``, which ``plan`` replaces; None when it
        has none, or an ancestor of ``node`` below it is replaced too (the ancestor wins, as
        the transformer does)."""
        if node in found:
            return node
        nested = False
        for anc in self.index.ancestors(node):
            if anc in plan.replace:
                nested = True
            if anc in found:
                return None if nested else anc
        return None


_CONTEXT_FREE: dict[type, bool] = {}


def _context_free(node: cst.CSTNode) -> bool:
    """Does ``node`` generate the same code wherever it stands (its ``_codegen_impl`` takes no
    argument from its parent, such as a default comma or semicolon)?"""
    tp = type(node)
    known = _CONTEXT_FREE.get(tp)
    if known is None:
        import inspect

        params = inspect.signature(tp._codegen_impl).parameters
        known = list(params) == ["self", "state"] and (
            isinstance(node, cst.BaseExpression)
            or isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        )
        _CONTEXT_FREE[tp] = known
    return known


def prepare(
    module: cst.Module, index: Index, plans: Sequence[FixPlan], source: SourceMap | None = None
) -> _Layout:
    return _Layout(module, index, plans, source)


class TargetMismatch(Exception):
    """An edit's span of the text does not hold the code of the node the plan meant to change
    there: the fix is dropped (and reported), never applied. ``line``: where the span starts."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _check_target(layout: _Layout, lines: LineIndex, span: Span, node: cst.CSTNode) -> None:
    """Raise :class:`TargetMismatch` unless ``span`` of the text holds the code of ``node``
    (what LibCST read there: the text less the odd indentation it does not keep)."""
    start = lines.offset(span[0], span[1])
    end = lines.offset(span[2], span[3])
    source = layout.source
    seen = source.parsed_slice(start, end) if source is not None else lines.text[start:end]
    module = layout.module
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(span[4]),
    )
    node._codegen(state)
    code = "".join(state.tokens)
    if seen == code:
        return
    if (
        end == len(lines.text)
        and code.startswith(seen)
        and code[len(seen) :] in ("\n", "\r\n", "\r")
    ):
        return  # the last statement of a file without a final newline
    raise TargetMismatch(span[0])


def plan_edits(
    layout: _Layout, spans: dict[cst.CSTNode, Span], lines: LineIndex, the_plan: FixPlan
) -> tuple[Edit, ...] | None:
    """The text edits of ``the_plan`` (one of the layout's); None when they cannot be computed (the
    fix is then not offered)."""
    module = layout.module
    tops = layout.tops[id(the_plan)]
    edits: list[Edit] = []
    if tops is None:
        return _whole_module(module, lines, the_plan)
    statements, anchors = tops
    transformer = _ApplyTransformer(the_plan.replace, the_plan.insert_before)
    pieces = layout.pieces[id(the_plan)]
    for stmt in statements:
        span = spans.get(stmt)
        if span is None:
            return None
        own = pieces.get(stmt)
        if own:
            for node in own:
                piece_span = spans.get(node)
                if piece_span is None:
                    return None
                _check_target(layout, lines, piece_span, node)
                new_code = _code(module, the_plan.replace[node], piece_span[4])
                edits.append(_statement_edit(module, lines, piece_span, new_code))
            continue
        _check_target(layout, lines, span, stmt)
        new = stmt.visit(transformer)
        edits.append(_statement_edit(module, lines, span, _code(module, new, span[4])))
    for anchor in anchors:
        span = spans.get(anchor)
        if span is None:
            return None
        _check_target(layout, lines, span, anchor)
        content = "".join(_code(module, s, span[4]) for s in the_plan.insert_before[anchor])
        at = lines.offset(span[0], span[1])
        edits.append(lines.edit(at, at, content))
    for spec in the_plan.imports:
        found = _import_edits(layout, spans, lines, spec)
        if found is None:
            return None
        edits.extend(found)
    return tuple(edits)


def _code(module: cst.Module, node: Replacement, indent: Sequence[str]) -> str:
    """The code of ``node`` (a node, or a removal / flatten sentinel) at ``indent``."""
    if isinstance(node, cst.RemovalSentinel):
        return ""
    if isinstance(node, cst.FlattenSentinel):
        return "".join(_code(module, n, indent) for n in node.nodes)
    key = (id(node), module.default_indent, module.default_newline, tuple(indent))
    known = _CODES.get(key)
    if known is not None and known[0] is node:
        return known[1]
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indent),
    )
    node._codegen(state)
    code = "".join(state.tokens)
    if len(_CODES) >= MAX_CODES:
        del _CODES[next(iter(_CODES))]  # the oldest goes
    _CODES[key] = (node, code)
    return code


# Generated code by node and indentation: a rule's fix statement is parsed once per text and
# inserted at every finding (`lr *= accelerator.num_processes` a thousand times); an entry holds
# its node, so its id stays its own.
_CODES: dict[tuple[int, str, str, tuple[str, ...]], tuple[cst.CSTNode, str]] = {}
MAX_CODES = 256


def _statement_edit(module: cst.Module, lines: LineIndex, span: Span, content: str) -> Edit:
    start = lines.offset(span[0], span[1])
    end = lines.offset(span[2], span[3])
    if not content:
        # a removed statement takes the blanks before it on its line: a statement LibCST placed
        # after a leading form feed (which it does not regenerate) would leave it behind
        line_start = lines.line_start(span[0])
        if lines.text[line_start:start].strip(" \t\x0c") == "":
            start = line_start
    old = lines.text[start:end]
    # the last statement of a file without a final newline: keep it without one
    if end == len(lines.text) and not old.endswith(("\n", "\r")):
        for newline in (module.default_newline, "\r\n", "\n", "\r"):
            if content.endswith(newline):
                content = content[: -len(newline)]
                break
    return lines.edit(start, end, content)


def _whole_module(module: cst.Module, lines: LineIndex, plan: FixPlan) -> tuple[Edit, ...] | None:
    """A plan that touches something outside every statement (a module-level comment): the
    module regenerated, as one edit (the untouched-bytes check still guards the result)."""
    try:
        new = module.visit(_ApplyTransformer(plan.replace, plan.insert_before))
        code = new.code
    except Exception:
        return None
    if plan.imports:
        return None
    return (lines.edit(0, len(lines.text), code),)


def _import_block(module: cst.Module) -> tuple[int, int]:
    """(first, end): ``module.body[first:end]`` is the leading block of import statements, after
    a docstring (LibCST's AddImportsVisitor takes the same block)."""
    body = module.body
    first = 0
    if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1:
        small = body[0].body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
            first = 1
        elif (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value == "__strict__"
        ):
            first = 1
    end = first
    while end < len(body) and _is_import_line(body[end]):
        end += 1
    return first, end


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom))
    )


def _dotted(node: cst.CSTNode | None) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _import_key(stmt: cst.SimpleStatementLine) -> tuple[int, str] | None:
    """isort's order inside a section, for the statements of one package: plain imports first,
    then by module name."""
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return 0, _dotted(small.names[0].name)
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        return 1, _dotted(small.module)
    return None


def _import_edits(
    layout: _Layout, spans: dict[cst.CSTNode, Span], lines: LineIndex, spec: ImportSpec
) -> list[Edit] | None:
    """The edit(s) adding ``spec``: merged into a ``from module import ...`` of the import block
    (as LibCST's AddImportsVisitor does), else a new statement beside the block's imports of the
    same package (where isort puts it), else after the block, with a blank line before the
    code that follows."""
    module = layout.module
    assert layout.imports_block is not None
    first, end = layout.imports_block
    body = module.body
    # the import block is made of simple statement lines (see `_Layout.imports_block`)
    block = cast("list[cst.SimpleStatementLine]", list(body[first:end]))
    newline = module.default_newline
    merge_into = _from_import_of(block, spec)
    if merge_into is not None:
        return _merged_import_edit(layout, spans, lines, spec, merge_into)
    text = (
        f"from {spec.module} import {spec.name}"
        if spec.name is not None
        else f"import {spec.module}"
    )
    if spec.asname:
        text += f" as {spec.asname}"
    text += newline
    after, before = _import_neighbours(block, body, first, spec)
    if after is None and before is None:  # an empty module (comments only): at the end
        at, follower = len(lines.text), None
        if lines.text and not lines.text.endswith(("\n", "\r")):
            text = newline + text
    else:
        found = _insertion_point(layout, spans, lines, after, before, bool(block))
        if found is None:
            return None
        at, follower = found
    edits = [lines.edit(at, at, text)]
    leading = getattr(follower, "leading_lines", None)
    if follower is not None and (not leading or leading[0].comment is not None):
        # a blank line between the imports and the code (AddImportsVisitor's rule)
        edits.append(lines.edit(at, at, newline))
    return edits


def _insertion_point(
    layout: _Layout,
    spans: dict[cst.CSTNode, Span],
    lines: LineIndex,
    after: cst.CSTNode | None,
    before: cst.CSTNode | None,
    block: bool,
) -> tuple[int, cst.CSTNode | None] | None:
    """The offset of a new import after ``after`` or before ``before`` (one of them is given),
    and the statement it then lands right before when that is code following the import
    block (``block``: the module has one), not another import; None: no span for it."""
    neighbour = before if before is not None else after
    assert neighbour is not None
    span = spans.get(neighbour)
    if span is None:
        return None
    _check_target(layout, lines, span, neighbour)
    if before is not None:
        return lines.offset(span[0], span[1]), (None if block else before)
    body = layout.module.body
    assert layout.imports_block is not None
    end = layout.imports_block[1]
    position = next(i for i, s in enumerate(body) if s is after)
    follower = body[end] if position + 1 == end and end < len(body) else None
    return lines.offset(span[2], span[3]), follower


def _from_import_of(
    block: list[cst.SimpleStatementLine], spec: ImportSpec
) -> cst.SimpleStatementLine | None:
    """The ``from module import ...`` statement of ``block`` that the name of ``spec`` can be
    added to (absolute, of the same module, not a star import); None when there is none or
    ``spec`` imports a module."""
    if spec.name is None:
        return None
    for stmt in block:
        small = stmt.body[0]
        if (
            isinstance(small, cst.ImportFrom)
            and not small.relative
            and _dotted(small.module) == spec.module
            and not isinstance(small.names, cst.ImportStar)
        ):
            return stmt
    return None


def _merged_import_edit(
    layout: _Layout,
    spans: dict[cst.CSTNode, Span],
    lines: LineIndex,
    spec: ImportSpec,
    stmt: cst.SimpleStatementLine,
) -> list[Edit] | None:
    """The edit adding the name of ``spec`` first in the ``from`` import ``stmt``."""
    assert spec.name is not None
    small = cast(cst.ImportFrom, stmt.body[0])
    names = cast("Sequence[cst.ImportAlias]", small.names)
    alias = cst.ImportAlias(
        name=cst.Name(spec.name),
        asname=cst.AsName(name=cst.Name(spec.asname)) if spec.asname else None,
    )
    new = stmt.with_changes(body=[small.with_changes(names=[alias, *names])])
    span = spans.get(stmt)
    if span is None:
        return None
    _check_target(layout, lines, span, stmt)
    return [_statement_edit(layout.module, lines, span, _code(layout.module, new, span[4]))]


def _import_neighbours(
    block: list[cst.SimpleStatementLine],
    body: Sequence[cst.BaseStatement],
    first: int,
    spec: ImportSpec,
) -> tuple[cst.CSTNode | None, cst.CSTNode | None]:
    """The statement a new import of ``spec`` goes after, or the one it goes before (both None:
    an empty module): beside the block's imports of the same package, in order (where isort
    puts it), else after the block, else after the module's docstring or before its code."""
    package = spec.module.split(".")[0]
    key = (0 if spec.name is None else 1, spec.module)
    same = [s for s in block if (k := _import_key(s)) is not None and k[1].split(".")[0] == package]
    if same:
        earlier = [s for s in same if (_import_key(s) or (0, "")) <= key]
        return (earlier[-1], None) if earlier else (None, same[0])
    if block:
        return block[-1], None
    if first:
        return body[0], None
    if body:
        return None, body[0]
    return None, None


# ------------------------------------------------------------------------------------------
# Applying fixes: the re-parse gate and the fixed point
# ------------------------------------------------------------------------------------------

MAX_FIX_ROUNDS = 6

# A parse of a text: its module and where LibCST's code stands in the text.
Parsed = tuple[cst.Module, "SourceMap"]


class Round(Protocol):
    """What one lint of a text gives the fixer: its findings (with their fixes) and errors."""

    @property
    def findings(self) -> Sequence[Finding]: ...

    @property
    def errors(self) -> Sequence[FileError]: ...


R = TypeVar("R", bound=Round)


class FixedPoint(NamedTuple):
    """The fixed text, the lint of it (a round as ``fixed_point``'s ``lint`` gives), how many
    fixes were applied and the errors met. (Not generic: Python 3.9 and 3.10 have no generic
    NamedTuple.)"""

    text: str
    last: Any
    applied: int
    errors: list[FileError]


def fixed_point(
    text: str,
    first: R,
    path: str,
    unsafe: bool,
    parse: Callable[[str, str], Parsed | FileError],
    lint: Callable[[Parsed, str], R],
) -> FixedPoint:
    """Fix ``text`` (whose lint is ``first``): apply its findings' fixes (sorted; overlapping
    fixes and second fixes of one isolation group wait for the next round), re-parse the
    result (:func:`gate`), ``lint`` it again, and repeat to a fixed point, at most
    :data:`MAX_FIX_ROUNDS` times. The errors are those of the later lints and of the fixes
    dropped; a fixed text changed outside its edits gives back ``text`` unfixed."""
    original, current = text, first
    applied = 0
    errors: list[FileError] = []
    for _ in range(MAX_FIX_ROUNDS):
        wanted = fixes_to_apply(current.findings, unsafe)
        if not wanted:
            break
        codes = {id(f.fix): f.code for f in current.findings if f.fix is not None}
        chosen, _deferred = choose(wanted)
        try:
            new_text, parsed, good, dropped = gate(text, chosen, path, parse)
        except OutsideEdits as exc:
            errors.append(FileError(path, f"fixes not applied: {exc}"))
            return FixedPoint(original, first, 0, errors)
        for bad in dropped:
            errors.append(
                FileError(
                    path,
                    f"{codes.get(id(bad), 'fix')}: the fixed code would not parse; fix dropped",
                )
            )
        if not good or parsed is None:
            break
        applied += len(good)
        text = new_text
        current = lint(parsed, text)
        errors += current.errors
    return FixedPoint(text, current, applied, errors)


def gate(
    text: str,
    fixes: Sequence[TextFix],
    path: str,
    parse: Callable[[str, str], Parsed | FileError],
) -> tuple[str, Parsed | None, list[TextFix], list[TextFix]]:
    """Apply ``fixes`` to ``text`` and ``parse`` the result: (new text, its parse, fixes
    applied, fixes dropped because the code would not parse). A fix is never applied
    unparsed."""
    new, _ = apply_fixes(text, fixes)
    parsed = parse(new, path)
    if not isinstance(parsed, FileError):
        return new, parsed, list(fixes), []
    # Find the culprit(s): add the fixes one by one and keep those that still parse.
    good: list[TextFix] = []
    dropped: list[TextFix] = []
    best: tuple[str, Parsed] | None = None
    for fix in fixes:
        candidate, _ = apply_fixes(text, [*good, fix])
        attempt = parse(candidate, path)
        if isinstance(attempt, FileError):
            dropped.append(fix)
        else:
            good.append(fix)
            best = (candidate, attempt)
    if best is None:
        return text, None, [], dropped
    return best[0], best[1], good, dropped


# ------------------------------------------------------------------------------------------
# Writing files
# ------------------------------------------------------------------------------------------


class FileChanged(Exception):
    """The file on disk is not the one that was read: another writer got there first."""


def same_file_state(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev, a.st_size, a.st_mtime_ns) == (
        b.st_ino,
        b.st_dev,
        b.st_size,
        b.st_mtime_ns,
    )


class NotWritten(OSError):
    """A file distlint will not write (read-only); ``strerror`` says why, in one line."""


def write_atomic(path: str, data: bytes, expected: os.stat_result | None = None) -> None:
    """Write ``data`` to ``path`` without ever leaving it half-written.

    The bytes go to a temporary file in the same directory, which is flushed, given the original
    file's mode and renamed over the original (atomic on POSIX). A symlink is followed: its target
    is rewritten and the link stays a link. With ``expected`` (the state of the file when it was
    read), the file's inode, size and modification time are checked again just before the
    rename: :class:`FileChanged` when another writer touched it meanwhile (nothing is written).

    As ruff: a read-only file (no write permission for us, or no write bit at all, which
    root's permissions would otherwise override) is not written: :class:`NotWritten`. A file
    with hard links is written in place, after the same checks, so every link sees the fix (a
    rename would leave the other names on the old text); its new size is reserved first, so a
    full disk fails before a byte of it changes.
    """
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    st = os.stat(real)
    if expected is not None and not same_file_state(st, expected):
        raise FileChanged(path)
    if not st.st_mode & 0o222 or not os.access(real, os.W_OK):
        mode = stat.S_IMODE(st.st_mode)
        raise NotWritten(errno.EACCES, f"file is read-only (mode {mode:04o})", path)
    if st.st_nlink > 1:
        _write_in_place(path, real, data, expected)
        return
    fd, tmp = tempfile.mkstemp(prefix=".distlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass
        if expected is not None and not same_file_state(os.stat(real), expected):
            raise FileChanged(path)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_in_place(path: str, real: str, data: bytes, expected: os.stat_result | None) -> None:
    fd = os.open(real, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (
            expected is not None and not same_file_state(st, expected)
        ):
            raise FileChanged(path)
        if len(data) > st.st_size and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, len(data))
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise  # no room: nothing written yet
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.pwrite(fd, view[written:], written)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
