"""Fixes as text edits: applying them, writing them, and the inputs that used to break that.

- issue #12: edits are applied to the original text (sorted, overlaps deferred, shared edits once);
- issue #16 item 9: after a failed write the report is about what is still on disk;
- issue #16 item 17: another writer touching the file between the read and the rename;
- issue #17 item 2: a 600-branch elif chain (positions used to recurse per branch and crash);
- issue #14 item 9: an added import goes beside the file's imports of the same package.
"""

from __future__ import annotations

import errno
import os

import pytest

from distlint import api, edits, files
from distlint.api import LintOptions, lint_file
from distlint.config import Config
from distlint.model import Applicability, Edit, FileError, Fix
from distlint.runner import lint_source

SEEDED = (
    "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
    "torch.manual_seed(0)\nimport random\n\nrandom.shuffle(order := [0, 1])\nx = 1\n"
)
FIX = LintOptions(fix=True, isolated=True)


def _fix(*spans: tuple[int, int, str], group: str | None = None) -> Fix:
    lines = edits.LineIndex("0123456789\n")
    return Fix("t", Applicability.SAFE, tuple(lines.edit(a, b, c) for a, b, c in spans), group)


def test_choose_defers_overlaps_and_same_group_but_shares_identical_edits():
    a = _fix((0, 2, "ab"))
    overlapping = _fix((1, 3, "x"))
    inside = _fix((1, 1, "ins"))  # an insertion strictly inside a replaced span
    at_boundary = _fix((2, 2, "!"))  # at its end: no overlap
    same_edit = _fix((0, 2, "ab"), (5, 6, "F"))  # shares a's edit exactly
    grouped_1, grouped_2 = _fix((7, 8, "g"), group="G"), _fix((9, 10, "h"), group="G")
    chosen, deferred = edits.choose(
        [a, overlapping, inside, at_boundary, same_edit, grouped_1, grouped_2]
    )
    assert chosen == [a, at_boundary, same_edit, grouped_1]
    assert deferred == [overlapping, inside, grouped_2]
    new, applied = edits.apply_fixes("0123456789\n", chosen)
    assert new == "ab!234F6g89\n"
    assert len(applied) == 4  # the shared edit once


def test_line_index_positions_follow_every_line_ending():
    text = "a\r\nbc\rd\n\x0ce"
    lines = edits.LineIndex(text)
    assert [lines.position(o) for o in (0, 3, 6, 8, 9)] == [(1, 1), (2, 1), (3, 1), (4, 1), (4, 2)]
    assert lines.offset(4, 1) == 9 and lines.content_end(1) == 1 and lines.content_end(4) == 10


def test_failed_write_reports_what_is_still_on_disk(tmp_path, monkeypatch):
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    unfixed = lint_file(str(path), Config(), LintOptions(isolated=True))
    assert [f.code for f in unfixed.findings] == ["DL101"]

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("distlint.fixes.write_atomic", full_disk)
    result = lint_file(str(path), Config(), FIX)
    assert path.read_text() == SEEDED
    assert result.fixed_source is None and result.fixes_applied == 0
    # the file on disk still has its finding: the report says so (not the unwritten text's)
    assert result.findings == unfixed.findings
    assert any("cannot write fixes" in e.message for e in result.errors), result.errors


def test_a_writer_that_resumes_before_the_rename_wins(tmp_path, monkeypatch):
    """A writer pauses mid-write, distlint reads and fixes, the writer resumes: the file's state
    is checked again just before the rename, and the writer's data is kept, not replaced."""
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    real_fsync = os.fsync

    def writer_resumes(fd):
        real_fsync(fd)
        with open(path, "a") as handle:  # in place, on the original inode
            handle.write("y = 2\n")

    monkeypatch.setattr("distlint.fixes.os.fsync", writer_resumes)
    result = lint_file(str(path), Config(), FIX)
    assert path.read_text() == SEEDED + "y = 2\n"
    assert any("changed on disk" in e.message for e in result.errors), result.errors
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".distlint-")], "temp file left"


