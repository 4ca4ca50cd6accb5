"""Shared dependency records (issue 32): what a lint, an answer or a cache entry consulted is
kept as its own paths plus references to the records it used, flattened only where a flat set
is needed. The meaning must be exactly that of copying each record into its user (a stale
dependency is a stale cache, which means wrong findings): these tests compare the two on the
fixture projects, check that an edit deep in a chain still invalidates what reached it, and
that what the project holds grows with the distinct paths consulted, not with their uses."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from distlint import api, cache
from distlint.analysis import project as project_mod
from distlint.analysis.project import (
    Answer,
    Project,
    _files,
    _flatten,
    _Gather,
    _Holds,
    _Looks,
    _Record,
    forget_projects,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "projects"
ROOT = os.path.abspath("/proj")


def P(rel: str) -> str:
    return os.path.join(ROOT, *rel.split("/"))


@pytest.fixture(autouse=True)
def _fresh(fresh_projects):
    yield


# ------------------------------------------------------------------ the records themselves
def test_a_frozen_gather_holds_what_was_gathered_and_later_freezes_add_only_what_came_after():
    inner = _Record(frozenset({"b", "c"}), ())
    gather = _Gather({"a"})
    gather.take(inner)
    first = gather.freeze()
    assert first is not None and _flatten((first,)) == {"a", "b", "c"}
    assert gather.freeze() is first  # nothing new: the same record, not a copy
    gather.paths.add("d")
    second = gather.freeze()
    assert second is not first and _flatten((second,)) == {"a", "b", "c", "d"}
    assert first in second.parts  # (the first snapshot is shared, not copied)
    assert _Gather().freeze() is None
    only = _Gather()
    only.take(inner)
    assert only.freeze() is inner


def test_an_accumulator_squashes_its_parts_into_one_flat_set_with_the_same_union():
    keeper = _Gather({"own"})
    expected = {"own"}
    for i in range(3 * project_mod._SQUASH_PARTS):
        keeper.keep(_Record(frozenset({f"m{i}", f"m{i % 7}"}), ()))
        expected |= {f"m{i}", f"m{i % 7}"}
    assert len(keeper.parts) <= project_mod._SQUASH_PARTS
    assert _flatten((keeper.freeze(),)) == expected


def test_a_squash_keeps_nothing_on_the_records_it_flattens():
    """An accumulator's squash (a long run's Facts, the pool: also without a cache) leaves
    no look-ups kept on the resolutions it met (memory a run keeping no cache never uses)."""
    leaf = _Looks((("/p", "torch.py", "0"),), ())
    keeper = _Gather()
    resolutions = [_Looks(((f"/p{i}", "m.py", "1"),), (leaf,)) for i in range(300)]
    for r in resolutions:
        keeper.keep(r)
    assert len(keeper.parts) < 300 and len(_flatten((keeper.freeze(),))) == 301  # (squashed)
    assert all(r.held is None for r in resolutions)
    assert _flatten(resolutions[:1], looked=True) == set(resolutions[0].held or ())


def test_a_join_that_a_second_flat_set_reaches_keeps_what_it_holds_and_gives_the_same_union(
    monkeypatch,
):
    """The lints of a tree share their answers' records: the second lint that flattens a
    record joining several parts keeps its flat set on it (`every`), and every later flat set
    takes it whole instead of walking below it again, with the same union."""
    monkeypatch.setattr(project_mod, "_KEPT", [0])
    looks = _Looks((("/p", "torch.py", "0"),), (_Looks((("/p", "torch/", "1"),), ()),))
    shared = _Record(frozenset({"a.py"}), (_Record(("b.py",), ()), looks))
    first = _Record(("one.py",), (shared,))
    second = _Record(("two.py",), (shared, _Record(("c.py",), ())))
    expected = {"a.py", "b.py", ("/p", "torch.py", "0"), ("/p", "torch/", "1")}
    assert _flatten((first,), looked=True) == expected | {"one.py"}
    assert shared.every is project_mod._ONCE  # (walked once: nothing kept yet)
    assert _flatten((second,), looked=True) == expected | {"two.py", "c.py"}
    assert shared.every is not None and set(shared.every) == expected
    walked = []
    real = _looked = project_mod._looked
    try:
        project_mod._looked = lambda r: walked.append(r) or real(r)
        assert _flatten((first,), looked=True) == expected | {"one.py"}
    finally:
        project_mod._looked = _looked
    assert walked == []  # (taken whole: nothing below it walked again)
    # an accumulator's squash (no cache) keeps nothing
    fresh = _Record(frozenset({"x.py"}), (_Record(("y.py",), ()), _Record(("z.py",), ())))
    for _ in range(3):
        assert _flatten((fresh,)) == {"x.py", "y.py", "z.py"}
    assert fresh.every is None


def test_what_joins_keep_is_bounded_for_the_process(monkeypatch):
    monkeypatch.setattr(project_mod, "_KEPT", [0])
    monkeypatch.setattr(project_mod, "_KEEP", 5)
    joins = [
        _Record((f"j{i}.py",), (_Record((f"a{i}.py",), ()), _Record((f"b{i}.py",), ())))
        for i in range(4)
    ]
    for _ in range(2):
        for join in joins:
            assert _flatten((_Record(("root.py",), (join,)),), looked=True) == {
                "root.py",
                *(f"{c}{joins.index(join)}.py" for c in "jab"),
            }
    kept = [j for j in joins if j.every is not project_mod._ONCE]
    assert len(kept) == 2 and project_mod._KEPT[0] == 6  # (kept while under the bound)


def test_a_deep_chain_of_joins_flattens_twice_without_deep_recursion():
    """Keeping a join's flat set walks what is below it without keeping more (no recursion
    per level): a chain of thousands of modules, each joining two parts, flattens again."""
    record = _Record(("leaf.py",), ())
    for i in range(5000):
        record = _Record((f"m{i}.py",), (record, _Record((f"s{i}.py",), ())))
    for _ in range(3):
        assert len(_flatten((record,), looked=True)) == 1 + 2 * 5000


def test_holds_looks_through_shared_parts_and_visits_each_record_once():
    leaf = _Record(frozenset({"deep.py"}), ())
    other = _Record(frozenset({"x.py"}), ())
    middle = _Record(frozenset(), (leaf, other))
    tops = [_Record(frozenset({f"t{i}"}), (middle,)) for i in range(50)]
    holds = _Holds("deep.py")
    assert all(holds(t) for t in tops)
    assert len(holds.known) == 50 + 3  # the shared records were looked at once
    assert not _Holds("nowhere.py")(tops[0]) and not holds(None)


# ------------------------------------------------------------------ same meaning as copies
def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records copied into their user at the moment they are taken (what the project did
    before records were shared): every record is then a flat set of its own."""

    def take(self: _Gather, record: _Record | None) -> None:
        if record is not None:
            self.paths |= _flatten((record,))

    def replay(self: Project, deps: _Record | None) -> None:
        if deps is not None and self._frames:
            self._frames[-1].paths |= _flatten((deps,))

    def freeze(self: _Gather) -> _Record | None:
        flat = _flatten(self.parts.values(), set(self.paths))
        return _Record(frozenset(flat), ()) if flat else None

    monkeypatch.setattr(_Gather, "take", take)
    monkeypatch.setattr(_Gather, "freeze", freeze)
    monkeypatch.setattr(Project, "_replay", replay)


