"""The flake8 plugin (entry point `DL`), run through the real flake8 command."""

import subprocess
import sys

from helpers import FIXTURES

BAD = (FIXTURES / "DL101" / "bad.py").read_text()
GOOD = (FIXTURES / "DL101" / "good.py").read_text()


def flake8(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plugin_reports_dl_codes(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    proc = flake8("--select", "DL", "bad.py", "good.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        "bad.py:20:5: DL101 torch is seeded by hand but numpy is not: "
        "use `accelerate.utils.set_seed(seed)`"
    ]


def test_plugin_is_registered_and_filtered_like_other_codes(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    version = subprocess.run(
        [sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True, timeout=60
    )
    assert "distlint" in version.stdout
    assert (
        flake8("--select", "DL", "--extend-ignore", "DL101", "bad.py", cwd=tmp_path).returncode == 0
    )
    noqa = BAD.replace(
        "torch.manual_seed(args.seed)  # expect: DL101",
        "torch.manual_seed(args.seed)  # noqa: DL101",
    )
    (tmp_path / "quiet.py").write_text(noqa)
    assert flake8("--select", "DL", "quiet.py", cwd=tmp_path).returncode == 0


def test_plugin_uses_distlint_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nignore = ["DL101"]\n')
    (tmp_path / "bad.py").write_text(BAD)
    assert flake8("--select", "DL", "bad.py", cwd=tmp_path).returncode == 0


def test_notebooks_are_skipped_with_a_message(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": ["import random\n", "import torch\n", "torch.manual_seed(0)\n"],
            }
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    import json

    (tmp_path / "train.ipynb").write_text(json.dumps(nb, indent=1))
    proc = flake8("--select", "DL", "train.ipynb", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and "DL000 notebooks are not linted through flake8" in lines[0], proc
    assert "distlint check train.ipynb" in lines[0]


def test_a_file_that_does_not_parse_is_flake8s_own_e999(tmp_path):
    """What the README says: flake8 reports E999 itself and never calls the plugin for a file
    Python cannot parse (no DL000 line); DL000 is for what only distlint refuses, such as
    its configuration being wrong."""
    (tmp_path / "broken.py").write_text("import torch\ntorch.manual_seed(0\n")
    proc = flake8("--select", "DL,E999", "broken.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "E999" in proc.stdout and "DL" not in proc.stdout.replace("DL000", "")
    assert "DL000" not in proc.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nselect = ["DL2O1"]\n')
    (tmp_path / "bad.py").write_text(BAD)
    proc = flake8("--select", "DL", "bad.py", cwd=tmp_path)
    assert (
        "DL000 distlint configuration error" in proc.stdout and "did you mean DL201" in proc.stdout
    )
