"""Nothing lost, nothing executed, no crash: bad inputs, file safety, concurrency (issue #8)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

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
    # the message is Python's own: 3.9's parser words it differently
    "syntax.py": (
        b"import torch\ntorch.manual_seed(0\n",
        "never closed" if sys.version_info >= (3, 10) else "unexpected EOF",
        2,
    ),
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
        "too deeply nested: more than 1200 levels",
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
    real_open = os.open

    def fake_open(file, flags, *a, **k):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied")
        return real_open(file, flags, *a, **k)

    monkeypatch.setattr(os, "open", fake_open)
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
    # over the default budget (512 KiB): one clear error, nothing parsed
    result = lint_file(str(path), Config())
    assert [str(e) for e in result.errors] == [
        f"{path}:1: error: file is 9.6 MiB, over the 512 KiB budget for one file "
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

    def broken_code(module, node, indent):
        return "(\n"  # every statement a fix rewrites or inserts comes out unparsable

    monkeypatch.setattr(fixes_mod, "_code", broken_code)
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


# --------------------------------------------------------------------------------------------
# Issue #16: inputs that crashed, stalled or exhausted LibCST are measured first (distlint.guard)
# --------------------------------------------------------------------------------------------

HEADER = SEEDED  # a DL101 finding at line 3 whenever the file is linted


def generated(kind: str, n: int) -> str:
    """The issue's inputs (and their neighbours), generated at test time."""
    body = {
        "parens_lines": lambda: "x = " + "(\n" * n + "1" + "\n)" * n + "\n",
        "sum_lines": lambda: "x = (\n" + " +\n".join(["1"] * n) + "\n)\n",
        "sum_backslash": lambda: "x = " + " + \\\n".join(["1"] * n) + "\n",
        "call_lines": lambda: "x = (a\n" + "    .f()\n" * n + ")\n",
        "subscript_lines": lambda: "x = (a\n" + "    [0]\n" * n + ")\n",
        "strings_lines": lambda: "x = (\n" + '    "ab"\n' * n + ")\n",
        "fstrings_lines": lambda: "x = (\n" + '    f"ab{y}"\n' * n + ")\n",
        "and_lines": lambda: "x = (\n" + " and\n".join(["a"] * n) + "\n)\n",
        "lambdas": lambda: "x = " + "lambda a, b=1: " * n + "1\n",
        "conditionals": lambda: "x = (\n" + "1 if a else\n" * n + "2)\n",
        "unary": lambda: "x = " + "-" * n + "1\n",
        "power": lambda: "x = " + "**".join(["2"] * n) + "\n",
        "elif": lambda: (
            "if a:\n    pass\n" + "".join(f"elif a == {i}:\n    pass\n" for i in range(n))
        ),
        "fat_sum": lambda: "x = (\n" + " +\n".join(["f(a, b, c, d, e, g, h, i, j, k)"] * n) + ")\n",
        "dicts": lambda: "x = " + "{1:\n" * n + "1" + "\n}" * n + "\n",
        # issue #27: within every bound above, but LibCST's parse costs memory and time
        # quadratic in the nesting of each statement, summed over the file
        "conditional_lines": lambda: ("x = " + "1 if a else " * n + "2\n") * 36,  # 9.2 GB, 87 s
        "lambda_lines": lambda: ("f = " + "lambda: " * n + "0\n") * 36,  # ~275 MB a line
        "call_nest_lines": lambda: ("x = " + "f(" * n + "a" + ")" * n + "\n") * 20,
    }[kind]()
    return HEADER + body


