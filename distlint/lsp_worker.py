"""The language server's lint worker: a separate process that does every lint and fix.

The server (:mod:`distlint.lsp`) keeps the LSP conversation on its event loop and hands the
work to this process, so that

- the server always answers: a lint that takes seconds blocks nobody but the thread waiting for
  it, and one that takes longer than the budget is stopped (the worker is killed and restarted);
  other documents do not wait for a slow one (the server starts a second worker for them:
  :meth:`Worker.spare`);
- the server survives what kills a lint: LibCST's native parser can crash the whole process
  (SIGSEGV on deeply nested code, an abort when Rust runs out of memory). That takes the worker,
  not the server: the document gets a message, the next lint starts a fresh worker;
- the first diagnostics come sooner: the worker starts first and imports LibCST and the rules
  while the server imports pygls.

Messages are pickled tuples with a 4-byte length prefix, over the worker's stdin / stdout
(``sys.stdout`` of the worker is sent to stderr, so a stray print cannot corrupt the pipe).
This module imports nothing heavy: the server imports the client half, the worker half loads
the engine.

Opening a folder in an editor must never run code from it. An editor starts the server with
the folder as its working directory, and a plain ``python -m`` child would put that directory
first on its import path (a ``select.py`` or ``distlint/`` there would be imported instead of
ours). So the worker starts with Python's isolated mode (``-I``: no working or script directory,
no ``PYTHON*`` variables, no user site-packages) in a directory of its own, and is handed the
server's own import path, less the working directory and the workspace: the same distlint and
dependencies the server runs, wherever they were installed (an editable install, a user
site-packages, ``PYTHONPATH``). The workspace root travels with each request; the worker moves
there only once its import path is fixed, so paths read as on the command line.

On Linux, the first worker of ``distlint lsp`` is forked from the server instead (see
:func:`_may_fork`): the server starts it first thing, while it is one thread that has imported
only distlint's start and the standard library, and the child sets the same import path. That
saves a second interpreter's start on the way to the first diagnostics. Restarts, from the
server's threads, are isolated new interpreters as above; ``DISTLINT_WORKER_EXEC=1`` in the
server's environment makes the first one too.

A worker that cannot start (an import error, no rules found, a crash before it is ready) says
so on the server's stderr and in :class:`WorkerStartError`; it is tried again after 1 s, then
2 s, and then given up on, so nothing waits for it for ever.
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
from collections import deque
from collections.abc import Sequence
from typing import Any, NoReturn

_HEADER = struct.Struct(">I")
CONFIG_FILE_NAMES = ("pyproject.toml", "distlint.toml", ".distlint.toml")
KEPT_DOCUMENTS = 16  # parsed buffers the worker keeps for incremental re-parsing
START_TIMEOUT = 60.0  # seconds a worker may take to load LibCST and the rules
RETRY_DELAYS = (1.0, 2.0)  # after the 1st and 2nd failed start; the 3rd is the last
STDERR_LINES = 20  # the worker's last output lines kept for an error message
EARLY_MESSAGE_BYTES = 4096  # a request sent before the worker is ready (a pipe holds 4 KiB+)
FIX_HINT = (
    "check that distlint and its dependencies (libcst, click) import in {python} "
    "(`{python} -I -c 'import distlint.lsp_worker, libcst'`), or reinstall: "
    "pip install 'distlint[lsp]'"
)

# The worker's start: fix the import path (the entries after the first argument, then those of
# the isolated interpreter itself), process a user site-packages if the server used one, then
# run the worker (``__name__`` is "__main__": nothing in distlint is imported before this).
_BOOT = (
    "import sys\n"
    "given = sys.argv[2:]\n"
    "sys.path[:] = given + [p for p in sys.path if p and p not in given]\n"
    "if sys.argv[1]:\n"
    "    import site\n"
    "    site.addsitedir(sys.argv[1])\n"
    "from distlint.lsp_worker import main\n"
    "main()\n"
)


class WorkerError(Exception):
    """The worker could not answer: it crashed, took too long, or failed (message says which)."""


class WorkerBusy(WorkerError):
    """The worker was still busy with another call when the caller stopped waiting."""


class WorkerStartError(WorkerError):
    """The worker could not start. ``retry_in``: seconds until the next attempt (None once it
    was given up on: ``final``)."""

    def __init__(self, message: str, retry_in: float | None) -> None:
        super().__init__(message)
        self.retry_in = retry_in

    @property
    def final(self) -> bool:
        return self.retry_in is None


def import_path(*unsafe: str) -> list[str]:
    """This process's import path for a child interpreter: absolute entries only (``""`` and
    relative ones mean the child's working directory), less the directories in ``unsafe``
    (the working directory, the workspace)."""
    bad = {os.path.realpath(d) for d in unsafe if d}
    out: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or entry in out:
            continue
        if os.path.realpath(entry) in bad:
            continue
        out.append(entry)
    return out


def worker_command(*unsafe: str) -> tuple[list[str], dict[str, str] | None]:
    """The command line (and environment, None: this one) of an isolated lint worker."""
    import site

    path = import_path(*unsafe)
    # A user site-packages the server uses (pip install --user): its .pth files (an editable
    # install's finder) are processed in the worker too, as this process's site did.
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site not in path:
        user_site = ""
    env = None
    flags = ["-I"]
    if os.environ.get("PYTHONHOME"):
        # -I ignores PYTHONHOME, which this Python needs to find its standard library: keep
        # that one variable, drop the others, and leave out the user site-packages (-s) and,
        # where Python has it, the working directory (-P; the start code removes it anyway).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONHOME"] = os.environ["PYTHONHOME"]
        flags = ["-s"] + (["-P"] if sys.version_info >= (3, 11) else [])
    command = [sys.executable, *flags, "-c", _BOOT, user_site, *path]
    return command, env


# A worker forked from the server saves a second interpreter's start (its site-packages' .pth
# files included), which is on the way to the first diagnostics: `distlint lsp` starts the
# worker first thing, while it is a single thread that has imported nothing but distlint's
# start and the standard library (distlint.cli, Worker(fork=True)). A fork then is as safe as
# an exec: no lock can be held by another thread, and the child sets the same import path an
# exec'd worker is given. Anywhere else (a restart, from the server's threads; a platform
# without a safe fork; a worker of a library caller or with a command of its own) the worker
# is an isolated new interpreter, as above.
def _may_fork() -> bool:
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and not os.environ.get("DISTLINT_WORKER_EXEC")
    )


class _Forked:
    """A forked worker, with the part of :class:`subprocess.Popen` that :class:`Worker` uses."""

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin = os.fdopen(stdin, "wb", buffering=0)
        self.stdout = os.fdopen(stdout, "rb", buffering=0)
        self.stderr = os.fdopen(stderr, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # (reaped elsewhere: it is gone)
                self.returncode = -signal.SIGKILL
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired([sys.executable], timeout or 0.0)
            time.sleep(0.005)
        return code

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork(home: str, path: list[str]) -> _Forked:
    """A worker forked from this process: working in ``home``, importing from ``path`` only."""
    pipes = [os.pipe() for _ in range(3)]  # requests, replies, its stderr
    for stream in (sys.stdout, sys.stderr):
        with _suppress_io():
            stream.flush()  # (nothing written so far may be written twice)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (measured by the language-server tests)
        _forked_worker(pipes[0][0], pipes[1][1], pipes[2][1], home, path)
    for end in (pipes[0][0], pipes[1][1], pipes[2][1]):
        os.close(end)
    return _Forked(pid, pipes[0][1], pipes[1][0], pipes[2][0])


def _forked_worker(
    requests: int, replies: int, errors: int, home: str, path: list[str]
) -> NoReturn:  # pragma: no cover - runs in the child
    code = 1
    try:
        os.dup2(requests, 0)
        os.dup2(replies, 1)
        os.dup2(errors, 2)
        try:  # (the fds open: a loop up to the limit is slow where it is a million)
            top = max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1
        except (OSError, ValueError):
            top = os.sysconf("SC_OPEN_MAX")
        os.closerange(3, top)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        os.chdir(home)
        sys.path[:] = path
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        with _suppress_io():
            traceback.print_exc()
    finally:
        with _suppress_io():
            sys.stderr.flush()
        os._exit(code)


# ------------------------------------------------------------------------------- client half


class Worker:
    """The server's handle on the lint worker; ``call`` is thread-safe and blocking.

    ``root``: the workspace (the working directory of each request; the server sets it from
    ``initialize``). ``command``: the worker's command line instead of :func:`worker_command`
    (the tests start workers with extra requests this way). ``fork``: the first start may fork
    this process (``distlint lsp``'s own start, see :func:`_may_fork`); later ones never do."""

    def __init__(
        self, command: Sequence[str] | None = None, root: str | None = None, fork: bool = False
    ) -> None:
        self.fork = fork
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ready = False  # the running process said it is ready
        self._started_at = 0.0
        self._next_id = 0
        self._busy_since: float | None = None  # when the call in progress was sent
        self._home: str | None = None  # the worker's own working directory
        self._closed = False
        self.command = list(command) if command else None
        self.root = os.path.abspath(root or os.getcwd())
        self.restarts = 0
        self.start_failures = 0  # in a row; reset once a worker is ready
        self._retry_at = 0.0
        self.gave_up: str | None = None  # why, once the worker is given up on
        self.start_error = ""  # why the last start failed
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)

    def start(self) -> None:
        """Start the process now (it warms up while the caller does other work)."""
        with self._lock:
            try:
                self._ensure()
            except WorkerError:
                pass  # the first call reports it

    def _spawn(self) -> Any:
        import tempfile

        if self._home is None or not os.path.isdir(self._home):
            self._home = tempfile.mkdtemp(prefix="distlint-worker-")
        proc: Any
        if self.fork and self.command is None and _may_fork():
            proc = _fork(self._home, import_path(os.getcwd(), self.root))
        else:
            if self.command is not None:
                command, env = self.command, None
            else:
                command, env = worker_command(os.getcwd(), self.root)
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._home,
                env=env,
                bufsize=0,
                close_fds=True,
            )
        self.fork = False  # (a restart comes from the server's threads)
        self.stderr_tail.clear()
        threading.Thread(
            target=self._forward_stderr, args=(proc,), name="distlint-worker-stderr", daemon=True
        ).start()
        self._ready = False
        self._started_at = time.monotonic()
        return proc

    def _forward_stderr(self, proc: subprocess.Popen) -> None:
        """The worker's stderr, line by line, to this process's stderr (the editor's log of the
        server), the last lines kept for error messages."""
        assert proc.stderr is not None
        out = getattr(sys.stderr, "buffer", None)
        try:
            while True:
                line = proc.stderr.readline(8192)
                if not line:
                    break
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    self.stderr_tail.append(text[:500])
                try:
                    if out is not None:
                        out.write(line)
                        out.flush()
                except (OSError, ValueError):
                    out = None  # no stderr to write to: keep reading, or the worker blocks
        except (OSError, ValueError):
            pass

    def _ensure(self) -> subprocess.Popen:
        if self._closed:
            raise WorkerError("the server is shutting down")
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self.gave_up is not None:
            raise WorkerStartError(self.gave_up, None)
        wait = self._retry_at - time.monotonic()
        if wait > 0:  # the last attempt failed: the next is not due yet
            raise WorkerStartError(self.start_error, wait)
        if self._proc is not None:
            self.restarts += 1
        self._proc = self._spawn()
        return self._proc

    def _await_ready(self, proc: subprocess.Popen) -> None:
        """Read the worker's first message: ready, or why it could not start."""
        deadline = self._started_at + START_TIMEOUT
        try:
            header = self._read(proc, _HEADER.size, deadline)
            _, ok, value = pickle.loads(self._read(proc, _HEADER.unpack(header)[0], deadline))
        except _Timeout:
            self._kill(proc)
            self._start_failed(f"it did not get ready within {START_TIMEOUT:g} s")
        except (EOFError, OSError, pickle.UnpicklingError):
            self._start_failed(self._exit_reason(proc))
        if not ok:
            self._kill(proc)
            self._start_failed(str(value))
        self._ready = True
        self.start_failures = 0

    def _start_failed(self, why: str) -> NoReturn:
        """Record a failed start, say so on stderr and raise :class:`WorkerStartError`."""
        self._proc = None
        self.start_failures += 1
        python = sys.executable
        message = f"the lint worker could not start: {why}. Fix: {FIX_HINT.format(python=python)}"
        if self.start_failures > len(RETRY_DELAYS):
            self.gave_up = f"{message} (gave up after {self.start_failures} attempts)"
            error = WorkerStartError(self.gave_up, None)
        else:
            delay = RETRY_DELAYS[self.start_failures - 1]
            self._retry_at = time.monotonic() + delay
            self.start_error = f"{message} (attempt {self.start_failures}; next in {delay:g} s)"
            error = WorkerStartError(self.start_error, delay)
        with _suppress_io():
            sys.stderr.write(f"distlint: {error}\n")
            sys.stderr.flush()
        raise error

    def _exit_reason(self, proc: subprocess.Popen) -> str:
        """Why a worker that had not answered yet ended: its last error line, or its status."""
        code = self._exit_status(proc)
        if code is None:
            return "it stopped answering"
        time.sleep(0.05)  # let the stderr thread take the last lines
        lines = [line for line in self.stderr_tail if not line.startswith((" ", "Traceback"))]
        status = _describe_status(code)
        return f"{lines[-1]} ({status})" if lines else status

    def call(
        self, method: str, *args: Any, timeout: float | None = None, wait: float | None = None
    ) -> Any:
        """``method(*args)`` in the worker, within ``timeout`` seconds once it is sent.
        ``wait``: raise :class:`WorkerBusy` rather than wait for a call that has been running
        longer than this (a worker still starting up is waited for)."""
        if wait is None:
            self._lock.acquire()
        else:
            while not self._lock.acquire(timeout=0.05):
                since = self._busy_since
                if since is not None and time.monotonic() - since > wait:
                    raise WorkerBusy(f"busy with one call for more than {wait:g} s")
        try:
            return self._call(method, args, timeout)
        finally:
            self._busy_since = None
            self._lock.release()

    def spare(self) -> Worker:
        """Another worker like this one (same command and workspace), for other documents
        while this one is busy with a slow lint."""
        spare = Worker(self.command, self.root)
        spare.start()
        return spare

    def _call(self, method: str, args: tuple, timeout: float | None) -> Any:
        proc = self._ensure()
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        self._next_id += 1
        request = (self._next_id, method, args, self.root)
        body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        message = _HEADER.pack(len(body)) + body
        if not self._ready:
            message = self._send_early(proc, message)
            self._await_ready(proc)
        self._busy_since = time.monotonic()
        try:
            if message:
                proc.stdin.write(message)
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
    def _send_early(proc: subprocess.Popen, message: bytes) -> bytes:
        """Send a request to a worker still starting up: it finds a request waiting when its
        engine is loaded and goes straight to it (no warm-up lint: see :class:`_Engine`). Only
        a message the pipe holds whole is sent (a worker that hangs while starting must not
        block the write; the start's time limit applies). What is left to send: the message,
        or nothing."""
        if len(message) > EARLY_MESSAGE_BYTES:
            return message
        try:
            assert proc.stdin is not None
            proc.stdin.write(message)
            proc.stdin.flush()
        except OSError:
            return message  # (a worker that could not start: _await_ready says why)
        return b""

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
        with _suppress_io():
            proc.kill()
        proc.wait()
        self._proc = None
        self.restarts += 1

    def _exit_status(self, proc: subprocess.Popen) -> int | None:
        """The exit status of a worker whose pipe closed; None (killed) if it does not end."""
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            return None

    def _death(self, proc: subprocess.Popen) -> str:
        code = self._exit_status(proc)
        if code is None:
            return "the lint worker stopped answering; restarted"
        if code < 0:
            return (
                f"the lint crashed ({_describe_status(code)}, inside LibCST's parser); "
                "the server restarted its worker"
            )
        return f"the lint worker exited with status {code}; restarted"

    def close(self) -> None:
        """Stop the worker (without waiting for a lint in progress: it ends with it)."""
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # the worker ends at the end of its input
                proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                with _suppress_io():
                    proc.kill()
                proc.wait()
        if self._home is not None:
            import shutil

            shutil.rmtree(self._home, ignore_errors=True)


def _describe_status(code: int) -> str:
    if code >= 0:
        return f"exit status {code}"
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _suppress_io():
    import contextlib

    return contextlib.suppress(OSError, ValueError)


class _Timeout(Exception):
    pass


# ------------------------------------------------------------------------------- worker half


class _Engine:
    """What the worker does for the server. Everything here runs in the worker process."""

    def __init__(self, warm_up: bool = True) -> None:
        """``warm_up``: lint a two-line script once, so that the first request finds the
        engine's lazy parts loaded; pointless when a request is waiting already (an editor
        that opened a file while the worker started): that request loads them itself."""
        from distlint import api
        from distlint._libcst_compat import plain_type_checks

        plain_type_checks()  # a process of our own: LibCST's isinstance checks made plain
        self.api = api
        if not api.all_rules():
            where = os.path.dirname(os.path.abspath(api.__file__))
            raise RuntimeError(f"no rules found in distlint.rules (distlint at {where})")
        if warm_up:
            api.lint_source("import torch\ntorch.manual_seed(0)\n", "warm_up.py", api.Config())
        self.stamps: dict[str, tuple | None] = {}
        self.last: tuple | None = None  # ((text, path, config), reply) of the last lint
        # per path: the last parse of the buffer (an edit re-parses only what it touched)
        self.documents: dict[str, Any] = {}
        self.document_configs: dict[str, Any] = {}
        self.overlaid: set[str] = set()  # paths whose editor text stood in for the file

    def idle(self) -> None:
        """Between requests: compute what the next edit of a linted buffer needs (where its
        statements start), so that the user's next pause in typing does not pay for it; and
        free what the last lint left (see `free_after_replies`)."""
        from distlint import collector

        collector.free_pending()
        for document in list(self.documents.values()):
            document.prepare()

    @staticmethod
    def free_after_replies() -> None:
        """What each lint leaves to free (the analysis of the text's own parse) is freed
        after its reply is sent (`idle`), not before (:func:`distlint.collector.free_later`:
        for the whole process, the worker's own; the loop of `main` sends each reply before
        the engine is idle)."""
        from distlint import collector

        collector.free_later()

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
        from distlint import collector
        from distlint.api import ConfigError

        collector.free_pending()  # (requests back to back: no idle time between them)
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

            if document is not None:
                document.let_go()
            document = self.documents[path] = Document()  # a new config: parse it whole
            self.document_configs[path] = config
            while len(self.documents) > KEPT_DOCUMENTS:  # the least recently added goes
                oldest = next(iter(self.documents))
                self.documents.pop(oldest).let_go()
                del self.document_configs[oldest]
        overlays = self._overlays(path, text, config, buffers)
        result = self.api.lint_document(text, path, config, overlays, document)
        reply = ("ok", result, config, changed)
        self.last = (key, reply)
        return reply

    def _overlays(
        self, path: str, text: str, config: Any, buffers: dict | None
    ) -> dict[str, str | None]:
        """What stands in for files on disk: the document itself (the editor's text is the
        truth; the file may be older, or a FIFO that never ends) and the other open buffers;
        None (the disk again) for documents closed since."""
        if not path.endswith(".ipynb"):
            self.api.project_for(path, config).set_overlay(path, text)
        now = set(buffers or ()) | {path}
        closed = self.overlaid - now
        self.overlaid |= now
        return {**dict.fromkeys(closed), **(buffers or {})}

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


