"""The distlint language server: findings while you type, fixes as code actions and on save.

``distlint lsp`` speaks the Language Server Protocol over stdio (pygls + lsprotocol, the ``lsp``
extra). It lints through :mod:`distlint.api`, exactly as the CLI does, with the same
configuration discovery per document (``[tool.distlint]`` / ``distlint.toml`` above the file).

- Diagnostics on open, on save and on change (debounced): range, severity, code, source
  ``distlint``, message; the rule documentation on hover (and ``codeDescription`` when the rule
  has a URL).
- Code actions: a ``quickfix`` per fixable finding (unsafe ones say so in the title), a
  ``# noqa: CODE`` suppression per finding, and ``source.fixAll.distlint``: every safe fix of
  the document (unsafe ones too when ``unsafe-fixes`` is configured), the same text
  ``distlint fix`` writes, so ``editor.codeActionsOnSave`` works.
- A document that does not parse (mid-typing) or a broken configuration never takes the
  server down: the document keeps its last diagnostics and ``window/logMessage`` says why.

Initialization options (all optional): ``unsafeFixes`` (bool), ``select`` / ``ignore`` /
``extendSelect`` (lists of codes), ``config`` (path of a configuration file), ``isolated``.

Like ``check`` and ``fix``, the server only reads code: it never imports torch, accelerate,
torch_xla or numpy, so it starts and answers fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from distlint import __version__, api
from distlint.api import merged
from distlint.lsp_start import DEBOUNCE_SECONDS, options_from, split_lines, workspace_root
from distlint.lsp_worker import (
    CONFIG_FILE_NAMES,
    Worker,
    WorkerBusy,
    WorkerError,
    WorkerStartError,
)
from distlint.model import Applicability, Edit, FileResult, Finding, Severity

SOURCE = "distlint"
FIX_ALL_KIND = "source.fixAll.distlint"
LINT_TIMEOUT = 20.0  # seconds one lint (or fix) may take before the worker is stopped
BUSY_SECONDS = 1.0  # a lint busy this long is slow: other documents go to a second worker
IMPORTED_MODULES_COMMAND = "distlint.importedModules"
# modules and config files a lint can reach: a change on disk re-lints the open dependents
DEPENDENCY_GLOBS = ("*.py", "*.yaml", "*.yml", "*.json")


def lsp_uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return os.path.normpath(unquote(parsed.path)) if parsed.scheme == "file" else uri


_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
}


class _Lint:
    """The last lint of one document text: code actions reuse its findings and fix ids."""

    __slots__ = ("text", "path", "config", "result", "fixed")

    def __init__(self, text: str, path: str, config: Any, result: FileResult) -> None:
        self.text = text
        self.path = path
        self.config = config  # distlint.config.Config (pickled from the worker, sent back)
        self.result = result
        self.fixed: dict[Any, str] = {}  # fix key -> fixed text, for this text


class DistlintProtocol(LanguageServerProtocol):
    """pygls's protocol with the specification's answers to requests out of turn: before
    ``initialize``, error -32002 (ServerNotInitialized; notifications other than ``exit`` are
    dropped); after ``shutdown``, error -32600 (InvalidRequest). pygls runs the first and
    leaves the second unanswered, so a client waits for ever."""

    initialize_seen = False

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        if method is not None and method != lsp.EXIT:  # a request or notification
            error: Exception | None = None
            if method == lsp.INITIALIZE:
                self.initialize_seen = True
            elif not self.initialize_seen:
                error = JsonRpcServerNotInitialized(f"{method} before initialize")
            if self._shutdown:
                error = JsonRpcInvalidRequest(f"{method} after shutdown")
            if error is not None:
                if msg_id is not None and isinstance(error, JsonRpcException):
                    self._send_response(msg_id, None, error.to_response_error())
                return
        super().handle_message(message)

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None):
        """pygls 2 keeps the future of every notification whose built-in handler is a
        generator (didOpen, didChange, didSave, didClose, ...) in ``_request_futures`` under a
        fresh id, and only a request's answer ever removes an entry: some 2 KB per keystroke for
        the server's whole life (pygls/protocol/json_rpc.py, ``JsonRPCProtocol._execute_handler``).
        Here each future is forgotten once it is done (a request's too: it has been answered)."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]


class DistlintServer(LanguageServer):
    def __init__(self, worker: Worker | None = None) -> None:
        super().__init__(
            "distlint",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=DistlintProtocol,
        )
        self.options = api.LintOptions()
        self.lints: dict[str, _Lint] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.reported_config_errors: set = set()
        self.stale: set[str] = set()  # open documents whose dependencies changed
        # Lints and fixes run in the worker process, called from these threads: the event
        # loop only reads messages, schedules work and publishes results.
        self.worker = worker or Worker()
        self.spare: Worker | None = None  # started when a slow lint holds the first one
        self.spare_lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="distlint-lint")
        self.lint_timeout = LINT_TIMEOUT
        self.loop: asyncio.AbstractEventLoop | None = None
        self.failed: dict[str, tuple[str, str]] = {}  # uri -> (text it failed on, why)
        self.published: dict[str, tuple] = {}  # uri -> (version, diagnostics) last sent
        # uri -> the lint behind the first diagnostics (distlint.lsp_start), taken as this
        # server's own while the document's text is the one it linted
        self.started: dict[str, _Lint] = {}
        self.rule_info: dict[str, tuple[str, str | None]] | None = None
        self.exit_code: int | None = None
        self.worker_problem: str | None = None  # why the worker could not start, last said
        self.retry: asyncio.TimerHandle | None = None  # the next start attempt's lints

    # ------------------------------------------------------------------ helpers
    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.on_loop(
            self.window_log_message,
            lsp.LogMessageParams(type=kind, message=f"distlint: {message}"),
        )

    def show(self, message: str, kind: lsp.MessageType = lsp.MessageType.Error) -> None:
        self.on_loop(
            self.window_show_message,
            lsp.ShowMessageParams(type=kind, message=f"distlint: {message}"),
        )

    def on_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the event loop (everything sent to the client goes from there)."""
        loop = self.loop
        if loop is None or not loop.is_running():
            fn(*args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def is_open(self, uri: str) -> bool:
        """Only documents the client opened are linted: their text comes from the client. A
        never-opened URI would make pygls read the file from disk (a FIFO blocks forever)."""
        return uri in self.workspace.text_documents

    def document_path(self, uri: str) -> str:
        doc = self.workspace.get_text_document(uri)
        if doc.path and uri.startswith("file:"):
            return doc.path
        # Untitled buffers: lint as a file of that name in the workspace (for its config).
        root = self.workspace.root_path or os.getcwd()
        return os.path.join(root, os.path.basename(doc.path or "untitled.py") or "untitled.py")

    def is_python(self, uri: str) -> bool:
        if not self.is_open(uri):
            return False
        doc = self.workspace.get_text_document(uri)
        if (doc.path or "").endswith(".ipynb"):
            return False  # notebooks: `distlint check` handles them; the server lints plain Python
        return doc.language_id in (None, "python") or (doc.path or "").endswith((".py", ".pyi"))

    def lint(self, uri: str) -> _Lint | None:
        """Lint the document's current text; None when it cannot be linted (logged).

        Blocking (it waits for the worker): called from the executor's threads, never on the
        event loop."""
        if not self.is_python(uri):
            return None
        doc = self.workspace.get_text_document(uri)
        text = doc.source
        cached = self.lints.get(uri) or self._started_lint(uri, text)
        if cached is not None and cached.text == text and uri not in self.stale:
            return cached
        self.stale.discard(uri)
        failed = self.failed.get(uri)
        if failed is not None and failed[0] == text:
            return None  # this exact text crashed or timed out the worker: do not retry it
        path = self.document_path(uri)
        answer = self._worker_lint(uri, text, path)
        if answer is None:
            return None
        status, value, config, changed = answer
        if status == "config_error":
            self._config_error(path, value)
            return None
        if changed:
            # A configuration file changed on disk: every open document may lint differently.
            self.reported_config_errors.clear()
            self.on_loop(self.relint_all, uri)
        result = value
        for error in result.errors:
            self.log(f"{error}", lsp.MessageType.Warning)
        if result.errors and not result.findings:
            return None  # e.g. a syntax error mid-typing: keep the last diagnostics
        entry = _Lint(text, path, config, result)
        self.lints[uri] = entry
        return entry

    def _started_lint(self, uri: str, text: str) -> _Lint | None:
        """The start-up code's lint of ``uri`` when it linted this text as this document's
        path (the worker would repeat it: a reached module may have changed on disk since,
        which is what the watched files and ``stale`` tell, as for any lint kept here)."""
        entry = self.started.get(uri)
        if entry is None:
            return None
        if entry.text != text or entry.path != self.document_path(uri):
            self.started.pop(uri, None)
            return None
        self.lints.setdefault(uri, entry)
        return entry

    def _worker_lint(self, uri: str, text: str, path: str) -> tuple[str, Any, Any, bool] | None:
        """The worker's answer to linting ``text`` as ``path`` (the other open buffers stand in
        for their files when this file's analysis reaches them); None when the worker failed
        (logged, and shown; a text that crashed the worker is not linted again)."""
        buffers = {
            self.document_path(u): d.source
            for u, d in list(self.workspace.text_documents.items())
            if u != uri and self.is_python(u)
        }
        try:
            return self.call("lint", text, path, self.options, buffers)
        except WorkerStartError as exc:  # not this text's fault: no document is marked failed
            self.worker_unavailable(exc)
            return None
        except WorkerError as exc:
            self.failed[uri] = (text, str(exc))
            message = f"{os.path.basename(path)} not linted: {exc}"
            self.log(message, lsp.MessageType.Error)
            self.show(message)
            return None

    def _config_error(self, path: str, error: str) -> None:
        """Log a configuration error that kept ``path`` from being linted; show it to the user
        once, not per keystroke."""
        message = f"configuration error, {os.path.basename(path)} not linted: {error}"
        self.log(message, lsp.MessageType.Error)
        if error not in self.reported_config_errors:
            self.reported_config_errors.add(error)
            self.show(error)

    def call(self, method: str, *args: Any) -> Any:
        """``method(*args)`` in the lint worker (blocking: from the executor's threads). While
        one lint holds it longer than BUSY_SECONDS (a slow document), other documents go to a
        second worker, started then, rather than wait for it."""
        try:
            return self.worker.call(method, *args, timeout=self.lint_timeout, wait=BUSY_SECONDS)
        except WorkerBusy:
            pass
        with self.spare_lock:
            if self.spare is None:
                self.spare = self.worker.spare()
            spare = self.spare
        return spare.call(method, *args, timeout=self.lint_timeout)

    def workers(self) -> list[Worker]:
        return [self.worker] + ([self.spare] if self.spare is not None else [])

    def close_workers(self) -> None:
        for worker in self.workers():
            worker.close()

    def worker_unavailable(self, exc: WorkerStartError) -> None:
        """The lint worker could not start: the user is told (the first time and when it is
        given up on; each attempt in the log), and open documents are linted again when the
        next attempt is due. Requests go on being answered, without findings."""
        message = str(exc)
        if message != self.worker_problem:  # (the start-up code may have told the first)
            first = self.worker_problem is None
            self.worker_problem = message
            self.log(message, lsp.MessageType.Error)
            if first or exc.final:
                self.show(message)
        if exc.retry_in is not None:
            self.on_loop(self._retry_later, exc.retry_in)

    def _retry_later(self, delay: float) -> None:
        if self.retry is None:
            loop = asyncio.get_running_loop()
            self.retry = loop.call_later(delay + 0.05, self._retry_now)

    def _retry_now(self) -> None:
        self.retry = None
        self.relint_all()

    def relint_all(self, except_uri: str | None = None) -> None:
        """On the loop: forget every lint and lint each open document again."""
        self.lints = {u: e for u, e in self.lints.items() if u == except_uri}
        self.started.clear()
        for uri in list(self.workspace.text_documents):
            if uri != except_uri:
                self.schedule(uri, 0)

    def lint_and_publish(self, uri: str, version: int | None = None) -> None:
        """In an executor thread: lint and send the diagnostics (from the loop)."""
        previous = self.lints.get(uri)
        try:
            entry = self.lint(uri)
            if entry is None:
                return
            if previous is not None and previous.text != entry.text:  # this buffer was edited
                self.on_loop(self.lint_dependents, entry.path)
            doc = self.workspace.get_text_document(uri)
            findings = entry.result.findings
            lines = split_lines(entry.text) if findings else []  # (~0.6 ms on 1,000 lines)
            diagnostics = [self.diagnostic(f, lines, doc) for f in findings]
        except Exception as exc:  # a bug must cost this document its diagnostics, not the server
            self.log(
                f"internal error while linting {uri}: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return
        self.on_loop(self.publish, uri, version, entry, diagnostics)

    def publish(self, uri: str, version, entry: _Lint, diagnostics: list) -> None:
        doc = self.workspace.get_text_document(uri) if self.is_open(uri) else None
        if (
            doc is None
            or doc.source != entry.text
            or (version is not None and doc.version != version)
        ):
            return  # the text changed meanwhile: its own lint is on the way
        key = (version, entry.text, entry.result.findings)
        if self.published.get(uri) == key:
            return  # the same diagnostics for the same text were sent already
        self.published[uri] = key
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def lint_dependents(self, path: str) -> None:
        """On the loop: open documents whose last lint reached ``path`` (a module or config
        file that changed in a buffer or on disk) are linted again."""
        others = {u: e.result for u, e in self.lints.items()}
        for dependent in api.dependents(path, others):
            if self.document_path(dependent) != path:
                self.stale.add(dependent)
                self.schedule(dependent, DEBOUNCE_SECONDS)

    def schedule(self, uri: str, delay: float) -> None:
        """On the loop: lint ``uri`` after ``delay`` seconds (the last of rapid changes wins)."""
        self.loop = asyncio.get_running_loop()
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        if delay <= 0:
            self.start_lint(uri)
            return
        self.pending[uri] = self.loop.call_later(delay, self.start_lint, uri)

    def start_lint(self, uri: str) -> None:
        self.pending.pop(uri, None)
        if not self.is_open(uri):
            return
        version = self.workspace.get_text_document(uri).version
        self.executor.submit(self.lint_and_publish, uri, version)

    # ------------------------------------------------------------ conversions
    def position(self, lines: Sequence[str], line: int, column: int, doc) -> lsp.Position:
        """Our 1-based line / 1-based code-point column -> LSP 0-based line / client units."""
        index = line - 1
        if index >= len(lines):
            return lsp.Position(line=len(lines), character=0)
        prefix = lines[index][: column - 1]
        return lsp.Position(line=index, character=doc.position_codec.client_num_units(prefix))

    def lsp_range(self, finding: Finding, lines: Sequence[str], doc) -> lsp.Range:
        rng = finding.range
        return lsp.Range(
            start=self.position(lines, rng.line, rng.column, doc),
            end=self.position(lines, rng.end_line, rng.end_column, doc),
        )

    def diagnostic(self, finding: Finding, lines: Sequence[str], doc) -> lsp.Diagnostic:
        url = self.rules().get(finding.code, ("", None))[1]
        return lsp.Diagnostic(
            range=self.lsp_range(finding, lines, doc),
            severity=_SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Error),
            code=finding.code,
            code_description=lsp.CodeDescription(href=url) if url else None,
            source=SOURCE,
            message=finding.message,
            data={"fix": finding.fix.applicability.value if finding.fix else None},
        )

    def text_edit(self, uri: str, old: str, new: str) -> lsp.WorkspaceEdit:
        """One edit replacing the changed lines of ``old`` by those of ``new``."""
        doc = self.workspace.get_text_document(uri)
        a, b = split_lines(old), split_lines(new)
        start = 0
        while start < min(len(a), len(b)) and a[start] == b[start]:
            start += 1
        end_a, end_b = len(a), len(b)
        while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
            end_a -= 1
            end_b -= 1
        if end_a == len(a) and a and not a[-1].endswith(("\n", "\r")):
            # the change reaches the last line, which has no line ending: end at its last character
            end = lsp.Position(
                line=len(a) - 1, character=doc.position_codec.client_num_units(a[-1])
            )
        else:
            end = lsp.Position(line=end_a, character=0)
        rng = lsp.Range(start=lsp.Position(line=start, character=0), end=end)
        edit = lsp.TextEdit(range=rng, new_text="".join(b[start:end_b]))
        return self.workspace_edit(uri, [edit])

    def workspace_edit(self, uri: str, edits: Sequence[lsp.TextEdit]) -> lsp.WorkspaceEdit:
        doc = self.workspace.get_text_document(uri)
        caps = self.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            ident = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=doc.version)
            return lsp.WorkspaceEdit(
                document_changes=[lsp.TextDocumentEdit(text_document=ident, edits=list(edits))]
            )
        return lsp.WorkspaceEdit(changes={uri: list(edits)})

    def edits_of(self, uri: str, lines: Sequence[str], edits: Sequence[Edit]) -> lsp.WorkspaceEdit:
        """A finding's own edits (computed by the lint, nothing re-linted) as an LSP edit."""
        doc = self.workspace.get_text_document(uri)
        text_edits = [
            lsp.TextEdit(
                range=lsp.Range(
                    start=self.position(lines, e.range.line, e.range.column, doc),
                    end=self.position(lines, e.range.end_line, e.range.end_column, doc),
                ),
                new_text=e.content,
            )
            for e in merged(edits)
        ]
        return self.workspace_edit(uri, text_edits)

    # ------------------------------------------------------------ code actions
    def rules(self) -> dict[str, tuple[str, str | None]]:
        """Each rule's documentation and URL, asked once from the worker (the server process
        never imports the rules, nor LibCST)."""
        if self.rule_info is None:
            try:
                self.rule_info = self.call("rules")
            except WorkerError:
                return {}  # no worker (reported by the lints): no docs yet, asked again later
        return self.rule_info

    def fixed_text(self, entry: _Lint) -> str:
        """Fix-all: the lint's edits applied, verified by one lint of the result (more rounds
        only when that lint finds fixes the first round uncovered), in the worker."""
        if "all" not in entry.fixed:
            entry.fixed["all"] = self.call(
                "fix", entry.text, entry.path, entry.config, entry.result
            )
        return entry.fixed["all"]

    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        entry = self.lint(uri)
        if entry is None:
            return []
        only = params.context.only
        want_quickfix = _wanted(only, lsp.CodeActionKind.QuickFix)
        want_fix_all = _wanted(only, FIX_ALL_KIND)
        doc = self.workspace.get_text_document(uri)
        lines = split_lines(entry.text)
        actions: list[lsp.CodeAction] = []
        if want_quickfix:
            for finding in entry.result.findings:
                rng = self.lsp_range(finding, lines, doc)
                if not _overlaps(rng, params.range):
                    continue
                diag = self.diagnostic(finding, lines, doc)
                if finding.fix is not None and finding.fix.edits:
                    unsafe = finding.fix.applicability is Applicability.UNSAFE
                    title = f"{finding.code}: {finding.fix.title}" + (
                        " (unsafe fix)" if unsafe else ""
                    )
                    actions.append(
                        lsp.CodeAction(
                            title=title,
                            kind=lsp.CodeActionKind.QuickFix,
                            diagnostics=[diag],
                            is_preferred=not unsafe,
                            edit=self.edits_of(uri, lines, finding.fix.edits),
                        )
                    )
                if finding.suppression is not None:
                    actions.append(
                        lsp.CodeAction(
                            title=f"{finding.code}: suppress with `# noqa: {finding.code}`",
                            kind=lsp.CodeActionKind.QuickFix,
                            diagnostics=[diag],
                            edit=self.edits_of(uri, lines, [finding.suppression]),
                        )
                    )
        # Light-bulb requests (no `only`) get fix-all only when something is fixable; editors ask
        # for it by kind on save (`source.fixAll`) or from the source-action menu.
        if want_fix_all and (only or any(f.fix for f in entry.result.findings)):
            new = self.fixed_text(entry)
            if new != entry.text:
                included = " (unsafe included)" if entry.config.unsafe_fixes else ""
                actions.append(
                    lsp.CodeAction(
                        title=f"distlint: fix all{included}",
                        kind=FIX_ALL_KIND,
                        edit=self.text_edit(uri, entry.text, new),
                    )
                )
        return actions

    def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        """The rule docs of the findings under the cursor, from the document's last lint (never
        a file the client did not open)."""
        uri = params.text_document.uri
        entry = self.lints.get(uri)
        if entry is None or not self.is_open(uri):
            return None
        doc = self.workspace.get_text_document(uri)
        lines = split_lines(entry.text)
        pos = params.position
        parts = []
        for finding in entry.result.findings:
            rng = self.lsp_range(finding, lines, doc)
            if _overlaps(rng, lsp.Range(start=pos, end=pos)):
                docs = self.rules().get(finding.code, ("", None))[0]
                parts.append(f"**{finding.code}** {finding.message}\n\n" + docs)
        if not parts:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)
            )
        )

    def configuration_changed(self) -> None:
        """A configuration file changed: forget cached configs and lint every open document."""
        self.reported_config_errors.clear()
        self.executor.submit(self._reset_and_relint)

    def _reset_and_relint(self) -> None:
        for worker in self.workers():
            try:
                worker.call("reset_config", timeout=self.lint_timeout)
            except WorkerError:
                pass  # a restarted worker starts with fresh caches anyway
        self.on_loop(self.relint_all)


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Code action kinds are hierarchical: asking for `source.fixAll` includes ours."""
    if not only:
        return True
    return any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    start_a, end_a = (a.start.line, a.start.character), (a.end.line, a.end.character)
    start_b, end_b = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return start_a <= end_b and start_b <= end_a


_options_from = options_from


def create_server(worker: Worker | None = None) -> DistlintServer:
    server = DistlintServer(worker)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: DistlintServer, params: lsp.InitializeParams) -> None:
        ls.options = _options_from(params.initialization_options)
        # The worker works in the workspace: relative paths and a file without configuration
        # read as on the command line there (it never imports from it).
        folders = [{"uri": f.uri} for f in params.workspace_folders or ()]
        root = workspace_root(
            {"rootUri": params.root_uri, "rootPath": params.root_path, "workspaceFolders": folders}
        )
        if root is not None:
            for worker in ls.workers():
                worker.root = root
        init = params.initialization_options
        if isinstance(init, dict) and isinstance(init.get("lintTimeout"), (int, float)):
            ls.lint_timeout = max(0.1, float(init["lintTimeout"]))

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: DistlintServer, params: lsp.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        ls.executor.submit(ls.rules)  # fetch the rule docs while the user reads
        caps = ls.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched and watched.dynamic_registration:
            watchers = [
                lsp.FileSystemWatcher(glob_pattern=f"**/{name}")
                for name in CONFIG_FILE_NAMES + DEPENDENCY_GLOBS
            ]
            ls.client_register_capability(
                lsp.RegistrationParams(
                    registrations=[
                        lsp.Registration(
                            id="distlint-config-watch",
                            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                                watchers=watchers
                            ),
                        )
                    ]
                )
            )

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DistlintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.failed.pop(params.text_document.uri, None)
        ls.schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DistlintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, DEBOUNCE_SECONDS)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: DistlintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        if os.path.basename(params.text_document.uri) in CONFIG_FILE_NAMES:
            ls.configuration_changed()
        else:
            ls.schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DistlintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        handle = ls.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        ls.lints.pop(uri, None)
        ls.started.pop(uri, None)
        ls.failed.pop(uri, None)
        ls.published.pop(uri, None)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: DistlintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        paths = [lsp_uri_path(change.uri) for change in params.changes]
        if any(os.path.basename(p) in CONFIG_FILE_NAMES for p in paths) or not paths:
            ls.configuration_changed()
            return
        for path in paths:  # a project module or config file changed on disk
            ls.lint_dependents(path)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    async def code_action(
        ls: DistlintServer, params: lsp.CodeActionParams
    ) -> list[lsp.CodeAction] | None:
        ls.loop = asyncio.get_running_loop()
        if not ls.is_open(params.text_document.uri):
            return None
        try:
            return await ls.loop.run_in_executor(ls.executor, ls.code_actions, params) or None
        except Exception as exc:
            ls.log(
                f"internal error computing code actions: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return None

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: DistlintServer, params: lsp.HoverParams) -> lsp.Hover | None:
        ls.loop = asyncio.get_running_loop()
        try:
            uri = params.text_document.uri
            if not ls.is_open(uri):
                return None  # nothing to say (and no reason to wait for the worker)
            if ls.rule_info is None:  # the docs are fetched once, off the loop
                await ls.loop.run_in_executor(ls.executor, ls.rules)
            if uri not in ls.lints and ls.is_python(uri):
                # The first diagnostics may come from the fast start before this server's own
                # lint lands: the user hovers what they see, so that lint is awaited (off the
                # loop; ls.lint returns the entry once it is there).
                await ls.loop.run_in_executor(ls.executor, ls.lint, uri)
            return ls.hover(params)
        except Exception as exc:
            ls.log(
                f"internal error computing hover: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: DistlintServer, params: Any) -> None:
        ls.close_workers()

    @server.feature(lsp.EXIT)
    def exit_(ls: DistlintServer, params: Any) -> None:
        # The specification: exit 0 after a shutdown request, 1 without one. (pygls computes
        # the same code but start_io swallows its SystemExit, so the process always exited 0.)
        ls.exit_code = 0 if ls.protocol._shutdown else 1

    @server.command(IMPORTED_MODULES_COMMAND)
    async def imported_modules(ls: DistlintServer, *args: Any) -> list[str]:
        """Top-level modules loaded in the server and its lint worker (tests check that torch
        never is)."""
        here = {name.split(".")[0] for name in list(sys.modules)}
        loop = asyncio.get_running_loop()
        worker = await loop.run_in_executor(
            ls.executor, lambda: ls.worker.call("modules", timeout=ls.lint_timeout)
        )
        return sorted(here | set(worker))

    return server


def serve(
    worker: Worker | None = None,
    stdin=None,
    stdout=None,
    published=None,
    worker_problem=None,
    linted=None,
) -> None:
    """Run the server over stdio (``stdin`` / ``stdout``, what was ``published`` and the
    ``worker_problem`` told already, and the lints behind what was published, uri -> (text,
    path, config, result): see :mod:`distlint.lsp_start`)."""
    server = create_server(worker)
    server.published.update(published or {})
    for uri, (text, path, config, result) in (linted or {}).items():
        server.started[uri] = _Lint(text, path, config, result)
    server.worker_problem = worker_problem
    if hasattr(stdin, "on_error"):  # a malformed message ends the session: tell the user why
        stdin.on_error = server.show
    try:
        server.start_io(stdin, stdout)
    finally:
        server.close_workers()
        server.executor.shutdown(wait=False, cancel_futures=True)
    # pygls returns on `exit` and on end of input alike: exit 1 unless `shutdown` came first.
    code = server.exit_code
    if code is None:
        code = 0 if server.protocol._shutdown else 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(code)
