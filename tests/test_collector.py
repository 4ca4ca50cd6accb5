"""The cyclic collector in a distlint process (distlint.collector): the command-line entry
point pauses it while the process starts and resumes it once the lint engine is loaded; a
program that uses distlint as a library keeps its collector as it was."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

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
