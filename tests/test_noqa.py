"""Suppressions: `# noqa`, `# distlint: noqa`, --ignore-noqa, --add-noqa and DL001 unused-noqa."""

import subprocess

import pytest
from helpers import FIXTURES

from distlint.config import Config
from distlint.runner import lint_source

BAD = (FIXTURES / "DL101" / "bad.py").read_text()
SEED_LINE = "    torch.manual_seed(args.seed)  # expect: DL101\n"
assert SEED_LINE in BAD

# DL101 reports the call on line 4; its statement starts on line 3.
MULTILINE = (
    "import random\nimport torch\nseeds = [\n    torch.manual_seed(0),\n]\nrandom.random()\n"
)


def codes(source, config=None, **kwargs):
    config = Config() if config is None else config
    return [f.code for f in lint_source(source, "train.py", config, **kwargs).findings]


@pytest.mark.parametrize(
    "comment",
    [
        "# noqa: DL101",
        "# noqa:DL101",
        "# NOQA: dl101",
        "# noqa",
        "# noqa: E501, DL101",
        "# noqa: seed-only-torch",
        "# noqa: E501,Seed-Only-Torch",
        "# distlint: noqa: seed-only-torch",
    ],
)
def test_noqa_on_the_reported_line(comment):
    assert codes(BAD) == ["DL101"]
    assert codes(BAD.replace(SEED_LINE, SEED_LINE.rstrip("\n") + "  " + comment + "\n")) == []


def test_noqa_for_another_code_does_not_suppress():
    assert codes(BAD.replace(SEED_LINE, SEED_LINE.rstrip("\n") + "  # noqa: DL201\n")) == ["DL101"]


def test_noqa_on_the_first_line_of_a_multiline_statement():
    assert codes(MULTILINE) == ["DL101"]
    assert codes(MULTILINE.replace("seeds = [\n", "seeds = [  # noqa: DL101\n")) == []
    assert (
        codes(
            MULTILINE.replace(
                "    torch.manual_seed(0),\n", "    torch.manual_seed(0),  # noqa: DL101\n"
            )
        )
        == []
    )
    # a comment on a later line of the statement is not the reported line: no effect
    assert codes(MULTILINE.replace("]\n", "]  # noqa: DL101\n")) == ["DL101"]


@pytest.mark.parametrize("header", ["# distlint: noqa\n", "# distlint: noqa: DL101\n"])
def test_file_level_suppression(header):
    assert codes(header + BAD) == []
    assert codes("# distlint: noqa: DL201\n" + BAD) == ["DL101"]


def test_ignore_noqa_and_suppressed_bookkeeping():
    source = BAD.replace(SEED_LINE, SEED_LINE.rstrip("\n") + "  # noqa: DL101\n")
    result = lint_source(source, "train.py", Config())
    assert result.findings == () and [f.code for f in result.suppressed] == ["DL101"]
    assert codes(source, ignore_noqa=True) == ["DL101"]


def test_add_noqa_then_clean_then_idempotent(distlint_exe, tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "multi.py").write_text(MULTILINE)
    (tmp_path / "crlf.py").write_bytes(BAD.replace("\n", "\r\n").encode())
    proc = subprocess.run(
        [distlint_exe, "check", "--add-noqa", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Added 3 noqa directives." in proc.stderr
    assert SEED_LINE.rstrip("\n") + "  # noqa: DL101\n" in (tmp_path / "train.py").read_text()
    assert "    torch.manual_seed(0),  # noqa: DL101\n" in (tmp_path / "multi.py").read_text()
    crlf = (tmp_path / "crlf.py").read_bytes()
    assert b"# noqa: DL101\r\n" in crlf and crlf.count(b"\r\n") == crlf.count(b"\n")
    check = subprocess.run(
        [distlint_exe, "check", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout
    before = (tmp_path / "train.py").read_text()
    again = subprocess.run(
        [distlint_exe, "check", "--add-noqa", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Added 0 noqa directives." in again.stderr
    assert (tmp_path / "train.py").read_text() == before
    shown = subprocess.run(
        [distlint_exe, "check", "--ignore-noqa", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 1 and shown.stdout.count("DL101") == 3


def test_add_noqa_extends_an_existing_code_list_and_skips_strings():
    from distlint.noqa import add_noqa

    source = BAD.replace(SEED_LINE, SEED_LINE.rstrip("\n") + "  # noqa: E501\n")
    findings = lint_source(source, "train.py", Config()).findings
    new, changed = add_noqa(source, findings)
    assert changed == 1 and "# noqa: E501, DL101\n" in new
    assert codes(new) == []


UNUSED = Config(extend_select=("DL001",))


def test_unused_noqa_is_opt_in_like_ruff_rul100():
    source = "import torch\nx = torch.zeros(1)  # noqa: DL101\n"
    assert codes(source) == []
    result = lint_source(source, "train.py", UNUSED, fix=True)
    assert [f.code for f in result.findings] == []  # fixed
    assert result.fixed_source == "import torch\nx = torch.zeros(1)\n"
    (finding,) = lint_source(source, "train.py", UNUSED).findings
    assert finding.code == "DL001" and "unused: `DL101`" in finding.message
    assert (finding.line, finding.column) == (2, 21)


def test_used_disabled_foreign_and_blanket_noqa_are_not_reported():
    used = BAD.replace(SEED_LINE, SEED_LINE.rstrip("\n") + "  # noqa: DL101\n")
    assert codes(used, UNUSED) == []
    assert codes("x = 1  # noqa: E501, F401\n", UNUSED) == []
    assert codes("x = 1  # noqa\n", UNUSED) == []
    disabled = Config(extend_select=("DL001",), ignore=("DL101",))
    assert codes("x = 1  # noqa: DL101\n", disabled) == []
    assert codes("x = 1  # noqa: DL101\n", UNUSED, ignore_noqa=True) == []


def test_unknown_code_and_partial_fix_keep_other_codes_and_comment_text():
    source = "import torch\nx = torch.zeros(1)  # noqa: E501, DL101, DL000  # keep me\n"
    (finding,) = lint_source(source, "train.py", UNUSED).findings
    assert "unused: `DL101`" in finding.message and "unknown: `DL000`" in finding.message
    fixed = lint_source(source, "train.py", UNUSED, fix=True).fixed_source
    assert fixed == "import torch\nx = torch.zeros(1)  # noqa: E501  # keep me\n"


def test_unused_noqa_through_the_cli(distlint_exe, tmp_path):
    (tmp_path / "t.py").write_text("import torch\nx = torch.zeros(1)  # noqa: DL101\n")
    proc = subprocess.run(
        [distlint_exe, "check", "--extend-select", "DL001", "t.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "t.py:2:21: DL001 [*] Unused `noqa` directive (unused: `DL101`)" in proc.stdout


def test_an_unused_rule_name_in_a_directive_is_reported_and_removed_like_its_code():
    source = "import torch\nx = torch.zeros(1)  # noqa: E501, seed-only-torch\n"
    (finding,) = lint_source(source, "train.py", UNUSED).findings
    assert "unused: `DL101`" in finding.message
    fixed = lint_source(source, "train.py", UNUSED, fix=True).fixed_source
    assert fixed == "import torch\nx = torch.zeros(1)  # noqa: E501\n"