def _everything_recorded(folder: Path) -> dict[str, Any]:
    """Per file: its dependencies and reached modules; per memoised answer and module Facts:
    the flat set of what it consulted (one in-process run, no cache)."""
    forget_projects()
    api.forget_config_files()
    old = os.getcwd()
    os.chdir(folder)
    try:
        options = api.LintOptions(select=("ALL",), cache=False, jobs=1)
        out: dict[str, Any] = {
            r.path: (r.dependencies, r.reached) for r in api.lint_paths(["."], options)
        }
    finally:
        os.chdir(old)
    for project in project_mod._PROJECTS.values():
        for key, value in project.memo.items():
            if type(value) is Answer:
                out[repr(key)] = _flatten((value.record,))
            elif type(key) is tuple and key[0] == "facts":
                held = value.__dict__.get("_consulted")
                if held is not None:
                    out[repr(key[:2])] = _flatten(held.parts.values(), set(held.paths))
    return out


def test_shared_records_flatten_to_what_copying_them_gave_on_every_fixture_project(monkeypatch):
    folders = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    assert len(folders) > 50
    shared = {f.name: _everything_recorded(f) for f in folders}
    _eager(monkeypatch)
    copied = {f.name: _everything_recorded(f) for f in folders}
    assert sum(len(v) for v in copied.values()) > 300  # (files, answers and Facts compared)
    for name in shared:
        assert shared[name] == copied[name], name


