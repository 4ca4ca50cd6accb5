"""Large trees: 10,000 files lint with bounded memory, and results come out file by file (issue #8).

A repository-wide run must not keep every parsed tree (or its index) alive: a small module's
LibCST tree plus its index costs ~14 KB, so holding the ~5,000 parsed trees of the 10,000-file
tree below would add ~70 MB on top of a ~30 MB interpreter. The test measures the peak RSS of
`distlint check` on 1,000 and on 10,000 files of the same mix and requires the larger run to stay
below twice the smaller one; `test_holding_trees_would_fail_the_bound` shows that bound is tight
enough to catch a leak of trees.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distlint.api import LintOptions, lint_paths

# Peak memory is read with wait4(2) and /proc/self/status.
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="measures memory through Linux interfaces"
)

# One in 50 files is a whole training script with three findings (DL101, DL201, DL302).
TRAINING = """\
import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

accelerator = Accelerator()
torch.manual_seed({i})
model = torch.nn.Linear(4, 2)
loader = DataLoader(range(64), batch_size=8)
order = np.random.permutation(64)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, optimizer = accelerator.prepare(model, optimizer)
for batch in loader:
    loss = model(batch).sum()
    accelerator.backward(loss)
    optimizer.step()
"""
TRAINING_FINDINGS = {(7, "DL101"), (11, "DL201"), (13, "DL302")}

# Half of the files mention a rule trigger, so they are parsed and indexed (and would be kept
# alive by a leak); the others are skipped by the trigger pre-filter, as most of a real repo is.
PARSED = """\
from torch.utils.data import DataLoader


def make_loader_{i}(data, bs={b}):
    return DataLoader(data, batch_size=bs)
"""
SKIPPED = """\
\"\"\"Helper module {i}.\"\"\"


def helper_{i}(x, y={i}):
    total = 0
    for k in range(x):
        total += k * y
    return total
"""


def make_tree(root: Path, n: int) -> list[Path]:
    """``n`` files in directories of 100; returns the training scripts."""
    training = []
    for i in range(n):
        directory = root / f"pkg{i // 100:03d}"
        if i % 100 == 0:
            directory.mkdir(parents=True)
        path = directory / f"m{i:05d}.py"
        if i % 50 == 0:
            path.write_text(TRAINING.format(i=i))
            training.append(path)
        else:
            path.write_text((PARSED if i % 2 else SKIPPED).format(i=i, b=i % 7 + 1))
    return training


LINE_RE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):\d+: (?P<code>DL\d{3}) ")


MEASURE = r"""
import os, subprocess, sys, tempfile
with tempfile.TemporaryFile() as err:
    proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=err)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (and its reaped workers')
    err.seek(0)
    sys.stdout.buffer.write(out)
    sys.stderr.buffer.write(err.read())
sys.stderr.write("\nPEAK_RSS_KB=%d EXIT=%d\n" % (usage.ru_maxrss, os.waitstatus_to_exitcode(status)))
"""


def measured_check(root: Path, *extra: str) -> tuple[int, dict[str, set], int, float, str]:
    """Run `distlint check` under a small parent that reads its exact peak RSS from wait4(2)
    (the maximum over the process and any workers it reaped)."""
    start = time.monotonic()
    cmd = [
        sys.executable,
        "-c",
        MEASURE,
        sys.executable,
        "-m",
        "distlint",
        "check",
        "--isolated",
        "--no-cache",
        "--jobs",
        "1",
        *extra,
        str(root),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - start
    m = re.search(r"PEAK_RSS_KB=(\d+) EXIT=(-?\d+)", proc.stderr)
    assert m, proc.stderr[-2000:]
    findings: dict[str, set] = {}
    for line in proc.stdout.splitlines():
        fm = LINE_RE.match(line)
        if fm:
            findings.setdefault(fm.group("path"), set()).add(
                (int(fm.group("line")), fm.group("code"))
            )
    return int(m.group(2)), findings, int(m.group(1)), elapsed, proc.stderr


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    small = tmp_path_factory.mktemp("tree1k")
    large = tmp_path_factory.mktemp("tree10k")
    return (small, make_tree(small, 1_000)), (large, make_tree(large, 10_000))


@pytest.fixture(scope="module")
def small_run(trees):
    (small, _), _ = trees
    return measured_check(small)


def test_ten_thousand_files_bounded_memory_and_complete(trees, small_run):
    (small, small_training), (large, large_training) = trees
    code_s, found_s, peak_s, secs_s, err_s = small_run
    code_l, found_l, peak_l, secs_l, err_l = measured_check(large)
    print(
        f"\n1,000 files: peak RSS {peak_s / 1024:.1f} MiB in {secs_s:.1f} s; "
        f"10,000 files: peak RSS {peak_l / 1024:.1f} MiB in {secs_l:.1f} s"
    )
    for code, err in ((code_s, err_s), (code_l, err_l)):
        assert code == 1, err[-2000:]  # findings, no errors
        assert "error" not in err.replace("PEAK_RSS_KB", ""), err[-2000:]
    # Every training script's findings are reported, and nothing else is.
    assert found_l == {str(p): TRAINING_FINDINGS for p in large_training}
    assert found_s == {str(p): TRAINING_FINDINGS for p in small_training}
    # Memory does not grow with the number of files: 10x the files, well under 2x the peak.
    assert peak_l < 2 * peak_s, (peak_s, peak_l)


HOLD = r"""
import re, sys
from pathlib import Path
import libcst as cst
from distlint.analysis import Index

def peak_kb():
    # VmHWM belongs to this process image; ru_maxrss would include the forking parent's peak.
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+)", status.read()).group(1))

