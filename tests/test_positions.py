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
