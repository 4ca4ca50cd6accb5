"""Running the installed command under a time and memory bound (issue #27's harness).

A scenario whose failure mode is unbounded (a hang on a FIFO, an alias bomb, an endless stdin)
runs ``python -m distlint`` in a subprocess whose address space is capped with
``resource.setrlimit(RLIMIT_AS)`` and whose run is cut off by a timeout: a regression fails the
test in seconds (MemoryError or TimeoutExpired) instead of taking the machine with it.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

MEMORY = 1 << 30  # bytes of address space (a plain lint of a small file needs under 512 MiB)
SECONDS = 30  # far above what any of these runs takes; reached only by a hang


def _cap(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def bounded(
    args: Sequence[str],
    *,
    cwd: Any,
    stdin: Any = subprocess.DEVNULL,
    input: bytes | None = None,
    memory: int = MEMORY,
    timeout: float = SECONDS,
    shell_stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``distlint ARGS`` in ``cwd`` under ``memory`` bytes and ``timeout`` seconds; stdout and
    stderr as text. ``shell_stdin``: a shell redirection for stdin instead (``<&-`` closes
    it; ``< <(head -c 600M /dev/zero)`` streams a pipe larger than the memory bound)."""
    command = [sys.executable, "-m", "distlint", *args]
    if shell_stdin is not None:
        import shlex

        script = f"exec {shlex.join(command)} {shell_stdin}"
        command = ["bash", "-c", script]
        stdin = None
    kwargs: dict[str, Any] = {"input": input} if input is not None else {"stdin": stdin}
    proc = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        preexec_fn=lambda: _cap(memory),
        **kwargs,
    )
    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )
