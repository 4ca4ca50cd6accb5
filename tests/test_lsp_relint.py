"""Re-linting an editor buffer inside a project (what the language server's worker does at
each pause in typing): an edit of the linted script keeps what was learnt about the modules it
follows, and forgets exactly what the edit can change."""

from __future__ import annotations

import shutil

import pytest
from helpers import FIXTURES

from distlint import api
from distlint.analysis import facts as facts_module
from distlint.analysis import project as project_module
from distlint.incremental import Document

# the entry calls a seed helper of its project that seeds python, numpy and torch (silent);
# the torch-only variant of that helper leaves python's and numpy's generators unseeded (DL101)
PROJECT = FIXTURES / "projects" / "seed_helper_module"
ENTRY = (PROJECT / "train.py").read_text()
SEEDS_ALL = (PROJECT / "utils" / "misc.py").read_text()
SEEDS_TORCH_ONLY = (
    FIXTURES / "projects" / "seed_helper_torch_only" / "utils" / "misc.py"
).read_text()
BACKWARD = "        accelerator.backward("


class Buffer:
    """One open document, linted as the server's worker lints it (the buffer stands in for
    its file; the same Document keeps the last parse)."""

    def __init__(self, path, config):
        self.path, self.config, self.document = str(path), config, Document()
        self.project = api.project_for(self.path, config)

    def lint(self, text, others=None):
        self.project.set_overlay(self.path, text)
        return api.lint_document(text, self.path, self.config, others or {}, self.document)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    project_module.forget_projects()
    shutil.copytree(PROJECT, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    work: list[str] = []  # what the project did: "outline", "scan <path>", "facts <path>"
    real_outline = project_module.outline
    real_scan = project_module.Project._scan_text
    real_facts = facts_module.Facts.__init__

    def outline(text):
        work.append("outline")
        return real_outline(text)

    def scan(self, full, text):
        work.append(f"scan {full}")
        return real_scan(self, full, text)

    def facts(self, index, path=None, project=None):
        work.append(f"facts {path}")
        real_facts(self, index, path, project)

    monkeypatch.setattr(project_module, "outline", outline)
    monkeypatch.setattr(project_module.Project, "_scan_text", scan)
    monkeypatch.setattr(facts_module.Facts, "__init__", facts)
    yield tmp_path, work
    project_module.forget_projects()


def _typed(text: str, line: str) -> str:
    """``text`` with ``line`` typed before the training loop's backward call."""
    assert BACKWARD in text
    return text.replace(BACKWARD, f"        {line}\n{BACKWARD}", 1)


def _opened(root):
    """The entry's path, its configuration, and a buffer of it."""
    path = str(root / "train.py")
    config = api.config_for(path, api.LintOptions())
    return path, config, Buffer(path, config)


def codes(result):
    return sorted(f.code for f in result.findings)


def test_an_edit_of_the_script_reads_none_of_the_modules_it_follows(tree):
    root, work = tree
    _, _, buffer = _opened(root)
    first = buffer.lint(ENTRY)
    helper = str(root / "utils" / "misc.py")
    assert any(path == helper for path, _ in first.dependencies)
    assert f"facts {helper}" in work  # the seed helper was parsed and analysed
    assert "outline" in work and f"scan {helper}" in work
    parsed = buffer.project.parse_count
    for i in range(3):
        work.clear()
        edited = _typed(ENTRY, f"step = {i}")
        again = buffer.lint(edited)
        assert codes(again) == codes(first)
        assert again.dependencies == first.dependencies
        assert buffer.project.parse_count == parsed  # the helper was not parsed again,
        # nor outlined, scanned or analysed: the script alone was
        assert work == [f"scan {buffer.path}", f"facts {buffer.path}"]
    # the answers are those of a fresh process
    project_module.forget_projects()
    fresh = api.project_for(buffer.path, buffer.config)
    assert fresh is not buffer.project
    assert api.lint_source(edited, buffer.path, buffer.config, project=fresh).findings == (
        again.findings
    )


def test_an_edit_that_adds_an_import_follows_the_new_module(tree):
    root, _ = tree
    (root / "utils" / "extra.py").write_text(SEEDS_TORCH_ONLY.replace("fix_random", "other"))
    _, _, buffer = _opened(root)
    buffer.lint(ENTRY)
    parsed = buffer.project.parse_count
    edited = ENTRY.replace(
        "from utils.misc import fix_random_seeds\n",
        "from utils.misc import fix_random_seeds\nfrom utils.extra import other_seeds\n",
    )
    edited = _typed(edited, "other_seeds(1)")
    again = buffer.lint(edited)
    extra = str(root / "utils" / "extra.py")
    assert any(path == extra for path, _ in again.dependencies)
    assert buffer.project.parse_count > parsed  # the new helper was parsed


def test_an_edited_helper_buffer_changes_the_scripts_answer(tree):
    # the helper is open in another buffer and edited to seed torch only: the script's next
    # lint must see it (DL101: python's and numpy's generators are used but never seeded)
    root, _ = tree
    path, config, buffer = _opened(root)
    helper = str(root / "utils" / "misc.py")
    assert "DL101" not in codes(buffer.lint(ENTRY, {helper: SEEDS_ALL}))
    edited = _typed(ENTRY, "step = 1")
    assert "DL101" in codes(buffer.lint(edited, {helper: SEEDS_TORCH_ONLY}))
    assert "DL101" not in codes(buffer.lint(ENTRY, {helper: SEEDS_ALL}))


def test_the_project_forgets_what_depends_on_the_changed_module_only(tree):
    root, _ = tree
    path, config, buffer = _opened(root)
    buffer.lint(ENTRY)
    project = api.project_for(path, config)
    helper = project_module.normalise(str(root / "utils" / "misc.py"))
    entry = project_module.normalise(path)
    owners = {key[1] for key in project.memo if key[0] in ("facts", "summary")}
    assert helper in owners
    project.set_overlay(path, _typed(ENTRY, "step = 2"))
    owners = {key[1] for key in project.memo if key[0] in ("facts", "summary")}
    assert helper in owners and entry not in owners  # the script's own analysis went
    # a change of the helper takes the analysis of the modules that name it with it
    project.set_overlay(helper, SEEDS_TORCH_ONLY)
    assert not {key[1] for key in project.memo if key[0] in ("facts", "summary")} & {helper}
    # a package's __init__.py can be reached without being named: everything goes
    buffer.lint(ENTRY)
    assert project.memo
    project.set_overlay(str(root / "utils" / "__init__.py"), "X = 1\n")
    assert not project.memo


def test_a_new_module_resolves_imports_again(tree):
    # a file that appears (a new buffer, a file created on disk) may change what an import
    # resolves to: nothing resolved before is kept
    root, _ = tree
    path, config, buffer = _opened(root)
    buffer.lint(ENTRY)
    project = api.project_for(path, config)
    assert project._resolved
    project.set_overlay(str(root / "utils" / "fresh.py"), "X = 1\n")
    assert not project._resolved and not project.memo


def test_a_class_s_method_code_is_searched_once_per_class_text(monkeypatch):
    # each re-lint of a script asks again for the code of the same methods of the same
    # (large) project classes: the search runs once per class text, and a changed text is
    # searched again
    from distlint.analysis import summaries

    searches = []
    real_search = summaries.re.search

    def search(pattern, string, *args, **kwargs):
        searches.append(pattern)
        return real_search(pattern, string, *args, **kwargs)

    monkeypatch.setattr(summaries.re, "search", search)
    summaries._method_code.cache_clear()
    code = (
        "class Env:\n    def size(self):\n        return 1\n    def rank(self):\n        return 0\n"
    )
    first = summaries._method_code(code, "size")
    assert first == "    def size(self):\n        return 1"
    assert summaries._method_code("".join(code), "size") == first
    assert len(searches) == 1
    edited = code.replace("return 1", "return world_size()")
    assert summaries._method_code(edited, "size") == (
        "    def size(self):\n        return world_size()"
    )
    assert len(searches) == 2


def test_a_helper_s_shape_is_read_once_per_helper_text(monkeypatch):
    # whether a helper's code may slice a batch per rank is asked again at every re-lint of
    # the scripts calling it: read once per text of the helper
    from distlint.analysis import batch

    searched = []
    pattern = batch._SUBSCRIPT_OF_NAME

    class Counting:
        def search(self, code):
            searched.append(code)
            return pattern.search(code)

    monkeypatch.setattr(batch, "_SUBSCRIPT_OF_NAME", Counting())
    batch._may_slice.cache_clear()
    code = "def shard(batch, rank):\n    return batch[rank::2]\n"
    assert batch._may_slice(code) and batch._may_slice("".join(code))
    assert len(searched) == 1
    assert not batch._may_slice(code.replace("batch[rank::2]", "batch"))
    assert len(searched) == 2


def test_the_worker_frees_a_lint_s_analysis_after_the_reply_not_before(monkeypatch, tmp_path):
    """In the worker's process, what a lint leaves to free (the index and facts of the text's
    own parse) waits until the reply is sent (`idle`); elsewhere it is freed at once."""
    from distlint import collector
    from distlint.analysis.facts import Facts
    from distlint.analysis.index import Index
    from distlint.lsp_worker import _Engine

    monkeypatch.setattr(collector, "_deferred", None)  # (restored after the test)
    script = tmp_path / "train.py"
    script.write_text(ENTRY)
    edited = ENTRY.replace("0", "1")
    library = _Engine(warm_up=False)
    expected = library.lint(edited, str(script), api.LintOptions(), {})
    assert collector.pending() == []  # a library's engine: freed before the lint returned

    engine = _Engine(warm_up=False)
    engine.free_after_replies()
    assert engine.lint(edited, str(script), api.LintOptions(), {}) == expected
    (index,) = [held for held in collector.pending() if isinstance(held, Index)]
    assert index.__dict__  # not freed yet: the reply goes first
    engine.idle()
    assert collector.pending() == [] and not index.__dict__  # freed (its cycles broken)
    engine.lint(ENTRY, str(script), api.LintOptions(), {})
    engine.lint(ENTRY.replace("0", "2"), str(script), api.LintOptions(), {})  # no idle between
    # the first lint's analysis was freed when the second began; the second's facts wait (and
    # what the index had memoised from the first text); its index (made from the first's: an
    # edit of the buffer) is the document's, for the next edit
    waiting = collector.pending()
    (facts,) = [held for held in waiting if isinstance(held, Facts)]
    assert not [held for held in waiting if isinstance(held, Index)]
    (document,) = engine.documents.values()
    assert facts.index is document.index
    engine.idle()
    assert document.index.__dict__ and not facts.__dict__ and not collector.pending()


def test_an_edit_of_the_script_keeps_the_name_searches_of_the_modules_it_follows(
    tmp_path, monkeypatch
):
    """What the name searches learnt of the helper modules (`Project.name_may_write`) is kept
    across edits of the script and lints; a helper changed on disk is searched again."""
    import os

    project_module.forget_projects()
    shutil.copytree(FIXTURES / "projects" / "ddp_helper_optimizer_caller_scales_lr", tmp_path / "p")
    root = tmp_path / "p"
    monkeypatch.chdir(root)
    searches = []
    real = project_module.Project._name_closure

    def counted(self, start, name, spellings):
        searches.append((start, name))
        return real(self, start, name, spellings)

    monkeypatch.setattr(project_module.Project, "_name_closure", counted)
    path, config, buffer = _opened(root)
    text = (root / "train.py").read_text()
    first = buffer.lint(text)
    assert searches
    for i in range(3):
        searches.clear()
        edited = text + f"\nstep_edit = {i}\n"
        again = buffer.lint(edited)
        assert not searches  # nothing the searches read changed
    # the answers are those of a fresh process
    project_module.forget_projects()
    fresh = api.lint_source(edited, path, config, project=api.project_for(path, config))
    assert again.findings == fresh.findings and codes(again) == codes(first)
    # the helpers change on disk: the next lint checks them and searches again
    path, config, buffer = _opened(root)  # (a buffer of the fresh process)
    buffer.lint(edited)
    searches.clear()
    for helper in root.rglob("*.py"):
        if helper.name != "train.py":
            helper.write_text(helper.read_text() + "\n# changed\n")
            stat = helper.stat()
            os.utime(helper, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    buffer.lint(edited)  # (the same text: only the disk changed)
    assert searches
