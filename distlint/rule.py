"""The Rule base class: one subclass per module in ``rules/``.

A rule declares its identity (CODE, NAME, MESSAGE), its fix (FIX_TITLE, FIX_SAFETY), its
options, its documentation (the class docstring, in DESIGN.md's fixed sections) and small
VALID / INVALID snippets, then implements ``check(ctx)``. ``check`` queries the shared
training facts (``ctx.facts``, a :class:`~distlint.analysis.facts.Facts` built once per file for
all rules; ``ctx.index`` for the syntax) and calls ``ctx.report``.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import libcst as cst

from distlint.analysis import Index
from distlint.analysis.facts import Facts, facts_for
from distlint.fixes import FixPlan
from distlint.model import Applicability, RuleInfo

_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class Option(NamedTuple):
    """A per-rule option, set under ``[tool.distlint.<rule-name>]`` or ``[tool.distlint.<CODE>]``."""

    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    type: type | None = None

    def validate(self, value: Any) -> str | None:
        """An error message for a bad value, or None."""
        expected = self.type or type(self.default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            return f"expected {expected.__name__}, got {type(value).__name__} {value!r}"
        if self.choices is not None and value not in self.choices:
            return f"expected one of {', '.join(map(repr, self.choices))}, got {value!r}"
        return None


class Invalid:
    """An INVALID snippet: code that must be reported, where, and (if the rule fixes it) the fix.

    ``range`` is where the finding points, as distlint prints it: ``"line:column-end_line:end_column"``
    in the snippet's own coordinates (1-based lines and columns, the end exclusive), or a tuple of
    them, in order, for a snippet with several findings (Fixit's ``Invalid(..., range=)``). The
    rule's test (tests/rules/test_<CODE>.py) asserts it; ``count`` is then the number of ranges.
    """

    __slots__ = ("code", "fixed", "ranges", "options", "_count")

    def __init__(
        self,
        code: str,
        fixed: str | None = None,  # expected output of the fix (unsafe fixes included)
        count: int | None = None,  # how many findings this snippet yields (or give their ranges)
        options: Mapping[str, Any] = _NO_OPTIONS,
        *,
        range: str | Sequence[str] | None = None,  # Fixit's name for it
    ) -> None:
        self.code = code
        self.fixed = fixed
        self.ranges: tuple[str, ...] = (range,) if isinstance(range, str) else tuple(range or ())
        if count is not None and self.ranges and count != len(self.ranges):
            raise ValueError(f"Invalid snippet: count={count} but {len(self.ranges)} ranges")
        self._count = count
        self.options = options

    @property
    def count(self) -> int:
        """How many findings this snippet yields."""
        return len(self.ranges) or self._count or 1

    def __repr__(self) -> str:
        return (
            f"Invalid({self.code!r}, fixed={self.fixed!r}, count={self.count}, "
            f"options={self.options!r}, range={self.ranges!r})"
        )


class Valid(NamedTuple):
    code: str
    options: Mapping[str, Any] = _NO_OPTIONS


class Report(NamedTuple):
    rule: Rule
    node: cst.CSTNode
    message: str
    fix: FixPlan | None


class RuleContext:
    """What a rule sees of the file being linted; collects its reports."""

    def __init__(
        self,
        index: Index,
        path: str,
        source: str,
        facts: Facts | None = None,
        project: Any = None,
    ) -> None:
        self.index = index
        self.path = path
        self.source = source
        self.project = project
        # the training facts of this file, built once for all rules
        self.facts = facts if facts is not None else facts_for(index, path, project)
        self.reports: list[Report] = []
        self._rule: Rule | None = None

    @property
    def module(self) -> cst.Module:
        return self.index.module

    def report(
        self, node: cst.CSTNode, message: str | None = None, fix: FixPlan | None = None
    ) -> None:
        rule = self._rule
        assert rule is not None
        if fix is not None and not fix.title:
            fix.title = rule.FIX_TITLE or ""
        self.reports.append(Report(rule, node, message or rule.MESSAGE, fix))


class Rule:
    CODE: ClassVar[str] = ""
    NAME: ClassVar[str] = ""
    MESSAGE: ClassVar[str] = ""
    FIX_TITLE: ClassVar[str | None] = None
    FIX_SAFETY: ClassVar[Applicability | None] = None
    # Substrings one of which must appear in the source for this rule to be able to match.
    # Files with none of the enabled rules' triggers are not even parsed.
    TRIGGERS: ClassVar[tuple[str, ...]] = ()
    OPTIONS: ClassVar[dict[str, Option]] = {}
    # Opt-in rules (DL9xx) run only when selected explicitly.
    DEFAULT_ENABLED: ClassVar[bool] = True
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    URL: ClassVar[str | None] = None

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        values = {name: opt.default for name, opt in self.OPTIONS.items()}
        values.update(options or {})
        self.options = values

    def check(self, ctx: RuleContext) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---------------------------------------------------------------- docs
    @classmethod
    def docs(cls) -> str:
        """The rule's documentation, with Example / Use instead taken from its snippets."""
        body = inspect.cleandoc(cls.__doc__ or "")
        sections = _split_sections(body)
        out = [f"# {cls.NAME} ({cls.CODE})", ""]
        fixable = f"yes ({cls.FIX_SAFETY.value})" if cls.FIX_SAFETY is not None else "never"
        out.append(
            f"Fix: {fixable}.   Enabled by default: {'yes' if cls.DEFAULT_ENABLED else 'no (opt-in)'}."
        )
        out.append("")
        for title in ("What it does", "Why is this bad?"):
            out += [f"## {title}", sections.get(title, "").strip(), ""]
        if cls.INVALID:
            out += ["## Example", "```python", cls.INVALID[0].code.strip("\n"), "```", ""]
            replacement = cls.INVALID[0].fixed
            if replacement is None and cls.VALID:
                replacement = cls.VALID[0].code
            if replacement is not None:
                out += ["## Use instead", "```python", replacement.strip("\n"), "```", ""]
        out += ["## Fix safety", sections.get("Fix safety", "This rule has no fix.").strip(), ""]
        if cls.OPTIONS:
            lines = []
            for name, opt in cls.OPTIONS.items():
                choices = f" (one of {', '.join(map(repr, opt.choices))})" if opt.choices else ""
                lines.append(f"- `{name}` (default {opt.default!r}){choices}: {opt.help}")
            extra = sections.get("Options", "").strip()
            out += ["## Options", "\n".join(lines) + ("\n\n" + extra if extra else ""), ""]
        else:
            out += ["## Options", "None.", ""]
        refs = sections.get("References", "").strip()
        if refs:
            out += ["## References", refs, ""]
        return "\n".join(out).rstrip() + "\n"

    @classmethod
    def summary(cls) -> str:
        return cls.MESSAGE.split(":")[0].split(". ")[0]

    @classmethod
    def info(cls) -> RuleInfo:
        """The rule's metadata as a plain record (what reports say about it)."""
        return RuleInfo(
            cls.CODE,
            cls.NAME,
            cls.summary(),
            cls.MESSAGE,
            cls.docs(),
            bool(cls.DEFAULT_ENABLED),
            cls.FIX_SAFETY,
            cls.URL,
        )


def _split_sections(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    current = None
    buf: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            if current is not None:
                sections[current] = textwrap.dedent("\n".join(buf))
            current, buf = line[3:].strip(), []
        elif current is not None:
            buf.append(line)
    if current is not None:
        sections[current] = textwrap.dedent("\n".join(buf))
    return sections


_MULTIPLY_SAFE = (
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.MatrixMultiply,
    cst.Power,
)


def scaled_expression(expr: cst.BaseExpression, factor: str) -> cst.BaseExpression:
    """For fix plans: ``expr * <factor>``, parenthesising ``expr`` where ``*`` would bind
    tighter than it."""
    needs_parens = (
        isinstance(
            expr,
            (cst.IfExp, cst.Lambda, cst.BooleanOperation, cst.Comparison, cst.NamedExpr, cst.Yield),
        )
        or (isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, _MULTIPLY_SAFE))
        or (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not))
    )
    if needs_parens and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(
        left=expr,
        operator=cst.Multiply(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
        ),
        right=factor_expression(factor),
    )


