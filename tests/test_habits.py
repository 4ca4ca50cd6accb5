"""The project's own habits, enforced by CI: the code is formatted, lint-clean and type-checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "--no-cache", "."),
        ("ruff", "format", "--no-cache", "--check", "."),
        # the files and the per-module strictness come from [tool.mypy] in pyproject.toml
        ("mypy", "--no-incremental"),
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_code_is_clean(command: tuple[str, ...]) -> None:
    proc = _run(*command)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version_has_one_source() -> None:
    import importlib.metadata

    import distlint

    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("distlint") == distlint.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{distlint.__version__}] - " in changelog


def _imports_of_dataclasses(path: Path) -> list[str]:
    import ast

    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (isinstance(node, ast.ImportFrom) and node.module == "dataclasses")
        or (isinstance(node, ast.Import) and any(a.name == "dataclasses" for a in node.names))
    ]


def test_the_lint_path_defines_no_dataclasses() -> None:
    """Every run of the command pays for creating its records at start-up: a dataclass costs
    0.2-0.4 ms (its methods are compiled from generated source), a NamedTuple about 0.05 ms,
    a plain class nothing. The lint path (everything but `verify`, which runs the user's
    training for minutes) uses NamedTuples and slotted classes (CONTRIBUTING.md)."""
    lint_path = [
        path
        for path in [*(ROOT / "distlint").rglob("*.py"), *(ROOT / "rules").glob("*.py")]
        if "verify" not in path.relative_to(ROOT).parts
    ]
    assert len(lint_path) > 30
    found = [where for path in lint_path for where in _imports_of_dataclasses(path)]
    # distlint.analysis.index and distlint.incremental (splicing a re-parsed block into its
    # parent) read the fields of LibCST's own node classes, which are dataclasses: they import
    # the module, they define none
    assert sorted(found) == ["distlint/analysis/index.py:20", "distlint/incremental.py:25"]
