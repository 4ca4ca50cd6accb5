"""Lint (and fix) one source text: parse once, index once, run every enabled rule, suppress.

This module never imports torch, accelerate or torch_xla, and never executes the user's code.
"""

from __future__ import annotations

import io
import re
import tokenize
import traceback
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst

from distlint import fixes as fixes_mod
from distlint import guard
from distlint.analysis import Index
from distlint.config import Config
from distlint.fixes import Fix
from distlint.model import Applicability, FileError, FileResult, Finding, FixInfo, Range
from distlint.positions import all_positions, positions_of
from distlint.registry import all_rules
from distlint.rule import Rule, RuleContext

MAX_FIX_ROUNDS = 6

NOQA_RE = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE
)
FILE_NOQA_RE = re.compile(
    r"#\s*distlint:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
    re.IGNORECASE,
)


@dataclass
class Noqa:
    """Suppression comments of one file."""

    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)  # None = blanket
    file_codes: frozenset[str] | None = None  # set when `# distlint: noqa` present
    file_blanket: bool = False
    used: dict[int, set[str]] = field(default_factory=dict)

    @classmethod
    def scan(cls, text: str) -> Noqa:
        result = cls()
        if "noqa" not in text and "NOQA" not in text:
            return result
        for lineno, line in enumerate(text.splitlines(), start=1):
            if "#" not in line:
                continue
            m = FILE_NOQA_RE.search(line)
            if m:
                if m.group("codes"):
                    codes = frozenset(c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c)
                    result.file_codes = (result.file_codes or frozenset()) | codes
                else:
                    result.file_blanket = True
                continue
            m = NOQA_RE.search(line)
            if m:
                codes_text = m.group("codes")
                result.lines[lineno] = (
                    frozenset(c.upper() for c in re.split(r"[\s,]+", codes_text) if c)
                    if codes_text
                    else None
                )
        return result

    def suppresses(self, code: str, lines: Sequence[int]) -> bool:
        if self.file_blanket or (self.file_codes and code in self.file_codes):
            return True
        for line in lines:
            if line in self.lines:
                codes = self.lines[line]
                if codes is None or code in codes:
                    self.used.setdefault(line, set()).add(code)
                    return True
        return False


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