# ------------------------------------------------------------------ a run keeping no cache
def _every_record(roots: list[Any]) -> list[_Record]:
    seen: dict[int, _Record] = {}
    stack = [r for r in roots if r is not None]
    while stack:
        record = stack.pop()
        if id(record) not in seen:
            seen[id(record)] = record
            stack += record.parts
    return list(seen.values())


def _walked(record: _Record) -> set[Any]:
    """Every atom below ``record``, walked through its parts (nothing kept on a record used)."""
    out: set[Any] = set()
    for r in _every_record([record]):
        out.update(r.atoms)
    return out


def _linted(folder: Path, dependencies: bool) -> dict[str, Any]:
    forget_projects()
    api.forget_config_files()
    old = os.getcwd()
    os.chdir(folder)
    try:
        options = api.LintOptions(select=("ALL",), jobs=1, dependencies=dependencies)
        return {r.path: r for r in api.lint_paths(["."], options)}
    finally:
        os.chdir(old)


def test_a_run_keeping_no_cache_walks_no_import_look_up_and_digests_nothing(monkeypatch):
    """What the CLI's --no-cache run asks of the records (the files each lint consulted: its
    errors to report, its reached modules) is found without flattening the import look-ups
    (most of a lint's record) nor digesting a file; the results are otherwise the same."""
    folders = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    full = {f.name: _linted(f, True) for f in folders}
    assert sum(bool(r.reached) for v in full.values() for r in v.values()) > 20
    assert sum(bool(r.errors) for v in full.values() for r in v.values()) > 0
    calls = {"flatten": 0, "deps_now": 0}
    deps_now, flatten = Project._deps_now, project_mod._flatten

    def counted_deps_now(self: Project, *args: Any, **kwargs: Any) -> Any:
        calls["deps_now"] += 1
        return deps_now(self, *args, **kwargs)

    def counted_flatten(*args: Any, **kwargs: Any) -> Any:
        calls["flatten"] += 1
        return flatten(*args, **kwargs)

    monkeypatch.setattr(Project, "_deps_now", counted_deps_now)
    monkeypatch.setattr(project_mod, "_flatten", counted_flatten)
    kept = 0  # records whose files were kept on them (see `_files`), met again later
    for folder in folders:
        lean = _linted(folder, False)
        assert list(lean) == list(full[folder.name]), folder.name
        for path, result in lean.items():
            assert result.dependencies == ()
            assert result == full[folder.name][path]._replace(dependencies=()), path
        for project in project_mod._PROJECTS.values():
            answers = [v.record for v in project.memo.values() if type(v) is Answer]
            kept += sum(r.held is not None for r in _every_record(answers))
            # (nor what an import's look-ups hold: flattened only for a cache or an editor)
            assert not [r for r in _every_record(answers) if type(r) is _Looks and r.held]
    assert calls == {"flatten": 0, "deps_now": 0}
    assert kept > 0  # (so what was kept is checked above on every fixture project)


def test_an_edit_after_the_files_of_shared_records_were_kept_is_still_seen(tmp_path):
    """A run keeping no cache keeps the files of the records its lints share (`_files`); an
    editor's edit of a module deep in the chain still reaches the next lint: the records
    holding it are forgotten with the answers, never found again through a kept set."""
    root = _chain(tmp_path)
    entry, deep = str(root / "train.py"), root / "mytron" / "distributed.py"
    project = project_mod.project_for(entry)
    config = api.config_for(entry)

    def lint() -> Any:
        return api.lint_source(
            Path(entry).read_text(), entry, config, project=project, dependencies=False
        )

    first = lint()
    assert [f.code for f in first.findings] == ["DL201"] and not first.errors
    answers = [v.record for v in project.memo.values() if type(v) is Answer]
    assert any(r.held is not None and str(deep) in r.held for r in _every_record(answers))
    assert [f.code for f in lint().findings] == ["DL201"]  # (from what was kept)
    deep.write_text("def broken(:\n")
    project.refresh(str(deep))
    again = lint()
    assert again.findings == () and [e.path for e in again.errors] == [str(deep)]


