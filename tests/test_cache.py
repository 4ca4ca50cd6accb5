"""The result cache changes how fast a run is, never what it reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES

from distlint import api, cache
from distlint.api import LintOptions, lint_paths

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "fixtures" / "scripts"
DL101_BAD = ROOT / "fixtures" / "DL101" / "bad.py"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project with its own config root: training scripts (with findings) plus a torch-free file."""
    (tmp_path / "distlint.toml").write_text("# project root\n")
    src = tmp_path / "src"
    src.mkdir()
    for path in sorted(SCRIPTS.glob("*.py"))[:12]:
        shutil.copy(path, src / path.name)
    shutil.copy(DL101_BAD, src / "seed_bad.py")
    (src / "plain.py").write_text("print('no training here')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


class Counter:
    """Counts how many files are really linted (not answered from the cache)."""

    def __init__(self, monkeypatch):
        self.paths = []
        real = api._lint_data

        def counting(path, data, config, options, *args):
            self.paths.append(path)
            return real(path, data, config, options, *args)

        monkeypatch.setattr(api, "_lint_data", counting)


def run(paths=("src",), **kwargs):
    kwargs.setdefault("jobs", 1)  # in-process, so the counter sees every lint
    return list(lint_paths(list(paths), LintOptions(cache=True, **kwargs)))


def entries(root: Path):
    return sorted((root / cache.CACHE_DIR / "entries").glob("*/*.json"))


def test_same_results_with_and_without_cache(project, monkeypatch):
    uncached = list(lint_paths(["src"], LintOptions(jobs=1)))
    assert any(r.findings for r in uncached), (
        "the project must have findings for this test to mean anything"
    )
    assert not (project / cache.CACHE_DIR).exists(), "the API does not cache unless asked"
    counter = Counter(monkeypatch)
    cold = run()
    warm = run()
    assert cold == uncached
    assert warm == uncached
    assert len(counter.paths) == len(uncached), "the warm run must come entirely from the cache"
    assert len(entries(project)) == len(uncached)


def test_cache_is_at_the_config_root_and_paths_follow_the_caller(project, monkeypatch):
    run(["src"])
    assert (project / cache.CACHE_DIR / "CACHEDIR.TAG").is_file()
    assert (project / cache.CACHE_DIR / ".gitignore").read_text().strip().endswith("*")
    monkeypatch.chdir(project / "src")
    counter = Counter(monkeypatch)
    results = run(["."])
    assert counter.paths == [], "same files, same config root: all hits"
    # paths are reported as the caller named them (relative to the new cwd, no `./` prefix)
    assert results and all(not r.path.startswith(("./", "src/", "/")) for r in results)
    assert all((project / "src" / r.path).is_file() for r in results)
    assert all(f.path == r.path for r in results for f in r.findings)


def test_content_change_invalidates_only_that_file(project, monkeypatch):
    before = {r.path: r for r in run()}
    target = project / "src" / "seed_bad.py"
    assert before[os.path.join("src", "seed_bad.py")].findings
    target.write_text("x = 1\n")
    counter = Counter(monkeypatch)
    after = {r.path: r for r in run()}
    assert counter.paths == [os.path.join("src", "seed_bad.py")]
    assert after[os.path.join("src", "seed_bad.py")].findings == ()


def test_config_change_invalidates(project, monkeypatch):
    first = run()
    codes = {f.code for r in first for f in r.findings}
    assert "DL101" in codes
    (project / "distlint.toml").write_text('ignore = ["DL101"]\n')
    from distlint import config as config_mod

    config_mod._find_from_dir.cache_clear()
    config_mod.load_config_file.cache_clear()
    counter = Counter(monkeypatch)
    second = run()
    assert len(counter.paths) == len(first)
    assert "DL101" not in {f.code for r in second for f in r.findings}
    assert second == list(lint_paths(["src"], LintOptions(jobs=1)))


def test_command_line_selection_invalidates(project, monkeypatch):
    run()
    counter = Counter(monkeypatch)
    only = run(select=("DL101",))
    assert counter.paths, "another rule selection is another key"
    assert {f.code for r in only for f in r.findings} == {"DL101"}


def test_version_change_invalidates(project, monkeypatch):
    first = run()
    monkeypatch.setattr(cache, "__version__", "999.0")
    cache.engine_fingerprint.cache_clear()
    try:
        counter = Counter(monkeypatch)
        assert run() == first
        assert len(counter.paths) == len(first)
    finally:
        cache.engine_fingerprint.cache_clear()


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x00\xff not json",
        b'{"findings": [[1]]}',
        b"[]",
        b'{"findings": [], "suppressed": [], "errors": [["m", "x", null]]}',
    ],
)
def test_corrupt_entries_are_ignored_and_replaced(project, monkeypatch, garbage):
    expected = run()
    for entry in entries(project):
        entry.write_bytes(garbage)
    counter = Counter(monkeypatch)
    assert run() == expected
    assert len(counter.paths) == len(expected)
    for entry in entries(project):
        json.loads(entry.read_bytes())  # rewritten with a valid entry