def test_a_file_read_while_its_size_changes_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "t.py"
    path.write_text(SEEDED)
    real_fstat = os.fstat
    calls = []

    def growing(fd):
        st = real_fstat(fd)
        calls.append(st)
        if len(calls) == 2:  # the size seen after the first read differs: a writer is busy
            return os.stat_result((*st[:6], st.st_size + 10, *st[7:]))
        return st

    monkeypatch.setattr(api.os, "fstat", growing)
    data, _ = api.read_stable(str(path))
    assert data == SEEDED.encode() and len(calls) == 4  # read twice

    monkeypatch.setattr(
        api.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], len(calls), 0, 0, 0))
    )
    monkeypatch.setattr(files.time, "sleep", lambda s: None)

    def always_growing(fd):
        calls.append(None)
        st = real_fstat(fd)
        return os.stat_result((*st[:6], len(calls), *st[7:]))

    monkeypatch.setattr(api.os, "fstat", always_growing)
    error = api.read_stable(str(path))
    assert isinstance(error, FileError) and "kept changing" in error.message


def elif_chain(branches: int) -> str:
    head = (
        "import random\nimport torch\nfrom accelerate import Accelerator\n"
        "accelerator = Accelerator()\nx = random.randint(3, 3)\n"
    )
    chain = "if x == 0:\n    y = 0\n" + "".join(
        f"elif x == {i}:\n    y = {i}\n" for i in range(1, branches)
    )
    # the seeding call (the finding, and the statement its fix rewrites) at the chain's far end
    return head + chain + "else:\n    torch.manual_seed(0)\n"


def test_a_600_branch_elif_chain_is_linted_and_fixed():
    source = elif_chain(600)
    result = lint_source(source, "t.py", Config())
    assert not result.errors, result.errors
    assert [f.code for f in result.findings] == ["DL101"]
    fixed = lint_source(source, "t.py", Config(), fix=True)
    assert not fixed.errors and fixed.fixes_applied == 1
    compile(fixed.fixed_source, "t.py", "exec", flags=0x400, dont_inherit=True)
    assert fixed.fixed_source.endswith("else:\n    set_seed(0)\n")


def test_an_overlong_elif_chain_is_one_line_refusal():
    source = elif_chain(6000)
    result = lint_source(source, "t.py", Config())
    (error,) = result.errors
    assert "too long to analyse" in error.message or "too deeply nested" in error.message
    assert "\n" not in str(error) and len(str(error)) < 200


def test_added_import_goes_beside_the_same_package():
    source = (
        "import os\n"
        "\n"
        "import torch\n"
        "from accelerate import Accelerator\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "accelerator = Accelerator()\n"
        "torch.manual_seed(0)\n"
        "loader = DataLoader(range(4))\n"
        "import numpy as np\n\norder = np.random.permutation(4)\n"
    )
    fixed = lint_source(source, "t.py", Config(), fix=True).fixed_source
    assert fixed.splitlines()[3:6] == [
        "from accelerate import Accelerator",
        "from accelerate.utils import set_seed",
        "from torch.utils.data import DataLoader",
    ]


def test_added_import_merges_into_a_from_import_of_the_same_module():
    source = (
        "import torch\nfrom accelerate import Accelerator\n"
        "from accelerate.utils import ProjectConfiguration\n\n"
        "accelerator = Accelerator(project_config=ProjectConfiguration())\n"
        "torch.manual_seed(0)\n"
        "import random\n\nrandom.shuffle([0])\n"
    )
    fixed = lint_source(source, "t.py", Config(), fix=True).fixed_source
    assert "from accelerate.utils import set_seed, ProjectConfiguration\n" in fixed


def test_edits_are_relative_to_the_linted_text_and_carry_ranges():
    result = lint_source(SEEDED, "t.py", Config())
    (finding,) = result.findings
    assert finding.fix is not None and finding.fix.applicability is Applicability.SAFE
    lines = edits.LineIndex(SEEDED)
    for edit in finding.fix.edits:
        assert isinstance(edit, Edit)
        assert edit.range == lines.range(edit.start, edit.end)
    assert api.apply_fix(SEEDED, finding) == lint_source(SEEDED, "t.py", fix=True).fixed_source
    # the suppression edit writes a noqa comment for DL101 on the reported line
    assert finding.suppression is not None
    noqa = edits.splice(SEEDED, [finding.suppression])
    assert "torch.manual_seed(0)  # noqa: DL101\n" in noqa
    assert lint_source(noqa, "t.py", Config()).findings == ()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_fix_keeps_every_line_ending_and_a_missing_final_newline(newline):
    source = SEEDED.replace("\n", newline).rstrip(newline)  # no newline at the end
    fixed = lint_source(source.encode(), "t.py", Config(), fix=True)
    assert fixed.fixed_bytes is not None
    text = fixed.fixed_bytes.decode()
    assert not text.endswith(newline) and text.endswith("x = 1")
    others = {"\n", "\r\n", "\r"} - {newline}
    assert all(o not in text.replace(newline, "") for o in others if o != "\r\n" or True)
