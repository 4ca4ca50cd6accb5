"""Shared test helpers: rule snippets and their snapshots, inline expectations, name binding."""

from __future__ import annotations

import difflib
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distlint.api import Config, FileResult, Finding

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

EXPECT_RE = re.compile(r"#\s*expect:\s*(?P<codes>DL\d{3}(?:\s*,\s*DL\d{3})*)")


def expected_findings(source: str) -> set[tuple[int, str]]:
    """(line, code) pairs marked with `# expect: DL101[, DL201]` at the end of a line."""
    out = set()
    for lineno, line in enumerate(source.splitlines(), start=1):
        m = EXPECT_RE.search(line)
        if m:
            for code in re.split(r"\s*,\s*", m.group("codes")):
                out.add((lineno, code))
    return out


def fixture_config(path: Path, source: str) -> Config:
    """Every rule for a fixture, an opt-in one only where it is chosen: in its own fixtures
    (`fixtures/<CODE>/`) and in a file that expects it, as a user turns it on. An opt-in rule
    reports what correct scripts do on purpose (DL403: the main process logs its own loss)."""
    from distlint.registry import all_rules

    opt_in = {rule.CODE for rule in all_rules() if not rule.DEFAULT_ENABLED}
    chosen = {code for _, code in expected_findings(source)} | {path.parent.name}
    return Config(select=("ALL",), ignore=tuple(sorted(opt_in - chosen)))


def undefined_names(source: str, filename: str = "<fixed>") -> list[str]:
    """Names used but never bound, according to pyflakes (compiles the source too)."""
    import io

    from pyflakes import api as pyflakes_api
    from pyflakes import reporter as pyflakes_reporter

    out, err = io.StringIO(), io.StringIO()
    pyflakes_api.check(source, filename, pyflakes_reporter.Reporter(out, err))
    problems = [line for line in out.getvalue().splitlines() if "undefined name" in line]
    problems += [line for line in err.getvalue().splitlines() if line.strip()]
    return problems


# ------------------------------------------------------------------------------- rule snippets
# One helper for every rule test: lint a dedented snippet through the public API
# (`distlint.api`), then render what was found and what the fix does as plain text, compared
# with snapshots/<module>/<test>.txt beside the test module by the `snapshot` fixture of conftest.py.


@dataclass(frozen=True)
class Linted:
    """A snippet linted with one rule alone, and fixed with `fix --unsafe-fixes`."""

    source: str
    path: str
    result: FileResult  # lint
    fix: FileResult  # lint + fix to a fixed point, unsafe fixes included

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.result.findings

    @property
    def fixed_source(self) -> str | None:
        return self.fix.fixed_source

    def lines(self, code: str | None = None) -> list[int]:
        return [f.line for f in self.findings if code is None or f.code == code]

    def render(self) -> str:
        return render(self)


def lint_snippet(
    code: str,
    snippet: str,
    options: Mapping[str, Any] | None = None,
    *,
    path: str = "t.py",
) -> Linted:
    """Lint ``snippet`` (dedented with textwrap.dedent, nothing else: line 1 is the empty line
    after the opening quotes) with rule ``code`` alone and its ``options``, as ``path``.

    Also asserts what holds for every snippet: no error, and the fix is sound
    (:func:`assert_fix_is_sound`).
    """
    source = textwrap.dedent(snippet)
    config = Config(select=(code,), rule_options=((code, tuple(sorted((options or {}).items()))),))
    result = lint_text(source, path, config)
    fixed = lint_text(source, path, config, fix=True)
    assert_fix_is_sound(source, fixed, path, config)
    return Linted(source, path, result, fixed)


def lint_text(source: str | bytes, path: str, config: Config, *, fix: bool = False) -> FileResult:
    """``distlint.api.lint_source`` (with ``fix``: unsafe fixes too), asserting no error."""
    from distlint.api import lint_source

    result = lint_source(source, path, config, fix=fix, unsafe_fixes=True)
    assert not result.errors, result.errors
    return result


def assert_fix_is_sound(
    source: str, fixed: FileResult, path: str, config: Config, *, all_bound: bool = False
) -> None:
    """What every fix must keep: the fixed text compiles, binds every name the original bound
    (``all_bound``: every name at all), a second fix changes nothing, and no fixable finding is
    left over."""
    if fixed.fixed_source is None:
        assert all(f.fix is None for f in fixed.findings), "fixable findings left unfixed"
        return
    compile(fixed.fixed_source, path, "exec")
    unbound = set(_unbound(fixed.fixed_source)) - (set() if all_bound else set(_unbound(source)))
    assert not unbound, f"names unbound after the fix: {sorted(unbound)}"
    again = lint_text(fixed.fixed_source, path, config, fix=True)
    assert again.fixed_source is None, "a second fix changed the text again"
    assert [f for f in again.findings if f.fix is not None] == [], "fixable findings left"


