"""The cyclic collector in a distlint process (distlint.collector): the command-line entry
point pauses it while the process starts and resumes it once the lint engine is loaded; a
program that uses distlint as a library keeps its collector as it was."""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from distlint import collector

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "fixtures" / "scripts" / "accelerate_example_torch_only_seed.py"

# Runs the command-line entry point with `argv`; at exit (after the entry point's own last
# step) prints whether the collector runs and how many objects are frozen.
ENTRY = """
import atexit, gc, sys
atexit.register(lambda: print("STATE", gc.isenabled(), gc.get_freeze_count() > 0))
sys.argv = ["distlint", *sys.argv[1:]]
from distlint.__main__ import main
main()
"""


def _state(code: str, *args: str, cwd: Path = ROOT) -> tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("STATE ")]
    assert lines, proc.stdout + proc.stderr
    enabled, frozen = lines[-1].split()[1:]
    return enabled, frozen


def test_check_resumes_the_collector_once_the_engine_is_loaded(tmp_path):
    # --no-cache: the file is linted, so the engine loads; the collector runs again afterwards
    assert _state(ENTRY, "check", "--no-cache", str(SCRIPT), cwd=tmp_path) == ("True", "True")


def test_a_command_that_does_not_lint_resumes_it_at_once(tmp_path):
    assert _state(ENTRY, "rules", cwd=tmp_path) == ("True", "True")


def test_library_use_keeps_the_collector_as_it_was(tmp_path):
    code = (
        "import gc\n"
        "from distlint.api import lint_paths\n"
        f"results = list(lint_paths([{str(SCRIPT)!r}]))\n"
        "assert results[0].findings\n"
        "print('STATE', gc.isenabled(), gc.get_freeze_count() > 0)\n"
    )
    assert _state(code, cwd=tmp_path) == ("True", "False")


def test_startup_over_does_nothing_unless_start_up_paused_it():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    collector.startup_over()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_paused_restores_the_state_it_found():
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it stopped: left stopped
    assert gc.isenabled()


# The C allocator (glibc): a command-line run about to lint many files fixes its trim and
# mapping thresholds, so memory a lint freed goes back to the system (see distlint.collector).
ALLOCATOR = """
import sys
from distlint import collector
mode, count = sys.argv[1], int(sys.argv[2])
if mode == "command-line":
    collector.pause_startup()
    collector.startup_over()
collector.many_files(count)
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
big = b"x" * (24 << 20)  # mapped on its own, and unmapped when freed ...
del big  # ... after which glibc's default raises its thresholds to its size (up to 32 MiB)
before = resident()
held = b"y" * (16 << 20)  # by default from the heap now, and kept when freed
del held
print("KEPT", (resident() - before) >> 20)
"""


def _kept_after_free(mode: str, count: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.run(
        [sys.executable, "-c", ALLOCATOR, mode, str(count)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("KEPT ")]
    assert lines, proc.stdout + proc.stderr
    return int(lines[-1].split()[1])


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt's thresholds are glibc's",
)
def test_a_command_line_run_of_many_files_gives_freed_memory_back():
    many = collector.MANY_FILES
    assert _kept_after_free("command-line", many) <= 2
    # glibc's default, which the others keep: the 16 MiB stay resident
    assert _kept_after_free("command-line", many - 1) >= 12
    assert _kept_after_free("library", many) >= 12


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    import ctypes

    fake = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_the_thresholds_are_set_for_a_command_line_run_of_many_files(libc, monkeypatch):
    monkeypatch.setattr(collector, "_command_line", True)
    collector.many_files(collector.MANY_FILES - 1)
    assert libc.calls == []
    collector.many_files(collector.MANY_FILES)
    assert libc.calls == [(-1, 128 << 10), (-3, 128 << 10)]


def test_a_library_caller_keeps_its_allocator(libc, monkeypatch):
    monkeypatch.setattr(collector, "_command_line", False)
    collector.many_files(100_000)
    assert libc.calls == []


def test_thresholds_the_user_set_are_left_alone(libc, monkeypatch):
    monkeypatch.setattr(collector, "_command_line", True)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    collector.many_files(collector.MANY_FILES)
    assert libc.calls == []


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch):
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # (macOS: no mallopt)
    monkeypatch.setattr(collector, "_command_line", True)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    collector.many_files(collector.MANY_FILES)  # nothing raised