def test_unwritable_cache_directory_does_not_fail_the_run(project):
    (project / cache.CACHE_DIR).write_text("a file where the cache directory should be\n")
    assert run() == list(lint_paths(["src"], LintOptions(jobs=1)))


def test_fix_run_does_not_reuse_a_check_result_that_has_fixes(project):
    target = project / "src" / "seed_bad.py"
    original = target.read_text()
    checked = {r.path: r for r in run()}
    assert any(f.fix for f in checked[os.path.join("src", "seed_bad.py")].findings)
    fixed = {r.path: r for r in run(fix=True, unsafe_fixes=True)}
    assert fixed[os.path.join("src", "seed_bad.py")].fixes_applied > 0
    assert target.read_text() != original
    # and the next check sees the fixed file, not the cached findings of the old one
    assert run() == list(lint_paths(["src"], LintOptions(jobs=1)))


def test_pool_workers_fill_the_cache(project, monkeypatch):
    expected = list(lint_paths(["src"], LintOptions(jobs=1)))
    assert run(jobs=2) == expected
    assert len(entries(project)) == len(expected)
    counter = Counter(monkeypatch)
    assert run(jobs=2) == expected
    assert counter.paths == []


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "distlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_concurrent_runs_are_safe(project):
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distlint", "check", "--format", "json", "src"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 1 for p in procs), [err for _, err in outputs]
    assert all(err == "" for _, err in outputs)
    assert len({out for out, _ in outputs}) == 1
    assert not [
        p for p in (project / cache.CACHE_DIR / "entries").rglob("*") if p.name.startswith(".tmp-")
    ]
    warm = _cli("check", "--format", "json", "src", cwd=project)
    assert warm.stdout == outputs[0][0]
    uncached = _cli("check", "--no-cache", "--format", "json", "src", cwd=project)
    assert uncached.stdout == outputs[0][0]


def test_no_cache_and_clean(project):
    assert _cli("check", "--no-cache", "src", cwd=project).returncode == 1
    assert not (project / cache.CACHE_DIR).exists()
    assert _cli("check", "src", cwd=project).returncode == 1
    assert (project / cache.CACHE_DIR).is_dir()
    cleaned = _cli("clean", cwd=project / "src")  # from a subdirectory: the project's cache
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (project / cache.CACHE_DIR).exists()
    assert "removed" in cleaned.stdout


def test_entries_are_json_never_pickle(project):
    run()
    for entry in entries(project):
        data = json.loads(entry.read_bytes())
        assert set(data) == {
            "format",
            "findings",
            "suppressed",
            "errors",
            "deps",
            "tables",
            "own",
            "reached",
            "content",
        }
    for table in (project / cache.CACHE_DIR / "tables").rglob("*.json"):
        assert all(len(pair) == 2 for pair in json.loads(table.read_bytes()).values())


# issue #27: the cache stays bounded and never writes through a link


def test_edits_keep_one_entry_per_file(project):
    target = project / "src" / "seed_bad.py"
    original = target.read_text()
    for i in range(5):
        target.write_text(original + f"\nx = {i}\n")
        run(["src/seed_bad.py"])
    assert len(entries(project)) == 1
    run(["src/seed_bad.py"], select=("DL101",))  # other settings: an entry of their own
    assert len(entries(project)) == 2


def test_the_total_is_trimmed_oldest_first(project):
    run()
    found = entries(project)
    assert len(found) > 3
    for age, entry in enumerate(found):
        os.utime(entry, ns=(age * 10**9, age * 10**9))
    sizes = [e.stat().st_size for e in found]
    # (the tables the entries name their dependencies in count too: written later, kept)
    tables = [t.stat().st_size for t in (project / cache.CACHE_DIR / "tables").rglob("*.json")]
    store = cache.Cache(str(project))
    store.trim(budget=sum(sizes[-2:]) + sum(tables))
    assert entries(project) == found[-2:]


