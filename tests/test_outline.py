"""The outline of a module's text (distlint.analysis.outline): what it reads without parsing,
pinned on the shapes its fast scans must get right (strings with prefixes, comments holding
quotes, lines joined by brackets and backslashes, imports and `global` inside functions)."""

from __future__ import annotations

import pytest

from distlint.analysis.outline import outline


def _blanked_at(text: str, piece: str) -> str:
    found = outline(text)
    assert found is not None
    start = text.index(piece)
    return found.code[start : start + len(piece)]


@pytest.mark.parametrize(
    "text, piece, blank",
    [
        ('x = rb"a#b"\n', 'rb"a#b"', True),  # a two-letter prefix is part of the string
        ("x = Rb'\\''\n", "Rb'\\''", True),  # an escaped quote inside
        ('y = f"{a}"  # it\'s\n', "# it's", True),  # a comment holding a quote
        ('s = "# not a comment"\nz = 1\n', "z = 1", False),  # `#` inside a string
        ('d = """\ndef fake():\n"""\n', "def fake", True),  # inside a triple-quoted string
        ("v = bur'x'\n", "v = b", False),  # at most two prefix letters before the quote
    ],
)
def test_strings_and_comments_are_blanked_and_code_is_not(text, piece, blank):
    got = _blanked_at(text, piece)
    assert len(got) == len(piece)
    if blank:
        assert got.strip() == "" and got.count("\n") == piece.count("\n")
    else:
        assert got == piece


def test_f_strings_are_kept_to_read_names_from():
    text = 'msg = f"{seed_all(0)}" + "plain"\n'
    found = outline(text)
    assert found is not None
    assert [s for _, _, s in found.fstrings] == ['f"{seed_all(0)}"']
    assert "seed_all" in found.words(0, len(text))


def test_logical_lines_join_brackets_and_backslashes():
    text = (
        "def build(lr=(1,\n"
        "2)):\n"  # a continuation line at column 0 does not end the function
        "    return lr\n"
        "x = [\n"
        "]\n"
        "y = 1 + \\\n"
        "    2\n"
        "def after():\n"
        "    pass\n"
    )
    found = outline(text)
    assert found is not None
    assert set(found.defs) == {"build", "after"}
    ((start, end),) = found.defs["build"]
    assert text[start:end] == "def build(lr=(1,\n2)):\n    return lr\n"
    lines = [text[a:b] for a, b in found.module_lines]
    assert lines == ["x = [\n]", "y = 1 + \\\n    2"]
    assert set(found.by_ident) == {"x", "y"}


def test_imports_and_globals_inside_functions_are_read():
    text = (
        "def setup():\n"
        "    global ENV, SEED\n"
        "    from .helpers import (\n"
        "        seed_all as sa,\n"
        "    )\n"
        "    import numpy as np\n"
        "    items = fetch(  # not an import\n"
        "import_x)\n"
        "    ENV = sa(np)\n"
    )
    found = outline(text)
    assert found is not None
    assert found.globals == {"ENV": ["setup"], "SEED": ["setup"]}
    assert [(i.module, i.name, i.level) for i in found.imports["sa"]] == [
        ("helpers", "seed_all", 1)
    ]
    assert [(i.module, i.name) for i in found.imports["np"]] == [("numpy", None)]
    assert "import_x" not in found.imports


@pytest.mark.parametrize(
    "text",
    [
        "x = 'unterminated\n",
        'x = """never closed\n',
        "x = f(1,\n",  # ends inside brackets
        "def f(:\n    x = [1,\n",
    ],
)
def test_what_cannot_be_read_with_confidence_is_none(text):
    assert outline(text) is None


def test_unbalanced_closers_end_their_line():
    # a stray closer ends its logical line (the next line starts afresh), as before
    found = outline("x = 1)\ndef f():\n    pass\n")
    assert found is not None and set(found.defs) == {"f"}


def test_an_unterminated_string_is_read_in_linear_time():
    # A helper being typed in the editor (an open docstring) is outlined at every lint of the
    # script that follows it. The string pattern once tried every way to split the text (an
    # unterminated docstring of 40 characters took minutes); this returns at once.
    for opener in ('"""', "'''", '"', "'"):
        text = "def f():\n    x = " + opener + "ab cd, ef " * 2000 + "\n    return x\n"
        assert outline(text) is None