def _read_exact(stream, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _send(out, message: tuple) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)


def main(engine_class: type = _Engine) -> None:
    """The worker's loop. Its first message says it is ready (or why it is not); then one
    reply per request. ``engine_class``: the tests' engine, with requests of their own."""
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray output goes to the log, not the pipe
    try:
        from distlint import collector

        collector.pause_startup()  # the engine's first lint resumes it (distlint.collector)
        engine = engine_class(warm_up=not _waiting(inp))
        engine.free_after_replies()
    except BaseException as exc:  # told to the server, which reports it to the editor
        import traceback

        traceback.print_exc()
        _send(out, (0, False, f"{type(exc).__name__}: {exc}"))
        sys.exit(3)
    _send(out, (0, True, os.getpid()))
    while True:
        header = _read_exact(inp, _HEADER.size)
        if header is None:
            return  # the server closed the pipe (or died): nothing left to do
        body = _read_exact(inp, _HEADER.unpack(header)[0])
        if body is None:
            return
        req_id, method, args, root = pickle.loads(body)
        # No collection until the reply is sent: the lint pauses the collector, and the first
        # allocation after it resumes would walk everything the lint allocated (1-2 ms of an
        # editor's re-lint) before the reply leaves; it walks it after, while the user types.
        with collector.paused():
            try:
                _enter(root)
                reply = (req_id, True, getattr(engine, method)(*args))
            except RecursionError:
                reply = (req_id, False, "source is too deeply nested to analyse")
            except Exception as exc:
                reply = (req_id, False, f"internal error: {type(exc).__name__}: {exc}")
            _send(out, reply)
        collector.free_pending()  # what the request's lints left, its reply sent
        if method == "lint":
            try:
                engine.idle()
            except Exception:  # pragma: no cover - a cache warm-up must not take the worker down
                engine.documents.clear()


def _waiting(stream) -> bool:
    """Is a request waiting to be read on ``stream`` (nothing read from it yet)?"""
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _enter(root: str | None) -> None:
    """Work in the workspace ``root`` (relative paths, and the configuration a file without
    one gets, read as on the command line there). Imports never look there: the import path
    holds no working directory."""
    if root and os.path.isdir(root):
        try:
            if os.path.samefile(root, os.getcwd()):
                return
        except OSError:
            pass
        os.chdir(root)


if __name__ == "__main__":
    main()
