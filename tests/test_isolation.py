"""Linting a folder never runs code from it (issue #27 item 1): modules planted there under the
names of everything distlint imports are never imported by the `distlint` command, its process
pool or ``python -m distlint`` (the language server: tests/test_lsp.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shadowing import cli_modules, distlint_command, plant, ran, scripts, worker_modules

from distlint import parallel


@pytest.fixture(scope="module")
def names(tmp_path_factory) -> set[str]:
    return cli_modules(tmp_path_factory.mktemp("clean")) | worker_modules()


def _check(command: list[str], folder: Path) -> list[dict]:
    files = scripts(folder)
    proc = subprocess.run(
        [*command, "check", "-j", "2", "--no-cache", "--format", "json", *files],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # findings: the lint really ran
    report = json.loads(proc.stdout)
    return report["findings"] if isinstance(report, dict) else report


@pytest.mark.skipif(not parallel.can_fork(), reason="no process pool on this platform")
def test_distlint_command_and_its_pool_import_nothing_from_the_folder(tmp_path, names):
    folder, markers = tmp_path / "repo", tmp_path / "markers"
    folder.mkdir()
    planted = plant(folder, names, markers)
    assert {"select", "pickle", "libcst", "click", "multiprocessing", "distlint"} <= set(planted)
    findings = _check([distlint_command()], folder)
    assert sorted({f["code"] for f in findings}) == ["DL101"] and len(findings) == 10
    assert ran(markers) == []


@pytest.mark.skipif(not parallel.can_fork(), reason="no process pool on this platform")
def test_python_m_distlint_imports_nothing_from_the_folder(tmp_path, names):
    """``python -m`` puts the folder first on the import path; distlint takes it off before
    importing anything. (A ``distlint/`` package in the folder is what ``python -m distlint``
    runs, by Python's rule: the `distlint` command or ``python -P`` do not.)"""
    folder, markers = tmp_path / "repo", tmp_path / "markers"
    folder.mkdir()
    plant(folder, names, markers)
    shutil.rmtree(folder / "distlint")
    findings = _check([sys.executable, "-m", "distlint"], folder)
    assert len(findings) == 10
    assert ran(markers) == []