def fixed_and_bound(linted: Linted) -> str:
    """The fixed text of a snippet whose every name is bound, which must be bound after the fix."""
    assert linted.fixed_source is not None, "no fix applied"
    assert undefined_names(linted.fixed_source) == []
    return linted.fixed_source


def _unbound(source: str) -> list[str]:
    # "t.py:3:5: undefined name 'x'" -> "undefined name 'x'" (lines move when a fix inserts)
    return [p.split(": ", 1)[-1] for p in undefined_names(source)]


def _diff(before: str, after: str, path: str) -> list[str]:
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            path,
            f"{path} (fixed)",
            n=1,
        )
    ]


def _where(f: Finding) -> str:
    return f"{f.line}:{f.column}-{f.end_line}:{f.end_column} {f.code}"


def render(linted: Linted) -> str:
    """The snapshot text: each finding (range, code, message, the source it points at, its own
    fix as a diff), then what `fix --unsafe-fixes` makes of the whole snippet."""
    from distlint.api import apply_fix

    src, path = linted.source, linted.path
    lines = src.splitlines()
    out: list[str] = []
    own_fixes = []
    for f in linted.findings:
        out.append(f"{_where(f)} {f.message}")
        text = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
        end = f.end_column if f.end_line == f.line else len(text) + 1
        out.append(f"  | {text}".rstrip())
        out.append("  | " + " " * (f.column - 1) + "^" * max(1, end - f.column))
        if f.end_line != f.line:
            out.append(f"  | ... to line {f.end_line}")
        if f.fix is None:
            out.append("  fix: none")
        else:
            out.append(f"  fix ({f.fix.applicability.value}): {f.fix.title}")
            own = apply_fix(src, f)
            own_fixes.append(own)
            out += ["    " + d for d in _diff(src, own, path)] or ["    (no change)"]
        out.append("")
    fixed = linted.fixed_source
    if not linted.findings and fixed is None:
        return "no findings\n"
    if fixed is None:
        out.append("fix --unsafe-fixes: unchanged")
    elif own_fixes == [fixed]:
        out.append("fix --unsafe-fixes: the fix above, nothing else")
    else:
        out.append("fix --unsafe-fixes:")
        out += ["    " + d for d in _diff(src, fixed, path)]
    remaining = linted.fix.findings if fixed is not None else ()
    if fixed is not None:
        out.append(
            "remaining after the fix: "
            + (", ".join(_where(f) for f in remaining) if remaining else "none")
        )
    return "\n".join(line.rstrip() for line in out) + "\n"


def snapshot_path(test_file: Path, test_name: str) -> Path:
    """snapshots/<test module>/<test name>[<param id>].txt in the test module's folder (for
    tests/rules/test_DL201.py: tests/rules/snapshots/test_DL201/), odd characters as `_`."""
    name = re.sub(r"[^A-Za-z0-9_.\[\]-]", "_", test_name) + ".txt"
    return test_file.parent / "snapshots" / test_file.stem / name


def snapshot_folders() -> list[Path]:
    """Every snapshots/<test module>/ folder of the suite."""
    return sorted(p for p in (ROOT / "tests").glob("**/snapshots/*") if p.is_dir())


def compare_snapshot(path: Path, text: str, *, update: bool, command: str) -> None:
    """Fail unless ``path`` holds ``text`` (a trailing newline added); with ``update``, write
    it instead. The failure says how to write it, and shows the diff or the would-be text."""
    import pytest

    if not text.endswith("\n"):
        text += "\n"
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if update:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(
            f"snapshot {shown} is missing; write it with\n    {command}\nand review it. "
            f"It would be:\n{text}",
            pytrace=False,
        )
    expected = path.read_text(encoding="utf-8")
    if expected != text:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"{shown} (snapshot)",
                f"{shown} (now)",
            )
        )
        pytest.fail(
            f"snapshot {shown} differs:\n{diff}\nIf the change is intended, write it with\n"
            f"    {command}\nand review the diff.",
            pytrace=False,
        )
