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
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from distlint import __version__, api
from distlint.config import ConfigError
from distlint.edits import merged
from distlint.model import Applicability, Edit, FileResult, Finding, Severity

SOURCE = "distlint"
FIX_ALL_KIND = "source.fixAll.distlint"
DEBOUNCE_SECONDS = 0.15
CONFIG_FILE_NAMES = ("pyproject.toml", "distlint.toml", ".distlint.toml")
IMPORTED_MODULES_COMMAND = "distlint.importedModules"

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
}


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where LSP (and LibCST) split: \\r\\n, \\r, \\n."""
    return _LINE_RE.findall(text)


@dataclass
class _Lint:
    """The last lint of one document text: code actions reuse its findings and fix ids."""

    text: str
    path: str
    config: Any  # distlint.config.Config
    result: FileResult
    fixed: dict[Any, str] = field(default_factory=dict)  # fix key -> fixed text, for this text


class DistlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "distlint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental
        )
        self.options = api.LintOptions()
        self.lints: dict[str, _Lint] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.reported_config_errors: set = set()

    # ------------------------------------------------------------------ helpers
    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.window_log_message(lsp.LogMessageParams(type=kind, message=f"distlint: {message}"))

    def document_path(self, uri: str) -> str:
        doc = self.workspace.get_text_document(uri)
        if doc.path and uri.startswith("file:"):
            return doc.path
        # Untitled buffers: lint as a file of that name in the workspace (for its config).
        root = self.workspace.root_path or os.getcwd()
        return os.path.join(root, os.path.basename(doc.path or "untitled.py") or "untitled.py")

    def is_python(self, uri: str) -> bool:
        doc = self.workspace.get_text_document(uri)
        if (doc.path or "").endswith(".ipynb"):
            return False  # notebooks: `distlint check` handles them; the server lints plain Python
        return doc.language_id in (None, "python") or (doc.path or "").endswith((".py", ".pyi"))

    def lint(self, uri: str) -> _Lint | None:
        """Lint the document's current text; None when it cannot be linted (logged)."""
        if not self.is_python(uri):
            return None
        doc = self.workspace.get_text_document(uri)
        text = doc.source
        cached = self.lints.get(uri)
        if cached is not None and cached.text == text:
            return cached
        path = self.document_path(uri)
        try:
            config = api.config_for(path, self.options)
        except ConfigError as exc:
            message = f"configuration error, {os.path.basename(path)} not linted: {exc}"
            self.log(message, lsp.MessageType.Error)
            if str(exc) not in self.reported_config_errors:  # tell the user once, not per keystroke
                self.reported_config_errors.add(str(exc))
                self.window_show_message(
                    lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"distlint: {exc}")
                )
            return None
        result = api.lint_source(text, path, config)
        for error in result.errors:
            self.log(f"{error}", lsp.MessageType.Warning)
        if result.errors and not result.findings:
            return None  # e.g. a syntax error mid-typing: keep the last diagnostics
        entry = _Lint(text, path, config, result)
        self.lints[uri] = entry
        return entry

    def lint_and_publish(self, uri: str) -> None:
        self.pending.pop(uri, None)
        try:
            entry = self.lint(uri)
        except Exception as exc:  # a bug must cost this document its diagnostics, not the server
            self.log(
                f"internal error while linting {uri}: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return
        if entry is None:
            return
        doc = self.workspace.get_text_document(uri)
        lines = split_lines(entry.text)
        diagnostics = [self.diagnostic(f, lines, doc) for f in entry.result.findings]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=doc.version)
        )

    def schedule(self, uri: str, delay: float) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        if delay <= 0:
            self.lint_and_publish(uri)
            return
        self.pending[uri] = asyncio.get_running_loop().call_later(delay, self.lint_and_publish, uri)

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
        from distlint.registry import by_code

        rule = by_code().get(finding.code)
        url = getattr(rule, "URL", None)
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
    def fixed_text(self, entry: _Lint) -> str:
        """Fix-all: the lint's edits applied, verified by one lint of the result (more rounds
        only when that lint finds fixes the first round uncovered)."""
        if "all" not in entry.fixed:
            entry.fixed["all"] = api.fix_source(
                entry.text, entry.path, entry.config, prior=entry.result
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
                unsafe = " (unsafe included)" if entry.config.unsafe_fixes else ""
                actions.append(
                    lsp.CodeAction(
                        title=f"distlint: fix all{unsafe}",
                        kind=FIX_ALL_KIND,
                        edit=self.text_edit(uri, entry.text, new),
                    )
                )
        return actions

    def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        from distlint.registry import by_code

        uri = params.text_document.uri
        entry = self.lint(uri)
        if entry is None:
            return None
        doc = self.workspace.get_text_document(uri)
        lines = split_lines(entry.text)
        pos = params.position
        parts = []
        for finding in entry.result.findings:
            rng = self.lsp_range(finding, lines, doc)
            if _overlaps(rng, lsp.Range(start=pos, end=pos)):
                rule = by_code().get(finding.code)
                parts.append(
                    f"**{finding.code}** {finding.message}\n\n" + (rule.docs() if rule else "")
                )
        if not parts:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)
            )
        )

    def configuration_changed(self) -> None:
        """A configuration file changed: forget cached configs and lint every open document."""
        from distlint import config as config_mod

        for cached in (
            getattr(config_mod, "_find_from_dir", None),
            getattr(config_mod, "load_config_file", None),
        ):
            if cached is not None and hasattr(cached, "cache_clear"):
                cached.cache_clear()
        self.lints.clear()
        self.reported_config_errors.clear()
        for uri in list(self.workspace.text_documents):
            self.schedule(uri, 0)


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Code action kinds are hierarchical: asking for `source.fixAll` includes ours."""
    if not only:
        return True
    return any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    start_a, end_a = (a.start.line, a.start.character), (a.end.line, a.end.character)
    start_b, end_b = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return start_a <= end_b and start_b <= end_a


def _options_from(init: Any) -> api.LintOptions:
    if not isinstance(init, dict):
        return api.LintOptions()

    def codes(key: str) -> tuple[str, ...] | None:
        value = init.get(key)
        return tuple(str(v).upper() for v in value) if isinstance(value, list) else None

    unsafe = init.get("unsafeFixes")
    config = init.get("config")
    return api.LintOptions(
        select=codes("select"),
        ignore=codes("ignore"),
        extend_select=codes("extendSelect"),
        unsafe_fixes=unsafe if isinstance(unsafe, bool) else None,
        config_path=config if isinstance(config, str) and config else None,
        isolated=init.get("isolated") is True,
    )


def create_server() -> DistlintServer:
    server = DistlintServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: DistlintServer, params: lsp.InitializeParams) -> None:
        ls.options = _options_from(params.initialization_options)

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: DistlintServer, params: lsp.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched and watched.dynamic_registration:
            watchers = [
                lsp.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILE_NAMES
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
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: DistlintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        ls.configuration_changed()

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    def code_action(
        ls: DistlintServer, params: lsp.CodeActionParams
    ) -> list[lsp.CodeAction] | None:
        try:
            return ls.code_actions(params) or None
        except Exception as exc:
            ls.log(
                f"internal error computing code actions: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return None

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: DistlintServer, params: lsp.HoverParams) -> lsp.Hover | None:
        try:
            return ls.hover(params)
        except Exception as exc:
            ls.log(
                f"internal error computing hover: {type(exc).__name__}: {exc}",
                lsp.MessageType.Error,
            )
            return None

    @server.command(IMPORTED_MODULES_COMMAND)
    def imported_modules(ls: DistlintServer, *args: Any) -> list[str]:
        """Top-level modules loaded in the server (tests check torch never is)."""
        return sorted({name.split(".")[0] for name in list(sys.modules)})

    return server


def serve() -> None:
    create_server().start_io()
