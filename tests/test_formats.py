"""--format github | sarif | junit and --output-file, through the installed command."""

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest
from helpers import FIXTURES, ROOT

from distlint.api import fix_source
from distlint.config import Config

BAD = (FIXTURES / "DL101" / "bad.py").read_text()
GOOD = (FIXTURES / "DL101" / "good.py").read_text()
BROKEN = "import torch\ntorch.manual_seed(0)\nif True\n    pass\n"
SARIF_SCHEMA = ROOT.parent / "shared" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def run(exe, *args, cwd):
    return subprocess.run(
        [exe, "check", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_github_annotations(distlint_exe, project):
    (project / "broken.py").write_text(BROKEN)
    proc = run(distlint_exe, "--format", "github", "bad.py", "good.py", "broken.py", cwd=project)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    finding = [line for line in lines if "DL101" in line]
    assert len(finding) == 1
    assert finding[0].startswith(
        "::error title=distlint (DL101),file=bad.py,line=20,col=5,endLine=20,endColumn="
    )
    assert finding[0].split("::", 2)[2].startswith("bad.py:20:5: DL101 torch is seeded by hand")
    error = [line for line in lines if "broken.py" in line]
    assert len(error) == 1 and error[0].startswith(
        "::error title=distlint (error),file=broken.py,line=3"
    )


def test_github_escapes_workflow_command_characters():
    import io

    from distlint.model import FileResult, Finding, Range
    from distlint.reporting import ReportContext
    from distlint.reporting.github_format import render

    f = Finding(
        "a,b:c.py", Range(1, 1, 1, 2), "DL101", "seed-only-torch", "100% wrong\nsecond line"
    )
    out = io.StringIO()
    render([FileResult("a,b:c.py", (f,))], out, ReportContext())
    assert out.getvalue() == (
        "::error title=distlint (DL101),file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,endColumn=2"
        "::a,b:c.py:1:1: DL101 100%25 wrong%0Asecond line\n"
    )


def test_junit_one_testcase_per_file_one_failure_per_finding(distlint_exe, project):
    (project / "bad2.py").write_text(
        BAD + "\nimport random\nimport torch\ntorch.manual_seed(1)\nrandom.random()\n"
    )
    (project / "broken.py").write_text(BROKEN)
    report = project / "report.xml"
    proc = run(distlint_exe, "--format", "junit", "--output-file", str(report), ".", cwd=project)
    assert proc.returncode == 2
    assert proc.stdout == ""
    root = ET.parse(report).getroot()
    suite = root.find("testsuite")
    cases = {os.path.normpath(c.get("name")): c for c in suite.findall("testcase")}
    assert set(cases) == {"bad.py", "bad2.py", "good.py", "broken.py"}
    assert len(cases["bad.py"].findall("failure")) == 1
    assert len(cases["bad2.py"].findall("failure")) >= 1
    assert cases["good.py"].findall("failure") == [] and cases["good.py"].findall("error") == []
    assert len(cases["broken.py"].findall("error")) == 1
    failure = cases["bad.py"].find("failure")
    assert failure.get("type") == "DL101" and "bad.py:20:5: DL101" in failure.text
    total = sum(len(c.findall("failure")) for c in cases.values())
    assert suite.get("failures") == root.get("failures") == str(total)
    assert suite.get("tests") == "4" and suite.get("errors") == "1"


def _sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    if not SARIF_SCHEMA.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the SARIF schema is missing at {SARIF_SCHEMA}")
        pytest.skip(
            f"SARIF 2.1.0 schema not found at {SARIF_SCHEMA} (../shared/data is provided in CI)"
        )
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema)


def _apply(text, replacements):
    for r in sorted(replacements, key=lambda r: r["deletedRegion"]["charOffset"], reverse=True):
        start, length = r["deletedRegion"]["charOffset"], r["deletedRegion"]["charLength"]
        text = text[:start] + r["insertedContent"]["text"] + text[start + length :]
    return text


def test_sarif_validates_and_carries_rules_locations_and_fixes(distlint_exe, project):
    validator = _sarif_validator()
    (project / "broken.py").write_text(BROKEN)
    proc = run(distlint_exe, "--format", "sarif", ".", cwd=project)
    assert proc.returncode == 2
    log = json.loads(proc.stdout)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    assert log["version"] == "2.1.0"
    (run_,) = log["runs"]
    rules = run_["tool"]["driver"]["rules"]
    by_id = {r["id"]: r for r in rules}
    assert by_id["DL101"]["name"] == "seed-only-torch"
    assert by_id["DL101"]["help"]["text"].startswith("# seed-only-torch (DL101)")
    assert by_id["DL101"]["shortDescription"]["text"]
    (result,) = run_["results"]
    assert result["ruleId"] == "DL101" and rules[result["ruleIndex"]]["id"] == "DL101"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "bad.py"
    assert location["region"]["startLine"] == 20 and location["region"]["startColumn"] == 5
    (fix,) = result["fixes"]
    (change,) = fix["artifactChanges"]
    # the replacements, applied to the file, give exactly that finding's fix
    expected = fix_source(BAD, "bad.py", Config())
    assert _apply(BAD, change["replacements"]) == expected
    notes = run_["invocations"][0]["toolExecutionNotifications"]
    assert run_["invocations"][0]["executionSuccessful"] is False
    assert len(notes) == 1 and "broken.py" in notes[0]["message"]["text"]


def test_sarif_of_a_clean_run_validates(distlint_exe, project):
    validator = _sarif_validator()
    proc = run(distlint_exe, "--format", "sarif", "good.py", cwd=project)
    assert proc.returncode == 0
    log = json.loads(proc.stdout)
    assert list(validator.iter_errors(log)) == []
    assert log["runs"][0]["results"] == []


def test_output_file_for_every_format(distlint_exe, project):
    for fmt in ("text", "json", "github", "sarif", "junit"):
        out = project / f"report.{fmt}"
        proc = run(distlint_exe, "--format", fmt, "-o", str(out), "bad.py", cwd=project)
        assert proc.returncode == 1, (fmt, proc.stderr)
        assert proc.stdout == "", fmt
        assert "DL101" in out.read_text(), fmt


@pytest.mark.parametrize("extra", [[], ["--diff"]], ids=["report", "diff"])
def test_quiet_silences_the_terminal_not_the_output_file(distlint_exe, project, extra):
    args = [*extra, "--format", "json", "-o", "report.json", "bad.py"]
    loud = run(distlint_exe, *args, cwd=project)
    expected = (project / "report.json").read_text()
    assert "DL101" in expected if not extra else expected.strip() == "[]"
    (project / "report.json").write_text("an old report\n")
    proc = run(distlint_exe, "-q", *args, cwd=project)
    assert proc.returncode == loud.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("--- a/bad.py") if extra else proc.stdout == ""
    assert (project / "report.json").read_text() == expected


# ------------------------------------------------------------------------------------------
# Every format carries the fixes JSON carries (issue #12), with and without --ignore-noqa
# ------------------------------------------------------------------------------------------

NOQA_LINE = '        lr=CONFIG["disc_lr"],  # expect: DL201'


def _json_edit_offsets(text, edit):
    """A JSON edit (ruff's shape: 1-based row/column) as offsets into ``text``."""
    from distlint.edits import LineIndex

    lines = LineIndex(text)
    loc, end = edit["location"], edit["end_location"]
    return (
        lines.offset(loc["row"], loc["column"] - 1),
        lines.offset(end["row"], end["column"] - 1),
    )


def _apply_json(text, edits):
    spans = sorted((*_json_edit_offsets(text, e), i, e["content"]) for i, e in enumerate(edits))
    for start, end, _, content in reversed(spans):
        text = text[:start] + content + text[end:]
    return text


@pytest.mark.parametrize("ignore_noqa", [False, True], ids=["noqa", "ignore-noqa"])
def test_every_format_carries_the_same_fixes_as_json(tmp_path, monkeypatch, ignore_noqa):
    from click.testing import CliRunner

    from distlint import cache as cache_mod
    from distlint.cli import main

    source = (FIXTURES / "DL201" / "bad.py").read_text()
    assert NOQA_LINE in source
    source = source.replace(NOQA_LINE, NOQA_LINE + "  # noqa: DL201")
    (tmp_path / "bad.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    cache_mod._CACHES.clear()
    extra = ["--ignore-noqa"] if ignore_noqa else []

    def check(fmt):
        result = CliRunner().invoke(
            main, ["check", "--unsafe-fixes", "--format", fmt, *extra, "bad.py"]
        )
        assert result.exit_code == 1, result.output
        return result.stdout

    findings = json.loads(check("json"))
    fixable = {(f["line"], f["column"], f["code"]): f["fix"] for f in findings if f["fix"]}
    # the suppressed finding is fixable too: --ignore-noqa shows one more finding and fix
    assert len(fixable) == (2 if ignore_noqa else 1)
    assert all(fix["edits"] for fix in fixable.values())

    sarif = json.loads(check("sarif"))
    (run_,) = sarif["runs"]
    sarif_fixes = {}
    for result in run_["results"]:
        region = result["locations"][0]["physicalLocation"]["region"]
        key = (region["startLine"], region["startColumn"], result["ruleId"])
        if "fixes" in result:
            ((change,),) = [fix["artifactChanges"] for fix in result["fixes"]]
            sarif_fixes[key] = _apply(source, change["replacements"])
    assert len(run_["results"]) == len(findings)
    assert sarif_fixes == {key: _apply_json(source, fix["edits"]) for key, fix in fixable.items()}
    assert all(fixed != source for fixed in sarif_fixes.values())

    text = check("text")
    marked = {
        (int(line), int(col), code)
        for line, col, code in re.findall(r"bad\.py:(\d+):(\d+): (DL\d+) \[\*\]", text)
    }
    assert marked == set(fixable)

    github = check("github")
    assert github.count("::error ") == len(findings)
    junit = ET.fromstring(check("junit"))
    assert len(junit.findall(".//failure")) == len(findings)
