"""The process pool changes how many cores a run uses, never what it reports or in which order."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import signal
import time
from functools import partial
from pathlib import Path

import pytest

from distlint import parallel
from distlint.api import LintOptions, lint_paths

ROOT = Path(__file__).resolve().parent.parent

needs_fork = pytest.mark.skipif(
    not parallel.can_fork(), reason="no fork start method on this platform"
)


def _pid_and_square(n):
    # later items finish first, so results arrive out of order and must be put back in order
    time.sleep(0.002 * (20 - n) if n < 20 else 0)
    return os.getpid(), n * n


def _fail_on_five(n):
    if n == 5:
        raise ValueError("boom")
    return n


def test_worker_count():
    assert parallel.worker_count(3, jobs=4) == 1, "a handful of files is linted in-process"
    assert parallel.worker_count(parallel.MIN_FILES_FOR_POOL - 1, jobs=4) == 1
    assert parallel.worker_count(100, jobs=1) == 1
    if parallel.can_fork():
        assert parallel.worker_count(100, jobs=2) == 2
        assert parallel.worker_count(9, jobs=64) == 9
        assert parallel.worker_count(100, jobs=None) == min(parallel.available_cpus(), 100)


@needs_fork
def test_ordered_map_keeps_input_order_and_uses_other_processes():
    items = list(range(24))
    results = list(parallel.ordered_map(_pid_and_square, items, jobs=2))
    assert [sq for _, sq in results] == [n * n for n in items]
    pids = {pid for pid, _ in results}
    assert os.getpid() not in pids and len(pids) == 2
    assert multiprocessing.active_children() == []


def test_small_inputs_run_in_process():
    results = list(parallel.ordered_map(_pid_and_square, range(3), jobs=2))
    assert {pid for pid, _ in results} == {os.getpid()}


@needs_fork
def test_early_stop_leaves_no_workers():
    stream = parallel.ordered_map(_pid_and_square, range(40), jobs=2)
    assert next(stream)[1] == 0
    stream.close()
    assert multiprocessing.active_children() == []


@needs_fork
def test_worker_exception_reaches_the_caller():
    with pytest.raises(ValueError, match="boom"):
        list(parallel.ordered_map(_fail_on_five, range(20), jobs=2))
    assert multiprocessing.active_children() == []


@pytest.fixture
def project(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    for path in sorted((ROOT / "fixtures" / "scripts").glob("*.py")):
        shutil.copy(path, src / path.name)
    for rule_dir in sorted((ROOT / "fixtures").glob("DL*")):
        shutil.copy(rule_dir / "bad.py", src / f"{rule_dir.name}_bad.py")
    (src / "broken.py").write_text("import torch\ndef f(:\n    torch.manual_seed(0)\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@needs_fork
def test_lint_paths_same_results_in_pool_and_in_process(project):
    serial = list(lint_paths(["src"], LintOptions(jobs=1)))
    pooled = list(lint_paths(["src"], LintOptions(jobs=2)))
    assert len(serial) >= parallel.MIN_FILES_FOR_POOL
    assert any(r.findings for r in serial) and any(r.errors for r in serial)
    # Findings, errors, fixes and the module and config files each lint depends on are the
    # same. The import paths looked at are grouped per folder, and those groups may differ:
    # callers that keep other modules' Facts share one conservative record of what every lint
    # consulted since (the project's pool), and which files a worker linted before is up to
    # the pool's timing. Where both looked at a name, they saw the same thing.
    assert [_without_looked_at(r) for r in pooled] == [_without_looked_at(r) for r in serial]
    for a, b in zip(serial, pooled):
        seen_a, seen_b = _looked_at(a), _looked_at(b)
        assert all(seen_b[k] == v for k, v in seen_a.items() if k in seen_b), a.path
    assert [r.path for r in pooled] == sorted(r.path for r in pooled), "stable, sorted order"
    # the fixes' edits and the suppression edits survive the trip through the pool too
    assert [(f.fix, f.suppression) for r in pooled for f in r.findings] == [
        (f.fix, f.suppression) for r in serial for f in r.findings
    ]


def _without_looked_at(result):
    """``result`` without its grouped import-path checks (see `_looked_at`)."""
    kept = tuple((k, v) for k, v in result.dependencies if "<exists " not in k)
    return result._replace(dependencies=kept)


def _looked_at(result):
    """(folder, name) -> what a lint's import resolution saw there ("0" absent, "1" present),
    from the per-folder groups of its dependencies."""
    out = {}
    for key, digest in result.dependencies:
        if "<exists " not in key:
            continue
        folder, names = key.rsplit("<exists ", 1)
        found = digest.split(" ", 1)[1]
        for name, flag in zip(names[:-1].split("|"), found):
            out[(folder, name)] = flag
    return out


@needs_fork
def test_pooled_fix_writes_the_same_files(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("copy")
    shutil.copytree(project / "src", other / "src")
    pooled = list(
        lint_paths([str(project / "src")], LintOptions(jobs=2, fix=True, unsafe_fixes=True))
    )
    serial = list(
        lint_paths([str(other / "src")], LintOptions(jobs=1, fix=True, unsafe_fixes=True))
    )
    assert sum(r.fixes_applied for r in pooled) > 0
    assert [r.fixes_applied for r in pooled] == [r.fixes_applied for r in serial]
    for name in sorted(os.listdir(project / "src")):
        assert (project / "src" / name).read_bytes() == (other / "src" / name).read_bytes(), name


def test_results_pickle_as_plain_data(project):
    results = list(lint_paths(["src"], LintOptions(jobs=1)))
    assert pickle.loads(pickle.dumps(results)) == results


# --------------------------------------------------------------------------------------------
# A worker that dies (segfault, OOM kill) is one error for its file; the run finishes (#16.4)
# --------------------------------------------------------------------------------------------


def _die_on(n, die=(7,), how=signal.SIGSEGV):
    if n in die:
        os.kill(os.getpid(), how)  # what a native parser's stack overflow or the OOM killer does
    return n * 10


def _crash_report(item, reason):
    return ("crashed", item, reason)


@pytest.fixture
def quiet_crashes():
    """pytest's faulthandler would print every dying child's stacks: quiet while we kill them."""
    import faulthandler

    was = faulthandler.is_enabled()
    faulthandler.disable()
    yield
    if was:
        faulthandler.enable()


@needs_fork
@pytest.mark.parametrize("how", [signal.SIGSEGV, signal.SIGKILL], ids=["SIGSEGV", "SIGKILL"])
def test_dead_worker_becomes_one_result_and_the_rest_finish(how, quiet_crashes):
    func = partial(_die_on, die=(7, 30), how=how)
    started = time.monotonic()
    results = list(parallel.ordered_map(func, range(40), jobs=2, on_crash=_crash_report))
    assert time.monotonic() - started < 30, "no hang on the dead worker's task"
    name = signal.Signals(how).name
    expected = [n * 10 for n in range(40)]
    expected[7] = ("crashed", 7, f"signal {int(how)} ({name})")
    expected[30] = ("crashed", 30, f"signal {int(how)} ({name})")
    assert results == expected, "in input order, every other item computed"
    assert multiprocessing.active_children() == []


@needs_fork
def test_a_pool_that_breaks_between_waits_refuses_a_submit_and_the_run_goes_on(monkeypatch):
    # a worker that dies between two waits makes the next `submit` raise BrokenProcessPool
    # (a race the SIGSEGV test above hit now and then): the futures in flight are collected,
    # what was not submitted goes to a fresh pool, every item is computed once, in order
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    real = ProcessPoolExecutor.submit
    calls = []

    def submit(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise BrokenProcessPool("a child process terminated abruptly")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    results = list(parallel.ordered_map(_pid_and_square, range(24), jobs=2))
    assert [sq for _, sq in results] == [n * n for n in range(24)]
    assert len(calls) == 25, "the refused item is submitted again, nothing twice"
    assert multiprocessing.active_children() == []


@needs_fork
def test_dead_worker_without_on_crash_raises(quiet_crashes):
    with pytest.raises(RuntimeError, match=r"worker process died \(signal 11 \(SIGSEGV\)\)"):
        list(parallel.ordered_map(_die_on, range(20), jobs=2))
    assert multiprocessing.active_children() == []


@needs_fork
def test_real_parser_crash_in_a_directory_run(tmp_path, monkeypatch, quiet_crashes):
    """With the guard switched off, 3,000 nested parentheses really segfault LibCST in a worker:
    that file becomes one error line, the other files are linted, nothing hangs."""
    import distlint.guard

    monkeypatch.setattr(distlint.guard, "check_source", lambda *args, **kwargs: None)
    seeded = "import torch\nimport numpy as np\ntorch.manual_seed(0)\nnp.random.rand(3)\n"
    for i in range(12):
        (tmp_path / f"m{i:02}.py").write_text(seeded)
    crash = tmp_path / "m05_deep.py"
    crash.write_text(seeded + "x = " + "(\n" * 3000 + "1" + "\n)" * 3000 + "\n")
    started = time.monotonic()
    results = list(lint_paths([str(tmp_path)], LintOptions(jobs=2, isolated=True)))
    assert time.monotonic() - started < 60
    assert [r.path for r in results] == sorted(str(p) for p in tmp_path.glob("*.py"))
    by_path = {r.path: r for r in results}
    crashed = by_path.pop(str(crash))
    assert [str(e) for e in crashed.errors] == [
        f"{crash}: error: the process linting this file died: signal 11 (SIGSEGV); not linted"
    ]
    assert all([f.code for f in r.findings] == ["DL101"] and not r.errors for r in by_path.values())
    assert multiprocessing.active_children() == []


def _import_path(_):
    import sys

    return list(sys.path)


@needs_fork
def test_workers_take_the_working_directory_off_their_import_path(monkeypatch, tmp_path):
    """A program that had its working directory on the import path (``python -c``, a REPL)
    hands the pool workers no way to import the linted folder's modules."""
    import sys

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    elsewhere = str(ROOT)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), "pkg", elsewhere, *sys.path])
    paths = list(parallel.ordered_map(_import_path, range(parallel.MIN_FILES_FOR_POOL), jobs=2))
    for path in paths:
        assert "" not in path and str(tmp_path) not in path and "pkg" not in path
        assert elsewhere in path
    assert sys.path[:3] == ["", str(tmp_path), "pkg"]  # the caller's own path is left alone
