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
