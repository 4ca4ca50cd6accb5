"""Incremental re-parsing (distlint.incremental): an edited buffer re-parses only the statements
the edit touched, and the result is the module a whole parse gives, node for node."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from helpers import FIXTURES

from distlint.config import Config
from distlint.incremental import Document, statement_offsets
from distlint.runner import lint_source

SCRIPTS = sorted((FIXTURES / "scripts").glob("*.py"))

EDITS = [
    lambda lines, i: lines[:i] + [lines[i].replace("=", "= 1 +", 1)] + lines[i + 1 :],
    lambda lines, i: lines[:i] + ["# a comment\n"] + lines[i:],
    lambda lines, i: lines[:i] + ["    # an indented comment\n"] + lines[i:],
    lambda lines, i: lines[:i] + lines[i + 1 :],
    lambda lines, i: lines[:i] + ["  " + lines[i]] + lines[i + 1 :],
    lambda lines, i: lines[:i] + [lines[i].lstrip()] + lines[i + 1 :],
    lambda lines, i: lines[:i] + ["\n"] + lines[i:],
    lambda lines, i: lines[:i] + ["x = (\n"] + lines[i:],
    lambda lines, i: lines[:i] + ["def helper():\n", "  return 2\n"] + lines[i:],
    lambda lines, i: lines[:i] + [lines[i].rstrip("\n") + "  # trailing\n"] + lines[i + 1 :],
    lambda lines, i: lines[:i] + [lines[i][: len(lines[i]) // 2] + "\n"] + lines[i + 1 :],
    lambda lines, i: lines[:i] + ["torch.manual_seed(1)\n"] + lines[i:],
]


def _whole(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except Exception:
        return None


def _same_module(got: cst.Module, text: str) -> bool:
    full = _whole(text)
    return (
        full is not None
        and got.code == text
        and got.deep_equals(full)
        and got.default_indent == full.default_indent
        and got.default_newline == full.default_newline
    )


@pytest.mark.parametrize("path", SCRIPTS[::6], ids=lambda p: p.stem)
def test_random_edits_give_the_whole_parse(path):
    _random_edits(path)


def _random_edits(path) -> int:
    """20 random edits of ``path``, each checked against the whole parse; how many were
    re-parsed inside a block."""
    rng = random.Random(path.stem)
    text = path.read_text()
    document = Document(text, cst.parse_module(text))
    reused = nested = 0
    for _ in range(20):
        lines = document.text.splitlines(keepends=True)
        new = "".join(rng.choice(EDITS)(lines, rng.randrange(len(lines))))
        if rng.random() < 0.5:
            document.prepare()  # (what the server's worker does between lints)
        found = document.update(new)
        if found is None:  # parsed whole (or not at all): start again from the whole parse
            full = _whole(new)
            if full is not None:
                document = Document(new, full)
            continue
        reused += 1
        nested += document.nested
        module, offsets = found
        assert _same_module(module, new)
        assert offsets == statement_offsets(module)
        assert document.reparsed <= len(module.body) or document.nested
    assert reused >= 4  # most edits are re-parsed in place
    return nested


def test_random_edits_inside_blocks_are_reparsed_in_their_block():
    nested = sum(_random_edits(path) for path in SCRIPTS[3::12])
    assert nested >= 5


NESTED = """\
import torch


