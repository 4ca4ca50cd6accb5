"""The answer store (issue 32): answers about a project's helper modules kept on disk, so a
lint of an edited script reads them instead of parsing its helpers. A stale answer means
wrong findings: every way an answer can go stale has a test here that fails without the
check that catches it."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from distlint import api, cache
from distlint.analysis import project as project_mod
from distlint.analysis.project import forget_projects

TRAIN = """\
from accelerate import Accelerator
from pkg.helpers import make_opt


def main(model, loader):
    accelerator = Accelerator()
    opt = make_opt(model, 1e-3)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for batch in loader:
        loss = model(batch)
        accelerator.backward(loss)
        opt.step()
"""
HELPERS = """\
from factory import build


def make_opt(model, lr):
    return build(model, lr)
"""
UNSCALED = """\
import torch


def build(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr)
"""
SCALED = """\
import torch
import torch.distributed as dist


def build(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr * dist.get_world_size())
"""


def _tree(root: Path, config: str = "[tool.distlint]\n") -> Path:
    (root / "pyproject.toml").write_text(config)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "helpers.py").write_text(HELPERS)
    (root / "factory.py").write_text(UNSCALED)
    (root / "train.py").write_text(TRAIN)
    return root


def _lint(root: Path, name: str = "train.py", cache_on: bool = True):
    """One run, as a new process would make it: nothing in memory from an earlier one (the
    lint results of earlier runs are dropped, so the lint itself runs and asks its answers)."""
    forget_projects()
    api.forget_config_files()
    cache._STORES.clear()
    cache._CACHES.clear()
    for entries in root.glob(".distlint_cache/entries"):
        for item in sorted(entries.rglob("*"), reverse=True):
            item.rmdir() if item.is_dir() else item.unlink()
    old = os.getcwd()
    os.chdir(root)
    try:
        options = api.LintOptions(select=("ALL",), cache=cache_on, jobs=1)
        results = list(api.lint_paths([name], options))
    finally:
        os.chdir(old)
    (project,) = project_mod._PROJECTS.values()
    codes = sorted((f.code, f.range.line) for r in results for f in r.findings)
    errors = [e.message for r in results for e in r.errors]
    assert not errors
    return codes, project


def _answers(root: Path) -> list[Path]:
    return sorted((root / ".distlint_cache" / "answers").glob("*/*.json"))


@pytest.fixture(autouse=True)
def _fresh(fresh_projects):
    yield


def test_an_edited_entry_reads_its_helpers_answers_instead_of_parsing_them(tmp_path):
    root = _tree(tmp_path)
    first, project = _lint(root)
    assert first == [("DL201", 7)]
    assert project.parse_count == 2 and project.answer_counts["stored"] >= 2
    (root / "train2.py").write_text(TRAIN + "# edited\n")
    again, project = _lint(root, "train2.py")
    assert again == first
    assert project.parse_count == 0  # helpers.py and factory.py: answered from the store
    assert project.answer_counts["disk"] >= 1 and project.answer_counts["computed"] == 0
    alone, project = _lint(root, "train2.py", cache_on=False)
    assert alone == again and project.parse_count == 2


def test_a_helper_edited_between_runs_is_answered_again(tmp_path):
    root = _tree(tmp_path)
    assert _lint(root)[0] == [("DL201", 7)]
    (root / "factory.py").write_text(SCALED)  # two modules away from the entry
    codes, project = _lint(root)
    assert codes == [] and project.answer_counts["disk"] == 0


def test_a_new_file_that_shadows_a_resolved_module_is_answered_again(tmp_path):
    root = _tree(tmp_path)
    assert _lint(root)[0] == [("DL201", 7)]
    # `from factory import build` in pkg/helpers.py now finds pkg/factory.py first
    (root / "pkg" / "factory.py").write_text(SCALED)
    codes, project = _lint(root)
    assert codes == [] and project.answer_counts["disk"] == 0


def test_a_deleted_helper_is_answered_again(tmp_path):
    root = _tree(tmp_path)
    # (make_opt's own text names an optimizer: the name search that gates summaries still
    # leads to it once factory.py is gone, and the store is asked)
    helpers = HELPERS.replace("(model, lr):", "(model, lr, kind=torch.optim.AdamW):")
    (root / "pkg" / "helpers.py").write_text("import torch\n" + helpers)
    assert _lint(root)[0] == [("DL201", 7)]
    (root / "factory.py").unlink()
    codes, project = _lint(root)
    assert codes == [] and project.answer_counts["disk"] == 0


def test_a_configuration_change_is_answered_again(tmp_path):
    root = _tree(tmp_path, '[tool.distlint]\nsrc = ["a"]\n')
    (root / "factory.py").unlink()
    for folder, text in (("a", UNSCALED), ("b", SCALED)):
        (root / folder).mkdir()
        (root / folder / "factory.py").write_text(text)
    assert _lint(root)[0] == [("DL201", 7)]
    (root / "pyproject.toml").write_text('[tool.distlint]\nsrc = ["b"]\n')
    codes, project = _lint(root)
    assert codes == [] and project.answer_counts["disk"] == 0


def test_another_engine_does_not_read_the_answers(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    _lint(root)
    assert _lint(root, "train.py")[1].answer_counts["disk"] > 0  # (the same engine does)
    monkeypatch.setattr(cache, "__version__", "99.0")
    cache.engine_fingerprint.cache_clear()
    try:
        codes, project = _lint(root)
    finally:
        cache.engine_fingerprint.cache_clear()
    assert codes == [("DL201", 7)] and project.answer_counts["disk"] == 0


def _poison(root: Path) -> None:
    """Make every stored summary say its function builds nothing (a wrong answer that would
    hide DL201 if it were read)."""
    for entry in _answers(root):
        data = json.loads(entry.read_text())
        if isinstance(data["value"], dict):
            data["value"]["makes"] = []
            data["value"]["lrs"] = []
            entry.write_text(json.dumps(data))


def test_no_cache_neither_reads_nor_writes_the_store(tmp_path):
    root = _tree(tmp_path)
    codes, project = _lint(root, cache_on=False)
    assert codes == [("DL201", 7)] and not (root / ".distlint_cache" / "answers").exists()
    _lint(root)
    _poison(root)
    assert _lint(root)[0] == []  # read with the cache (what makes this test able to fail)
    codes, project = _lint(root, cache_on=False)
    assert codes == [("DL201", 7)] and project.answer_counts["disk"] == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "not json at all",
        lambda text: json.dumps({**json.loads(text), "key": '["summary","/elsewhere.py","f"]'}),
        lambda text: json.dumps({**json.loads(text), "value": {"makes": 3}}),
        lambda text: json.dumps({**json.loads(text), "deps": [[1, 2]]}),
        lambda text: json.dumps({**json.loads(text), "scope": "another project"}),
    ],
    ids=["truncated", "garbage", "foreign-key", "wrong-types", "bad-deps", "foreign-scope"],
)
def test_a_corrupt_or_foreign_entry_is_ignored(tmp_path, damage):
    root = _tree(tmp_path)
    _lint(root)
    _poison(root)
    for entry in _answers(root):
        entry.write_text(damage(entry.read_text()))
    codes, project = _lint(root)
    assert codes == [("DL201", 7)] and project.answer_counts["disk"] == 0


def _writer(directory: str, rounds: int) -> None:
    store = cache.AnswerStore(cache.Cache(directory), "scope")
    for i in range(rounds):
        store.put(("derives-loader", "/x.py", "C"), True, [], [f"/m{i}.py"])


def test_processes_writing_the_same_entry_never_show_half_an_entry(tmp_path):
    store = cache.AnswerStore(cache.Cache(str(tmp_path)), "scope")
    key = ("derives-loader", "/x.py", "C")
    assert store.put(key, True, [], [])
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), 300)) for _ in range(2)]
    for w in writers:
        w.start()
    seen = 0
    while any(w.is_alive() for w in writers):
        found = store.get(key, lambda p: None)
        assert found is not None and found[0] is True  # always a whole entry
        seen += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert seen > 0
    assert [p.name for p in (tmp_path / ".distlint_cache" / "answers").rglob(".tmp-*")] == []


def test_every_answer_of_the_fixture_projects_round_trips(tmp_path):
    """What is stored is plain data that comes back equal: every clean answer the fixture
    projects compute is written (none is refused as not plain)."""
    fixtures = Path(__file__).parent.parent / "fixtures" / "projects"
    stored = computed = 0
    for folder in sorted(fixtures.iterdir()):
        files = sorted(str(p) for p in folder.rglob("*.py"))
        forget_projects()
        project = project_mod.project_for(files[0])
        project.answers = cache.AnswerStore(cache.Cache(str(tmp_path / folder.name)), "s")
        for path in files:
            with project.tracking(path):
                api.lint_source(Path(path).read_bytes(), path, project=project)
        for key, found in project.memo.items():
            if type(found) is project_mod.Answer and found.clean and not project.errors:
                computed += 1
                encoded = cache._answer_out(key[0], found.value)
                assert cache._answer_out(key[0], cache._answer_in(key[0], encoded)) == encoded
        stored += project.answer_counts["stored"]
    assert computed > 20 and stored > 0


def test_the_language_server_reads_the_answers_of_a_check_run(tmp_path):
    root = _tree(tmp_path)
    result = _after_a_check(root, TRAIN + "# typing\n")
    (project,) = project_mod._PROJECTS.values()
    assert [f.code for f in result.findings] == ["DL201"]
    assert project.parse_count == 0 and project.answer_counts["disk"] > 0


def test_an_editors_unsaved_buffer_of_a_helper_is_not_answered_from_the_disk(tmp_path):
    root = _tree(tmp_path)
    opened = {str(root / "factory.py"): SCALED}  # edited in the editor, not saved
    result = _after_a_check(root, TRAIN, opened)
    assert [f.code for f in result.findings] == []


def _after_a_check(root, text, opened=None):
    """The language server's lint of ``text`` as train.py, in a fresh process's state, after
    a `check` of the tree filled the store."""
    _lint(root)
    forget_projects()
    old = os.getcwd()
    os.chdir(root)
    try:
        config = api.config_for(str(root / "train.py"))
        return api.lint_document(text, str(root / "train.py"), config, opened or {})
    finally:
        os.chdir(old)


def test_the_store_is_trimmed_oldest_first(tmp_path):
    store = cache.AnswerStore(cache.Cache(str(tmp_path)), "scope")
    for i in range(6):
        assert store.put(("derives-loader", f"/m{i}.py", "C"), True, [(f"/m{i}.py", "x")], [])
        for entry in (tmp_path / ".distlint_cache" / "answers").rglob("*.json"):
            if f"m{i}" in entry.read_text():
                os.utime(entry, ns=(i * 10**9, i * 10**9))  # (written in this order)
    files = list((tmp_path / ".distlint_cache" / "answers").rglob("*.json"))
    assert len(files) == 12  # an entry and its dependency set each
    store.trim(budget=sum(f.stat().st_size for f in files) // 2)
    kept = {i for i in range(6) if store.get(("derives-loader", f"/m{i}.py", "C"), lambda p: "x")}
    assert kept and max(kept) == 5 and 0 not in kept
