"""The lint path under every supported Python this machine has (issue #30 item 6).

distlint supports Python 3.9 and later. The suite itself runs under one interpreter; this test
runs a small lint-path smoke script (check, fix, a notebook, the registry, no torch imported)
under each other interpreter it finds: ``~/.pyenv/versions/*``, ``python3.X`` on PATH, and the
interpreters named in ``DISTLINT_TEST_PYTHONS`` (``os.pathsep``-separated, e.g. venvs made for
this). distlint is imported from this checkout (a folder of links that installs ``rules/`` as
``distlint.rules``, as the wheel does), so nothing is installed; an interpreter without
distlint's dependencies (libcst, click, tomli before 3.11) is skipped and the skip names it and
says what to install. Each run prints which interpreter it used (`pytest -rA` shows it).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

SUPPORTED = [(3, minor) for minor in range(9, 14)]

SMOKE = r"""
import json, sys
from distlint.config import Config
from distlint.api import lint_source
from distlint.registry import all_rules, normalise_selector

assert len(all_rules()) >= 9 and normalise_selector("seed-only-torch") == "DL101"
bad = open(sys.argv[1], encoding="utf-8").read()
found = lint_source(bad, "bad.py", Config()).findings
assert [f.code for f in found] == ["DL101"], found
fixed = lint_source(bad, "bad.py", Config(), fix=True)
assert fixed.fixed_source and "set_seed(" in fixed.fixed_source and not fixed.findings
assert lint_source(fixed.fixed_source, "bad.py", Config(), fix=True).fixed_source is None
cell = "!pip install a \\\nb\nimport random, torch\ntorch.manual_seed(0)\nrandom.random()\n"
nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": cell,
                 "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
result = lint_source(json.dumps(nb).encode(), "nb.ipynb", Config())
assert [(f.code, f.cell, f.line) for f in result.findings] == [("DL101", 1, 4)], result
assert not {"torch", "accelerate", "torch_xla"} & set(sys.modules), "the lint path imported torch"
print("lint path ok on Python %d.%d.%d" % sys.version_info[:3])
"""


def _version(python: str) -> tuple[int, int] | None:
    """The version of an interpreter, from its name where it says it (no process started at
    collection), else by asking it."""
    named = re.search(r"(?:versions/|python)(3)\.(\d+)", python)
    if named:
        return int(named.group(1)), int(named.group(2))
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (int(out[0]), int(out[1])) if len(out) == 2 else None


def interpreters() -> list[tuple[str, str]]:
    """(id, path) of one interpreter per supported version found, the running one excluded;
    the ones named in DISTLINT_TEST_PYTHONS first."""
    candidates = [p for p in os.environ.get("DISTLINT_TEST_PYTHONS", "").split(os.pathsep) if p]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python")))
    candidates += filter(None, (shutil.which(f"python3.{m}") for _, m in SUPPORTED))
    found: dict[tuple[int, int], str] = {}
    for python in candidates:
        version = _version(python)
        if version in SUPPORTED and version != sys.version_info[:2]:
            found.setdefault(version, python)
    return [(f"py{v[0]}.{v[1]}", found[v]) for v in sorted(found)]


def _missing(python: str) -> list[str]:
    code = (
        "import importlib.util, sys\n"
        "mods = ['libcst', 'click'] + (['tomli'] if sys.version_info < (3, 11) else [])\n"
        "print(' '.join(m for m in mods if importlib.util.find_spec(m) is None))"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    return proc.stdout.split()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """This checkout importable as the installed package: distlint/ with rules/ inside it."""
    site = tmp_path_factory.mktemp("site")
    package = site / "distlint"
    package.mkdir()
    for entry in (ROOT / "distlint").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "rules").symlink_to(ROOT / "rules")
    return site


FOUND = interpreters()


@pytest.mark.slow
@pytest.mark.parametrize("python", [p for _, p in FOUND], ids=[i for i, _ in FOUND])
def test_lint_path_smoke_under_each_supported_python(python, checkout, tmp_path):
    missing = _missing(python)
    if missing:
        pytest.skip(
            f"{python} lacks {', '.join(missing)}: `{python} -m pip install {' '.join(missing)}` "
            "(or name a venv that has them in DISTLINT_TEST_PYTHONS) to run the smoke test there"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(checkout)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [python, "-s", "-c", SMOKE, str(ROOT / "fixtures" / "DL101" / "bad.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"lint path ok on Python 3\.\d+\.\d+", proc.stdout)
    print(f"{python}: {proc.stdout.strip()}")


def test_the_running_python_is_supported_and_others_are_looked_for():
    """The suite's own interpreter is one of the supported ones; the list of others found is
    shown (each runs the smoke test above, or is skipped saying what it lacks)."""
    assert sys.version_info[:2] in SUPPORTED
    print("other interpreters:", ", ".join(f"{i} ({p})" for i, p in FOUND) or "none")
