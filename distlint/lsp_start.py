"""Start of ``distlint lsp``: the first diagnostics are sent before pygls has finished loading.

Importing pygls costs more than linting a 500-line file: ``lsprotocol.types`` alone defines
about a thousand attrs classes (0.3-0.4 s on a quiet machine, over a second on a busy one). An
editor that opens a file waits for that import, then for the lint. So ``distlint lsp`` does
three things at once:

- the lint worker (:mod:`distlint.lsp_worker`) starts first and loads LibCST and the rules;
- a thread imports pygls and builds the server (:mod:`distlint.lsp`), once the first
  diagnostics are out (or the client sends nothing for a moment, or sends a message only the
  server answers): on a busy machine, loading it meanwhile slows the worker's first lint;
- this module answers the only messages an editor sends before its first diagnostics, with
  plain JSON: ``initialize`` (the same capabilities the pygls server computes; a test
  compares them), ``initialized`` and ``textDocument/didOpen`` (linted by the worker,
  diagnostics published as the server would publish them), and the ``textDocument/didChange``
  of a user who starts typing before pygls is ready (debounced like the server's).

At the first other message (or once pygls is ready, whichever comes first) every message read
so far is handed to the pygls server, which processes them as if it had read them itself: it
sets up its workspace and documents, its ``initialize`` answer is dropped (the client already
has one) and diagnostics already sent are not sent again. From then on pygls alone talks to the
client.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import sys
import threading
import time
from typing import Any, BinaryIO, Callable

SOURCE = "distlint"
FIX_ALL_KIND = "source.fixAll.distlint"
IMPORTED_MODULES_COMMAND = "distlint.importedModules"
_ENCODINGS = ("utf-8", "utf-16", "utf-32")
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_SEVERITY = {"error": 1, "warning": 2}
LOAD_WHEN_QUIET_SECONDS = 0.2
DEBOUNCE_SECONDS = 0.15  # a change is linted once typing pauses this long (the server's too)


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where LSP (and LibCST) split: \\r\\n, \\r, \\n."""
    return _LINE_RE.findall(text)


def options_from(init: Any):
    """LintOptions from the client's initializationOptions (unknown keys are ignored)."""
    from distlint.api import LintOptions

    if not isinstance(init, dict):
        return LintOptions()

    def codes(key: str) -> tuple[str, ...] | None:
        value = init.get(key)
        return tuple(str(v).upper() for v in value) if isinstance(value, list) else None

    unsafe = init.get("unsafeFixes")
    config = init.get("config")
    return LintOptions(
        select=codes("select"),
        ignore=codes("ignore"),
        extend_select=codes("extendSelect"),
        unsafe_fixes=unsafe if isinstance(unsafe, bool) else None,
        config_path=config if isinstance(config, str) and config else None,
        isolated=init.get("isolated") is True,
    )


def workspace_root(params: Any) -> str | None:
    """The folder ``initialize`` names as the workspace (``rootUri``, ``rootPath``, else the
    first workspace folder); None when it names none."""
    from urllib.parse import unquote, urlparse

    if not isinstance(params, dict):
        return None
    folders = params.get("workspaceFolders")
    first = folders[0] if isinstance(folders, list) and folders else None
    candidates = [params.get("rootUri"), params.get("rootPath")]
    candidates.append(first.get("uri") if isinstance(first, dict) else None)
    for value in candidates:
        if not isinstance(value, str) or not value:
            continue
        if value.startswith("file:"):
            value = unquote(urlparse(value).path)
        elif "://" in value:
            continue  # not a folder on this machine
        if os.path.isabs(value):
            return os.path.normpath(value)
    return None


def position_encoding(capabilities: Any) -> str:
    """The client's first supported encoding, else UTF-16 (what pygls chooses too)."""
    general = capabilities.get("general") if isinstance(capabilities, dict) else None
    encodings = general.get("positionEncodings") if isinstance(general, dict) else None
    for encoding in encodings or ():
        if encoding in _ENCODINGS:
            return encoding
    return "utf-16"