def test_the_command_line_digests_what_lints_consulted_only_for_its_cache(tmp_path, monkeypatch):
    import shutil

    from click.testing import CliRunner

    from distlint.cli import main

    root = tmp_path / "p"
    shutil.copytree(DEEP, root)
    calls: list[str] = []
    deps_now = Project._deps_now

    def counted(self: Project, *args: Any, **kwargs: Any) -> Any:
        calls.append("deps_now")
        return deps_now(self, *args, **kwargs)

    monkeypatch.setattr(Project, "_deps_now", counted)
    monkeypatch.chdir(root)
    for flags, digested in ((["--no-cache"], False), ([], True)):
        forget_projects()
        calls.clear()
        out = CliRunner().invoke(main, ["check", *flags, "--select", "ALL", "train.py"])
        assert out.exit_code == 1 and "DL201" in out.output
        assert bool(calls) is digested, flags


def test_the_files_of_a_record_are_the_paths_its_flat_set_holds_and_looks_hold_none():
    """`_files` skips every _Looks: a _Looks, and all below it, holds import look-ups only;
    what a record keeps of what it holds (``held``) is what walking its parts gives."""
    checked = looks = kept = 0
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        _linted(folder, True)
        for project in project_mod._PROJECTS.values():
            roots = [v.record for v in project.memo.values() if type(v) is Answer]
            for table in (project._found_deps, project._resolved_deps, project._scan_deps):
                roots += table.values()
            for record in _every_record(roots):
                flat = _flatten((record,))
                assert flat == _walked(record)
                assert _files((record,)) == {p for p in flat if type(p) is str}
                if type(record) is _Looks:
                    looks += 1
                    assert flat and all(type(p) is tuple for p in flat)
                    if record.held is not None:  # (kept by a lint that flattened it)
                        assert set(record.held) == flat
                        kept += 1
                elif record.held is not None:  # (kept by a lint that used it)
                    assert {p for p in record.held if type(p) is str} == _files((record,))
                checked += 1
    assert checked > 1000 and looks > 200 and kept > 100


# ------------------------------------------------------------------ what the project holds
def _held_atoms(project: Project) -> tuple[int, int]:
    """(paths stored in the records the project holds, counted once per record; distinct
    paths among them)."""
    roots: list[Any] = []
    for table in (
        project._found_deps,
        project._resolved_deps,
        project._scan_deps,
        project._uses_deps,
        project._may_write_deps,
        project._reach_deps,
    ):
        roots += table.values()
    roots += [v.record for v in project.memo.values() if type(v) is Answer]
    seen: set[int] = set()
    stored = 0
    stack = [r for r in roots if r is not None]
    while stack:
        record = stack.pop()
        if id(record) not in seen:
            seen.add(id(record))
            stored += len(record.atoms)
            stack += record.parts
    return stored, len(_flatten(roots))


def _sixty_answers_using_one_helper() -> tuple[int, int]:
    """(paths stored, distinct paths) of the records of 60 answers that each resolve the
    same 200 imports of one helper module."""
    files = {f"lib/m{i}.py": "" for i in range(200)}
    files["lib/__init__.py"] = ""
    files["helper.py"] = "".join(f"from lib import m{i}\n" for i in range(200))
    project = Project.from_sources(ROOT, files)

    def uses_the_helper(k: int) -> Any:
        def compute() -> int:
            project.module(P("helper.py"))
            for i in range(200):
                project.resolve_from_import(P("helper.py"), "lib", f"m{i}")
            return k

        return compute

    with project.tracking(P("main.py")) as deps:
        for k in range(60):
            assert project.answer(("uses", P("helper.py"), k), uses_the_helper(k)) == k
    assert P("helper.py") in deps
    return _held_atoms(project)