@pytest.mark.slow
def test_a_symlinked_cache_folder_is_not_written_through_and_clean_unlinks_it(
    project, tmp_path_factory
):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (project / cache.CACHE_DIR).symlink_to(elsewhere, target_is_directory=True)
    proc = _cli("check", "src", cwd=project)
    assert proc.returncode == 1 and proc.stderr == ""
    assert list(elsewhere.iterdir()) == []
    cleaned = _cli("clean", cwd=project)
    assert cleaned.returncode == 0
    assert "a symbolic link; its target was left alone" in cleaned.stdout
    assert not os.path.lexists(project / cache.CACHE_DIR) and elsewhere.is_dir()


def test_entries_of_the_old_flat_layout_are_removed(project):
    old = project / cache.CACHE_DIR / "entries"
    old.mkdir(parents=True)
    (old / ("0" * 64 + ".json")).write_text("{}")
    run()
    assert not (old / ("0" * 64 + ".json")).exists() and entries(project)


def test_a_helper_judged_by_its_importers_answers_as_the_run_does(tmp_path, monkeypatch):
    """An evaluation helper's loop over a parameter is judged by the loaders the run's other
    files pass it: linted alone it is silent, in a run with its caller it is reported, and the
    cache answers each run as that run would be answered without it (the caller answered from
    the cache still counts)."""
    helper = FIXTURES / "projects" / "accelerate_eval_helper_module"
    for name in ("train.py", "evaluation.py", "pyproject.toml"):
        shutil.copy(helper / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)

    def codes(paths, cache):
        results = lint_paths(list(paths), LintOptions(cache=cache, jobs=1))
        return sorted((Path(r.path).name, f.code) for r in results for f in r.findings)

    together = codes(["train.py", "evaluation.py"], cache=False)
    alone = codes(["evaluation.py"], cache=False)
    assert ("evaluation.py", "DL402") in together and alone == []
    for paths, expected in [
        (["evaluation.py"], alone),  # cached silent: must not answer the next run
        (["train.py", "evaluation.py"], together),
        (["train.py", "evaluation.py"], together),  # train.py now from the cache
        (["evaluation.py"], alone),
    ]:
        assert codes(paths, cache=True) == expected, paths
    counter = Counter(monkeypatch)
    assert codes(["evaluation.py"], cache=True) == alone
    assert codes(["train.py", "evaluation.py"], cache=True) == together
    assert codes(["train.py", "evaluation.py"], cache=True) == together
    # the same run again is answered from the cache: 1 lint for the change of run, then none
    assert [Path(p).name for p in counter.paths] == ["evaluation.py"]


# issue #32: dependencies named by id in shared tables


def _results_sharing(root: Path, count: int) -> tuple[list[str], list[tuple[str, str]]]:
    """``count`` results (keys) that all depend on the same helper module and on a long
    group of paths imports looked at (as a diffusers script does), each on a file of its own."""
    helper = root / "helper.py"
    helper.write_text("def make():\n    return 1\n")
    reader = cache.Cache(str(root))
    names = "|".join(f"Pipeline{i}.py|Pipeline{i}/" for i in range(150))
    group = f"{root}{os.sep}<exists {names}>"
    shared = [(str(helper), reader.digest_now(str(helper))), (group, reader.digest_now(group))]
    keys = []
    writer = cache.Cache(str(root))
    for i in range(count):
        own = root / f"script{i}.py"
        own.write_text(f"x = {i}\n")
        deps = (*shared, (str(own), reader.digest_now(str(own))))
        key = f"{i:032x}/{'0' * 64}"
        writer.put(key, api.FileResult(str(own), dependencies=deps))
        keys.append(key)
    return keys, shared


