"""No long or branchy function on the lint path, except those CONTRIBUTING.md names.

The lint path is `distlint/` (without `distlint/verify/`, which runs training and is never imported
by `check`, `fix` or the language server) and `rules/`. A function is measured on its own: its
lines from `def` to its last line, and a McCabe-style cyclomatic complexity counted from the AST
(1, plus 1 per `if`/`elif`, `for`, `while`, `except`, ternary, `case`, comprehension `if` and
`and`/`or` operand beyond the first). A function nested in another is measured apart from it.

The exceptions are the bullet list under "Long functions" in CONTRIBUTING.md, one
`` `path.py:qualname` `` per line with a justification: the test reads it from there, so the list
and the code cannot drift apart (an entry that is no longer over a limit fails too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 80
MAX_COMPLEXITY = 15
LINT_PATH = ("distlint", "rules")
NOT_LINT_PATH = ("distlint/verify/",)
HEADING = "## Long functions"

_DECISIONS = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.IfExp,
    ast.ExceptHandler,
    ast.match_case,
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Measure(NamedTuple):
    name: str  # "distlint/guard.py:Scanner._scan"
    lines: int
    complexity: int


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue  # measured on its own
        if isinstance(node, _DECISIONS):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += len(node.ifs)
        stack.extend(ast.iter_child_nodes(node))
    return count


def measure_source(source: str, path: str) -> list[Measure]:
    found: list[Measure] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append(Measure(f"{path}:{name}", lines, complexity(child)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def lint_path_measures() -> list[Measure]:
    measures = []
    for top in LINT_PATH:
        for file in sorted((ROOT / top).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            if not path.startswith(NOT_LINT_PATH):
                measures.extend(measure_source(file.read_text(encoding="utf-8"), path))
    return measures


def named_exceptions() -> dict[str, str]:
    """`path.py:qualname` -> its justification, from CONTRIBUTING.md's list."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert HEADING in text, f"CONTRIBUTING.md has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    entries = {}
    for line in section.splitlines():
        match = re.match(r"- `([\w/.]+\.py:[\w.]+)`(.*)", line)
        if match:
            entries[match.group(1)] = match.group(2).strip(" :-—")
    return entries


def test_the_measure_counts_decisions_and_lines():
    source = (
        "def f(a, b):\n"
        "    if a and b or a:\n"  # if +1, two extra operands +2
        "        return [x for x in a if x if not x]\n"  # two comprehension ifs +2
        "    elif b:\n"  # +1
        "        pass\n"
        "    for x in a:\n"  # +1
        "        while x:\n"  # +1
        "            x = 1 if x else 2\n"  # +1
        "    try:\n"
        "        pass\n"
        "    except ValueError:\n"  # +1
        "        pass\n"
        "    match a:\n"
        "        case 1: pass\n"  # +1
        "        case _: pass\n"  # +1
        "    def inner():\n"  # measured on its own
        "        if a: pass\n"
        "    return inner\n"
    )
    outer, inner = measure_source(source, "m.py")
    assert outer == Measure("m.py:f", 18, 13)
    assert inner == Measure("m.py:f.inner", 2, 2)


def test_no_long_or_branchy_function_outside_the_named_exceptions():
    allowed = named_exceptions()
    over = {
        m.name: m
        for m in lint_path_measures()
        if m.lines > MAX_LINES or m.complexity > MAX_COMPLEXITY
    }
    unlisted = [
        f"{m.name}: {m.lines} lines, complexity {m.complexity}"
        for name, m in over.items()
        if name not in allowed
    ]
    assert not unlisted, (
        f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: split these along their seams "
        f"(or name them, justified, under {HEADING!r} in CONTRIBUTING.md):\n  "
        + "\n  ".join(unlisted)
    )
    stale = sorted(name for name in allowed if name not in over)
    assert not stale, (
        f"within the limits now (or gone): remove them from {HEADING!r} in CONTRIBUTING.md:\n  "
        + "\n  ".join(stale)
    )
    unjustified = sorted(name for name, why in allowed.items() if not why)
    assert not unjustified, f"named without a justification in CONTRIBUTING.md: {unjustified}"