# kind, n, expected message (None: within the bounds), line of the message
GUARD_CASES = [
    ("parens_lines", 200, None, None),
    ("parens_lines", 201, "more than 200 nested brackets", 205),
    ("parens_lines", 3000, "more than 200 nested brackets", 205),  # LibCST: SIGSEGV in 0.6 s
    ("dicts", 200, None, None),
    ("sum_lines", 1000, None, None),
    ("sum_lines", 6000, "too deeply nested: more than 1200 levels", 5),  # LibCST: 110 s
    ("sum_backslash", 6000, "too deeply nested: more than 1200 levels", 5),
    ("call_lines", 550, None, None),
    ("call_lines", 5000, "too deeply nested: more than 1200 levels", 5),  # LibCST: segfault
    ("subscript_lines", 1000, None, None),
    ("subscript_lines", 5000, "operators/calls/subscripts", 5),  # LibCST: 204 s
    ("fat_sum", 1000, "operators/calls/subscripts", 5),  # LibCST: 6 s
    ("strings_lines", 1000, None, None),  # was refused as "too deeply nested"
    ("strings_lines", 50000, "too deeply nested: more than 1200 levels", 5),  # false "cannot parse"
    ("fstrings_lines", 30000, "too deeply nested: more than 1200 levels", 5),
    ("strings_lines", 60000, "over the 512 KiB budget", 1),  # the size is measured first
    ("and_lines", 1100, None, None),
    ("and_lines", 8000, "too deeply nested: more than 1200 levels", 5),  # LibCST: segfault
    ("lambdas", 1100, None, None),
    ("lambdas", 6000, "too deeply nested: more than 1200 levels", 5),  # LibCST: segfault
    ("conditionals", 6000, "too deeply nested: more than 1200 levels", 5),  # LibCST: > 30 s
    ("unary", 6000, "too deeply nested: more than 1200 levels", 5),  # LibCST: 2 GB
    ("power", 6000, "too deeply nested: more than 1200 levels", 5),  # LibCST: 4 GB
    ("elif", 1100, None, None),
    ("elif", 10000, "too deeply nested: more than 1200 levels", 2402),  # LibCST: segfault
    ("conditionals", 1100, None, None),  # one is fine (LibCST: 215 MB, 1.3 s)
    ("conditional_lines", 1100, "nested expressions too costly", 7),  # the third
    ("conditional_lines", 300, "nested expressions too costly", 34),  # 36 x 19 MB, 5 s
    ("conditional_lines", 200, None, None),
    ("lambda_lines", 1100, "nested expressions too costly", 6),  # the second
    ("lambda_lines", 200, None, None),
    ("call_nest_lines", 150, "nested expressions too costly", 15),  # 20 x 52 MB
    ("call_nest_lines", 60, None, None),
]


@pytest.mark.parametrize("kind,n,message,line", GUARD_CASES, ids=lambda v: str(v))
def test_guard_bounds(kind, n, message, line):
    from distlint import guard

    text = generated(kind, n)
    started = time.perf_counter()
    error = guard.check_source(text, "g.py")
    assert time.perf_counter() - started < 1.0, "the measure is linear and fast"
    if message is None:
        assert error is None, error
    else:
        assert error is not None and message in error.message, error
        assert error.path == "g.py" and error.line == line, error
        assert str(error).startswith(f"g.py:{line}: error: ")


def test_guard_runs_before_libcst(monkeypatch):
    """What the guard refuses never reaches LibCST (where it would crash the process)."""
    import libcst

    from distlint.runner import lint_source

    def no_parse(*args, **kwargs):
        raise AssertionError("LibCST must not see this input")

    monkeypatch.setattr(libcst, "parse_module", no_parse)
    for kind, n in (("parens_lines", 3000), ("call_lines", 5000), ("and_lines", 8000)):
        result = lint_source(generated(kind, n), "g.py")
        assert len(result.errors) == 1 and "not linted" in result.errors[0].message


def test_guard_is_linear_on_a_large_ordinary_file():
    from distlint import guard

    text = HEADER + "".join(
        f"def f{i}(a, b):\n    '''Doc.'''\n    return g(a.b[i], {{'k': -b}}) ** 2  # c\n\n"
        for i in range(6000)
    )
    started = time.perf_counter()
    assert guard.check_source(text, "big.py", max_file_size=0) is None
    assert time.perf_counter() - started < 2.0


def test_guard_leaves_syntax_errors_to_the_parser():
    from distlint import guard

    for text in ('x = """never closed\n', "x = 'open\n", "x = (((\n", "x = )))\n", "\\"):
        assert guard.check_source(HEADER + text, "s.py") is None


