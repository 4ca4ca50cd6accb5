"""Nothing lost, nothing executed, no crash: bad inputs, file safety, concurrency (issue #8)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from distlint.api import LintOptions, lint_file
from distlint.config import Config

SEEDED = "import torch\nimport numpy as np\ntorch.manual_seed(0)\nnp.random.rand(3)\n"
FIXED_TAIL = "set_seed(0)\nnp.random.rand(3)\n"
FIX = LintOptions(fix=True, unsafe_fixes=True, isolated=True)


def run_cli(*args, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "distlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------------------------
# Bad inputs: each gives findings or one clear error line with the path (and line), never a crash
# --------------------------------------------------------------------------------------------

BAD_INPUTS = {
    # name: (bytes, expected error substring or None when findings/clean are expected, line)
    "syntax.py": (b"import torch\ntorch.manual_seed(0\n", "never closed", 2),
    "py2.py": (b'print "hello"\nimport torch\ntorch.manual_seed(0)\n', "Python 2", 1),
    "nul.py": (b"import torch\x00\ntorch.manual_seed(0)\n", "null byte", 1),
    "badutf8.py": (b'import torch\ntorch.manual_seed(0)\nx = "\xe9"\n', "cannot decode", None),
    "badcookie.py": (b"# -*- coding: klingon -*-\nimport torch\n", "cannot decode", None),
    "empty.py": (b"", None, None),
    "only_comment.py": (b"# torch.manual_seed(0)\n", None, None),
    # Python's own limit is 200 nested brackets: within it linted, beyond it refused
    "deep.py": (
        b"import torch\ntorch.manual_seed(0)\nx = " + b"(" * 200 + b"1" + b")" * 200 + b"\n",
        None,
        None,
    ),
    "deeper.py": (
        b"import torch\ntorch.manual_seed(0)\nx = " + b"(" * 201 + b"1" + b")" * 201 + b"\n",
        "more than 200 nested brackets",
        3,
    ),
    "longchain.py": (
        b"import torch\ntorch.manual_seed(0)\nx = " + b"+".join([b"1"] * 50000) + b"\n",
        "expression nested more than 1200 levels",
        3,
    ),
    "widechain.py": (
        b"import torch\ntorch.manual_seed(0)\nx = " + b"+".join([b"1"] * 1100) + b"\n",
        None,
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gives_clean_error_or_result(tmp_path, name):
    data, error, line = BAD_INPUTS[name]
    path = tmp_path / name
    path.write_bytes(data)
    good = tmp_path / "good.py"
    good.write_text(SEEDED)
    proc = run_cli("check", "--isolated", str(path), str(good))
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    # the other file is still linted
    assert f"{good}:3:1: DL101" in proc.stdout
    if error is None:
        assert proc.returncode in (0, 1), proc.stderr
        assert str(path) + ": error" not in proc.stderr
    else:
        assert proc.returncode == 2
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(str(path))]
        assert len(lines) == 1 and error in lines[0], proc.stderr
        if line is not None:
            assert lines[0].startswith(f"{path}:{line}:") or lines[0].startswith(
                f"{path}:{line}: "
            ), lines[0]


def test_special_paths(tmp_path):
    (tmp_path / "dir.py").mkdir()
    (tmp_path / "broken.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "loop1.py").symlink_to(tmp_path / "loop2.py")
    (tmp_path / "loop2.py").symlink_to(tmp_path / "loop1.py")
    proc = run_cli(
        "check",
        "--isolated",
        str(tmp_path / "broken.py"),
        str(tmp_path / "loop1.py"),
        str(tmp_path / "missing.py"),
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{tmp_path / 'broken.py'}: error: broken symbolic link" in proc.stderr
    assert f"{tmp_path / 'loop1.py'}: error:" in proc.stderr
    assert f"{tmp_path / 'missing.py'}: error: no such file" in proc.stderr
    # walking the directory: a directory named x.py is walked, links are not followed into loops
    proc = run_cli("check", "--isolated", str(tmp_path))
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2  # the broken links are reported


def test_unreadable_file_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    real_open = open

    def fake_open(file, mode="r", *a, **k):
        if str(file) == str(path) and "r" in mode:
            raise PermissionError(13, "Permission denied")
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    result = lint_file(str(path), Config())
    assert result.errors and "permission denied" in result.errors[0].message


def test_ten_megabyte_file(tmp_path):
    body = "import torch\nimport numpy as np\ntorch.manual_seed(0)\nnp.random.rand(3)\n"
    # 10 MB, as generated files are: some code and a large embedded data literal. (10 MB of
    # dense statements also works but costs LibCST ~80 CPU-seconds to parse: not for every CI run.)
    code = "".join(f"value_{i} = {i} * 2\n" for i in range(5_000))
    filler = code + 'DATA = """\n' + ("x" * 99 + "\n") * 100_000 + '"""\n'
    path = tmp_path / "big.py"
    path.write_text(body + filler)
    assert path.stat().st_size > 10_000_000
    # over the default budget (1 MiB): one clear error, nothing parsed
    result = lint_file(str(path), Config())
    assert [str(e) for e in result.errors] == [
        f"{path}:1: error: file is 9.6 MiB, over the 1.0 MiB budget for one file "
        "(max-file-size in [tool.distlint]); not linted"
    ]
    # within a raised budget: linted
    result = lint_file(str(path), Config(max_file_size=16 << 20))
    assert not result.errors
    assert [f.code for f in result.findings] == ["DL101"]


# --------------------------------------------------------------------------------------------
# Fixes keep bytes: encoding, BOM, line endings, tabs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,data,expected",
    [
        (
            "latin1.py",
            "# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + SEEDED.encode(),
            "# -*- coding: latin-1 -*-\n# café\n".encode("latin-1"),
        ),
        ("bom.py", b"\xef\xbb\xbf" + SEEDED.encode(), b"\xef\xbb\xbfimport torch\n"),
        ("crlf.py", SEEDED.replace("\n", "\r\n").encode(), b"import torch\r\n"),
    ],
)
def test_fix_keeps_encoding_bom_and_newlines(tmp_path, name, data, expected):
    path = tmp_path / name
    path.write_bytes(data)
    result = lint_file(str(path), Config(), FIX)
    assert not result.errors, result.errors
    out = path.read_bytes()
    assert out.startswith(expected)
    if name == "crlf.py":
        assert b"\n" not in out.replace(b"\r\n", b"")
        assert out.endswith(FIXED_TAIL.replace("\n", "\r\n").encode())
    else:
        assert out.endswith(FIXED_TAIL.encode())
    if name == "latin1.py":
        assert "café".encode("latin-1") in out


def test_fix_keeps_mixed_line_endings_of_untouched_lines(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_bytes(
        b"import torch\r\nimport numpy as np\ntorch.manual_seed(0)\nnp.random.rand(3)\r\n"
    )
    lint_file(str(path), Config(), FIX)
    out = path.read_bytes()
    assert out.startswith(b"import torch\r\nimport numpy as np\n")
    assert out.endswith(b"np.random.rand(3)\r\n")


def test_fix_keeps_mode_and_follows_symlinks(tmp_path):
    target = tmp_path / "real.py"
    target.write_text(SEEDED)
    os.chmod(target, 0o751)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = lint_file(str(link), Config(), FIX)
    assert not result.errors
    assert link.is_symlink()
    assert target.read_text().endswith(FIXED_TAIL)
    assert (target.stat().st_mode & 0o777) == 0o751
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".distlint-")]


def test_write_failure_leaves_original_intact(tmp_path, monkeypatch):
    path = tmp_path / "t.py"
    path.write_text(SEEDED)

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    result = lint_file(str(path), Config(), FIX)
    assert path.read_text() == SEEDED
    assert any("permission denied" in e.message for e in result.errors)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".distlint-")]


def test_vanished_file_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    import distlint.api as api_mod

    real = api_mod.lint_source

    def vanish(*a, **k):
        result = real(*a, **k)
        path.unlink()
        return result

    monkeypatch.setattr(api_mod, "lint_source", vanish)
    result = lint_file(str(path), Config(), FIX)
    assert any("vanished" in e.message for e in result.errors)
    assert not path.exists()


def test_invalid_fix_is_dropped_not_written(tmp_path, monkeypatch):
    """A fix whose output would not parse is dropped with its rule code and nothing is written."""
    from distlint import fixes as fixes_mod

    real_transform = fixes_mod._transform

    def broken_transform(module, fixes):
        if not fixes:
            return real_transform(module, fixes)
        return None  # as if the transformed code did not re-parse

    monkeypatch.setattr(fixes_mod, "_transform", broken_transform)
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    result = lint_file(str(path), Config(), FIX)
    assert path.read_text() == SEEDED
    assert any(
        e.message.startswith("DL101:") and "would not parse" in e.message for e in result.errors
    )


def test_concurrent_fix_processes_leave_files_whole(tmp_path):
    for i in range(30):
        (tmp_path / f"s{i}.py").write_text(SEEDED + f"# file {i}\n")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distlint",
                "fix",
                "--isolated",
                "--unsafe-fixes",
                str(tmp_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for p in procs:
        p.communicate(timeout=180)
    for i in range(30):
        text = (tmp_path / f"s{i}.py").read_text()
        assert text in (SEEDED + f"# file {i}\n",) or (
            text.endswith(f"# file {i}\n")
            and "set_seed(0)" in text
            and "torch.manual_seed" not in text
        ), text
        compile(text, "x", "exec")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".distlint-")]


# --------------------------------------------------------------------------------------------
# Nothing executed on the lint path
# --------------------------------------------------------------------------------------------


def test_linting_never_executes_the_script(tmp_path):
    marker = tmp_path / "executed"
    script = tmp_path / "sideeffect.py"
    script.write_text(
        textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("ran")
        import torch
        import numpy as np
        torch.manual_seed(0)
        np.random.rand(3)
        raise SystemExit(3)
    """)
    )
    conf = tmp_path / "pyproject.toml"
    conf.write_text('[tool.distlint]\nselect = ["DL1"]\n')
    for cmd in (["check"], ["fix", "--unsafe-fixes"]):
        proc = run_cli(*cmd, str(script), cwd=tmp_path)
        assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists()
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['distlint', 'check', '--exit-zero', {str(script)!r}]\n"
        "try:\n    runpy.run_module('distlint', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('torch', 'accelerate', 'torch_xla', 'numpy', 'sideeffect', 'distlint.verify', 'distlint.lsp') if m in sys.modules]\n"
        "print('IMPORTED', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "IMPORTED []" in proc.stdout, proc.stdout + proc.stderr
