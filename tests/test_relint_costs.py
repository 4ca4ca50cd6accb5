"""Questions the analysis of one module answers with less work than a walk of every node: each
answer is compared with the walk it replaces, over every fixture script and project module."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path

import libcst as cst
from helpers import FIXTURES

from distlint.analysis import batch
from distlint.analysis import knowledge as K
from distlint.analysis.batch import Place, Use, extend_use, is_target, matches, place_of
from distlint.analysis.facts import facts_for
from distlint.analysis.index import Index, walk

SOURCES = sorted(FIXTURES.glob("scripts/*.py")) + sorted(FIXTURES.glob("projects/*/**/*.py"))
SOURCES = [p for p in SOURCES if not p.name.startswith("broken")][::2]  # (broken: no parse)


@functools.cache
def _index(path: Path) -> Index:
    return Index(cst.parse_module(path.read_text()))


def _every_use(index: Index, places: Sequence[Place]) -> Iterator[Use]:
    """The uses of ``places``, found by asking every name, attribute and subscript its place."""
    for node in index.nodes_of(cst.Name, cst.Attribute, cst.Subscript):
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
            continue
        if is_target(index, node) or not matches(place_of(index, node), places):
            continue
        if isinstance(node, cst.BaseExpression):
            yield extend_use(index, node)


def _places(index: Index) -> list[list[Place]]:
    """The per-device batch's places, and places of the module's own names and paths."""
    facts = facts_for(index)
    out = [batch.per_device_places(index, facts.data.batch.per_device_values)]
    nodes = index.nodes_of(cst.Name, cst.Attribute, cst.Subscript)
    for step in (11,):
        found = [place_of(index, n) for n in nodes[::step]]
        out.append([p for p in found if p is not None])
    return out


def test_uses_of_places_are_those_every_node_would_match():
    found = 0
    for path in SOURCES:
        index = _index(path)
        for places in _places(index):
            uses = list(batch.uses_of(index, places))
            assert uses == list(_every_use(index, places)), path
            found += len(uses)
    assert found > 1000


def test_uses_of_looks_up_only_names_a_place_is_called(monkeypatch):
    code = "".join(f"v{i} = {i}\nprint(v{i})\n" for i in range(50))
    code += "bs = 8\nloader = DataLoader(data, batch_size=bs)\nprint(bs * 2)\n"
    index = Index(cst.parse_module(code))
    (given,) = [
        a.value for a in index.nodes_of(cst.Arg) if a.keyword and a.keyword.value == "batch_size"
    ]
    places = batch.per_device_places(index, [given])
    expected = [index.module.code_for_node(u.expr) for u in _every_use(index, places)]
    asked: list[str] = []
    real = Index.bindings_of

    def bindings_of(self, node):
        asked.append(node.value)
        return real(self, node)

    monkeypatch.setattr(Index, "bindings_of", bindings_of)
    uses = list(batch.uses_of(index, places))
    assert [index.module.code_for_node(u.expr) for u in uses] == expected
    assert "bs * 2" in expected
    assert set(asked) == {"bs"}


def test_nodes_of_a_type_are_those_of_an_isinstance_test():
    for path in SOURCES[::3]:
        index = _index(path)
        every = list(index._nodes)
        for types in (
            (cst.Name,),
            (cst.Call, cst.Attribute),
            (cst.BaseExpression,),
            (cst.BaseCompoundStatement, cst.SimpleStatementLine),
        ):
            assert index.nodes_of(*types) == [n for n in every if isinstance(n, types)]


def test_calls_inside_a_node_are_those_an_ancestor_walk_finds():
    checked = 0
    for path in SOURCES[::2]:
        index = _index(path)
        for node in index.nodes_of(
            cst.FunctionDef, cst.ClassDef, cst.For, cst.While, cst.If, cst.Call, cst.Lambda
        ):
            expected = [c for c in index.calls if index.is_inside(c, node)]
            assert index.calls_inside(node) == expected, (path, index.module.code_for_node(node))
            checked += bool(expected)
    assert checked > 1000
    index = Index(cst.parse_module("f(g(x))\n"))
    assert index.calls_inside(cst.parse_expression("f()")) == []  # not of this module


def _walked(loop: cst.For | cst.While) -> bool:
    """A backward call anywhere in the loop's body, found by walking it."""
    return any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in K.BACKWARD_METHODS
        for node in walk(loop.body)
    )


def test_loops_running_backward_are_those_whose_body_holds_a_backward_call():
    answers = []
    for path in SOURCES:
        index = _index(path)
        loops = facts_for(index).loops
        for loop in index.loops:
            if isinstance(loop, (cst.For, cst.While)):
                answers.append(_walked(loop))
                assert loops.runs_backward_directly(loop) == answers[-1], path
    assert answers.count(True) > 50 and answers.count(False) > 15
    code = (
        "for epoch in range(3):\n"
        "    for batch in loader:\n"
        "        def closure():\n"
        "            loss.backward()\n"
        "        opt.step(closure)\n"
        "    while True:\n"
        "        break\n"
        "else:\n"
        "    loss.backward()\n"
        "for x in xs:\n"
        "    accelerator.backward(x)\n"
    )
    index = Index(cst.parse_module(code))
    loops = facts_for(index).loops
    assert [loops.runs_backward_directly(loop) for loop in index.loops] == [True, True, False, True]