def test_guard_reads_the_same_on_python_before_3_11(monkeypatch):
    """Python 3.9 and 3.10 have no possessive quantifiers: there the guard's tokenizer is
    compiled from ``guard.without_possessive`` of its pattern. On every fixture and source file of
    the project, on texts made to tell them apart and on every bounds case, that pattern cuts the
    same tokens of the same kinds, and the guard gives the same verdict."""
    import re
    from pathlib import Path

    from distlint import guard

    older = guard.without_possessive(guard._TOKEN_PATTERN)
    assert "*+" not in older and "++" not in older and "(?>" not in older
    compiled = re.compile(older, re.VERBOSE | re.DOTALL)

    def tokens(pattern: re.Pattern[str], text: str) -> list[tuple[str | None, tuple[int, int]]]:
        kinds = {index: name for name, index in pattern.groupindex.items()}
        return [(kinds.get(m.lastindex or 0), m.span()) for m in pattern.finditer(text)]

    root = Path(__file__).resolve().parents[1]
    texts = [
        path.read_text(encoding="utf-8", errors="replace")
        for folder in ("fixtures", "distlint", "rules", "tests")
        for path in sorted((root / folder).rglob("*.py"))
    ]
    assert len(texts) > 200
    texts += [
        """rb'x' r'''a''' f\"\"\"b\"\"\" abc'x' u'' 1.2e3j 0x_ff 1.e5.x '\\'' "\\"" #c\n""",
        """'''a\\'''' x\\\ny 'open\n \"\"\"never closed""",
        "é = 1 ; $ ? ! ` ab' \t\f  x",
        "a,=b==c<<=d<>e->f**=g**h*i//=j//k/l-m-=n...o..p:q:=r~s!=t>>u>=v<w@x%=y^z&|not if ifx",
    ]
    for text in texts:
        assert tokens(compiled, text) == tokens(guard._TOKEN, text)
    verdicts = [guard.check_source(generated(kind, n), "g.py") for kind, n, *_ in GUARD_CASES]
    monkeypatch.setattr(guard, "_TOKEN", compiled)
    for kind, index in compiled.groupindex.items():  # the kinds are numbered in its own order
        if not kind.startswith("_"):
            monkeypatch.setattr(guard, f"_{kind.upper()}", index)
    assert [
        guard.check_source(generated(kind, n), "g.py") for kind, n, *_ in GUARD_CASES
    ] == verdicts


# Linted end to end at the bounds, in a child process (a crash there must not take pytest down),
# in a thread as the language server lints: LibCST, the analysis and the fix all get through.
# (kind, n, also fix it): fixing re-lints, which doubles the cost; the slow ones are checked only.
AT_THE_BOUNDS = [
    ("strings_lines", 1000, True),
    ("parens_lines", 200, True),
    ("sum_lines", 1000, True),
    ("and_lines", 1150, False),
    ("elif", 1150, False),
    ("lambdas", 1100, False),
]


