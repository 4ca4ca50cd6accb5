"""The process pool changes how many cores a run uses, never what it reports or in which order."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import time
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
    assert pooled == serial
    assert [r.path for r in pooled] == sorted(r.path for r in pooled), "stable, sorted order"
    # the fixes' edits and the suppression edits survive the trip through the pool too
    assert [(f.fix, f.suppression) for r in pooled for f in r.findings] == [
        (f.fix, f.suppression) for r in serial for f in r.findings
    ]


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