def decode(data: bytes) -> str:
    """Decode Python source bytes as the interpreter would (PEP 263 cookie, BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


@dataclass
class _Round:
    findings: list[Finding]
    suppressed: list[Finding]
    fixes: list[tuple[Finding, Fix]]
    index: Index | None
    module: cst.Module | None
    noqa: Noqa


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
    fix_ids: Collection[int] | None = None,
) -> FileResult:
    """Lint ``source`` as the file ``path``; with ``fix``, also compute the fixed text.

    ``fix_ids`` (with ``fix``) applies only the fixes of the findings with these
    :attr:`Finding.fix_id` values, from a lint of this same text, safe or not, in one round
    (the language server's per-finding quick fix).

    ``fixed_source`` of the result is the fixed text (None when nothing changed); when
    ``source`` was bytes, ``fixed_bytes`` holds it re-encoded in the file's own encoding with
    its BOM and line endings kept.
    """
    config = config or Config()
    if unsafe_fixes is None:
        unsafe_fixes = config.unsafe_fixes
    active = tuple(rules) if rules is not None else enabled_rules(config, path)
    enabled = frozenset(r.CODE for r in active)  # before the trigger filter: for DL001 unused-noqa

    try:
        text = decode(source) if isinstance(source, bytes) else source
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FileResult(path, errors=(FileError(path, f"cannot decode source: {exc}"),))
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return FileResult(path, errors=(FileError(path, "source contains a null byte", line),))

    # Cheap pre-filter: a rule that needs e.g. "manual_seed" cannot match a file without it.
    active = tuple(r for r in active if not r.TRIGGERS or any(t in text for t in r.TRIGGERS))
    if not active:
        return FileResult(path)

    refused = guard.check_source(text, path, config.max_file_size)  # before LibCST sees it
    if refused is not None:
        return FileResult(path, errors=(refused,))
    guard.ensure_recursion_headroom()
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return FileResult(path, errors=(_syntax_error(path, text, exc),))
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "source is too deeply nested to parse"),))
    except Exception as exc:  # libcst raises a few other types on odd input
        return FileResult(path, errors=(FileError(path, f"cannot parse: {exc}"),))

    errors: list[FileError] = []
    try:
        current = _lint_module(
            module, text, path, active, config, ignore_noqa, unsafe_fixes, errors, debug, enabled
        )
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "source is too deeply nested to analyse"),))
    if not fix:
        return FileResult(
            path, tuple(current.findings), tuple(errors), suppressed=tuple(current.suppressed)
        )

    applied = 0
    changed = False
    for _ in range(MAX_FIX_ROUNDS):
        if fix_ids is not None:
            if applied:
                break  # a quick fix is that finding's fix alone, not what it uncovers next
            wanted = [f for finding, f in current.fixes if finding.fix_id in fix_ids]
        else:
            wanted = [
                f
                for finding, f in current.fixes
                if finding.fix is not None
                and (finding.fix.applicability is Applicability.SAFE or unsafe_fixes)
            ]
        if not wanted or current.module is None or current.index is None:
            break
        try:
            new_module, done, dropped = fixes_mod.apply(current.module, current.index, wanted)
        except RecursionError:
            errors.append(FileError(path, "source is too deeply nested to fix"))
            break
        for dropped_fix, reason in dropped:
            if "would not parse" in reason:
                code = _code_of(current, dropped_fix)
                errors.append(FileError(path, f"{code}: {reason}"))
        if not done:
            break
        applied += len(done)
        changed = True
        module = new_module
        text = module.code
        current = _lint_module(
            module, text, path, active, config, ignore_noqa, unsafe_fixes, errors, debug, enabled
        )
    fixed_source = module.code if changed else None
    return FileResult(
        path,
        tuple(current.findings),
        tuple(errors),
        fixed_source=fixed_source,
        fixed_bytes=module.bytes if changed and isinstance(source, bytes) else None,
        fixes_applied=applied,
        suppressed=tuple(current.suppressed),
    )


def _syntax_error(path: str, text: str, exc: cst.ParserSyntaxError) -> FileError:
    """Locate a syntax error the way Python reports it (LibCST's native parser positions are
    approximate); fall back to LibCST's own message when CPython accepts the code."""
    try:
        compile(text, path, "exec", flags=0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    except SyntaxError as err:
        hint = " (Python 2 code?)" if "Missing parentheses in call to" in (err.msg or "") else ""
        return FileError(path, f"syntax error: {err.msg}{hint}", err.lineno, err.offset)
    except (ValueError, RecursionError, MemoryError):
        pass
    return FileError(path, f"cannot parse: {exc.message}", exc.editor_line, exc.editor_column)


def _code_of(current: _Round, fix: Fix) -> str:
    for finding, f in current.fixes:
        if f is fix:
            return finding.code
    return "fix"


def _lint_module(
    module: cst.Module,
    text: str,
    path: str,
    active: Sequence[Rule],
    config: Config,
    ignore_noqa: bool,
    unsafe_fixes: bool,
    errors: list[FileError],
    debug: bool,
    enabled: frozenset[str] = frozenset(),
) -> _Round:
    index = Index(module, text)
    ctx = RuleContext(index, path, text)
    for rule in active:
        ctx._rule = rule
        try:
            rule.check(ctx)
        except RecursionError:
            raise
        except Exception as exc:  # a rule bug must not take the other rules or files down
            detail = traceback.format_exc() if debug else f"{type(exc).__name__}: {exc}"
            errors.append(
                FileError(
                    path,
                    f"internal error in {rule.CODE}: {detail} (please report; --debug shows the traceback)",
                )
            )
    noqa = Noqa.scan(text)
    unused_noqa_rule = None if ignore_noqa else next((r for r in active if r.CODE == "DL001"), None)
    if not ctx.reports and unused_noqa_rule is None:
        return _Round([], [], [], index, module, noqa)
    if unused_noqa_rule is not None:
        positions = all_positions(module)  # DL001 needs every comment's position
    else:
        wanted = [r.node for r in ctx.reports]
        wanted += [s for s in (index.statement(n) for n in wanted) if s is not None]
        positions = positions_of(module, wanted)
    findings: list[Finding] = []
    suppressed: list[Finding] = []
    fix_pairs: list[tuple[Finding, Fix]] = []
    seen: set[tuple[str, int, int]] = set()
    for fix_id, report in enumerate(ctx.reports):
        rule = report.rule
        pos = positions.get(report.node)
        if pos is None:  # a node the rule built itself: report at the module start
            rng = Range(1, 1, 1, 1)
        else:
            rng = Range(pos.start.line, pos.start.column + 1, pos.end.line, pos.end.column + 1)
        key = (rule.CODE, rng.line, rng.column)
        if key in seen:
            continue
        seen.add(key)
        info = None
        if report.fix is not None:
            applicability = report.fix.applicability or rule.FIX_SAFETY or Applicability.UNSAFE
            override = config.applicability_override(rule.CODE)
            if override is not None:
                applicability = Applicability(override)
            info = FixInfo(applicability, report.fix.title or rule.FIX_TITLE or "Apply fix")
        finding = Finding(path, rng, rule.CODE, rule.NAME, report.message, info, fix_id=fix_id)
        lines = [rng.line]
        stmt = index.statement(report.node)
        if stmt is not None and stmt in positions:
            lines.append(positions[stmt].start.line)
        if not ignore_noqa and noqa.suppresses(rule.CODE, lines):
            suppressed.append(finding)
            continue
        findings.append(finding)
        if report.fix is not None:
            fix_pairs.append((finding, report.fix))
    if unused_noqa_rule is not None:
        # after suppression: only now is it known which `# noqa` codes suppressed nothing
        from distlint.rules import unused_noqa

        known = {r.CODE for r in all_rules()}
        for rng, message, fix in unused_noqa.unused_noqa(module, positions, noqa, enabled, known):
            info = FixInfo(Applicability.SAFE, fix.title)
            finding = Finding(
                path,
                rng,
                unused_noqa.CODE,
                unused_noqa_rule.NAME,
                message,
                info,
                fix_id=len(ctx.reports) + len(fix_pairs),
            )
            findings.append(finding)
            fix_pairs.append((finding, fix))
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return _Round(findings, suppressed, fix_pairs, index, module, noqa)
