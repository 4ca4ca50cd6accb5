"""What distlint borrows from LibCST's private modules (distlint._libcst_compat), pinned.

A LibCST release that renames or reshapes any of it fails here, by name."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import libcst as cst

from distlint._libcst_compat import CODEGEN_STATE_MEMBERS, CodegenState

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "def f(a):\n    if a:\n        return [a,\n                1]\n    return None\n"


def test_codegen_state_has_what_distlint_uses():
    params = inspect.signature(CodegenState).parameters
    assert {"default_indent", "default_newline", "indent_tokens"} <= set(params)
    state = CodegenState(default_indent="    ", default_newline="\n")
    for member in CODEGEN_STATE_MEMBERS:
        assert hasattr(state, member), member
    assert state.tokens == [] and list(state.indent_tokens) == []


def test_codegen_of_one_node_with_hooks_gives_its_code():
    """``node._codegen(state)`` writes the node's code as tokens and calls the state's
    before/after hooks around every node: what positions and fix edits are built on."""
    module = cst.parse_module(SOURCE)
    seen: list[str] = []

    class Watching(CodegenState):
        def before_codegen(self, node: cst.CSTNode) -> None:
            seen.append(type(node).__name__)
            super().before_codegen(node)

    state = Watching(default_indent=module.default_indent, default_newline="\n")
    module._codegen(state)
    assert "".join(state.tokens) == SOURCE
    assert seen[0] == "Module" and "Return" in seen and "List" in seen
    # one statement alone, at the indentation in effect where it sits
    stmt = module.body[0].body.body[0]
    alone = CodegenState(default_indent="    ", default_newline="\n", indent_tokens=["    "])
    stmt._codegen(alone)
    assert "".join(alone.tokens) == "    if a:\n        return [a,\n                1]\n"


def test_only_the_adapter_imports_libcst_private_modules():
    offenders = []
    for path in sorted([*(ROOT / "distlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]):
        if path.name == "_libcst_compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(n.startswith("libcst.") and "._" in f".{n[7:]}" for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


# In a process of its own: the change is for the whole process (the lint worker's).
PLAIN_CHECKS = """
import abc, itertools, pathlib, sys
import libcst as cst
from distlint._libcst_compat import plain_type_checks

classes = sorted({c for c in vars(cst).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)}, key=repr)
nodes = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.py"))[::3]:
    module = cst.parse_module(path.read_text())
    todo = [module]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo.extend(node.children)
kinds = {type(n): n for n in nodes}
def answers():
    return [isinstance(n, c) for n in kinds.values() for c in classes] + [
        issubclass(t, c) for t in kinds for c in classes] + [
        isinstance(n, (c, d)) for n in kinds.values() for c, d in itertools.pairwise(classes)]
before = answers()
changed = plain_type_checks()
assert all(type(c) is not abc.ABCMeta for c in classes), "a node class kept ABCMeta"
class Mine(cst.Name):  # a subclass made afterwards
    pass
mine = Mine("x")
assert isinstance(mine, cst.Name) and isinstance(mine, cst.BaseExpression)
assert not isinstance(mine, cst.Attribute) and not isinstance(cst.Name("y"), Mine)
assert answers() == before
print(changed, len(kinds), len(classes))
"""


def test_plain_type_checks_give_every_answer_abcmeta_gave():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PLAIN_CHECKS, str(ROOT / "fixtures" / "scripts")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    changed, kinds, classes = map(int, done.stdout.split())
    assert changed > 300 and kinds > 80 and classes > 150
