"""`distlint check/fix --stdin-filename PATH -`: config applies as for PATH; fix prints only the source."""

import subprocess

import pytest
from helpers import FIXTURES

from distlint.config import Config
from distlint.runner import lint_source

BAD = (FIXTURES / "DL101" / "bad.py").read_text()


def run(exe, *args, cwd, data):
    return subprocess.run([exe, *args], cwd=cwd, input=data, capture_output=True, timeout=120)


def test_check_from_stdin_reports_under_the_given_name(distlint_exe, tmp_path):
    proc = run(
        distlint_exe, "check", "--stdin-filename", "train.py", "-", cwd=tmp_path, data=BAD.encode()
    )
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("train.py:20:5: DL101 ")
    clean = run(
        distlint_exe,
        "check",
        "--stdin-filename",
        "train.py",
        "-",
        cwd=tmp_path,
        data=b"import torch\n",
    )
    assert clean.returncode == 0


def test_per_file_ignores_apply_to_the_stdin_filename(distlint_exe, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.distlint]\nper-file-ignores = {"scratch/*.py" = ["DL101"]}\n'
    )
    ignored = run(
        distlint_exe,
        "check",
        "--stdin-filename",
        "scratch/try.py",
        "-",
        cwd=tmp_path,
        data=BAD.encode(),
    )
    assert ignored.returncode == 0, ignored.stdout
    linted = run(
        distlint_exe, "check", "--stdin-filename", "train.py", "-", cwd=tmp_path, data=BAD.encode()
    )
    assert linted.returncode == 1


def test_fix_writes_the_fixed_source_and_nothing_else(distlint_exe, tmp_path):
    data = BAD.replace("\n", "\r\n").encode()
    proc = run(distlint_exe, "fix", "--stdin-filename", "train.py", "-", cwd=tmp_path, data=data)
    expected = lint_source(data, "train.py", Config(), fix=True).fixed_bytes
    assert expected is not None and b"set_seed(args.seed)" in expected
    assert proc.stdout == expected  # byte for byte: CRLF kept, no report mixed in
    assert proc.returncode == 0
    assert not list(tmp_path.glob("*.py"))  # nothing written to disk


def test_fix_of_clean_or_unparsable_input_echoes_it(distlint_exe, tmp_path):
    clean = b"import torch\nx = 1\n"
    proc = run(distlint_exe, "fix", "--stdin-filename", "train.py", "-", cwd=tmp_path, data=clean)
    assert (proc.returncode, proc.stdout) == (0, clean)
    broken = b"import torch\ntorch.manual_seed(0)\nif True\n"
    proc = run(distlint_exe, "fix", "--stdin-filename", "train.py", "-", cwd=tmp_path, data=broken)
    assert proc.stdout == broken  # an editor piping through must never lose the buffer
    assert proc.returncode == 2 and b"train.py:3" in proc.stderr


def test_stdin_respects_selection_options(distlint_exe, tmp_path):
    proc = run(
        distlint_exe,
        "check",
        "--ignore",
        "DL1",
        "--stdin-filename",
        "train.py",
        "-",
        cwd=tmp_path,
        data=BAD.encode(),
    )
    assert proc.returncode == 0
    proc = run(
        distlint_exe,
        "check",
        "--format",
        "json",
        "--stdin-filename",
        "t.py",
        "-",
        cwd=tmp_path,
        data=BAD.encode(),
    )
    assert b'"path": "t.py"' in proc.stdout


def test_force_exclude_applies_to_the_stdin_filename(distlint_exe, tmp_path):
    """As ruff: an excluded --stdin-filename is not linted; `fix -` passes the text through."""
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nextend-exclude = ["legacy/"]\n')
    args = ("--force-exclude", "--stdin-filename", "legacy/train.py", "-")
    check = run(distlint_exe, "check", *args, cwd=tmp_path, data=BAD.encode())
    assert check.returncode == 0 and check.stdout == b"", check.stderr
    fix = run(distlint_exe, "fix", *args, cwd=tmp_path, data=BAD.encode())
    assert fix.returncode == 0 and fix.stdout == BAD.encode()
    # without --force-exclude, a named file is linted as always (ruff's rule too)
    named = run(distlint_exe, "check", *args[1:], cwd=tmp_path, data=BAD.encode())
    assert named.returncode == 1


