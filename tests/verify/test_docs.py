"""docs/verify.md stays true: its commands parse with the real CLI (verify itself stubbed, so
nothing runs), its synopsis lists exactly the options that exist, the extras and fixtures it
names exist, and its real report has the checks and static findings distlint prints today."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from verify_helpers import ROOT, VERIFY_FIXTURES, load_case

DOC = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
FENCES = re.findall(r"^```\w*\n(.*?)^```$", DOC, re.S | re.M)
SYNOPSIS = FENCES[0]


def verify_command():
    from distlint.cli import main

    return main.commands["verify"]


def test_the_synopsis_lists_exactly_the_options_of_verify():
    documented = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", SYNOPSIS)) - {"--", "--verify"}
    options = [p for p in verify_command().params if any(o.startswith("-") for o in p.opts)]
    missing = [p.opts for p in options if not documented & set(p.opts)]
    assert missing == []
    known = {o for p in options for o in p.opts}
    assert documented <= known


# Placeholders of the document's commands, with values the CLI accepts.
PLACEHOLDERS = {"K": "2", "N": "2", "R": "0", "S": "60", "HOST:PORT": "127.0.0.1:29500"}


def doc_commands() -> list[str]:
    """Every concrete `distlint ...` command of the document (inline or after `$ `)."""
    inline = re.findall(r"`(distlint (?:check|verify) [^`]+)`", DOC)
    shown = re.findall(r"^\$ (distlint .+)$", DOC, re.M)
    return [c for c in inline + shown if "[" not in c and ".py" in c]


def test_the_document_has_commands_to_check():
    assert len(doc_commands()) >= 3


@pytest.mark.parametrize("command", doc_commands())
def test_every_command_of_the_document_parses(command, monkeypatch, tmp_path):
    """The command as a user would copy it (placeholders filled in): the real CLI accepts it
    and hands verify what the document says, without running anything."""
    from distlint.cli import main
    from distlint.verify import cli as verify_cli

    calls = []

    def fake_run(script, script_args, fmt, static, **options):
        calls.append((script, options))
        return 0

    monkeypatch.setattr(verify_cli, "run_verify_command", fake_run)
    argv = []
    for word in shlex.split(command)[1:]:
        if word == "train.py":
            word = str(VERIFY_FIXTURES / "correct.py")
        elif word == "DIR":
            word = str(tmp_path / "keep")
        argv.append(PLACEHOLDERS.get(word, word))
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, (command, result.output)
    assert len(calls) == 1
    script, options = calls[0]
    assert Path(script).is_file()
    if "--slurm" in argv:
        assert options["slurm"] and options["nnodes"] == 2 and options["keep_dir"]


def test_install_lines_name_real_extras_and_the_torch_that_is_tested():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    [named] = re.findall(r"pip install -e '\.\[([\w,]+)\]'", DOC)
    assert set(named.split(",")) <= set(extras)
    assert {"torch", "accelerate"} <= {re.split(r"[<>=\[ ]", d)[0] for d in extras["verify"]}
    torch = pytest.importorskip("torch")
    [pinned] = re.findall(r"pip install torch==([\d.]+) --index-url", DOC)
    assert torch.__version__.split("+")[0] == pinned


def test_named_fixtures_and_fault_modes_exist():
    section = DOC.split("## Fixtures and tests", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`(\w+\.py)", section)
    assert len(names) >= 15
    for name in names:
        assert (VERIFY_FIXTURES / name).is_file() or (ROOT / "tests" / "verify" / name).is_file()
    modes = re.search(r"--fault ([\w|-]+)", section).group(1).split("|")
    faults = (VERIFY_FIXTURES / "faults.py").read_text()
    for mode in modes:
        assert f'"{mode}"' in faults, mode


def test_documented_record_cases_exist():
    sys.path.insert(0, str(ROOT / "tests" / "verify"))
    from record_runs import CASES

    assert "python tests/verify/record_runs.py [CASE ...]" in DOC
    assert {"correct", "unscaled_lr", "token_stream"} <= set(CASES)


def test_the_real_report_has_the_checks_and_findings_printed_today():
    """The document's report came from 20 updates, the recorded case from 10, so the numbers
    differ; the lines that name each check, its status and rule, and the static findings cited
    (from a real lint of the fixture) must be the same."""
    from distlint.api import lint_file
    from distlint.verify.report import render_text

    path = "fixtures/verify/unscaled_lr.py"
    findings = list(lint_file(str(ROOT / path)).findings)  # as `distlint check` reads it
    findings = [f._replace(path=path) for f in findings]
    assert [f.code for f in findings] == ["DL201"]
    shown = DOC.split("$ distlint check --verify --plot", 1)[1].split("```", 1)[0]
    text = render_text(load_case("unscaled_lr", static_findings=findings))

    def heads(report: str) -> list[str]:
        return re.findall(r"^  (?:PASS|INFO|WARN|FAIL|SKIP)  .*$", report, re.M)

    def cited(report: str) -> str:
        block = report.split("Static findings cited (distlint check)", 1)[1].split("\n\n", 1)[0]
        return " ".join(block.split())

    assert heads(text) == heads(shown)

    def table(report: str) -> str:
        return report.split("Equivalent setups", 1)[1].split("\n\n", 1)[0]

    assert table(text) == table(shown)
    assert cited(text) == cited(shown)
    rows = re.compile(r"^  ([a-z][a-z /(),-]+?)  +", re.M)
    assert rows.findall(text.split("Checks", 1)[0]) == rows.findall(shown.split("Checks", 1)[0])


def test_the_benchmark_command_of_the_document_parses():
    import subprocess

    [command] = re.findall(r"`(python benchmarks/verify_overhead.py[^`]*)`", DOC)
    argv = shlex.split(command)
    helptext = subprocess.run(
        [sys.executable, argv[1], "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    ).stdout
    for word in argv[2:]:
        if word.startswith("--"):
            assert word in helptext, word