def test_what_the_records_hold_grows_with_the_paths_consulted_not_with_their_uses(monkeypatch):
    stored, distinct = _sixty_answers_using_one_helper()
    assert distinct > 400  # where the imports looked: `m0.py`, `m0/`, ... in lib/
    assert stored < 2 * distinct
    _eager(monkeypatch)  # each record a copy: what the project held before
    stored, distinct = _sixty_answers_using_one_helper()
    assert stored > 30 * distinct


# ------------------------------------------------------------------ invalidation through chains
# train.py -> mytron/engine.py -> mytron/parallel/context.py -> mytron/distributed.py, which
# starts the process group: the learning rate of train.py is unscaled under DDP (DL201).
DEEP = FIXTURES / "ddp_parallel_context_three_modules_deep"
STARTS = '    dist.init_process_group(backend="nccl", world_size=world_size, rank=rank)\n'


def _chain(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "chain"
    shutil.copytree(DEEP, root)
    assert STARTS in (root / "mytron" / "distributed.py").read_text()
    return root


def _run(root: Path, cache_on: bool = True) -> tuple[list[tuple[str, int]], Project]:
    """A run as a new process makes it (the result cache and the answer store kept)."""
    forget_projects()
    api.forget_config_files()
    cache._STORES.clear()
    cache._CACHES.clear()
    old = os.getcwd()
    os.chdir(root)
    try:
        options = api.LintOptions(select=("ALL",), cache=cache_on, jobs=1)
        results = list(api.lint_paths(["train.py"], options))
    finally:
        os.chdir(old)
    assert not [e for r in results for e in r.errors]
    codes = sorted((f.code, f.range.line) for r in results for f in r.findings)
    projects = list(project_mod._PROJECTS.values())
    return codes, projects[0] if projects else Project(str(root))


def _cached_dependencies(root: Path) -> set[str]:
    """The dependency paths of the lint results in the cache under ``root``."""
    import json

    out: set[str] = set()
    reader = cache.Cache(str(root))
    for entry in (root / ".distlint_cache" / "entries").rglob("*.json"):
        deps = reader._dependencies(json.loads(entry.read_text()))
        assert deps is not None
        out.update(d[0] for d in deps)
    return out


def test_an_edit_three_modules_deep_invalidates_the_cached_result_and_the_answers(tmp_path):
    root = _chain(tmp_path)
    assert _run(root)[0] == [("DL201", 11)]
    deep = root / "mytron" / "distributed.py"
    assert str(deep) in _cached_dependencies(root)  # the lint's record reached it
    assert _run(root)[0] == [("DL201", 11)]  # (answered from the cache)
    deep.write_text(deep.read_text().replace(STARTS, ""))  # the process group is not started
    codes, project = _run(root)
    assert codes == []  # neither the result nor an answer on the way was taken stale
    assert project.answer_counts["disk"] == 0
    assert _run(root, cache_on=False)[0] == []


def test_a_module_appearing_deep_in_a_chain_invalidates_what_resolved_past_it(tmp_path):
    root = _chain(tmp_path)
    assert _run(root)[0] == [("DL201", 11)]
    # `import mytron.distributed` in mytron/parallel/context.py now finds a package in its
    # own folder first, whose module starts nothing
    shadow = root / "mytron" / "parallel" / "mytron"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "distributed.py").write_text(
        "def is_initialized():\n    return True\n\n\ndef get_rank():\n    return 0\n"
    )
    assert _run(root)[0] == []


def test_an_editors_refresh_of_a_deep_module_forgets_every_answer_that_reached_it(tmp_path):
    root = _chain(tmp_path)
    codes, project = _run(root, cache_on=False)
    assert codes == [("DL201", 11)]
    deep = str(root / "mytron" / "distributed.py")
    answers = {k: v for k, v in project.memo.items() if type(v) is Answer}
    reaching = {k for k, v in answers.items() if deep in _flatten((v.record,))}
    assert any(k[1] != deep for k in reaching)  # (answers about other modules reached it)
    project.refresh(deep)
    left = {k for k, v in project.memo.items() if type(v) is Answer}
    assert left == set(answers) - reaching