def test_entries_share_their_dependencies_in_tables_and_take_a_fraction_of_the_old_bytes(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(cache, "_TABLE_PAIRS", 2)
    keys, shared = _results_sharing(tmp_path, 40)
    folder = tmp_path / cache.CACHE_DIR
    written = sum(f.stat().st_size for f in folder.rglob("*.json"))
    # what each entry held before: every (path, digest) pair in full
    each = len(json.dumps([list(d) for d in shared], separators=(",", ":")))
    assert each > 3000
    assert written * 5 < 40 * each
    assert list((folder / "tables").rglob("*.json"))
    reader = cache.Cache(str(tmp_path))
    got = [reader.get(key, "x.py") for key in keys]
    assert all(r is not None and r.dependencies[:2] == tuple(shared) for r in got)


def test_a_changed_dependency_in_a_table_invalidates_every_entry_that_names_it(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(cache, "_TABLE_PAIRS", 2)
    keys, _ = _results_sharing(tmp_path, 6)
    assert all(cache.Cache(str(tmp_path)).get(key, "x.py") is not None for key in keys)
    (tmp_path / "helper.py").write_text("def make():\n    return 2\n")
    assert all(cache.Cache(str(tmp_path)).get(key, "x.py") is None for key in keys)


def test_a_new_path_in_a_looked_at_folder_invalidates_entries_naming_its_group_from_a_table(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(cache, "_TABLE_PAIRS", 2)
    keys, _ = _results_sharing(tmp_path, 3)
    assert all(cache.Cache(str(tmp_path)).get(key, "x.py") is not None for key in keys)
    (tmp_path / "Pipeline7.py").write_text("")  # an import now finds a module there
    assert all(cache.Cache(str(tmp_path)).get(key, "x.py") is None for key in keys)


@pytest.mark.parametrize("damage", ["truncated", "other-content", "removed", "not-json"])
def test_a_damaged_table_is_a_miss_never_an_error(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(cache, "_TABLE_PAIRS", 2)
    keys, _ = _results_sharing(tmp_path, 4)
    tables = list((tmp_path / cache.CACHE_DIR / "tables").rglob("*.json"))
    assert tables
    for table in tables:
        if damage == "truncated":
            table.write_bytes(table.read_bytes()[:40])
        elif damage == "other-content":  # valid JSON, but not what its name says
            table.write_text(json.dumps({"0" * 24: [str(tmp_path / "helper.py"), "0" * 64]}))
        elif damage == "removed":
            table.unlink()
        else:
            table.write_bytes(b"\xff\x00[")
    reader = cache.Cache(str(tmp_path))
    assert [reader.get(key, "x.py") for key in keys] == [None] * len(keys)


def test_entries_of_an_older_layout_are_misses_never_errors(project):
    run()
    keys = []
    for entry in entries(project):
        data = json.loads(entry.read_bytes())
        keys.append(f"{entry.stem}/{data['content']}")
        old = {k: v for k, v in data.items() if k not in ("format", "tables", "own")}
        old["deps"] = [["/proj/helper.py", "ab" * 32]]  # (format 6: the pairs themselves)
        entry.write_text(json.dumps(old))
    reader = cache.Cache(str(project))
    assert keys and all(reader.get(key, "x.py") is None for key in keys)
    # format 6 kept an entry per content in a folder per file: such folders go
    per_content = project / cache.CACHE_DIR / "entries" / ("e" * 32)
    per_content.mkdir()
    (per_content / ("0" * 64 + ".json")).write_text("{}")
    assert cache._FORMAT >= 7
    # the next run (a new process) lints them again and writes this layout
    cache._CACHES.clear()
    assert run() == list(lint_paths(["src"], LintOptions(jobs=1)))
    assert all(json.loads(e.read_bytes())["format"] == cache._FORMAT for e in entries(project))
    assert not per_content.exists()


def test_a_warm_run_checks_each_dependency_its_entries_share_once(tmp_path, monkeypatch):
    """Files importing the same helper: the warm run reads every entry and checks the
    helper's digest once (a tree's entries name the same modules hundreds of times)."""
    (tmp_path / "distlint.toml").write_text("")
    (tmp_path / "helpers.py").write_text("import torch\n\ndef make(model):\n    return model\n")
    for i in range(4):
        (tmp_path / f"train{i}.py").write_text(
            "import torch\nfrom helpers import make\n\nmodel = make(torch.nn.Linear(2, 2))\n"
        )
    monkeypatch.chdir(tmp_path)
    scripts = [f"train{i}.py" for i in range(4)]
    cold = run(scripts)
    helper = str(tmp_path / "helpers.py")
    assert all(helper in dict(r.dependencies) for r in cold)
    asked: list[str] = []
    real = cache.Cache.digest_now
    monkeypatch.setattr(
        cache.Cache, "digest_now", lambda self, path: asked.append(path) or real(self, path)
    )
    counter = Counter(monkeypatch)
    assert run(scripts) == cold
    assert counter.paths == []  # (all from the cache)
    assert asked.count(helper) == 1
    # an edit of the helper: every entry naming it is a miss in the next run
    (tmp_path / "helpers.py").write_text("import torch\n\ndef make(model):\n    return None\n")
    run(scripts)
    assert sorted(os.path.basename(p) for p in counter.paths) == scripts
