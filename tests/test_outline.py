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


@pytest.mark.parametrize(
    "code, called",
    [
        ("mod.f(1)", {"mod"}),
        ("pkg . sub . g ()", {"pkg"}),  # spaces inside a dotted name
        ("x[0].m()", set()),  # `m` is read from `x[0]`, and `x` is not called
        ("a.b.c + d(e)", {"d"}),  # a chain not called is passed over whole
        ("a . b c(1)", {"c"}),
        ("0x1f(2)", set()),  # a name glued to a digit is no name
        ("name_(1) + _n2.k(3)", {"name_", "_n2"}),
    ],
)
def test_called_names_are_the_first_of_each_called_chain(code, called):
    found = outline(code + "\n")
    assert found is not None
    assert found.called(0, len(code)) == called


def test_attributes_called_on_modules():
    found = outline("import a.b\na.b.c(1)\na.d()\ne.f\n")
    assert found is not None
    assert found.attributes("a") == {"b", "d"}
    assert found.attributes("a.b") == {"c"}
    assert found.attributes("e") == set()  # read, not called


@pytest.mark.parametrize(
    "code, spelled, attributes",
    [
        ("x . mod.f()", "mod", set()),  # `mod` is read from `x`: not a module of its own
        ("x . mod.f()", "x", {"mod"}),
        ("(1) . mod.f()", "mod", {"f"}),  # no name before the dot: `mod` starts a name
        ("y = mod . sub . k(1)", "mod.sub", {"k"}),
        ("y = mod . sub . k(1)", "mod", {"sub"}),
        ("amod.f() + mod_.g() + o.mod.h()", "mod", set()),  # other names holding the word
    ],
)
def test_attributes_of_a_dotted_name_however_it_is_spaced(code, spelled, attributes):
    found = outline(code + "\n")
    assert found is not None
    assert found.attributes(spelled) == attributes


def test_a_plain_identifier_string_is_a_key_with_or_without_prefix():
    text = 'x = env[r"RANK"] + env["WORLD_SIZE"] + f"{RANK}"\n'
    found = outline(text)
    assert found is not None
    assert [w for _, w in found.keys] == ["RANK", "WORLD_SIZE"]
    assert [(s, text[s]) for s, _ in found.keys][0] == (text.index('r"'), "r")
    assert [t for _, _, t in found.fstrings] == ['f"{RANK}"']


def test_a_function_body_whose_brackets_close_is_read_whole(monkeypatch):
    """A top-level function or class whose body closes every bracket it opens (and joins no
    lines with a backslash) is read whole: only its imports and `global` statements are
    looked at, not each of its lines."""
    from distlint.analysis import outline as outline_module

    body = "".join(f"    v{i} = call(a[{i}], {{'k': ({i},)}})\n" for i in range(500))
    text = (
        "import os\n"
        "class Big(Base):\n"
        "    def method(self):\n"
        "        from .helpers import (\n"
        "            seed_all as sa,\n"
        "        )\n"
        "        global ENV\n"
        "        items = fetch(\n"
        "            import_x)\n" + body + "after = 1\n"
        "def tail():\n"
        "    import numpy as np\n"
    )
    read: list[tuple[int, int, int]] = []
    real = outline_module._logical_lines

    def counted(*args):
        for line in real(*args):
            read.append(line)
            yield line

    monkeypatch.setattr(outline_module, "_logical_lines", counted)
    found = outline(text)
    assert found is not None
    assert len(read) == 4  # `import os`, `class Big`, `after = 1`, `def tail`
    assert set(found.defs) == {"Big", "tail"}
    ((start, end),) = found.defs["Big"]
    assert text[start:end].startswith("class Big") and text[end:].startswith("after = 1")
    assert [text[a:b] for a, b in found.module_lines] == ["after = 1"]
    assert [(i.module, i.name) for i in found.imports["sa"]] == [("helpers", "seed_all")]
    assert [(i.module, i.name) for i in found.imports["np"]] == [("numpy", None)]
    assert "import_x" not in found.imports  # inside brackets: not a statement
    assert found.globals == {"ENV": ["Big"]}


def test_a_body_that_writes_no_import_nor_global_is_not_read_statement_by_statement(monkeypatch):
    """Only an import or a `global` statement of a body is recorded: a body whose text spells
    neither word is passed over whole (its `from_config = ...` lines are not looked at), and
    one that spells them is still read."""
    from distlint.analysis import outline as outline_module

    looked: list[str] = []
    real = outline_module._in_function

    def counted(stripped, out, owner):
        looked.append(stripped)
        real(stripped, out, owner)

    monkeypatch.setattr(outline_module, "_in_function", counted)
    plain = "".join(f"    from_config{i} = build({i})\n" for i in range(50))
    found = outline("def f():\n" + plain + "def g():\n    from_x = 1\n    import os\n")
    assert found is not None
    assert looked == ["from_x = 1", "import os"]  # g's, none of f's
    assert [(i.module, i.name) for i in found.imports["os"]] == [("os", None)]
    looked.clear()
    found = outline("def h():\n    global CFG\n    CFG = 1\n")
    assert found is not None and found.globals == {"CFG": ["h"]}
    assert looked == ["global CFG"]


@pytest.mark.parametrize(
    "body",
    [
        "    x = f(1,\n2)\n",  # a line at column 0 inside brackets: not the end of the body
        "    x = 1 + \\\n2\n",  # joined by a backslash
        "    x = 1)\n    (y\n)\n",  # a stray closer, then an opener: read line by line
    ],
)
def test_a_body_that_cannot_be_read_whole_is_read_line_by_line(body):
    text = "def f():\n" + body + "def g():\n    pass\n"
    found = outline(text)
    assert found is not None
    assert set(found.defs) == {"f", "g"}
    ((start, end),) = found.defs["f"]
    assert text[start:end] == "def f():\n" + body