def test_inputs_at_the_bounds_are_linted_and_fixed(tmp_path):
    paths = []
    for kind, n, fix in AT_THE_BOUNDS:
        path = tmp_path / f"{kind}_{n}{'_fix' if fix else ''}.py"
        path.write_text(generated(kind, n))
        paths.append(str(path))
    code = textwrap.dedent(
        """
        import sys, threading
        from distlint.runner import lint_source
        out = []
        def work():
            for path in sys.argv[1:]:
                text = open(path).read()
                fix = path.endswith("_fix.py")
                result = lint_source(text, path, fix=fix, unsafe_fixes=True)
                codes = [f.code for f in lint_source(text, path).findings] if fix else [
                    f.code for f in result.findings]
                out.append((path, codes, [e.message for e in result.errors],
                            result.fixes_applied if fix else 1))
        t = threading.Thread(target=work)
        t.start()
        t.join()
        for item in out:
            print(item)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *paths], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(paths), proc.stdout + proc.stderr[-2000:]
    for path, line in zip(paths, lines):
        assert line == repr((path, ["DL101"], [], 1)), line


def test_crashing_and_stalling_inputs_are_refused_by_the_cli(tmp_path):
    """Issue #16 items 3 and 6 through the command: one line each, the other file linted."""
    cases = {
        "parens3000.py": (generated("parens_lines", 3000), 205),  # was: SIGSEGV, no message
        "calls5000.py": (generated("call_lines", 5000), 5),  # was: SIGSEGV after 200-280 s
        "sum6000.py": (generated("sum_lines", 6000), 5),  # was: 110 s
        "subscripts5000.py": (generated("subscript_lines", 5000), 5),  # was: 204 s
        "strings50000.py": (generated("strings_lines", 50000), 5),  # was: false "cannot parse"
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "good.py").write_text(SEEDED)
    for i in range(3):  # enough files for the process pool
        (tmp_path / f"other{i}.py").write_text("x = 1\n")
    strings = tmp_path / "strings1000.py"
    strings.write_text(generated("strings_lines", 1000))
    proc = run_cli("check", "--isolated", "--no-cache", "-j", "2", str(tmp_path), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    _assert_refused(proc, tmp_path, cases)
    assert f"{tmp_path / 'good.py'}:3:1: DL101" in proc.stdout
    assert f"{strings}:3:1: DL101" in proc.stdout  # 1,000 concatenated strings: linted


def _assert_refused(proc, tmp_path, cases, message: str = "") -> None:
    """Each of ``cases`` (file name -> (text, line)) refused in one line of ``proc``'s stderr
    naming the file and the line."""
    errors = sorted(proc.stderr.splitlines())
    assert len(errors) == len(cases), proc.stderr
    for line, (name, (_, lineno)) in zip(errors, sorted(cases.items())):
        assert line.startswith(f"{tmp_path / name}:{lineno}: error: {message}"), line
        assert line.endswith("not linted"), line


def _drop_root_read(cmd: list[str]) -> list[str]:
    """As root, mode 000 is readable: run without the capabilities that allow it (setpriv)."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root without setpriv: cannot make a file unreadable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]


def test_unreadable_file_on_the_command_line_next_to_a_readable_one(tmp_path):
    """#16.8: was a click usage error, and the readable file was not linted."""
    bad = tmp_path / "bad.py"
    bad.write_text(SEEDED)
    bad.chmod(0)
    good = tmp_path / "good.py"
    good.write_text(SEEDED)
    cmd = [sys.executable, "-m", "distlint", "check", "--isolated", "--no-cache", str(bad)]
    proc = subprocess.run(
        _drop_root_read([*cmd, str(good)]), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"{bad}: error: permission denied"]
    assert f"{good}:3:1: DL101" in proc.stdout


def test_fifos_and_devices_are_refused_without_hanging(tmp_path):
    """#16.7: a FIFO named x.py hung forever in open(); a link to /dev/zero read 3.8 GB."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "good.py").write_text(SEEDED)
    os.mkfifo(tree / "pipe.py")
    (tree / "zero.py").symlink_to("/dev/zero")
    lone_fifo = tmp_path / "lone.py"
    os.mkfifo(lone_fifo)
    started = time.monotonic()
    proc = run_cli("check", "--isolated", "--no-cache", str(tree), str(lone_fifo), timeout=30)
    assert time.monotonic() - started < 30
    assert proc.returncode == 2
    assert sorted(proc.stderr.splitlines()) == [
        f"{lone_fifo}: error: is a FIFO (named pipe), not a regular file: not read",
        f"{tree / 'pipe.py'}: error: is a FIFO (named pipe), not a regular file: not read",
        f"{tree / 'zero.py'}: error: is a character device (a link to /dev/zero), "
        "not a regular file: not read",
    ]
    assert f"{tree / 'good.py'}:3:1: DL101" in proc.stdout


def test_read_source_caps_the_bytes_it_reads(tmp_path):
    from distlint.api import read_source

    path = tmp_path / "huge.py"
    with open(path, "wb") as handle:  # 100 MB with trigger words, sparse: costs no disk
        handle.write(SEEDED.encode())
        handle.truncate(100_000_000)
    error = read_source(str(path))
    assert str(error) == f"{path}: error: file is 95.4 MiB, over the 64.0 MiB read limit: not read"
    assert read_source(str(path), limit=None) != error  # no cap asked: read (and NULs reported)
    small = tmp_path / "small.py"
    small.write_bytes(b"x = 1\n")
    assert read_source(str(small), limit=3).message.startswith("file is 6 bytes, over the")


@pytest.mark.parametrize(
    "name,make",
    [
        # #16.5: Rust out-of-memory abort (exit 134) with an 8 GB cap, 8.2 GB and > 600 s without
        (
            "functions10mb.py",
            lambda: "".join(
                f"def f{i}(a, b):\n    c = a + b * {i}\n    return c\n\n" for i in range(210_000)
            ),
        ),
        # a 1 MB single-line list: 30 s / 1.4 GB to check, 167 s / 1.8 GB to fix
        ("list1mb.py", lambda: "x = [" + ", ".join(str(i) for i in range(145_000)) + "]\n"),
    ],
)
def test_files_over_the_budget_are_refused_quickly_in_bounded_memory(tmp_path, name, make):
    path = tmp_path / name
    path.write_text(SEEDED + make())
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['distlint', 'fix', '--isolated', '--no-cache', {str(path)!r}]\n"
        "try:\n    runpy.run_module('distlint', run_name='__main__')\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "print('PEAK', int(hwm[0].split()[1]) // 1024 if hwm else 0)\n"
        "sys.exit(code)\n"
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    size = path.stat().st_size
    assert proc.stderr.splitlines() == [
        f"{path}:1: error: file is {size / (1 << 20):.1f} MiB, over the 512 KiB budget for one "
        "file (max-file-size in [tool.distlint]); not linted"
    ]
    assert elapsed < 20
    peak = int(proc.stdout.split("PEAK")[-1])
    assert 0 < peak < 250, f"peak RSS {peak} MB"  # was 1.4-8.2 GB


def test_raised_budget_lints_a_larger_file(tmp_path):
    path = tmp_path / "list.py"
    path.write_text(SEEDED + '"""' + "text\n" * 120_000 + '"""\n')  # cheap for LibCST
    assert path.stat().st_size > 512 << 10
    assert "over the 512 KiB budget" in lint_file(str(path), Config()).errors[0].message
    (tmp_path / "pyproject.toml").write_text("[tool.distlint]\nmax-file-size = 1_048_576\n")
    result = lint_file(str(path))
    assert not result.errors and [f.code for f in result.findings] == ["DL101"]


def test_parse_cost_is_bounded_under_a_memory_limit(tmp_path):
    """Issue #27 item 3: 36 lines of nested conditional expressions (464 KiB, inside every
    other bound) took LibCST 87 s and 9.2 GB; repeated `lambda:` lines ~275 MB a line. Under a
    3 GB address-space limit and a timeout, each is refused in one line naming the file and the
    line; a file with one such expression (215 MB to parse) is linted."""
    cases = {
        "conditionals.py": (generated("conditional_lines", 1100), 7),
        "lambdas.py": (generated("lambda_lines", 1100), 6),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    one = tmp_path / "one.py"
    one.write_text(generated("conditionals", 1100))
    code = textwrap.dedent(
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from distlint.__main__ import main
        sys.argv = ["distlint", *sys.argv[1:]]
        main()
        """
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, "check", "--isolated", "--no-cache", "-j", "1", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 120
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    _assert_refused(proc, tmp_path, cases, "nested expressions too costly")
    assert f"{one}:3:1: DL101" in proc.stdout


@pytest.mark.parametrize(
    "kind, n",
    [("conditionals", 400), ("lambdas", 300), ("unary", 800), ("nested_calls", 100)],
)
def test_parse_cost_estimate_tracks_libcsts_memory(kind, n):
    """The guard's estimate of LibCST's parse cost is within 0.6-2x of the memory LibCST's
    parse of the construct really takes (measured in a fresh process)."""
    from distlint import guard

    text = (
        "x = " + "f(" * n + "a" + ")" * n + "\n" if kind == "nested_calls" else generated(kind, n)
    )
    code = textwrap.dedent(
        """
        import sys
        import libcst
        def peak():  # this process's own high-water mark (ru_maxrss keeps the parent's)
            with open("/proc/self/status") as status:
                line = next(x for x in status if x.startswith("VmHWM:"))
            return int(line.split()[1]) * 1024
        text = sys.stdin.read()
        before = peak()
        libcst.parse_module(text)
        print(peak() - before)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60
    )
    measured = int(proc.stdout)
    estimate = guard.estimated_parse_cost(text)
    assert measured > 10 << 20  # quadratic: tens of MB for a line of a few KB
    assert 0.6 * measured < estimate < 2 * measured, (estimate, measured)


def test_ordinary_code_is_far_below_the_parse_cost_bound():
    from distlint import guard

    root = Path(__file__).resolve().parent.parent
    files = [
        *root.glob("distlint/**/*.py"),
        *root.glob("tests/*.py"),
        *root.glob("fixtures/**/*.py"),
    ]
    assert len(files) > 100
    worst = max(guard.estimated_parse_cost(p.read_text(encoding="utf-8")) for p in files)
    assert 0 < worst < guard.MAX_PARSE_COST // 16


# --------------------------------------------------------------------------------------------
# Issue #27: every file read is a regular file we meant, bounded; one-line errors; output safety
# --------------------------------------------------------------------------------------------

TRAIN = (
    "import numpy as np\nfrom accelerate import Accelerator\nfrom helper import seed\n"
    "accelerator = Accelerator()\nseed()\nnp.random.rand(3)\n"
)
HELPER = "import torch\n\n\ndef seed():\n    torch.manual_seed(0)\n"
ACCEL_SEEDED = "from accelerate import Accelerator\naccelerator = Accelerator()\n" + SEEDED


def _special(path, kind):
    """Make ``path`` a FIFO, or a symbolic link to /dev/zero (a device read without end)."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.slow
def test_a_followed_module_that_became_special_is_one_error_no_hang(tmp_path, kind):
    from bounded import bounded

    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "helper.py").write_text(HELPER)
    first = bounded(["check", "train.py"], cwd=tmp_path)  # cached, the helper a dependency
    assert first.returncode == 1 and "DL101" in first.stdout, first.stderr
    (tmp_path / "helper.py").unlink()
    _special(tmp_path / "helper.py", kind)
    proc = bounded(["check", "train.py"], cwd=tmp_path)
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device (a link to /dev/zero)"
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"{tmp_path / 'helper.py'}: error: cannot read: is {what}, not a regular file: not read"
    ]


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.slow
def test_a_special_gitignore_is_a_warning_and_the_walk_goes_on(tmp_path, kind):
    from bounded import bounded

    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    _special(tmp_path / ".gitignore", kind)
    proc = bounded(["check", "--no-cache", "."], cwd=tmp_path)
    assert proc.returncode == 1 and "train.py:5:1: DL101" in proc.stdout
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"{tmp_path / '.gitignore'}: warning: is a ")


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.slow
def test_a_special_cache_entry_is_a_miss_and_is_replaced(tmp_path, kind):
    from bounded import bounded

    (tmp_path / "distlint.toml").write_text("")
    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    first = bounded(["check", "train.py"], cwd=tmp_path)
    (entry,) = (tmp_path / ".distlint_cache" / "entries").glob("*/*.json")
    entry.unlink()
    _special(entry, kind)
    second = bounded(["check", "train.py"], cwd=tmp_path)
    assert (second.returncode, second.stdout, second.stderr) == (1, first.stdout, "")
    assert entry.is_file() and not entry.is_symlink()  # rewritten as a plain entry


