"""The language server's first diagnostics (issue 32): what lies on the way from an editor's
`didOpen` to the first `publishDiagnostics`, and what does not have to."""

from __future__ import annotations

import io
import json

from distlint.lsp_start import _Start


class _Result:
    errors = ()
    findings = ()


class _RecordingWorker:
    """Answers like the lint worker and records the order of the calls."""

    root = None

    def __init__(self) -> None:
        self.calls: list[str] = []

    def call(self, method, *args, **kwargs):
        self.calls.append(method)
        if method == "rules":
            return {"DL101": ("docs", "https://example.org/DL101")}
        return ("ok", _Result(), None, False)


def _open(start: _Start, uri: str, text: str) -> None:
    init = {"processId": None, "rootUri": None, "capabilities": {}}
    assert start.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    assert start.handle(
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}
    )


def _messages(out: io.BytesIO) -> list[dict]:
    raw, found = out.getvalue(), []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        length = int(head.split(b":")[1])
        found.append(json.loads(rest[:length]))
        raw = rest[length:]
    return found


def test_the_rules_links_are_asked_before_the_first_lint_not_after_it(tmp_path):
    """After a lint the worker prepares the buffer's next edit before it reads another
    request (lsp_worker.main): the links asked after the first lint waited for that, on the
    way to the first diagnostics."""
    worker = _RecordingWorker()
    out = io.BytesIO()
    start = _Start(worker, out, "0")
    _open(start, (tmp_path / "train.py").as_uri(), "import torch\n")
    assert worker.calls == ["rules", "lint"]
    published = [m for m in _messages(out) if m.get("method") == "textDocument/publishDiagnostics"]
    assert len(published) == 1
    _open_again = {"uri": (tmp_path / "eval.py").as_uri(), "text": "x = 1\n", "version": 1}
    start.lint_and_publish(_open_again)
    assert worker.calls == ["rules", "lint", "lint"]  # (the links are asked once)