def initialize_result(capabilities: Any, version: str) -> dict:
    """What the pygls server answers to ``initialize`` (tests/test_lsp.py keeps them equal)."""
    return {
        "capabilities": {
            "positionEncoding": position_encoding(capabilities),
            "textDocumentSync": {"openClose": True, "change": 2, "save": True},
            "hoverProvider": True,
            "codeActionProvider": {"codeActionKinds": ["quickfix", FIX_ALL_KIND]},
            "executeCommandProvider": {"commands": [IMPORTED_MODULES_COMMAND]},
            "workspace": {
                "workspaceFolders": {"supported": True, "changeNotifications": True},
                "fileOperations": {},
            },
        },
        "serverInfo": {"name": "distlint", "version": version},
    }


def units(text: str, encoding: str) -> int:
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


def _position(lines: list[str], line: int, column: int, encoding: str) -> dict:
    index = line - 1
    if index >= len(lines):
        return {"line": len(lines), "character": 0}
    return {"line": index, "character": units(lines[index][: column - 1], encoding)}


def diagnostic_json(finding, lines: list[str], encoding: str, url: str | None) -> dict:
    rng = finding.range
    out = {
        "range": {
            "start": _position(lines, rng.line, rng.column, encoding),
            "end": _position(lines, rng.end_line, rng.end_column, encoding),
        },
        "severity": _SEVERITY.get(finding.severity.value, 1),
        "code": finding.code,
        "source": SOURCE,
        "message": finding.message,
        "data": {"fix": finding.fix.applicability.value if finding.fix else None},
    }
    if url:
        out["codeDescription"] = {"href": url}
    return out


def offset_of(text: str, position: Any, encoding: str) -> int | None:
    """The offset in ``text`` of an LSP position (0-based line, ``character`` in the client's
    units; past the end of a line: its end)."""
    if not isinstance(position, dict):
        return None
    line, character = position.get("line"), position.get("character")
    if not isinstance(line, int) or not isinstance(character, int) or line < 0 or character < 0:
        return None
    lines = split_lines(text)
    if line >= len(lines):
        return len(text)
    start = sum(len(x) for x in lines[:line])
    content = lines[line].rstrip("\r\n")
    if encoding == "utf-32":
        return start + min(character, len(content))
    used = 0
    for i, char in enumerate(content):
        if used >= character:
            return start + i
        used += units(char, encoding)
    return start + len(content)


def apply_change(text: Any, change: Any, encoding: str) -> str | None:
    """``text`` after one ``contentChanges`` item (a whole text, or a range and its new text);
    None for what is not one."""
    if not isinstance(text, str) or not isinstance(change, dict):
        return None
    new = change.get("text")
    if not isinstance(new, str):
        return None
    rng = change.get("range")
    if rng is None:
        return new
    if not isinstance(rng, dict):
        return None
    start = offset_of(text, rng.get("start"), encoding)
    end = offset_of(text, rng.get("end"), encoding)
    if start is None or end is None or end < start:
        return None
    return text[:start] + new + text[end:]


MAX_HEADER_LINE = 8192  # bytes of one header line
MAX_HEADER_LINES = 32
MAX_MESSAGE = 64 << 20  # bytes of one message body (a document far past any lint limit)


class FramingError(Exception):
    """A message header that cannot be followed: where the next message starts is unknown."""