@pytest.mark.slow
def test_distlint_toml_whose_tool_is_not_a_table(tmp_path):
    from bounded import bounded

    (tmp_path / "distlint.toml").write_text("tool = 1\n")
    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    proc = bounded(["check", "--no-cache", "train.py"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"train.py: error: {tmp_path / 'distlint.toml'}: `tool` must be a table, got 1"
    ]


@pytest.mark.slow
def test_output_file_full_device_is_one_error_line(tmp_path):
    from bounded import bounded

    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    proc = bounded(["check", "--no-cache", "-o", "/dev/full", "train.py"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: cannot write --output-file /dev/full: No space left on device"
    ]


@pytest.mark.slow
def test_output_fifo_without_reader_is_refused_not_waited_for(tmp_path):
    from bounded import bounded

    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    os.mkfifo(tmp_path / "report")
    proc = bounded(["fix", "--no-cache", "-o", "report", "train.py"], cwd=tmp_path, timeout=20)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: cannot open --output-file report: a FIFO with no reader"
    ]
    assert (tmp_path / "train.py").read_text() == ACCEL_SEEDED  # refused before any fix


@pytest.mark.slow
def test_output_fifo_with_a_reader_gets_the_report(tmp_path):
    (tmp_path / "train.py").write_text(ACCEL_SEEDED)
    fifo = tmp_path / "report"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        proc = run_cli("check", "--no-cache", "-o", "report", "train.py", cwd=tmp_path, timeout=30)
        out, _ = reader.communicate(timeout=30)
    finally:
        reader.kill()
    assert proc.returncode == 1
    assert out.startswith("train.py:5:1: DL101")


@pytest.mark.parametrize("named", ["u.py", "."])
@pytest.mark.slow
def test_output_file_naming_an_input_is_a_usage_error(tmp_path, named):
    from bounded import bounded

    (tmp_path / "u.py").write_text(ACCEL_SEEDED)
    proc = bounded(["fix", "--no-cache", "-o", "u.py", named], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "Error: --output-file u.py is a file this run lints: the report would replace it"
    )
    assert (tmp_path / "u.py").read_text() == ACCEL_SEEDED


@pytest.mark.slow
def test_read_only_file_is_not_fixed_and_says_so(tmp_path):
    path = tmp_path / "ro.py"
    path.write_text(ACCEL_SEEDED)
    path.chmod(0o444)
    proc = run_cli("fix", "--no-cache", "--unsafe-fixes", "ro.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "ro.py: error: file is read-only (mode 0444): fixes not written (make it writable to fix it)"
    ]
    assert path.read_text() == ACCEL_SEEDED and (path.stat().st_mode & 0o777) == 0o444
    assert "DL101" in proc.stdout  # the findings of what is on disk


def test_hard_linked_file_is_fixed_in_place_for_every_link(tmp_path):
    path = tmp_path / "t.py"
    path.write_text(ACCEL_SEEDED)
    os.link(path, tmp_path / "other_name.py")
    inode = path.stat().st_ino
    result = lint_file(str(path), Config(), FIX)
    assert result.fixes_applied == 1 and not result.errors
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert (tmp_path / "other_name.py").read_text() == path.read_text()
    assert path.read_text().endswith(FIXED_TAIL)


@pytest.mark.parametrize("fmt", ["text", "github", "junit"])
@pytest.mark.slow
def test_control_characters_in_file_names_never_reach_the_output(tmp_path, fmt):
    import xml.etree.ElementTree as ET

    name = "\x1b[31mred\x01.py"
    (tmp_path / name).write_text(ACCEL_SEEDED)
    proc = run_cli("check", "--no-cache", "--format", fmt, name, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stdout and "\x01" not in proc.stdout
    assert "\\x1b[31mred\\x01.py" in proc.stdout
    if fmt == "junit":
        ET.fromstring(proc.stdout)  # valid XML


@pytest.mark.slow
def test_control_characters_in_error_lines_are_escaped(tmp_path):
    name = "bad\x1b[2J.py"
    (tmp_path / name).write_bytes(b"import torch\ntorch.manual_seed(0\n")
    proc = run_cli("check", "--no-cache", name, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("bad\\x1b[2J.py:2:") and "\x1b" not in proc.stderr


@pytest.mark.slow
def test_diff_of_a_cr_only_file_shows_one_line_per_line(tmp_path):
    (tmp_path / "cr.py").write_bytes(ACCEL_SEEDED.replace("\n", "\r").encode())
    proc = run_cli("check", "--no-cache", "--diff", "--unsafe-fixes", "cr.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "\r" not in proc.stdout
    assert "-torch.manual_seed(0)\n" in proc.stdout and "+set_seed(0)\n" in proc.stdout
    assert (tmp_path / "cr.py").read_bytes() == ACCEL_SEEDED.replace("\n", "\r").encode()
