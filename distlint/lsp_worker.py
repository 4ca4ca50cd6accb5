"""The language server's lint worker: a separate process that does every lint and fix.

The server (:mod:`distlint.lsp`) keeps the LSP conversation on its event loop and hands the
work to this process, so that

- the server always answers: a lint that takes seconds blocks nobody but the thread waiting for
  it, and one that takes longer than the budget is stopped (the worker is killed and restarted);
- the server survives what kills a lint: LibCST's native parser can crash the whole process
  (SIGSEGV on deeply nested code, an abort when Rust runs out of memory). That takes the worker,
  not the server: the document gets a message, the next lint starts a fresh worker;
- the first diagnostics come sooner: the worker starts first and imports LibCST and the rules
  while the server imports pygls.

Messages are pickled tuples with a 4-byte length prefix, over the worker's stdin / stdout
(``sys.stdout`` of the worker is sent to stderr, so a stray print cannot corrupt the pipe).
This module imports nothing heavy: the server imports the client half, the worker half loads
the engine.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any

_HEADER = struct.Struct(">I")
CONFIG_FILE_NAMES = ("pyproject.toml", "distlint.toml", ".distlint.toml")
KEPT_DOCUMENTS = 16  # parsed buffers the worker keeps for incremental re-parsing


class WorkerError(Exception):
    """The worker could not answer: it crashed, took too long, or failed (message says which)."""


# ------------------------------------------------------------------------------- client half


class Worker:
    """The server's handle on the lint worker; ``call`` is thread-safe and blocking."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._next_id = 0
        self.restarts = 0

    def start(self) -> None:
        """Start the process now (it warms up while the caller does other work)."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self.restarts += 1
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "distlint.lsp_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,
                close_fds=True,
            )
        return self._proc

    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        with self._lock:
            proc = self._ensure()
            self._next_id += 1
            body = pickle.dumps((self._next_id, method, args), protocol=pickle.HIGHEST_PROTOCOL)
            assert proc.stdin is not None and proc.stdout is not None  # both are pipes
            try:
                proc.stdin.write(_HEADER.pack(len(body)) + body)
                proc.stdin.flush()
                deadline = None if timeout is None else time.monotonic() + timeout
                header = self._read(proc, _HEADER.size, deadline)
                reply = self._read(proc, _HEADER.unpack(header)[0], deadline)
            except _Timeout:
                self._kill(proc)
                raise WorkerError(f"took longer than {timeout:g} s; stopped") from None
            except (BrokenPipeError, EOFError, OSError):
                raise WorkerError(self._death(proc)) from None
            _, ok, value = pickle.loads(reply)
            if not ok:
                raise WorkerError(value)
            return value

    @staticmethod
    def _read(proc: subprocess.Popen, n: int, deadline: float | None) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        while n:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise _Timeout()
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError()
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _kill(self, proc: subprocess.Popen) -> None:
        proc.kill()
        proc.wait()
        self._proc = None
        self.restarts += 1

    def _death(self, proc: subprocess.Popen) -> str:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            return "the lint worker stopped answering; restarted"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the lint crashed ({name}, inside LibCST's parser); the server restarted its worker"
        return f"the lint worker exited with status {code}; restarted"

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()


class _Timeout(Exception):
    pass


# ------------------------------------------------------------------------------- worker half


class _Engine:
    """What the worker does for the server. Everything here runs in the worker process."""

    def __init__(self) -> None:
        from distlint import api

        self.api = api
        api.all_rules()
        api.lint_source("import torch\ntorch.manual_seed(0)\n", "warm_up.py", api.Config())
        self.stamps: dict[str, tuple | None] = {}
        self.last: tuple | None = None  # ((text, path, config), reply) of the last lint
        # per path: the last parse of the buffer (an edit re-parses only what it touched)
        self.documents: dict[str, Any] = {}
        self.document_configs: dict[str, Any] = {}

    def idle(self) -> None:
        """Between requests: compute what the next edit of a linted buffer needs (where its
        statements start), so that the user's next pause in typing does not pay for it."""
        for document in list(self.documents.values()):
            document.offsets  # noqa: B018 - computed and kept on first access

    # Configuration files are re-checked on every lint (a few stat calls): an edit of
    # pyproject.toml applies at the next keystroke, whether or not the client watches files.
    def _config_stamps(self, path: str, options: Any) -> dict[str, tuple | None]:
        here = os.path.dirname(os.path.realpath(path)) or "/"
        names = []
        while True:
            names += [os.path.join(here, name) for name in CONFIG_FILE_NAMES]
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
        if options.config_path:
            names.append(os.path.abspath(options.config_path))
        stamps: dict[str, tuple[Any, ...] | None] = {}
        for name in names:
            try:
                st = os.stat(name)
            except OSError:
                stamps[name] = None
            else:
                stamps[name] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)
        return stamps

    def _clear_config_caches(self) -> None:
        self.api.forget_config_files()

    def config(self, path: str, options: Any) -> tuple[Any, bool]:
        """(the configuration of ``path``, whether any configuration file changed)."""
        stamps = self._config_stamps(path, options)
        changed = any(self.stamps.get(k, v) != v for k, v in stamps.items())
        if changed:
            self._clear_config_caches()
        self.stamps.update(stamps)
        return self.api.config_for(path, options), changed

    def lint(self, text: str, path: str, options: Any, buffers: dict | None = None):
        """Lint ``text`` as ``path``; ``buffers`` (path -> text of the other open documents)
        stand in for their files when the analysis reaches them."""
        from distlint.api import ConfigError

        try:
            config, changed = self.config(path, options)
        except ConfigError as exc:
            return ("config_error", str(exc), None, False)
        except (OSError, RecursionError) as exc:
            return ("config_error", f"{type(exc).__name__}: {exc}", None, False)
        key = (text, path, config, tuple(sorted((buffers or {}).items())))
        if self.last is not None and self.last[0] == key and not changed:
            last = self.last[1][1]
            if not last.dependencies:  # a reached module may have changed on disk since
                return self.last[1]  # the same text again (the start-up code linted it already)
        document = self.documents.get(path)
        if document is None or self.document_configs.get(path) != config:
            from distlint.incremental import Document

            document = self.documents[path] = Document()  # a new config: parse it whole
            self.document_configs[path] = config
            while len(self.documents) > KEPT_DOCUMENTS:  # the least recently added goes
                oldest = next(iter(self.documents))
                del self.documents[oldest], self.document_configs[oldest]
        result = self.api.lint_document(text, path, config, buffers or {}, document)
        reply = ("ok", result, config, changed)
        self.last = (key, reply)
        return reply

    def _project(self, path: str, config: Any):
        return None if path.endswith(".ipynb") else self.api.project_for(path, config)

    def fix(self, text: str, path: str, config: Any, prior: Any = None) -> str:
        """Fix-all from the lint's own edits (``prior``: the result the client was shown)."""
        return self.api.fix_source(
            text, path, config, prior=prior, project=self._project(path, config)
        )

    def suppresses(self, text: str, path: str, config: Any, code: str, line: int) -> bool:
        """Does ``text`` (a line with a new noqa comment) lint without that finding?"""
        check = self.api.lint_source(text, path, config, project=self._project(path, config))
        return not check.errors and not any(
            f.code == code and f.line == line for f in check.findings
        )

    def rules(self) -> dict[str, tuple[str, str | None]]:
        return {r.code: (r.docs, r.url) for r in self.api.rule_metadata()}

    def reset_config(self) -> None:
        self._clear_config_caches()
        self.stamps.clear()

    def modules(self) -> list[str]:
        return sorted({name.split(".")[0] for name in list(sys.modules)})

    def passes(self, clear: bool = False) -> dict[str, int]:  # for the tests: lint passes made
        from distlint import runner

        counts = dict(runner.PASSES)
        if clear:
            runner.PASSES.clear()
        return counts

    def crash(self) -> None:  # for the tests: what a native crash in LibCST does
        os.kill(os.getpid(), signal.SIGSEGV)

    def sleep(self, seconds: float) -> None:  # for the tests: a lint that takes too long
        time.sleep(seconds)


def _read_exact(stream, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    from distlint import collector

    collector.pause_startup()  # the engine's warm-up lint resumes it (distlint.collector)
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray output goes to the log, not the pipe
    engine = _Engine()
    while True:
        header = _read_exact(inp, _HEADER.size)
        if header is None:
            return  # the server closed the pipe (or died): nothing left to do
        body = _read_exact(inp, _HEADER.unpack(header)[0])
        if body is None:
            return
        req_id, method, args = pickle.loads(body)
        try:
            reply = (req_id, True, getattr(engine, method)(*args))
        except RecursionError:
            reply = (req_id, False, "source is too deeply nested to analyse")
        except Exception as exc:
            reply = (req_id, False, f"internal error: {type(exc).__name__}: {exc}")
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(data)) + data)
        if method == "lint":
            try:
                engine.idle()
            except Exception:  # pragma: no cover - a cache warm-up must not take the worker down
                engine.documents.clear()


if __name__ == "__main__":
    main()
