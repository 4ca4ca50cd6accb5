"""Lint (and fix) one source text: parse once, index once, run every enabled rule, suppress.

This module never imports torch, accelerate or torch_xla, and never executes the user's code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache, wraps
from typing import Any, Callable, NamedTuple, TypeVar, cast

import libcst as cst
from libcst.metadata import CodeRange

from distlint import fixes as fixes_mod
from distlint import guard
from distlint.analysis import Index
from distlint.analysis.facts import Facts, facts_for
from distlint.analysis.project import Project
from distlint.collector import free
from distlint.collector import paused as collector_paused
from distlint.config import Config
from distlint.edits import LineIndex
from distlint.incremental import Document
from distlint.model import Applicability, FileError, FileResult, Finding, Fix, Range
from distlint.noqa import UNUSED_CODE, Directives, Placement, directive_edit, unused_noqa
from distlint.parse import decode_source, null_byte, parse, parse_piece
from distlint.positions import DEEP_RECURSION_LIMIT, SourceMap, Span, TooDeep, deep_call, layout
from distlint.registry import all_rules, codes_by_name
from distlint.rule import Report, Rule, RuleContext

MAX_FIX_ROUNDS = fixes_mod.MAX_FIX_ROUNDS

# Lint passes of this process: "parse" (LibCST parses) and "rules" (rule runs over a module).
# tests/test_lint_passes.py asserts how many each command costs.
PASSES: Counter[str] = Counter()


@lru_cache(maxsize=32)
def _rule_instances(config: Config, codes: frozenset[str]) -> tuple[Rule, ...]:
    return tuple(r(config.options_for(r.CODE)) for r in all_rules() if r.CODE in codes)


def enabled_rules(
    config: Config, path: str, select: frozenset[str] | None = None
) -> tuple[Rule, ...]:
    defaults = {r.CODE: r.DEFAULT_ENABLED for r in all_rules()}
    codes = config.enabled_codes(defaults, path)
    if select is not None:
        codes = codes & select
    return _rule_instances(config, codes)


class _Round(NamedTuple):
    findings: list[Finding]
    suppressed: list[Finding]
    errors: list[FileError]


F = TypeVar("F", bound=Callable[..., Any])


def _collector_paused_call(fn: F) -> F:
    """``fn`` with the cyclic garbage collector paused until it has returned. The parse and
    the analysis allocate so much that a collection, once the collector is resumed inside the
    lint, walks the whole tree the lint still holds (8% of a 10,000-line lint) to find nothing;
    the analysis breaks its own cycles (Index.release), so the tree dies with ``fn``'s frame,
    before the collector is resumed."""

    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with collector_paused():
            return fn(*args, **kwargs)

    return cast(F, call)


@_collector_paused_call
def lint_source(
    source: str | bytes,
    path: str = "<stdin>",
    config: Config | None = None,
    *,
    fix: bool = False,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
    rules: Sequence[Rule] | None = None,
    debug: bool = False,
    prior: FileResult | None = None,
    keep_source: bool = False,
    project: Project | None = None,
    document: Document | None = None,
) -> FileResult:
    """Lint ``source`` as the file ``path``; with ``fix``, also compute the fixed text.

    ``project``: the :class:`~distlint.analysis.project.Project` the file belongs to, shared by
    the files of a run (other modules and config files are then followed); None: this file only.
    ``document``: the :class:`~distlint.incremental.Document` of an editor buffer: an edit of
    its last text re-parses only the statements it touched (the language server's worker).

    Fixing is :func:`distlint.fixes.fixed_point`: the findings' edits applied to the text,
    the result re-parsed (a fix whose result does not parse is dropped and reported) and linted
    again, to a fixed point, at most :data:`MAX_FIX_ROUNDS` times. ``prior``: the result of linting this same text with the same
    settings (the cache's), so that fixing starts from its edits without parsing anything.

    ``fixed_source`` of the result is the fixed text (None when nothing changed); when
    ``source`` was bytes, ``fixed_bytes`` holds it encoded like the input (encoding, BOM), and
    every byte outside the edited spans is the input's own.
    """
    config = config or Config()
    if unsafe_fixes is None:
        unsafe_fixes = config.unsafe_fixes
    active = tuple(rules) if rules is not None else enabled_rules(config, path)
    enabled = frozenset(r.CODE for r in active)  # before the trigger filter: for DL001 unused-noqa

    decoded = _decoded(source, path)
    if isinstance(decoded, FileError):
        return FileResult(path, errors=(decoded,))
    text, encoding = decoded
    kept = text if keep_source else None
    active = _triggered(active, text, path, project)
    if not active:
        return FileResult(path, source_text=kept)

    job = _Job(path, active, config, ignore_noqa, debug, enabled, project)
    if prior is not None and fix:
        current = _Round(list(prior.findings), list(prior.suppressed), list(prior.errors))
    else:
        first = _first_round(text, source, job, document)
        if isinstance(first, FileError):
            return FileResult(path, errors=(first,), source_text=kept)
        current = first
    if not fix:
        return FileResult(
            path,
            tuple(current.findings),
            tuple(current.errors),
            suppressed=tuple(current.suppressed),
            source_text=kept,
        )
    return _fixed(text, source, encoding, current, job, unsafe_fixes)._replace(source_text=kept)


def _decoded(source: str | bytes, path: str) -> tuple[str, str | None] | FileError:
    """The text of ``source`` and its encoding (None: given as text), or the error to report
    (undecodable, or holding a null byte)."""
    encoding = None
    if isinstance(source, bytes):
        decoded = decode_source(source, path)
        if isinstance(decoded, FileError):
            return decoded
        text, encoding = decoded
    else:
        text = source
    refused = null_byte(text, path)
    return refused if refused is not None else (text, encoding)


def _triggered(
    active: tuple[Rule, ...], text: str, path: str, project: Project | None
) -> tuple[Rule, ...]:
    """The rules of ``active`` that may match: a cheap pre-filter, since a rule that needs e.g.
    "manual_seed" cannot match a file without it, or without a project module it imports (a
    seeding helper, a loader factory) holding it. Imported modules are searched only for the
    words of the rules still asleep (each module for each word once per run), and no more
    once every rule is awake."""
    candidates = active
    active = tuple(r for r in active if not r.TRIGGERS or any(t in text for t in r.TRIGGERS))
    if project is not None and len(active) < len(candidates):
        asleep = [r for r in candidates if r not in active]
        wanted = {t for r in asleep for t in r.TRIGGERS}
        for words in project.imported_words(path, text, wanted):
            if not words:
                continue
            woken = [r for r in asleep if not words.isdisjoint(r.TRIGGERS)]
            if not woken:
                continue
            asleep = [r for r in asleep if r not in woken]
            if not asleep:
                return candidates
            wanted.clear()
            wanted.update(t for r in asleep for t in r.TRIGGERS)
        active = tuple(r for r in candidates if r not in asleep)
    return active


def _first_round(
    text: str, source: str | bytes, job: _Job, document: Document | None
) -> _Round | FileError:
    """The lint of ``text`` as it is (parsed, or its parse reused), or the error to report.

    A module the project already parsed for an importer is not parsed again; the linted file's
    own parse is not kept in the project (a whole-tree run would hold every tree)."""
    path, config, project = job.path, job.config, job.project
    index: Index | None = None
    offsets: list[int] | None = None
    tops: list[int] | None = None
    where: SourceMap | None = None
    reused = _reuse(document, text, path, config.max_file_size)
    known = project.parsed(path, source) if project is not None and not reused else None
    if reused is not None:
        module, offsets = reused
        assert document is not None
        from distlint.analysis.reindex import index_for  # (an editor's lint only)

        index = index_for(document, module, text)  # the document's, made from its last one
    elif known is not None:
        module, index = known
        where = index.source_map
    else:
        tops = []
        parsed = _parse(text, path, config.max_file_size, tops, checked=False)
        if isinstance(parsed, FileError):
            return parsed
        module, where = parsed
    if document is not None and reused is None:
        # the document's offsets are of LibCST's code: of no use where it is not the text
        document.reset(text, module if where is None or not where.cuts else None)
    return _lint_guarded(module, text, job, index, offsets, tops, where)


def _fixed(
    text: str,
    source: str | bytes,
    encoding: str | None,
    current: _Round,
    job: _Job,
    unsafe_fixes: bool,
) -> FileResult:
    """The result of fixing ``text`` (whose lint is ``current``) to a fixed point; the fixed
    text encoded as ``source`` was (``encoding``) when it came as bytes."""
    path = job.path
    done = fixes_mod.fixed_point(
        text,
        current,
        path,
        unsafe_fixes,
        _parse,
        lambda parsed, new: _lint_guarded(parsed[0], new, job, source=parsed[1]),
    )
    errors = current.errors + done.errors  # the first round's, and the fixing's
    fixed, current, applied = done.text, done.last, done.applied
    changed = fixed != text
    fixed_bytes = None
    if changed and encoding is not None:
        assert isinstance(source, bytes)
        try:
            fixed_bytes = fixed.encode(encoding)
            if text.encode(encoding) != source:
                raise UnicodeError("the file does not round-trip through its encoding")
        except UnicodeError as exc:
            errors.append(FileError(path, f"fixes not applied: {exc}"))
            changed, fixed_bytes, applied = False, None, 0
    return FileResult(
        path,
        tuple(current.findings),
        tuple(errors),
        fixed_source=fixed if changed else None,
        fixed_bytes=fixed_bytes,
        fixes_applied=applied if changed else 0,
        suppressed=tuple(current.suppressed),
    )


def _parse(
    text: str,
    path: str,
    max_file_size: int | None = guard.DEFAULT_MAX_FILE_SIZE,
    tops: list[int] | None = None,
    *,
    checked: bool = True,
) -> tuple[cst.Module, SourceMap] | FileError:
    """``text`` parsed, with where LibCST's code stands in it (counted in :data:`PASSES`), or
    the error to report; see :func:`distlint.parse.parse`. The fixer's re-parse checks
    LibCST's nodes (``checked``); the lint's parse need not."""
    return parse(text, path, max_file_size=max_file_size, tops=tops, passes=PASSES, checked=checked)


def _reuse(
    document: Document | None, text: str, path: str, max_file_size: int | None
) -> tuple[cst.Module, list[int] | None] | None:
    """The module of ``text`` from ``document`` (its own text, or an edit of it, re-parsing
    only the statements the edit touched); None: parse it whole."""
    if document is None:
        return None
    if document.module is None:
        return None
    if document.text == text:
        return document.module, document.offsets
    if max_file_size and len(text) > max_file_size // 4:
        return None  # maybe over the size budget: the whole parse checks (and reports) it

    found = document.update(text, lambda piece: parse_piece(piece, path))
    if found is not None:
        PASSES["parse"] += 1
    return found


class _Job(NamedTuple):
    """What every lint round of one file shares."""

    path: str
    active: Sequence[Rule]
    config: Config
    ignore_noqa: bool
    debug: bool
    enabled: frozenset[str]  # enabled before the trigger filter: for DL001 unused-noqa
    project: Project | None


def _lint_guarded(
    module: cst.Module,
    text: str,
    job: _Job,
    index: Index | None = None,
    offsets: list[int] | None = None,
    tops: list[int] | None = None,
    source: SourceMap | None = None,
) -> _Round:
    """:func:`_lint_module`, retried with a large stack when the code nests deeply; code nested
    beyond even that is one error line, never a traceback.

    The cyclic garbage collector is paused meanwhile: the analysis allocates an entry per node,
    which triggers full collections that walk the whole parsed tree again and again (a third
    of the analysis time on a 10,000-line file) to find next to no garbage; the cycles the
    analysis makes (scopes and their bindings, the facts and the index) are broken when it is
    done (:meth:`~distlint.analysis.index.Index.release`)."""
    try:
        with collector_paused():
            return deep_call(lambda: _lint_module(module, text, job, index, offsets, tops, source))
    except (TooDeep, RecursionError):
        message = f"source is nested too deeply to analyse (over {DEEP_RECURSION_LIMIT:,} frames)"
        return _Round([], [], [FileError(job.path, message)])


def _lint_module(
    module: cst.Module,
    text: str,
    job: _Job,
    index: Index | None = None,
    offsets: list[int] | None = None,
    tops: list[int] | None = None,
    source: SourceMap | None = None,
) -> _Round:
    PASSES["rules"] += 1
    path, project = job.path, job.project
    if index is not None:
        # the project's parse of this file (kept for its importers), or an editor buffer's
        # (kept by its document for the next edit): linted with Facts of its own, as its own
        # parse would be, so that its dependencies are its own reads, and what the rules ask
        # is not kept in the project's Facts of it after the lint
        facts = Facts(index, path, project)
        try:
            return _lint_indexed(module, text, job, index, facts, offsets, tops, source)
        finally:
            free(facts)  # (the language server's worker: once the reply is sent)
    # the linted text's own parse: its facts are not memoised in the project (importers that
    # reach this file use the project's parse of it), and nothing is kept once it is linted
    index = Index(module, text, source)
    facts = Facts(index, path, project) if project is not None else facts_for(index, path)
    try:
        return _lint_indexed(module, text, job, index, facts, offsets, tops, source)
    finally:
        free(facts, index)  # (the language server's worker: once the reply is sent)


def _lint_indexed(
    module: cst.Module,
    text: str,
    job: _Job,
    index: Index,
    facts: Facts,
    offsets: list[int] | None,
    tops: list[int] | None,
    source: SourceMap | None = None,
) -> _Round:
    path, active, config, ignore_noqa, debug, enabled, project = job
    ctx = RuleContext(index, path, text, facts, project)
    errors = _run_rules(ctx, active, path, debug)
    directives = Directives.scan(text, codes_by_name())  # a rule name in a directive too
    run_unused = not ignore_noqa and any(r.CODE == UNUSED_CODE for r in active)
    if not ctx.reports and not run_unused:
        return _Round([], [], errors)
    reports = ctx.reports
    lines = LineIndex(text)
    if source is None or not source.cuts:
        source = SourceMap(text, (), lines.starts)
    else:
        offsets = None  # of the text, not of LibCST's code
    plans = [r.fix for r in reports if r.fix is not None]
    plan_layout = fixes_mod.prepare(module, index, plans, source)
    wanted = [r.node for r in reports]
    statements = {r.node: index.statement(r.node) for r in reports}
    wanted += [s for s in statements.values() if s is not None]
    positions, spans = layout(
        module,
        wanted,
        plan_layout.spans_wanted,
        _top_statements(module, index),
        offsets,
        source.parsed_starts,
        source.parsed,
        index.ancestors,
        tops,
        source,
    )
    report_to = _Reporter(job, module, source, lines, positions, plan_layout, spans, directives)
    reached = facts.reach.reached  # code the module's run never executes reports nothing
    for report in reports:
        report_to.add(report, statements[report.node], reached(report.node))
    errors += report_to.errors
    findings = report_to.findings
    if run_unused:
        # after suppression: only now is it known which noqa codes suppressed nothing
        override = config.applicability_override(UNUSED_CODE)
        known = {r.CODE for r in all_rules()}
        findings += unused_noqa(
            path,
            text,
            directives,
            enabled,
            known,
            Applicability(override) if override is not None else Applicability.SAFE,
        )
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return _Round(findings, report_to.suppressed, errors)


def _run_rules(ctx: RuleContext, active: Sequence[Rule], path: str, debug: bool) -> list[FileError]:
    """Run each rule of ``active`` over ``ctx`` (its reports land there); a rule that fails is
    one error line, and the other rules still run."""
    errors: list[FileError] = []
    for rule in active:
        ctx._rule = rule
        try:
            rule.check(ctx)
        except RecursionError:
            raise
        except Exception as exc:  # a rule bug must not take the other rules or files down
            if debug:
                import traceback  # only --debug shows one

                detail = traceback.format_exc(limit=-40)
            else:
                detail = f"{type(exc).__name__}: {exc}"
            errors.append(
                FileError(
                    path,
                    f"internal error in {rule.CODE}: {detail} (please report; --debug shows the traceback)",
                )
            )
    return errors


class _Reporter:
    """Turns the rules' reports into findings (positioned, their fixes' edits computed, their
    ``# noqa`` edit placed) or suppressed findings, one report at a time."""

    def __init__(
        self,
        job: _Job,
        module: cst.Module,
        source: SourceMap,
        lines: LineIndex,
        positions: dict[cst.CSTNode, CodeRange],
        plan_layout: fixes_mod._Layout,
        spans: dict[cst.CSTNode, Span],
        directives: Directives,
    ) -> None:
        self.job, self.module, self.source, self.lines = job, module, source, lines
        self.positions, self.plan_layout, self.spans = positions, plan_layout, spans
        self.directives = directives
        self.placement = _Placements(lines)
        self.findings: list[Finding] = []
        self.suppressed: list[Finding] = []
        self.errors: list[FileError] = []
        self.seen: set[tuple[str, int, int]] = set()  # (code, line, column) of each finding

    def add(self, report: Report, stmt: cst.CSTNode | None, reached: bool = True) -> None:
        """Add the finding of ``report`` (in statement ``stmt``), unless its rule reported the
        same place already or it is in code the run does not reach (not ``reached``: only a
        ``noqa`` there counts as used)."""
        path, rule = self.job.path, report.rule
        pos = self.positions.get(report.node)
        if pos is None:  # a node the rule built itself: report at the module start
            rng = Range(1, 1, 1, 1)
        else:
            rng = Range(pos.start.line, pos.start.column + 1, pos.end.line, pos.end.column + 1)
        key = (rule.CODE, rng.line, rng.column)
        if key in self.seen:
            return
        self.seen.add(key)
        stmt_range = self.positions.get(stmt) if stmt is not None else None
        stmt_line = stmt_range.start.line if stmt_range is not None else None
        lines_checked = [rng.line] + ([stmt_line] if stmt_line is not None else [])
        if not self.job.ignore_noqa and self.directives.suppresses(rule.CODE, lines_checked):
            self.suppressed.append(Finding(path, rng, rule.CODE, rule.NAME, report.message))
            return
        if not reached:
            return
        fix = self._fix(report, pos is not None, rng) if report.fix is not None else None
        target = self.placement.target(rng.line, stmt_range)
        suppression = (
            directive_edit(self.lines, target, [rule.CODE]) if target is not None else None
        )
        self.findings.append(
            Finding(path, rng, rule.CODE, rule.NAME, report.message, fix, suppression=suppression)
        )

    def _fix(self, report: Report, placed: bool, rng: Range) -> Fix | None:
        """The fix of ``report`` as edits; None (and an error line) when its edits do not match
        the code it was meant to change."""
        rule = report.rule
        try:
            if placed:
                _check_reported(self.module, self.source, self.lines, report.node, rng)
            return _fix_of(
                report.fix,
                rule,
                self.job.config,
                self.plan_layout,
                self.spans,
                self.lines,
                self.job.debug,
            )
        except fixes_mod.TargetMismatch as exc:
            message = (
                f"{rule.CODE}: the fix's edits do not match the code it was meant to change "
                f"(line {exc.line}); fix dropped"
            )
            self.errors.append(FileError(self.job.path, message, exc.line))
            return None


def _top_statements(module: cst.Module, index: Index):
    """node -> the index in ``module.body`` of the top-level statement holding it (None for a
    node outside every statement)."""
    numbers = {id(stmt): i for i, stmt in enumerate(module.body)}

    def top_of(node: cst.CSTNode) -> int | None:
        number = numbers.get(id(node))
        if number is not None:
            return number
        for anc in index.ancestors(node):
            number = numbers.get(id(anc))
            if number is not None:
                return number
        return None

    return top_of


class _Placements:
    """Where each finding's ``# noqa`` goes (:class:`~distlint.noqa.Placement`), from the tokens
    of the finding's statement only: tokenizing the whole file costs about a fifth of parsing
    it, and a statement holds every string and continuation line that can block its lines."""

    def __init__(self, lines: LineIndex) -> None:
        self.lines = lines
        self._regions: dict[tuple[int, int], Placement] = {}
        self._whole: Placement | None = None

    def target(self, line: int, statement: CodeRange | None) -> int | None:
        if statement is None:  # no statement known: the whole file's tokens
            if self._whole is None:
                self._whole = Placement(self.lines.text)
            return self._whole.target(line)
        first, last = statement.start.line, statement.end.line
        region = self._regions.get((first, last))
        if region is None:
            lines = self.lines
            code = lines.text[lines.line_start(first) : lines.line_start(last + 1)]
            if not _may_block(code):
                return line  # no line of it is inside a string or continued: any takes a comment
            region = self._regions[(first, last)] = Placement(code)
        shift = first - 1
        found = region.target(line - shift, first - shift)
        return found + shift if found is not None else None


def _may_block(code: str) -> bool:
    """Can a line of ``code`` be unable to take a trailing comment (see
    :class:`~distlint.noqa.Placement`)? Only inside a string spanning lines (triple quotes, or
    a backslash before the line break) or on a line continued with a backslash."""
    return '"""' in code or "'''" in code or "\\\n" in code or "\\\r" in code or code.endswith("\\")


def _check_reported(
    module: cst.Module, source: SourceMap, lines: LineIndex, node: cst.CSTNode, rng: Range
) -> None:
    """Raise :class:`~distlint.fixes.TargetMismatch` unless the text at the reported range is
    code of the reported ``node`` (its range leaves out the parentheses, indentation and
    comments around it): a fix is offered only for a finding that points at its node."""
    start = lines.offset(rng.line, rng.column - 1)
    end = lines.offset(rng.end_line, rng.end_column - 1)
    seen = source.parsed_slice(start, end)
    if not seen or seen not in module.code_for_node(node):
        raise fixes_mod.TargetMismatch(rng.line)


def _fix_of(plan, rule, config, plan_layout, spans, lines, debug) -> Fix | None:
    applicability = plan.applicability or rule.FIX_SAFETY or Applicability.UNSAFE
    override = config.applicability_override(rule.CODE)
    if override is not None:
        applicability = Applicability(override)
    try:
        edits = fixes_mod.plan_edits(plan_layout, spans, lines, plan)
    except (RecursionError, fixes_mod.TargetMismatch):
        raise
    except Exception:  # a plan LibCST cannot generate: no fix offered
        if debug:
            raise
        return None
    if not edits:
        return None
    title = plan.title or rule.FIX_TITLE or "Apply fix"
    return Fix(title, applicability, edits, plan.isolation)
