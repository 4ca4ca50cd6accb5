"""distlint.parse: the one way text becomes a tree, shared by the runner and the project."""

from __future__ import annotations

import os

import libcst as cst
import pytest

from distlint.analysis.project import Project
from distlint.model import FileError
from distlint.parse import decode_source, parse
from distlint.runner import lint_source

ROOT = os.path.abspath("/proj")

BAD = {
    "unclosed.py": b"import torch\ntorch.manual_seed(0)\nx = (1,\n",
    "py2.py": b"import torch\ntorch.manual_seed(0)\nprint 'hello'\n",
    "cookie.py": b"# -*- coding: klingon -*-\nimport torch\ntorch.manual_seed(0)\n",
    "latin.py": b'import torch\ntorch.manual_seed(0)\nx = "\xe9"\n',
    "nul.py": b"import torch\ntorch.manual_seed(0)\nx = 1\x00\n",
    "brackets.py": b"import torch\ntorch.manual_seed(0)\nx = "
    + b"(" * 300
    + b"1"
    + b")" * 300
    + b"\n",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_helper_module_gets_the_linted_files_error(name):
    """A file imported by the linted script is refused with the same message and position as
    when it is linted itself: both go through distlint.parse."""
    data = BAD[name]
    linted = lint_source(data, os.path.join(ROOT, name))
    [expected] = linted.errors
    project = Project.from_sources(ROOT, {name: data, "train.py": ""})
    assert project.module(os.path.join(ROOT, name)) is None
    [got] = project.errors
    assert (got.message, got.line, got.column) == (expected.message, expected.line, expected.column)


def test_parse_keeps_the_encoding_of_bytes():
    data = "# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1")
    decoded = decode_source(data, "m.py")
    assert isinstance(decoded, tuple)
    parsed = parse(decoded[0], "m.py", source=data)
    assert not isinstance(parsed, FileError)
    module = parsed[0]
    assert isinstance(module, cst.Module) and module.encoding == "iso-8859-1"
    assert module.bytes == data
