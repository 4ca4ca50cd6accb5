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

    import tomllib

    import distlint

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("distlint") == distlint.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{distlint.__version__}] - " in changelog