def _read_message(stream: BinaryIO) -> bytes | None:
    """One framed message's body; None at the end of input (also inside a message).

    A header the specification does not allow (a ``Content-Length`` that is not a decimal
    number, no ``Content-Length``, an endless line) raises :class:`FramingError`: the stream
    cannot be re-synchronised (the next message could start anywhere in what follows), so the
    session ends there, as rust-analyzer and gopls end theirs."""
    length = None
    lines = 0
    while True:
        line = stream.readline(MAX_HEADER_LINE + 1)
        if not line:
            return None
        if len(line) > MAX_HEADER_LINE:
            raise FramingError(f"a header line longer than {MAX_HEADER_LINE} bytes")
        stripped = line.strip()
        if not stripped:
            if length is not None:
                break
            continue  # blank lines between messages are tolerated
        lines += 1
        name, sep, value = stripped.partition(b":")
        if not sep or lines > MAX_HEADER_LINES:
            raise FramingError(f"not a message header: {stripped[:80]!r}")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            if not value.isdigit() or len(value) > 12:
                raise FramingError(
                    f"Content-Length {value[:40].decode('latin-1')!r} is not a length"
                )
            length = int(value)
            if length > MAX_MESSAGE:
                raise FramingError(f"a message of {length} bytes (the limit is {MAX_MESSAGE})")
    body = stream.read(length)
    return body if len(body) == length else None


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _parse(raw: bytes) -> dict | None:
    _, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        _, sep, body = raw.partition(b"\n\n")
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _show_message(text: str) -> dict:
    params = {"type": 1, "message": f"distlint: {text}"}
    return {"jsonrpc": "2.0", "method": "window/showMessage", "params": params}


def _write(stream: BinaryIO, message: dict) -> None:
    body = json.dumps(message).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


class QueueReader:
    """What pygls reads: the messages the start-up code read, then those the reader thread
    goes on reading (one thread owns stdin for the whole session)."""

    def __init__(self, prefix: bytes, frames: queue.Queue, eof: bool):
        self.buffer = prefix
        self.frames = frames
        self.eof = eof
        self.on_error: Any = None  # called with the message when the input is malformed

    def _fill(self) -> bool:
        if self.eof:
            return False
        frame = self.frames.get()
        if isinstance(frame, FramingError):
            if self.on_error is not None:
                self.on_error(framing_message(frame))
            frame = None
        if frame is None:
            self.eof = True
            return False
        self.buffer += frame
        return True

    def readline(self) -> bytes:
        while b"\n" not in self.buffer and self._fill():
            pass
        i = self.buffer.find(b"\n")
        end = len(self.buffer) if i < 0 else i + 1
        line, self.buffer = self.buffer[:end], self.buffer[end:]
        return line

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n and self._fill():
            pass
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data


def framing_message(error: FramingError) -> str:
    return f"malformed message from the client ({error}); the server stops"


def _read_frames(stream: BinaryIO, frames: queue.Queue) -> None:
    """The reader thread: each message, framed anew, into ``frames``; at the end None (after
    a :class:`FramingError` when the input was malformed, said on stderr too)."""
    try:
        while True:
            body = _read_message(stream)
            if body is None:
                break
            frames.put(_frame(body))
    except FramingError as exc:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"distlint: {framing_message(exc)}\n")
            sys.stderr.flush()
        frames.put(exc)
    except (OSError, ValueError):
        pass
    frames.put(None)


class DropResponses:
    """The client's output stream, less the responses to the given request ids (answered
    already by the start-up code)."""

    def __init__(self, stream: BinaryIO, ids: set):
        self.stream = stream
        self.ids = set(ids)

    def write(self, data: bytes) -> None:
        if self.ids:
            head, sep, body = data.partition(b"\r\n\r\n")
            try:
                message = json.loads(body) if sep else None
            except ValueError:
                message = None
            if (
                isinstance(message, dict)
                and "method" not in message
                and message.get("id") in self.ids
            ):
                self.ids.discard(message["id"])
                return
        self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.close()


class _Start:
    def __init__(self, worker, stdout: BinaryIO, version: str):
        self.worker = worker
        self.stdout = stdout
        self.version = version
        self.encoding = "utf-16"
        self.options = None
        self.root: str | None = None
        self.answered: set = set()
        self.published: dict[str, tuple] = {}  # uri -> (version, text, findings)
        self.linted: dict[str, tuple] = {}  # uri -> (text, path, config, result) published
        self.urls: dict[str, str | None] | None = None
        self.docs: dict[str, dict] = {}  # uri -> the textDocument item, kept current
        self.due: dict[str, float] = {}  # uri -> when its debounced lint is due (monotonic)
        self.worker_problem: str | None = None  # why the worker could not start, as told

    def handle(self, message: dict) -> bool:
        """Handle one message; False when it is one for the pygls server."""
        method = message.get("method")
        found = message.get("params")
        params: dict[str, Any] = found if isinstance(found, dict) else {}
        if method == "initialize" and "id" in message and not self.answered:
            return self._initialize(message["id"], params)
        if not self.answered:
            return False
        if method == "initialized":
            return True
        if method == "textDocument/didOpen":
            doc = params.get("textDocument") or {}
            if isinstance(doc.get("uri"), str):
                self.docs[doc["uri"]] = dict(doc)
            self.lint_and_publish(doc)
            return True
        if method == "textDocument/didChange":
            return self._did_change(params)
        return False

    def _initialize(self, request_id: Any, params: dict[str, Any]) -> bool:
        """Answer ``initialize``; False (the server answers) when the client asks for a time
        budget other than the default."""
        self.encoding = position_encoding(params.get("capabilities"))
        self.options = options_from(params.get("initializationOptions"))
        if isinstance(params.get("initializationOptions"), dict) and params[
            "initializationOptions"
        ].get("lintTimeout"):
            return False  # a non-default time budget: let the server do everything
        root = params.get("rootUri")
        self.root = root if isinstance(root, str) else None
        folder = workspace_root(params)
        if folder is not None:
            self.worker.root = folder  # its working directory (it never imports from it)
        result = initialize_result(params.get("capabilities"), self.version)
        _write(self.stdout, {"jsonrpc": "2.0", "id": request_id, "result": result})
        self.answered.add(request_id)
        return True

    def _did_change(self, params: dict[str, Any]) -> bool:
        """Apply a change to an open document and lint it once the typing pauses; False (the
        server takes over) for a change this code does not follow."""
        ident = params.get("textDocument")
        uri = ident.get("uri") if isinstance(ident, dict) else None
        doc = self.docs.get(uri) if isinstance(uri, str) else None
        changes = params.get("contentChanges")
        if doc is None or not isinstance(changes, list):
            return False
        text = doc.get("text")
        for change in changes:
            text = apply_change(text, change, self.encoding)
            if text is None:
                return False
        doc["text"], doc["version"] = text, ident.get("version")  # type: ignore[union-attr]
        self.due[doc["uri"]] = time.monotonic() + DEBOUNCE_SECONDS
        return True

    def lint_due(self) -> None:
        """Lint the documents whose debounce has passed."""
        now = time.monotonic()
        for uri, when in list(self.due.items()):
            if when <= now:
                del self.due[uri]
                self.lint_and_publish(self.docs[uri])

    def wait(self, idle: float) -> float:
        """How long to wait for the next message: until the next due lint, else ``idle``."""
        if not self.due:
            return idle
        return max(0.0, min(min(self.due.values()) - time.monotonic(), idle))

    def lint_and_publish(self, doc: dict) -> None:
        from distlint.lsp_worker import WorkerError, WorkerStartError

        uri, text, version = doc.get("uri"), doc.get("text"), doc.get("version")
        if not isinstance(uri, str) or not isinstance(text, str) or not uri.startswith("file:"):
            return  # untitled buffers and odd documents: the server handles them
        if not uri.endswith((".py", ".pyi")) and doc.get("languageId") != "python":
            return
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(uri).path)
        try:
            # The rules' links first: after a lint the worker prepares the buffer's next edit
            # (lsp_worker.main), and a question asked then would wait for that.
            urls = self.rule_urls()
            status, result, config, _ = self.worker.call(
                "lint", text, path, self.options, timeout=20
            )
        except WorkerStartError as exc:  # told at once; the server tries again when it is due
            self.worker_unavailable(str(exc), exc.final)
            return
        except WorkerError:
            return  # the server lints it again and reports why
        if status != "ok":
            return  # a configuration error: the server reports it
        for error in result.errors:  # as the server logs them
            _write(
                self.stdout,
                {
                    "jsonrpc": "2.0",
                    "method": "window/logMessage",
                    "params": {"type": 2, "message": f"distlint: {error}"},
                },
            )
        if result.errors and not result.findings:
            return  # e.g. a syntax error mid-typing: the last diagnostics stay
        lines = split_lines(text) if result.findings else []
        diagnostics = [
            diagnostic_json(f, lines, self.encoding, urls.get(f.code)) for f in result.findings
        ]
        params = {"uri": uri, "diagnostics": diagnostics}
        if version is not None:
            params["version"] = version
        _write(
            self.stdout,
            {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params},
        )
        self.published[uri] = (version, text, result.findings)
        self.linted[uri] = (text, path, config, result)

    def worker_unavailable(self, message: str, final: bool) -> None:
        """As :meth:`distlint.lsp.DistlintServer.worker_unavailable` says it (which takes over
        from here, knowing what was said)."""
        if message == self.worker_problem:
            return
        first = self.worker_problem is None
        self.worker_problem = message
        log = {"type": 1, "message": f"distlint: {message}"}
        _write(self.stdout, {"jsonrpc": "2.0", "method": "window/logMessage", "params": log})
        if first or final:
            _write(self.stdout, _show_message(message))

    def rule_urls(self) -> dict[str, str | None]:
        if self.urls is None:
            self.urls = {code: url for code, (_, url) in self.worker.call("rules").items()}
        return self.urls


def _answer_while_loading(
    start: _Start, frames: queue.Queue, loader: threading.Thread
) -> tuple[list[bytes], bool]:
    """Answer the client's first messages (``frames``) until ``loader`` has loaded pygls, or a
    message comes that only the server answers; the messages read (for the server to read
    again), and whether the client closed its end.

    pygls loads once the first diagnostics are out (or the client goes quiet, or sends what
    only the server answers): loading it meanwhile would take CPU from the worker's first lint.
    """
    replay: list[bytes] = []
    eof = loading = False
    while not loading or loader.is_alive():
        try:
            raw = frames.get(timeout=start.wait(0.01 if loading else LOAD_WHEN_QUIET_SECONDS))
        except queue.Empty:
            if start.due:
                start.lint_due()
            elif not loading:
                loading = True
                loader.start()
            continue
        if isinstance(raw, FramingError):
            if start.answered:  # notifications may go to the client once it is initialized
                _write(start.stdout, _show_message(framing_message(raw)))
            start.worker.close()
            os._exit(1)  # no `shutdown` came first (the server would say 1 too)
        if raw is None:
            eof = True
            break
        replay.append(raw)
        message = _parse(raw)
        if message is None or not start.handle(message):
            break
        if start.published and not loading:
            loading = True
            loader.start()
    if not loading:
        loader.start()
    return replay, eof


def serve(worker, load_server: Callable[[], Any]) -> None:
    """Answer the first messages, load pygls meanwhile, then hand over to the pygls server.
    ``load_server``: imports and returns :mod:`distlint.lsp` (given by the command, so that this
    module, which the server reuses, does not import the server back)."""
    from distlint import __version__

    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            loaded["lsp"] = load_server()
        except BaseException as exc:  # reported by the main thread
            loaded["error"] = exc

    loader = threading.Thread(target=load, name="distlint-load-pygls", daemon=True)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    frames: queue.Queue = queue.Queue()
    threading.Thread(
        target=_read_frames, args=(stdin, frames), name="distlint-stdin", daemon=True
    ).start()
    start = _Start(worker, stdout, __version__)
    replay, eof = _answer_while_loading(start, frames, loader)
    loader.join()
    if "error" in loaded:
        raise loaded["error"]
    loaded["lsp"].serve(
        worker,
        stdin=QueueReader(b"".join(replay), frames, eof),
        stdout=DropResponses(stdout, start.answered),
        published=start.published,
        worker_problem=start.worker_problem,
        linted=start.linted,
    )
