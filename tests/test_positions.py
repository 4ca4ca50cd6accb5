"""Our wanted-nodes position pass gives exactly LibCST's PositionProvider ranges."""

import libcst as cst
import pytest
from helpers import FIXTURES

from distlint.analysis import walk
from distlint.positions import all_positions, positions_of

# every fixture that is Python (a project fixture's broken module is broken on purpose)
FILES = sorted(p for p in FIXTURES.glob("**/*.py") if not p.name.startswith("broken_"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_positions_match_libcst(path):
    module = cst.parse_module(path.read_bytes())
    expected = all_positions(module)
    nodes = [n for n in walk(module)]
    # every node at once, and a sparse subset (what a lint run asks for)
    got = positions_of(module, nodes)
    assert [n for n in nodes if got.get(n) != expected[n]] == []
    subset = nodes[::37]
    got = positions_of(module, subset)
    assert [n for n in subset if got.get(n) != expected[n]] == []


def test_crlf_and_tabs():
    module = cst.parse_module("if x:\r\n\tfoo(1,\r\n\t    2)\r\ny = 'é'\n")
    expected = all_positions(module)
    nodes = list(walk(module))
    got = positions_of(module, nodes)
    assert [n for n in nodes if got.get(n) != expected[n]] == []


def _located(text: str, every: int = 1, monkeypatch=None, whole: bool = False, only=None):
    """Ranges the lint run's way: only the top-level statements holding a node, placed in the
    text (by finding their code, or beyond 64 statements at the offsets Python's parser gives).
    With ``monkeypatch``, also checks whether the one-pass fallback ran (``whole``); ``only``:
    the numbers of the statements whose nodes are asked for (default: all)."""
    from distlint import positions
    from distlint.analysis.index import Index
    from distlint.edits import LineIndex
    from distlint.runner import _top_statements

    module = cst.parse_module(text)
    index = Index(module, text)
    top_of = _top_statements(module, index)
    # the nodes inside statements (a lint run asks for no other)
    nodes = [n for n in walk(module) if top_of(n) is not None][::every]
    if only is not None:
        nodes = [n for n in nodes if top_of(n) in only]
    passes = []
    if monkeypatch is not None:
        real = positions._whole_pass
        monkeypatch.setattr(positions, "_whole_pass", lambda *a: passes.append(1) or real(*a))
    got, _ = positions.layout(module, nodes, (), top_of, None, LineIndex(text).starts, text)
    if monkeypatch is not None:
        assert bool(passes) is whole
    expected = all_positions(module)
    return [n for n in nodes if got.get(n) != expected[n]]


TRICKY = (
    "# a comment before\n\n@decorator\n# between decorators\n@(other)\ndef f{i}(x):\n"
    "    return x  # same code as below\n"
    "a{i} = 1; b{i} = 2\n"
    "\n\x0c\nx = '''\nx = 1\n'''\n"
    "if a{i}:\n    x = 1\nelse:\n    pass\n"
    "x = 1\n"
    "class C{i}(\n    object,\n):\n    '''doc'''\n"
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_many_located_statements_match_libcst(newline, monkeypatch):
    # 40 copies of 6 statements: past the 64 that are placed by finding their code, so placed
    # at the offsets ast's line numbers give (decorators, comments, `;`, form feeds, strings)
    text = "".join(TRICKY.replace("{i}", str(i)) for i in range(40)).replace("\n", newline)
    assert _located(text, monkeypatch=monkeypatch) == []
    assert _located(text, every=7) == []


def test_few_located_statements_match_libcst(monkeypatch):
    text = "".join(TRICKY.replace("{i}", str(i)) for i in range(3))
    assert _located(text, monkeypatch=monkeypatch) == []


def _counting_plain_code(monkeypatch):
    from distlint import positions

    calls = []
    real = positions._plain_code
    monkeypatch.setattr(positions, "_plain_code", lambda *a: calls.append(1) or real(*a))
    return calls


def test_repeated_statements_are_told_apart_by_pythons_parser(monkeypatch):
    # the same statement code occurs many times: which occurrence a statement is, is counted
    # by `ast` on the text between occurrences, without generating the statements before it
    text = "x = 1\n" * 7 + "def f():\n    x = 1\n" + "x = 1\na = 1; b = 2\n" * 5 + "y = 2\n"
    calls = _counting_plain_code(monkeypatch)
    assert _located(text, every=3, monkeypatch=monkeypatch) == []
    assert len(calls) == 1  # the module's header only


def test_repeated_code_inside_a_string_falls_back_to_generating(monkeypatch):
    # an occurrence at a line start inside a string: the text before it does not parse, so
    # the statements before the one placed are generated and measured instead
    text = "x = 1\n" + 's = """\nx = 1\n"""\n' + "x = 1\n" * 4
    calls = _counting_plain_code(monkeypatch)
    assert _located(text, monkeypatch=monkeypatch, only={0, 3}) == []
    assert len(calls) > 1


def test_pythons_parser_says_nothing_about_the_users_code(monkeypatch):
    # `"\d"` makes Python's parser warn (DeprecationWarning, SyntaxWarning from 3.12): not
    # distlint's to print; were the warning raised, the parse would fail and the one pass run
    import warnings

    text = 'pattern = "\\d+"\n' + "".join(f"x{i} = {i}\n" for i in range(100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _located(text, monkeypatch=monkeypatch, whole=False) == []


def test_statements_python_cannot_parse_fall_back_to_one_pass(monkeypatch):
    # `type X = int` is Python 3.12: LibCST parses it, the ast of Python 3.11 may not
    import sys

    text = "".join(f"x{i} = {i}\n" for i in range(100)) + "type X = int\n"
    fallback = sys.version_info < (3, 12)
    assert _located(text, monkeypatch=monkeypatch, whole=fallback) == []


def test_code_libcst_does_not_regenerate_is_placed_in_the_text(monkeypatch):
    # LibCST drops a form feed that starts a statement's line ("\x0cy = 1" comes back as
    # "y = 1"): that statement's code is not at its offset, so the one pass runs, and its
    # columns on that line are moved to the text's (one to the right)
    from distlint import positions
    from distlint.analysis.index import Index
    from distlint.edits import LineIndex
    from distlint.runner import _top_statements

    text = "".join(f"x{i} = {i}\n" for i in range(100)) + "\x0cy = (1 +\n    2)\n"
    module = cst.parse_module(text)
    assert module.code != text  # the LibCST behaviour this is about
    top_of = _top_statements(module, Index(module, text))
    nodes = [n for n in walk(module) if top_of(n) is not None]
    got, _ = positions.layout(module, nodes, (), top_of, None, LineIndex(text).starts, text)
    expected = all_positions(module)

    def moved(pos):
        return (pos.line, pos.column + (pos.line == 101))

    wrong = [
        n
        for n in nodes
        if (moved(expected[n].start), moved(expected[n].end))
        != ((got[n].start.line, got[n].start.column), (got[n].end.line, got[n].end.column))
    ]
    assert wrong == []
    y = next(n for n in nodes if isinstance(n, cst.Name) and n.value == "y")
    assert (got[y].start.line, got[y].start.column) == (101, 1)
    assert text.split("\n")[100][1] == "y"  # (splitlines would split at the form feed)


def _lines_layout(text: str, every: int = 1, spans_too: bool = True, in_lines: bool = False):
    """The lint run's layout with the index's ancestors (lines placed alone, expressions found
    in them): the nodes whose range differs from LibCST's, and the spans that differ from the
    one-pass layout's (every simple statement line, and the expressions in them)."""
    from distlint import positions
    from distlint.analysis.index import Index
    from distlint.edits import LineIndex
    from distlint.runner import _top_statements

    module = cst.parse_module(text)
    index = Index(module, text)
    top_of = _top_statements(module, index)
    nodes = [n for n in walk(module) if top_of(n) is not None][::every]
    if in_lines:  # only nodes of simple statement lines (what a finding usually is)
        nodes = [
            n
            for n in nodes
            if any(isinstance(a, cst.SimpleStatementLine) for a in index.ancestors(n))
        ]
    spans = []
    if spans_too:
        spans = [
            n
            for n in nodes
            if isinstance(n, cst.SimpleStatementLine)
            or (isinstance(n, cst.BaseExpression) and positions.context_free(n))
        ]
    starts = LineIndex(text).starts
    got, got_spans = positions.layout(
        module, nodes, spans, top_of, None, starts, text, index.ancestors
    )
    expected = all_positions(module)
    _, expected_spans = positions._whole_pass(module, nodes, spans, positions.SourceMap(text))
    wrong = [n for n in nodes if got.get(n) != expected[n]]
    wrong_spans = [n for n in spans if got_spans.get(n) != expected_spans[n]]
    return wrong, wrong_spans


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_lines_placed_alone_match_libcst(path):
    text = path.read_bytes().decode("utf-8")  # newlines kept as they are, as the runner reads
    assert _lines_layout(text, every=3) == ([], [])


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_lines_placed_alone_in_many_statements(newline):
    # past 64 statements: top-level lines are the text between the offsets Python's parser
    # gives, and their expressions are found in it (decorators, `;`, strings, comments)
    text = "".join(TRICKY.replace("{i}", str(i)) for i in range(40)).replace("\n", newline)
    assert _lines_layout(text) == ([], [])
    nested = "".join(
        f"def f{i}(lr):\n    # tune\n    scaled = lr * {i}  # x\n"
        f"    return SGD(p, lr=scaled), {{'lr': scaled}}\n\n"
        f"opt{i} = f{i}(0.1); y = [lr, lr]\nz = (\n    lr\n)\n"
        for i in range(70)
    ).replace("\n", newline)
    assert _lines_layout(nested) == ([], [])


def test_a_line_in_a_long_function_is_generated_alone(monkeypatch):
    # a finding in a long `def main()` generates its own line, not the whole function
    from distlint import positions

    body = "".join(f"    x{i} = step(x{i - 1}, lr={i})\n" for i in range(1, 300))
    text = f"def main(lr):\n    x0 = 0\n{body}    return SGD(params, lr=lr)\n"
    generated = []
    real = positions._statement_code
    monkeypatch.setattr(positions, "_statement_code", lambda *a: generated.append(1) or real(*a))
    assert _lines_layout(text, every=97, in_lines=True) == ([], [])
    assert generated == []


def test_a_line_that_occurs_twice_falls_back_to_its_statement(monkeypatch):
    from distlint import positions

    text = "def f():\n    step()\n    step()\n"
    generated = []
    real = positions._statement_code
    monkeypatch.setattr(positions, "_statement_code", lambda *a: generated.append(1) or real(*a))
    assert _lines_layout(text) == ([], [])
    assert generated  # which `step()` is which: the function is generated


def _tops_offsets(text: str):
    from distlint import guard, positions
    from distlint.edits import LineIndex

    tops: list[int] = []
    assert guard.check_source(text, "t.py", None, tops) is None
    module = cst.parse_module(text)
    return positions.offsets_from_tops(module, text, LineIndex(text).starts, tops), module


# (a form feed that leads a line is dropped by LibCST: its code is not the text, and the layout
# does not use these offsets there)
PLAIN = [p for p in FILES if b"\x0c" not in p.read_bytes()]


@pytest.mark.parametrize("path", PLAIN, ids=[str(p.relative_to(FIXTURES)) for p in PLAIN])
def test_statement_offsets_from_the_guards_scan(path):
    # where the guard's scan saw statements start at column 0 gives each top-level
    # statement's offset, as generating every statement does
    from distlint.incremental import statement_offsets as generated

    text = path.read_bytes().decode("utf-8")
    got, module = _tops_offsets(text)
    truth = generated(module)
    assert module.code == text and truth is not None
    assert got == truth[:-1]


def test_statement_offsets_from_the_guards_scan_tricky():
    from distlint.incremental import statement_offsets as generated

    text = "".join(TRICKY.replace("{i}", str(i)) for i in range(3)).replace("\x0c", "")
    text += (
        "try:\n    x = 1\nexcept E:\n    pass\nelse:\n    pass\nfinally:\n    pass\n"
        "elsewhere = 1\n@a\n@b(\n  1,\n)\n# c\nasync def g():\n    pass\n"
        "s = '''\nnot = a statement\n'''\nx = (1,\n2)\ny = 1 + \\\n 2\n"
    )
    got, module = _tops_offsets(text)
    assert got == generated(module)[:-1]
    assert got is not None and len(got) == len(module.body)


def test_lines_written_to_fool_the_search():
    # the same text in a docstring, a string, a comment or another function: each node is
    # placed where it is, or its statement is generated
    text = (
        "def f(lr):\n"
        '    """\n    x = g(lr)\n    """\n'
        "    x = g(lr)  # x = g(lr)\n"
        "    s = 'g(lr)'; t = g(lr)\n"
        "    return x\n\n"
        "def h(lr):\n    x = g(lr)\n    return x\n\n"
        "lr = 0.1; s = '0.1'  # 0.1\n"
        "opt = SGD(p, lr=lr)  # lr=lr\n"
        "y = [lr, (lr), lr]\n"
    )
    many = text + "".join(f"z{i} = {i}\n" for i in range(70))  # past 64 statements too
    for source in (text, many):
        assert _lines_layout(source) == ([], [])


# ---------------------------------------------------------------------------------------------
# Odd indentation LibCST reads otherwise than Python (issue #27 item 2): a backslash-only line or
# a form feed before a statement. LibCST dropped it from its code (every position after it a
# line early: fixes edited the wrong line) or refused valid code.
# ---------------------------------------------------------------------------------------------

REPRO = (
    "import random\n"
    "import torch\n"
    "from accelerate import Accelerator\n"
    "\n\n"
    "def main(args):\n"
    "    accelerator = Accelerator()\n"
    "    \\\n"
    "        model = torch.nn.Linear(4, 1)\n"
    "    torch.manual_seed(0)\n"
    "    random.shuffle(args.files)\n"
)


def _fix(text: str, path: str = "train.py"):
    from distlint.config import Config
    from distlint.runner import lint_source

    return lint_source(text, path, Config(), fix=True, unsafe_fixes=True)


def test_a_fix_after_a_backslash_only_line_edits_its_own_line():
    from distlint.runner import lint_source

    found = lint_source(REPRO, "train.py")
    assert [(f.code, f.line, f.column) for f in found.findings] == [
        ("DL101", 10, 5),
        ("DL102", 10, 5),
    ]
    fixed = _fix(REPRO)
    assert not fixed.errors
    assert fixed.fixed_source == (
        "import random\n"
        "import torch\n"
        "from accelerate import Accelerator\n"
        "from accelerate.utils import set_seed\n"
        "\n\n"
        "def main(args):\n"
        "    accelerator = Accelerator()\n"
        "    \\\n"
        "        model = torch.nn.Linear(4, 1)\n"
        "    set_seed(0)\n"
        "    random.shuffle(args.files)\n"
    )
    assert _fix(fixed.fixed_source).fixed_source is None


def test_add_noqa_after_a_backslash_only_line_comments_the_reported_line():
    from distlint.noqa import add_noqa
    from distlint.runner import lint_source

    found = lint_source(REPRO, "train.py")
    text, count = add_noqa(REPRO, found.findings)
    assert count == 1
    assert text.splitlines()[9] == "    torch.manual_seed(0)  # noqa: DL101, DL102"
    assert lint_source(text, "train.py").findings == ()


def _backslash_line_before(text: str, needle: str) -> str:
    """``text`` with a backslash-only line before the line holding ``needle``, which is then
    indented four columns more (Python keeps the backslash line's indentation)."""
    at = text.index(needle)
    start = text.rindex("\n", 0, at) + 1
    indent = text[start:at]
    return text[:start] + f"{indent}\\\n    " + text[start:]


@pytest.mark.parametrize(
    "fixture, needle",
    [
        ("DL203", "loss = loss / args"),  # the fix was dropped as "would not parse"
        ("DL203", "features = encoder(x)"),  # the first line of a block: "expected INDENT"
        ("DL302", "accelerator = Accelerator()"),  # the fix was dropped as "would not parse"
        ("DL302", "warmup_loader = DataLoader("),
    ],
)
def test_fixes_after_a_backslash_only_line_are_those_of_the_file_without_it(fixture, needle):
    clean = (FIXTURES / fixture / "bad.py").read_text(encoding="utf-8")
    assert needle in clean
    fixed_clean = (FIXTURES / fixture / "bad.fixed.py").read_text(encoding="utf-8")
    odd = _backslash_line_before(clean, needle)
    fixed = _fix(odd, "bad.py")
    assert not fixed.errors
    if needle in fixed_clean:
        assert fixed.fixed_source == _backslash_line_before(fixed_clean, needle)
    else:  # the statement is removed, with the odd indentation before it
        assert fixed.fixed_source == fixed_clean
    assert _fix(fixed.fixed_source, "bad.py").fixed_source is None  # a fixed point


@pytest.mark.parametrize(
    "text",
    [
        # a form feed at the start of a more-indented line inside an `if` block
        "def f(x):\n    if x:\n\x0c        return 1\n    return 2\n",
        # the backslash line sets the block's indentation, the statement's own is odd
        "def f(x):\n  if x:\n   \\\n return 1\n",
        "def f():\n    \\\n    return 1\n",
    ],
)
def test_valid_code_with_odd_indentation_is_linted(text):
    from distlint.runner import lint_source

    compile(text, "t.py", "exec")
    head = "import random, torch\nfrom accelerate import Accelerator\nacc = Accelerator()\n"
    result = lint_source(head + text + "torch.manual_seed(0)\nrandom.shuffle([x])\n", "t.py")
    assert result.errors == ()
    assert [(f.code, f.line) for f in result.findings] == [("DL101", 4 + text.count("\n"))]


def test_code_only_libcst_refuses_is_said_to_be_libcsts_limit():
    from distlint.runner import lint_source

    # a continuation before the end of the file (CPython takes it after a \r\n only)
    text = "import torch\ntorch.manual_seed(0)\n\\\r\n"
    compile(text, "t.py", "exec")
    (error,) = lint_source(text, "t.py").errors
    assert error.message.startswith("LibCST cannot parse this file (line ")
    assert error.message.endswith("; Python accepts it")
    assert error.line is not None


def test_source_map_places_offsets_of_the_parsed_text_in_the_file():
    from distlint import guard
    from distlint.positions import SourceMap

    text = "if x:\n    a = 1\n    \\\n        b = 2\n\x0c    c = 3\n"
    cuts: list[tuple[int, int]] = []
    assert guard.check_source(text, "t.py", None, None, cuts) is None
    source = SourceMap(text, cuts)
    assert source.parsed == "if x:\n    a = 1\n    b = 2\n    c = 3\n"
    b = source.parsed.index("b")
    assert text[source.to_text(b)] == "b"
    assert source.position(b) == (4, 8)
    # a statement's span starts before the odd indentation, and so covers it
    line = source.parsed.index("    b")
    assert source.to_text(line, after=False) == text.index("    \\")
    c = source.parsed.index("c")
    assert source.position(c) == (5, 5)
    assert source.to_text(source.parsed.index("    c"), after=False) == text.index("\x0c")
    assert source.parsed_slice(text.index("    \\"), text.index("\x0c")) == "    b = 2\n"


@pytest.mark.parametrize("shift", ["spans", "ranges"])
def test_a_fix_whose_edits_miss_their_code_is_dropped_and_reported(monkeypatch, shift):
    # positions one line off (what a backslash-only line caused): the edits' spans, or the
    # reported node's range, do not hold the code the rule meant to change
    from libcst.metadata import CodePosition, CodeRange

    from distlint import runner

    real = runner.layout

    def off_by_one(*args, **kwargs):
        ranges, spans = real(*args, **kwargs)
        if shift == "spans":
            return ranges, {n: (s[0] + 1, s[1], s[2] + 1, s[3], s[4]) for n, s in spans.items()}
        moved = {
            n: CodeRange(CodePosition(r.start.line + 1, r.start.column), r.end)
            for n, r in ranges.items()
        }
        return moved, spans

    monkeypatch.setattr(runner, "layout", off_by_one)
    text = REPRO.replace("    \\\n        model", "    model")
    result = _fix(text)
    assert result.fixed_source is None and result.fixes_applied == 0
    (error,) = [e for e in result.errors if "do not match the code" in e.message]
    assert error.message.startswith("DL101: the fix's edits do not match the code")
    assert error.message.endswith("fix dropped") and error.line is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "x\n",
        "\n\n",
        "a\nb",
        "a\r\nb\rc\n",
        "a\rb",
        "\r",
        "x = 1\n\ny = 2\n\n\n",
        "é\n€\nz",
    ],
)
def test_line_starts_are_the_tokenizers_line_breaks(text):
    import re

    from distlint.positions import SourceMap, line_starts

    expected = [0] + [m.end() for m in re.finditer(r"\r\n?|\n", text)]
    assert line_starts(text) == expected
    mapped = SourceMap(text)  # found when asked, the same
    assert mapped.starts == expected and mapped.parsed_starts == expected
