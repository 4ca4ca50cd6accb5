"""Test-only requests for the language server's lint worker (never shipped in distlint).

Run as a worker's command (through :func:`hooked_worker`): the worker of
:mod:`distlint.lsp_worker`, with an engine that also answers ``crash`` (what a native crash in
LibCST does), ``sleep`` (a lint that takes too long), ``passes`` (the lint passes made, from
:data:`distlint.runner.PASSES`) and ``pending`` (the analyses waiting to be freed). :func:`hooked_worker` gives the server's handle on one.
``python -I tests/lsp_hooks.py serve-with-broken-worker``: a server whose worker cannot start;
``serve-with-hooked-worker``: one whose workers lint a document holding ``# test: lint takes
N s`` that slowly.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time

HERE = os.path.abspath(__file__)


def hooked_worker(root: str | None = None):
    """A :class:`distlint.lsp_worker.Worker` running this module (isolated, like the real one:
    ``-I``, the test process's import path less its working directory)."""
    from distlint.lsp_worker import Worker, worker_command

    command, _ = worker_command(os.getcwd())
    # [python, flags..., "-c", start code, user site, path...]: run this file instead of the
    # start code's import of distlint.lsp_worker, with the same import path
    at = command.index("-c")
    start = command[at + 1].replace(
        "from distlint.lsp_worker import main\nmain()\n",
        f"import runpy\nrunpy.run_path({HERE!r}, run_name='__main__')\n",
    )
    return Worker(command=[*command[:at], "-c", start, *command[at + 2 :]], root=root)


def _engine_class():
    from distlint.lsp_worker import _Engine

    class HookedEngine(_Engine):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._watch_collections()

        def _watch_collections(self) -> None:
            """Note each collection of the cyclic garbage collector, and whether a request
            was being answered then (from its start until its reply was sent)."""
            import gc

            from distlint import lsp_worker

            self.answering = False
            self.collected: list[tuple[int, bool]] = []
            send = lsp_worker._send

            def sent(out, message):
                send(out, message)
                self.answering = False

            def noted(phase, info):
                if phase == "start":
                    self.collected.append((info["generation"], self.answering))

            lsp_worker._send = sent
            gc.callbacks.append(noted)

        def churn(self, count: int) -> int:
            """Allocate ``count`` objects that outlive the request (as a lint's analysis does
            until it is freed)."""
            self.answering = True
            self.kept = [{} for _ in range(count)]
            return len(self.kept)

        def collections(self) -> list[tuple[int, bool]]:
            """(generation, while a request was answered) of each collection so far."""
            return list(self.collected)

        def crash(self) -> None:
            os.kill(os.getpid(), signal.SIGSEGV)

        def sleep(self, seconds: float) -> None:
            time.sleep(seconds)

        def lint(self, text: str, *args, **kwargs):
            """A document holding ``# test: lint takes N s`` is a slow one."""
            found = re.search(r"# test: lint takes ([0-9.]+) s", text)
            if found:
                time.sleep(float(found.group(1)))
            return super().lint(text, *args, **kwargs)

        def pending(self) -> int:
            """How many analyses wait to be freed (see distlint.collector.free_later)."""
            from distlint import collector

            return len(collector.pending())

        def passes(self, clear: bool = False) -> dict[str, int]:
            from distlint import runner

            counts = dict(runner.PASSES)
            if clear:
                runner.PASSES.clear()
            return counts

    return HookedEngine


# A worker whose start fails as a broken install's does: an import error.
BROKEN_WORKER = [sys.executable, "-I", "-c", "import distlint_is_not_installed_here"]


def serve_with_broken_worker() -> None:
    """``distlint lsp`` whose lint worker cannot start (run: ``python -I lsp_hooks.py
    serve-with-broken-worker``)."""
    import importlib

    from distlint.lsp_start import serve
    from distlint.lsp_worker import Worker

    serve(Worker(command=BROKEN_WORKER), lambda: importlib.import_module("distlint.lsp"))


def serve_with_hooked_worker() -> None:
    """``distlint lsp`` whose lint workers have the test requests (run: ``python -I
    lsp_hooks.py serve-with-hooked-worker``)."""
    import importlib

    from distlint.lsp_start import serve

    serve(hooked_worker(), lambda: importlib.import_module("distlint.lsp"))


if __name__ == "__main__":
    if sys.argv[1:] == ["serve-with-broken-worker"]:
        serve_with_broken_worker()
    elif sys.argv[1:] == ["serve-with-hooked-worker"]:
        serve_with_hooked_worker()
    else:
        from distlint.lsp_worker import main

        sys.exit(main(_engine_class()))
