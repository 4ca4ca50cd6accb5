"""Helpers of the verify tests: fixture paths, a process-table check."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERIFY_FIXTURES = ROOT / "fixtures" / "verify"


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
