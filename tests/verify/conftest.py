"""Shared helpers for the verify tests: the `verify` marker, fixture paths, a process-table check."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERIFY_FIXTURES = ROOT / "fixtures" / "verify"


def pytest_configure(config):
    # Registered so `-m "not verify"` can deselect the real runs; they run by default (CI included).
    config.addinivalue_line(
        "markers", "verify: runs real 1- and 2-process CPU trainings through `distlint verify` (slow, ~10 s each)"
    )


def fixture_script(name: str) -> str:
    return str(VERIFY_FIXTURES / name)


def processes_with_env(needle: str):
    """Live processes whose environment mentions `needle` (read from /proc, independent of verify's own scan)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


@pytest.fixture(scope="session")
def linux_proc():
    if not sys.platform.startswith("linux"):
        pytest.skip("the process-table checks read /proc")
