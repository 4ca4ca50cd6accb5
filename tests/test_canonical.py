"""`canonical`: a qualified name's re-exports and legacy paths named one way, found by the
prefixes of the name's first part only (the answer of a scan of every prefix, longest first)."""

from __future__ import annotations

import libcst as cst
from helpers import FIXTURES

from distlint.analysis.index import CANONICAL_PREFIXES, Index, canonical


def _every_prefix(qualname: str) -> str:
    """The definition: the longest prefix the name starts with, as a whole part."""
    for prefix in sorted(CANONICAL_PREFIXES, key=len, reverse=True):
        if qualname == prefix or qualname.startswith((prefix + ".", prefix + "(")):
            return CANONICAL_PREFIXES[prefix] + qualname[len(prefix) :]
    return qualname


def test_canonical_names_as_a_scan_of_every_prefix_does():
    names = set()
    for prefix, to in CANONICAL_PREFIXES.items():
        for tail in ("", ".x", "()", "().y", "(", "x", "[0]", ".a.b()", "_more"):
            names |= {prefix + tail, to + tail, prefix[:-1] + tail, "m." + prefix + tail}
    names |= {"", ".", "(", "torch", "torch(", "torch()", "numpy", "numpy.random", "a[x.y]"}
    for path in sorted((FIXTURES / "scripts").glob("*.py"))[::3]:
        index = Index(cst.parse_module(path.read_text()))
        names |= {q for q in map(index.qualname, index.nodes_of(cst.Attribute)) if q}
    assert len(names) > 500
    for name in names:
        assert canonical(name) == _every_prefix(name), name
