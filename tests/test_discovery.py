"""Which files a directory walk lints: .gitignore rules as git applies them, at any scale."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distlint.config import Config
from distlint.discovery import iter_source_files


def walk(top) -> list[str]:
    return sorted(
        os.path.relpath(p, top) for p in iter_source_files([str(top)], lambda _: Config(exclude=()))
    )


def make(tmp_path, files, gitignore: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(gitignore)
    for rel in files:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


FILES = [
    "ok.py",
    "build/a.py",
    "src/build/b.py",
    "docs/c.py",
    "a/b.py",
    "a/x/y/b.py",
    "gen_1.py",
    "pkg/gen_2.py",
    "keep_gen.py",
    "sub/s.py",
    "sub/deep/t.py",
    "#weird.py",
    "x1.py",
    "xa.py",
    "data/q/z.py",
    "trailing .py",
]


@pytest.mark.parametrize(
    "gitignore,ignored",
    [
        ("/build\n", ["build/a.py"]),  # anchored: the top-level one only
        ("build/\n", ["build/a.py", "src/build/b.py"]),  # a folder at any depth
        ("a/**/b.py\n", ["a/b.py", "a/x/y/b.py"]),  # `**`: zero or more folders
        ("**/gen_*.py\n!keep_gen.py\n", ["gen_1.py", "pkg/gen_2.py"]),
        ("gen_*.py\nkeep_gen.py\n!keep_*.py\n", ["gen_1.py", "pkg/gen_2.py"]),  # last one wins
        ("sub/*.py\n", ["sub/s.py"]),  # `*` never crosses a slash
        ("\\#weird.py\n", ["#weird.py"]),  # an escaped `#` is a name, not a comment
        ("# a comment\n", []),
        ("x[0-9].py\n", ["x1.py"]),
        ("x[!0-9].py\n", ["xa.py"]),
        ("data/**\n", ["data/q/z.py"]),
        ("trailing\\ .py\n", ["trailing .py"]),  # an escaped trailing space is kept
        ("x[z-a].py\nok.py\n", ["ok.py"]),  # a broken range drops that pattern alone
    ],
)
def test_gitignore_rules_are_gits(tmp_path, gitignore, ignored):
    make(tmp_path, FILES, gitignore)
    assert walk(tmp_path) == sorted(set(FILES) - set(ignored))


def test_a_deeper_gitignore_overrides_the_one_above(tmp_path):
    make(tmp_path, ["sub/a.py", "sub/b.py", "c.py"], "*.py\n")
    (tmp_path / "sub" / ".gitignore").write_text("!a.py\n")
    assert walk(tmp_path) == ["sub/a.py"]


@pytest.mark.slow
def test_thousands_of_patterns_over_thousands_of_files_stay_fast(tmp_path):
    # Every path against every pattern took 63 s here (3,000 patterns, 2,000 files); compiled,
    # it is a fraction of a second. The subprocess's timeout is the bound, far above that.
    lines = [f"pattern_{i}_*.tmp" if i % 3 else f"/dir{i}/sub/*.py" for i in range(3000)]
    files = [f"pkg{d}/inner/m{i}.py" for d in range(20) for i in range(100)]
    make(tmp_path, files, "\n".join(lines) + "\n")
    code = (
        "import sys; from distlint.config import Config; "
        "from distlint.discovery import iter_source_files; "
        "print(sum(1 for _ in iter_source_files([sys.argv[1]], lambda _: Config())))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=20
    )
    assert proc.stdout.strip() == "2000", proc.stderr