@lru_cache(maxsize=256)
def factor_expression(text: str) -> cst.BaseExpression:
    """``cst.parse_expression(text)``, parsed once per text: fix plans only generate code from
    it, so one node can stand in every plan (a plan never looks nodes up by identity there)."""
    return cst.parse_expression(text)


@lru_cache(maxsize=256)
def fix_statement(text: str) -> cst.BaseStatement:
    """``cst.parse_statement(text)``, parsed once per text (as :func:`factor_expression`): a
    file with a thousand findings inserts the same ``lr *= accelerator.num_processes``."""
    return cst.parse_statement(text)


def can_scale_name_in_place(index: Index, name: cst.Name, stmt: cst.CSTNode | None) -> bool:
    """`lr *= n` before the statement is right when `lr` is a local of the statement's scope
    (not a global: that would make it local and unbound), and the statement is not repeated
    by a loop (the factor would compound)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    if not isinstance(index.parent(stmt), (cst.IndentedBlock, cst.Module)):
        return False
    scope = index.scope(name)
    if (
        scope.kind not in ("function", "module")
        or name.value in scope.globals
        or name.value in scope.nonlocals
    ):
        return False
    if not scope.bindings.get(name.value):
        return False
    for anc in index.ancestors(stmt):
        if anc is scope.node:
            break
        if isinstance(anc, (cst.For, cst.While)):
            return False
    return True
