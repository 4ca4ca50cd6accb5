"""Project-level tests driven by fixtures/projects/<name>/.

Each project is a small multi-file training repository (entry script, helper modules, config
files) shaped like a real one (``fixture.toml`` says which). Its ``entry`` (and any other files
listed in ``lint``) are linted in ONE run through the public API, as ``distlint check`` does,
so all files share one project analysis. Every finding is marked inline with
``# expect: DL201`` at the end of the line where it is reported; the set of findings must equal
the set of expectations exactly, in every file of the project. ``[[message]]`` entries require a
finding's message to name where the value comes from; ``not_yet`` (a reason) marks a project
the analysis does not follow yet (a strict xfail); ``errors`` lists the modules reported as
broken (each exactly once); ``fixed`` is the exact output of ``fix --unsafe-fixes`` on the entry
(``pytest --update-fixtures`` regenerates it). Config files are never written.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import FIXTURES, expected_findings, undefined_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from distlint import api
from distlint.analysis.project import forget_projects

PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if (p / "fixture.toml").is_file())
OPTIONS = api.LintOptions(select=("ALL",), jobs=1)


def spec(project):
    with open(project / "fixture.toml", "rb") as handle:
        return tomllib.load(handle)


def lint_project(project, options=OPTIONS):
    forget_projects()  # each test starts from a fresh analysis, as a new process would
    data = spec(project)
    files = [str(project / rel) for rel in data.get("lint", [data["entry"]])]
    return data, list(api.lint_paths(files, options))


def rel(project, path):
    return os.path.relpath(os.path.abspath(path), project).replace(os.sep, "/")


def test_there_are_enough_projects_in_several_layouts():
    assert len(PROJECTS) >= 15
    silent = [p for p in PROJECTS if not any(_all_expectations(p))]
    assert len(silent) >= 5, "correct-but-suspicious projects that must stay silent"
    for p in PROJECTS:
        assert spec(p).get("based_on"), f"{p.name}: say which real repository it is shaped on"


def _all_expectations(project):
    for path in sorted(p for p in project.rglob("*.py") if not p.name.endswith(".fixed.py")):
        for line, code in expected_findings(path.read_text(encoding="utf-8")):
            yield rel(project, path), line, code


def _expected_to_match(project):
    """A project whose ``not_yet`` says what the analysis cannot follow yet is a strict xfail:
    it fails the run the day it starts to pass, so the marker is removed with the fix."""
    reason = spec(project).get("not_yet")
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(project, id=project.name, marks=marks)


@pytest.mark.parametrize("project", [_expected_to_match(p) for p in PROJECTS])
def test_findings_match_inline_expectations(project):
    data, results = lint_project(project)
    found = {(rel(project, f.path), f.line, f.code) for r in results for f in r.findings}
    expected = set(_all_expectations(project))
    linted = {rel(project, r.path) for r in results}
    stray = sorted(e for e in expected if e[0] not in linted)
    assert not stray, f"expectations in files the fixture does not lint: {stray}"
    messages = {
        (rel(project, f.path), f.line, f.code): f.message for r in results for f in r.findings
    }
    missed = sorted(expected - found)
    false_positives = sorted((*k, messages[k]) for k in found - expected)
    assert not missed and not false_positives, f"missed={missed} false_positives={false_positives}"

    errors = [e for r in results for e in r.errors]
    wanted = sorted(data.get("errors", []))
    assert sorted(rel(project, e.path) for e in errors) == wanted, [str(e) for e in errors]

    for item in data.get("message", []):
        matching = [
            m
            for (file, _line, code), m in messages.items()
            if file == item["file"] and code == item["code"]
        ]
        assert matching, f"no {item['code']} in {item['file']}"
        assert any(item["contains"] in m for m in matching), matching


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_fix_stays_in_the_linted_file_and_is_valid(project, update_fixtures, tmp_path):
    data = spec(project)
    entry = project / data["entry"]
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    forget_projects()
    result = api.lint_file(
        str(entry),
        options=api.LintOptions(select=("ALL",), fix=True, unsafe_fixes=True, write=False),
    )
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert before == after, "a fix run without write must not touch any file of the project"
    fixed = result.fixed_source if result.fixed_source is not None else entry.read_text()
    compile(fixed, str(entry), "exec")
    assert undefined_names(fixed, str(entry)) == []
    if "fixed" in data:
        expected_path = project / data["fixed"]
        if update_fixtures:
            expected_path.write_text(fixed)
        assert expected_path.exists(), f"{expected_path} missing: run pytest --update-fixtures"
        assert fixed == expected_path.read_text()
        assert result.fixed_source is not None, "the fix belongs in the entry script"


def test_whole_project_run_parses_each_module_once():
    from distlint.analysis import project as project_mod

    project = FIXTURES / "projects" / "broken_and_cyclic_helpers"
    forget_projects()
    files = sorted(str(p) for p in project.rglob("*.py"))
    results = list(api.lint_paths(files, OPTIONS))
    assert len(results) == len(files)
    shared = list(project_mod._PROJECTS.values())
    assert len(shared) == 1
    assert shared[0].parse_count <= len(files)
    # the broken module is reported once: by its own lint, not again by its importer
    broken = [e for r in results for e in r.errors if e.path.endswith("broken_helper.py")]
    assert len(broken) == 1, broken


def test_cli_names_the_config_file(tmp_path):
    project = FIXTURES / "projects" / "hydra_accelerate_config_tree"
    env = dict(os.environ, NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "distlint", "check", "--no-cache", str(project / "train.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert "conf/optimizer/adamw.yaml:2: optimizer.lr = 3e-4" in proc.stdout


def test_cache_key_covers_reached_modules_and_config_files(tmp_path):
    import shutil

    project = tmp_path / "proj"
    shutil.copytree(FIXTURES / "projects" / "omegaconf_helper_module", project)
    entry = str(project / "train.py")
    options = api.LintOptions(select=("ALL",), cache=True, jobs=1)
    forget_projects()
    first = list(api.lint_paths([entry], options))[0]
    reached = {rel(project, p) for p, _ in first.dependencies}
    assert {"config.py", "configs/base.yaml"} <= reached
    assert api._cached_result(entry, options) is not None  # unchanged: answered from the cache
    yaml_path = project / "configs" / "base.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("1.5e-4", "2.5e-4"))
    assert api._cached_result(entry, options) is None  # a reached config file changed: a miss
    again = list(api.lint_paths([entry], options))[0]
    assert any("optimizer.lr = 2.5e-4" in f.message for f in again.findings)
    helper = project / "config.py"
    helper.write_text(helper.read_text() + "\n# touched\n")
    assert api._cached_result(entry, options) is None  # a reached module changed: a miss