def main(args):
    model = torch.nn.Linear(4, 4)
    for epoch in range(3):
        for step, batch in enumerate(loader):
            loss = model(
                batch,
            ).sum()
            # a comment at the loop's level
            accelerator.backward(loss)
            if step % 2:
                log(\"\"\"a string
over lines\"\"\")
            elif step:
                pass
            else:
                continue
        # the epoch loop's comment
        try:
            save(model)
        except OSError:
            pass
        finally:
            done()
    return model
"""

NESTED_EDITS = [
    (
        "            accelerator.backward(loss)\n",
        "            x = 1\n            accelerator.backward(loss)\n",
    ),
    ("                batch,\n", "                batch, other,\n"),
    ("over lines", "over two lines"),
    ("                pass\n", "                step += 1\n"),
    ("                continue\n", "                break\n"),
    ("            pass\n", "            raise\n"),
    ("            done()\n", "            done()\n            # after\n"),
    ("            # a comment at the loop's level\n", ""),
    ("        # the epoch loop's comment\n", "    # moved out\n"),
    ("            accelerator.backward(loss)\n", "        accelerator.backward(loss)\n"),
    ("            accelerator.backward(loss)\n", "             accelerator.backward(loss)\n"),
    ("            accelerator.backward(loss)\n", "            accelerator.backward(loss\n"),
    ("    return model\n", "    return model, 1\n"),
]


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("indent", ["    ", "\t"], ids=["spaces", "tab"])
@pytest.mark.parametrize("edit", NESTED_EDITS, ids=range(len(NESTED_EDITS)))
def test_edits_inside_nested_blocks_give_the_whole_parse(edit, indent, newline):
    def shaped(text: str) -> str:
        text = text.replace("    ", indent) if indent != "    " else text
        return text.replace("\n", newline)

    text = shaped(NESTED)
    old, new_part = shaped(edit[0]), shaped(edit[1])
    assert old in text
    new = text.replace(old, new_part, 1)
    document = Document(text, cst.parse_module(text))
    found = document.update(new)
    if found is None:
        assert _whole(new) is None or document.text == text  # parsed whole by the caller
        return
    module, offsets = found
    assert _same_module(module, new)
    assert offsets == statement_offsets(module)
    # and the next edit, from the updated document, still gives the whole parse
    document.prepare()
    again = new.replace(shaped("model = torch"), shaped("model = torch.nn.Identity() or torch"))
    found = document.update(again)
    if found is not None:
        assert _same_module(found[0], again)


def test_an_edit_in_a_loop_reparses_the_statements_around_it():
    document = Document(NESTED, cst.parse_module(NESTED))
    new = NESTED.replace("accelerator.backward(loss)", "accelerator.backward(loss * 2)")
    module, _ = document.update(new)
    assert document.nested and document.reparsed == 3  # the statement and its neighbours
    assert _same_module(module, new)
    old = cst.parse_module(NESTED)
    document = Document(NESTED, old)
    module, _ = document.update(new)
    # what the edit did not touch is the old tree: the other top-level statements, the
    # statements of the function around the loop
    assert module.body[0] is old.body[0]
    assert module.body[1].body.body[0] is old.body[1].body.body[0]
    assert module.body[1].body.body[-1] is old.body[1].body.body[-1]


def test_finding_the_edited_block_builds_no_copy_of_the_statements_around_it(monkeypatch):
    """The blocks holding an edit are read from the statements' fields: LibCST's `children`
    would build (and check) a copy of each statement on the way, for every edit."""
    listed: list[str] = []
    children = cst.CSTNode.children

    def counted(node: cst.CSTNode) -> object:
        listed.append(type(node).__name__)
        return children.fget(node)  # type: ignore[attr-defined]

    document = Document(NESTED, cst.parse_module(NESTED))
    document.prepare()
    monkeypatch.setattr(cst.CSTNode, "children", property(counted))
    new = NESTED.replace("accelerator.backward(loss)", "accelerator.backward(loss * 2)")
    module, _ = document.update(new)
    assert document.nested and _same_module(module, new)
    assert listed == []


def test_one_line_edit_reparses_only_its_neighbourhood():
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(50))
    document = Document(body, cst.parse_module(body))
    new = body.replace("return x + 25\n", "return x * 25\n")
    module, _ = document.update(new)
    assert document.reparsed == 1 and document.nested  # the return statement alone
    assert _same_module(module, new)
    # the untouched statements are the old nodes, not re-parsed copies
    old = cst.parse_module(body)
    document = Document(body, old)
    module, _ = document.update(new)
    assert module.body[0] is old.body[0] and module.body[-1] is old.body[-1]


@pytest.mark.parametrize(
    "old, new",
    [
        ("# header\nx = 1\n", "# header changed\nx = 1\n"),  # the module header
        ("x = 1\n# footer\n", "x = 1\n# footer changed\n"),  # the module footer
        ("x = 1\ny = 2", "x = 1\ny = 3"),  # no final newline
        # the first indented block decides the module's indentation
        ("def f():\n    return 1\n\nz = 0\n", "def f():\n  return 1\n\nz = 0\n"),
    ],
    ids=["header", "footer", "no-final-newline", "default-indent"],
)
def test_edits_a_piece_cannot_decide_are_parsed_whole(old, new):
    document = Document(old, cst.parse_module(old))
    found = document.update(new)
    if found is not None:  # allowed only when it is exactly the whole parse
        assert _same_module(found[0], new)
    else:
        assert document.text == old  # unchanged: the caller parses whole


def test_lint_with_a_document_matches_a_fresh_lint():
    rng = random.Random(7)
    config = Config()
    compared = 0
    for path in SCRIPTS[1::8]:
        document = Document()
        text = path.read_text()
        assert lint_source(text, str(path), config, document=document) == lint_source(
            text, str(path), config
        )
        for _ in range(4):
            lines = document.text.splitlines(keepends=True)
            new = "".join(rng.choice(EDITS)(lines, rng.randrange(len(lines))))
            got = lint_source(new, str(path), config, document=document)
            assert got == lint_source(new, str(path), config), path
            compared += document.reparsed > 0
    assert compared >= 5


def test_a_syntax_error_keeps_the_last_good_parse():
    text = "import torch\n\ntorch.manual_seed(0)\n\nx = 1\n"
    document = Document()
    lint_source(text, "t.py", Config(), document=document)
    broken = text.replace("x = 1", "x = (")
    result = lint_source(broken, "t.py", Config(), document=document)
    assert result.errors and document.text == text
    fixed = text.replace("x = 1", "x = 2")
    assert lint_source(fixed, "t.py", Config(), document=document) == lint_source(
        fixed, "t.py", Config()
    )


def test_positions_of_statements_an_edit_did_not_touch_are_reused_and_still_right(monkeypatch):
    # the code of a reported statement is remembered by node: after an edit above it, the same
    # node is reported again, its code is not generated again, and its positions move down
    from distlint import positions

    made = []
    real = positions._WantedPositionsState

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(positions, "_WantedPositionsState", Counting)
    config = Config()
    reused = 0
    for path in SCRIPTS:
        document = Document()
        text = path.read_text()
        lint_source(text, str(path), config, document=document)
        new = "# a comment\n\n" + text
        made.clear()
        got = lint_source(new, str(path), config, document=document)
        incremental = len(made)
        made.clear()
        assert got == lint_source(new, str(path), config), path  # a fresh parse: new nodes
        reused += incremental < len(made)
    assert reused >= 5