def test_everything_excluded_says_no_python_files_found(distlint_exe, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nextend-exclude = ["legacy/"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "train.py").write_text(BAD)
    for args in (("--force-exclude", "legacy/train.py"), ("legacy",)):
        proc = run(distlint_exe, "check", *args, cwd=tmp_path, data=b"")
        assert proc.returncode == 0, proc.stderr
        assert b"warning: No Python files found" in proc.stderr, (args, proc.stderr)


def test_output_file_in_a_missing_directory_is_created(distlint_exe, tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    proc = run(
        distlint_exe,
        "fix",
        "-o",
        "reports/deep/out.json",
        "--format",
        "json",
        "train.py",
        cwd=tmp_path,
        data=b"",
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert (tmp_path / "reports" / "deep" / "out.json").read_text().startswith("[")
    # a directory that cannot be made: exit 2 BEFORE any file is fixed
    (tmp_path / "blocker").write_text("a file, not a directory")
    (tmp_path / "again.py").write_text(BAD)
    proc = run(distlint_exe, "fix", "-o", "blocker/out.txt", "again.py", cwd=tmp_path, data=b"")
    assert proc.returncode == 2 and b"--output-file" in proc.stderr
    assert (tmp_path / "again.py").read_text() == BAD


def test_statistics_mark_only_what_fix_would_fix(distlint_exe, tmp_path):
    """`[*]` in --statistics: safe fixes, and unsafe ones only when unsafe fixes are on (flag
    or `unsafe-fixes = true` in the configuration)."""
    unsafe_only = "import random\n\nimport torch\n\ntorch.manual_seed(0)\nrandom.shuffle([1])\n"
    (tmp_path / "train.py").write_text(unsafe_only)
    proc = run(
        distlint_exe, "check", "--no-cache", "--statistics", "train.py", cwd=tmp_path, data=b""
    )
    [line] = [x for x in proc.stdout.decode().splitlines() if "\tDL101\t" in x]
    assert "[*]" not in line, line
    (tmp_path / "pyproject.toml").write_text("[tool.distlint]\nunsafe-fixes = true\n")
    proc = run(
        distlint_exe, "check", "--no-cache", "--statistics", "train.py", cwd=tmp_path, data=b""
    )
    out = proc.stdout.decode()
    [line] = [x for x in out.splitlines() if "\tDL101\t" in x]
    assert "[*]" in line, out
    assert out.splitlines()[0] == line  # --statistics prints the table, not the findings


# issue #27: stdin is read in chunks under a cap; every problem is one line naming it, exit 2


@pytest.mark.slow
def test_stdin_larger_than_the_memory_bound_is_refused_in_bounded_memory(tmp_path):
    from bounded import bounded

    # 600 MB through a pipe, under a 1 GiB address-space cap (read whole, it took 610 MB)
    proc = bounded(["check", "-"], cwd=tmp_path, shell_stdin="< <(head -c 600M /dev/zero)")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "<stdin>: error: standard input is over the 64.0 MiB read limit: not read"
    ]


@pytest.mark.slow
def test_closed_stdin_is_one_error_line(tmp_path):
    from bounded import bounded

    proc = bounded(["check", "-"], cwd=tmp_path, shell_stdin="<&-")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["<stdin>: error: standard input is closed: nothing to lint"]


@pytest.mark.slow
def test_deeply_nested_notebook_json_on_stdin_is_one_error_line(tmp_path):
    from bounded import bounded

    data = b'{"cells": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    proc = bounded(["check", "--stdin-filename", "nb.ipynb", "-"], cwd=tmp_path, input=data)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "nb.ipynb: error: notebook JSON is nested too deeply to read: not a notebook"
    ]


@pytest.mark.slow
def test_notebook_of_millions_of_tiny_values_is_refused_before_it_is_parsed(tmp_path):
    from bounded import bounded

    # 5 million `[]` (10 MB): parsed, 1.5 GB for 20 million; refused from a count first
    data = b'{"cells": [' + b",".join([b"[]"] * 5_000_000) + b"]}"
    proc = bounded(["check", "--stdin-filename", "nb.ipynb", "-"], cwd=tmp_path, input=data)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "nb.ipynb: error: notebook JSON holds up to 10,000,001 values, over the 4,000,000 "
        "that are read: not linted"
    ]
