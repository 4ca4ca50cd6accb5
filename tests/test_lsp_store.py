"""The language server and the answer store (issue 32): the server's worker stores what it
learnt of the modules it did not open, so the next start answers them from disk, and never
stores an answer that read an editor's unsaved buffer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_answer_store import SCALED, TRAIN, _answers, _tree

from distlint import api, cache
from distlint.analysis import project as project_mod


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    _new_process()
    monkeypatch.chdir(tmp_path)
    yield
    _new_process()


def _new_process() -> None:
    """What a new server process starts from: nothing in memory."""
    project_mod.forget_projects()
    api.forget_config_files()
    cache._STORES.clear()
    cache._CACHES.clear()


def _worker_lint(root: Path, text: str, buffers: dict[str, str] | None = None):
    """The worker's lint of buffer train.py holding ``text`` (``buffers``: the other open
    documents): the buffer stands in for its file, as in the server."""
    path = str(root / "train.py")
    config = api.config_for(path)
    project = api.project_for(path, config)
    project.set_overlay(path, text)
    return api.lint_document(text, path, config, buffers or {}), project


def test_the_server_stores_what_it_learnt_of_the_modules_it_did_not_open(tmp_path):
    root = _tree(tmp_path)
    first, project = _worker_lint(root, TRAIN + "# typing\n")
    assert [f.code for f in first.findings] == ["DL201"]
    assert project.answer_counts["stored"] > 0 and _answers(root)
    # the next start of the server, the same buffer open: the helpers are answered from disk
    _new_process()
    again, project = _worker_lint(root, TRAIN + "# typing more\n")
    assert again.findings == first.findings
    assert project.parse_count == 0 and project.answer_counts["disk"] > 0


def test_an_answer_that_read_an_unsaved_buffer_is_not_stored(tmp_path):
    root = _tree(tmp_path)
    factory = str(root / "factory.py")
    linted, project = _worker_lint(root, TRAIN, {factory: SCALED})  # edited, not saved
    assert linted.findings == ()  # the buffer scales the learning rate
    assert project.answer_counts["computed"] > 0
    assert project.answer_counts["stored"] == 0 and not _answers(root)
    # the disk still says the rate is not scaled
    _new_process()
    checked = list(api.lint_paths(["train.py"], api.LintOptions(select=("ALL",), jobs=1)))
    assert [f.code for r in checked for f in r.findings] == ["DL201"]


def test_a_buffer_of_a_file_not_saved_yet_is_not_stored_either(tmp_path):
    # the helper's `from factory import build` looks beside it first: an unsaved buffer of
    # pkg/factory.py (no such file on disk) is what it finds, so the helper's answer read a
    # buffer; the answers about the files on disk alone may be stored
    root = _tree(tmp_path)
    new = root / "pkg" / "factory.py"
    linted, project = _worker_lint(root, TRAIN, {str(new): SCALED})
    assert linted.findings == () and not new.exists()
    helper = project_mod.normalise(str(root / "pkg" / "helpers.py"))
    assert ("summary", helper, "make_opt") in project.memo
    assert ("summary", helper, "make_opt") not in _stored_keys(root)
    _new_process()
    checked = list(api.lint_paths(["train.py"], api.LintOptions(select=("ALL",), jobs=1)))
    assert [f.code for r in checked for f in r.findings] == ["DL201"]


def _stored_keys(root: Path) -> set[tuple]:
    return {tuple(json.loads(json.loads(p.read_text())["key"])) for p in _answers(root)}


def test_the_check_after_the_server_reads_its_answers(tmp_path):
    root = _tree(tmp_path)
    _worker_lint(root, TRAIN + "# typing\n")
    _new_process()
    options = api.LintOptions(select=("ALL",), jobs=1, cache=True)  # (the command's default)
    checked = list(api.lint_paths(["train.py"], options))
    assert [f.code for r in checked for f in r.findings] == ["DL201"]
    (project,) = project_mod._PROJECTS.values()
    assert project.answer_counts["disk"] > 0 and os.path.isdir(root / ".distlint_cache")
