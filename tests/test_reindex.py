"""The index of an edited buffer, made from the last one (distlint.analysis.reindex): after any
sequence of edits it holds what a fresh index of the new module holds, entry for entry and in
the same order, and the lint of the buffer is the lint of its text."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from helpers import FIXTURES

from distlint import api
from distlint.analysis import reindex
from distlint.analysis.index import Index, Scope
from distlint.config import Config
from distlint.incremental import Document
from distlint.runner import lint_source

SCRIPTS = sorted((FIXTURES / "scripts").glob("*.py"))
MODULES = [
    p for p in SCRIPTS + sorted((FIXTURES / "projects").glob("*/**/*.py")) if p.read_text().strip()
]


def _scope(scope: Scope | None) -> tuple | None:
    return None if scope is None else (scope.kind, id(scope.node), scope.name)


def _assignments(found) -> list[tuple]:
    return [
        (
            a.key,
            id(a.value),
            id(a.node),
            a.order,
            a.op,
            a.qualname,
            id(a.target),
            a.record,
            _scope(a.scope),
        )
        for a in found
    ]


def state(index: Index) -> dict:
    """Everything an index holds, nodes by identity, in its order."""
    return {
        "module": id(index.module),
        "source": index.source,
        "nodes": [id(n) for n in index._nodes],
        "info": [
            (key, id(parent), _scope(scope), order)
            for key, (parent, scope, order) in index._info.items()
        ],
        "scopes": [
            (
                _scope(s),
                _scope(s.parent),
                [(key, _assignments(found)) for key, found in s.bindings.items()],
                list(s.orders.items()),
                sorted(s.globals),
                sorted(s.nonlocals),
            )
            for s in index.scopes
        ],
        "module_scope": _scope(index.module_scope),
        "calls": [id(c) for c in index.calls],
        "functions": [(k, [id(d) for d in v]) for k, v in index.functions.items()],
        "classes": [(k, [id(d) for d in v]) for k, v in index.classes.items()],
        "loops": [id(loop) for loop in index.loops],
        "attr": [(k, _assignments(v)) for k, v in index.attr_assignments.items()],
        "returns": [(id(k), [id(r) for r in v]) for k, v in index.returns.items()],
    }


def _same_as_fresh(index: Index, module: cst.Module, text: str) -> None:
    got = state(index)
    fresh = Index(module, text)
    want = state(fresh)
    if index._by_type is not None:  # (the nodes of each type, made from the last index's)
        fresh.nodes_of(cst.Name)
        assert index._by_type == fresh._by_type
    assert index.nodes_of(cst.Call, cst.Name) == fresh.nodes_of(cst.Call, cst.Name)
    got["info"].sort()
    want["info"].sort()  # (a dict of ids: its order is not the walk's)
    for key in want:
        assert got[key] == want[key], key


# edits of one line each: inside a function or at the top level (see `_edit`)
EDITS = [
    lambda line: line.replace("=", "= 1 +", 1),
    lambda line: line + "x_edit = 1\n",
    lambda line: line + "def helper_edit(a, b=2):\n    return a + b\n",
    lambda line: line + "import random as random_edit\n",
    lambda line: line + "from torch import optim\n",
    lambda line: "",
    lambda line: line + "for q in range(3):\n    total_edit = q\n",
    lambda line: line + "self.edit = [a for a in range(2)]\n",
    lambda line: line + "f = lambda v: v\n",
    lambda line: line.replace("(", "(0, ", 1),
    lambda line: line + "global g_edit\n",
    lambda line: line + "with open('x') as handle:\n    pass\n",
    lambda line: line + "class Edit:\n    def m(self):\n        return self\n",
    lambda line: line + "try:\n    pass\nexcept ValueError as err:\n    raise\n",
]


def _edit(text: str, rng: random.Random, edits=EDITS) -> str:
    """``text`` with one random line edited (new lines take that line's indentation)."""
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    line = lines[i]
    indent = line[: len(line) - len(line.lstrip())] if line.strip() else ""
    made = rng.choice(edits)(line)
    if made.startswith(line):  # new statements after the line
        extra = made[len(line) :]
        made = line + "".join(indent + row for row in extra.splitlines(keepends=True))
    return "".join([*lines[:i], made, *lines[i + 1 :]])


def _edits(path, count: int, seed: str, edits=EDITS) -> tuple[int, int]:
    """``count`` random edits of ``path``'s text, each indexed from the last index and checked
    against a fresh index; (edits made from the last index, edits that could be: re-parsed in
    place, after an edit that was, in a text without `global` or `nonlocal` statements)."""
    rng = random.Random(seed)
    text = path.read_text()
    document = Document()
    document.reset(text, cst.parse_module(text))
    made = could = 0
    for _ in range(count):
        new = _edit(text, rng, edits)
        had_index = document.index is not None
        document.prepare()  # (the worker's idle time: an edit inside a block re-parses there)
        if document.update(new) is None:  # (parsed whole; the lint resets the document then)
            try:
                document.reset(new, cst.parse_module(new))
            except cst.ParserSyntaxError:
                continue
        elif had_index and not any(w in text + new for w in ("global ", "nonlocal ")):
            could += 1
        text = new
        before = reindex.COUNTS["edited"]
        index = reindex.index_for(document, document.module, text)
        made += reindex.COUNTS["edited"] - before
        _same_as_fresh(index, document.module, text)
    document.let_go()
    return made, could


@pytest.mark.parametrize("path", MODULES[::4], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_random_edits_give_the_index_a_whole_walk_gives(path):
    made, could = _edits(path, 10, path.stem)
    assert made >= could


def test_most_edits_are_made_from_the_last_index():
    """Edits of realistic scripts, none adding a `global` statement: most are indexed from
    the last index (the others follow a whole parse)."""
    plain = [edit for edit in EDITS if "global" not in edit("")]
    made = tried = 0
    for path in SCRIPTS[::2]:
        made += _edits(path, 6, "most", plain)[0]
        tried += 6
    assert tried > 100 and made >= 0.5 * tried


def test_an_edit_inside_a_function_walks_only_its_new_statements():
    path = FIXTURES / "scripts" / "accelerate_example_correct.py"
    text = path.read_text()
    document = Document()
    document.reset(text, cst.parse_module(text))
    reindex.index_for(document, document.module, text)  # the first: built whole
    document.prepare()
    backward = "            accelerator.backward(loss)\n"
    assert backward in text
    new = text.replace(backward, "            edit_step = 1\n" + backward, 1)
    assert document.update(new) is not None and document.nested
    before = dict(reindex.COUNTS)
    index = reindex.index_for(document, document.module, new)
    assert reindex.COUNTS["built"] == before["built"]
    walked = reindex.COUNTS["walked"] - before["walked"]
    assert 0 < walked < len(index._nodes) // 10
    _same_as_fresh(index, document.module, new)


def test_a_global_statement_builds_the_index_again():
    text = "import torch\n\ndef main():\n    x = 1\n    return x\n"
    document = Document()
    document.reset(text, cst.parse_module(text))
    reindex.index_for(document, document.module, text)
    new = text.replace("    x = 1\n", "    global x\n    x = 1\n")
    assert document.update(new) is not None
    before = reindex.COUNTS["built"]
    index = reindex.index_for(document, document.module, new)
    assert reindex.COUNTS["built"] == before + 1
    _same_as_fresh(index, document.module, new)


def _lint(text: str, path: str, document: Document | None = None):
    result = lint_source(text, path, Config(), document=document)
    return [(f.line, f.column, f.code, f.message, f.fix) for f in result.findings]


@pytest.mark.parametrize("path", SCRIPTS[::4], ids=lambda p: p.stem)
def test_a_sequence_of_edits_lints_as_the_final_text_does(path):
    rng = random.Random(f"lint {path.stem}")
    text = path.read_text()
    document = Document()
    _lint(text, str(path), document)
    for _ in range(8):
        text = _edit(text, rng)
        assert _lint(text, str(path), document) == _lint(text, str(path))


def test_an_editor_buffer_in_a_project_keeps_its_findings_through_edits(tmp_path, monkeypatch):
    """The worker's path: a project, the buffer standing in for its file."""
    from distlint.analysis import project as project_module

    project_module.forget_projects()
    source = FIXTURES / "projects" / "seed_helper_torch_only"
    for file in source.rglob("*.py"):
        target = tmp_path / file.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file.read_text())
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / "train.py")
    text = (tmp_path / "train.py").read_text()
    config = api.config_for(path, api.LintOptions())
    project = api.project_for(path, config)
    document = Document()
    rng = random.Random("project")
    expected_codes = None
    for step in range(6):
        if step:
            text = _edit(text, rng)
        project.set_overlay(path, text)
        got = api.lint_document(text, path, config, {}, document)
        fresh = api.lint_document(text, path, config, {})
        assert got.findings == fresh.findings
        expected_codes = expected_codes or [f.code for f in fresh.findings]
    assert expected_codes  # (the project's finding: DL101 through the helper)