paths = [p for p in sorted(Path(sys.argv[1]).rglob("*.py")) if "DataLoader" in p.read_text()]
before = peak_kb()
kept = []
for path in paths[: int(sys.argv[2])]:
    text = path.read_text()
    module = cst.parse_module(text)
    kept.append((module, Index(module, text)))
print(len(paths), len(kept), before, peak_kb())
"""


def test_holding_trees_would_fail_the_bound(trees, small_run):
    """The bound above can fail: a process that kept the parsed trees (and indexes) of the
    10,000-file tree alive would peak above twice what linting 1,000 files takes. Measured by
    holding 1,000 of them and projecting to all the parsed files (parsing all ~5,000 takes ~20 s)."""
    _, (large, _) = trees
    peak_s = small_run[2]
    proc = subprocess.run(
        [sys.executable, "-c", HOLD, str(large), "1000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    parsed, kept, before, after = map(int, proc.stdout.split())
    assert parsed > 5_000 and kept == 1_000
    projected = before + (after - before) * parsed / kept
    print(
        f"\nholding {kept} trees costs {(after - before) / 1024:.1f} MiB; all {parsed} parsed files: "
        f"~{projected / 1024:.1f} MiB peak; linting 1,000 files: {peak_s / 1024:.1f} MiB"
    )
    assert projected > 2 * peak_s


def test_lint_paths_streams_results(trees):
    """lint_paths yields a file's result before it reads the files after it: a file removed
    after the first result arrives is reported as missing, not linted from a snapshot."""
    (small, small_training), _ = trees
    files = sorted(small.rglob("*.py"))
    results = lint_paths([str(small)], LintOptions(isolated=True, jobs=1))
    first = next(results)
    assert first.path == str(files[0])
    assert {(f.line, f.code) for f in first.findings} == TRAINING_FINDINGS
    last = files[-1]
    data = last.read_bytes()
    last.unlink()
    try:
        rest = list(results)
    finally:
        last.write_bytes(data)
    assert len(rest) == len(files) - 1
    assert rest[-1].path == str(last)
    assert rest[-1].errors and "no such file" in rest[-1].errors[0].message
    assert all(not r.errors for r in rest[:-1])


@pytest.mark.parametrize("with_project", [False, True])
def test_a_linted_tree_dies_with_the_lint(with_project, tmp_path):
    # the analysis breaks its own reference cycles, so the parsed tree is freed by reference
    # counting when the lint returns: no full collection has to walk it (one would find the
    # whole tree as garbage here, with the collector off)
    import gc

    import libcst as cst

    from distlint.analysis.project import Project
    from distlint.config import Config
    from distlint.runner import lint_source

    path = tmp_path / "train.py"
    path.write_text(TRAINING)
    project = Project(str(tmp_path)) if with_project else None
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = lint_source(TRAINING, str(path), Config(), project=project)
        gc.collect()
        nodes = [o for o in gc.garbage if isinstance(o, cst.CSTNode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert {f.code for f in result.findings} >= {"DL101", "DL201"}
    assert nodes == []
