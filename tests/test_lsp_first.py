"""The language server's first diagnostics (issue 32): what lies on the way from an editor's
`didOpen` to the first `publishDiagnostics`, and what does not have to."""

from __future__ import annotations

import io
import json

import pytest

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


@pytest.mark.asyncio
async def test_the_server_takes_over_the_lint_behind_the_first_diagnostics(tmp_path):
    """The start-up code's lint is handed to the pygls server with what it published: the
    replayed didOpen and the user's first hover do not lint the same text again (the worker
    repeated it twice, ~2 lints before the first hover or edit was answered)."""
    import asyncio

    pytest.importorskip("pygls")
    from distlint import api
    from distlint.lsp import _Lint, create_server

    path = tmp_path / "train.py"
    text = "import torch\ntorch.manual_seed(0)\n"
    result = api.lint_document(text, str(path), api.config_for(str(path)))
    worker = _RecordingWorker()
    server = create_server(worker)  # type: ignore[arg-type]
    uri = path.as_uri()
    server.started[uri] = _Lint(text, str(path), None, result)
    server.published[uri] = (1, text, result.findings)  # (as serve() hands them over)
    protocol = server.protocol
    sent: list[bytes] = []
    protocol.set_writer(type("Sink", (), {"write": lambda self, data: sent.append(data)})())

    def send(message: dict) -> None:
        protocol.handle_message(
            json.loads(json.dumps(message), object_hook=protocol.structure_message)
        )

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
    hover = {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 0}}
    send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": hover})
    for _ in range(200):
        await asyncio.sleep(0.01)
        if any(b'"id": 2' in data or b'"id":2' in data for data in sent):
            break
    assert "lint" not in worker.calls
    assert server.lints[uri].result is result
    assert not [d for d in sent if b"publishDiagnostics" in d]  # (sent already)
    # an edit is linted by the worker as before
    change = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": text + "\n"}]}
    send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change})
    for _ in range(200):
        await asyncio.sleep(0.01)
        if "lint" in worker.calls:
            break
    assert worker.calls.count("lint") == 1
    for handle in server.pending.values():
        handle.cancel()
    server.executor.shutdown(wait=True)


def test_the_engine_warms_up_unless_told_a_request_is_waiting():
    from distlint import runner
    from distlint.lsp_worker import _Engine

    before = dict(runner.PASSES)
    _Engine(warm_up=False)
    assert runner.PASSES == before
    _Engine()  # (idle before its first request: the warm-up lint loads the lazy parts)
    assert runner.PASSES["parse"] == before.get("parse", 0) + 1


def test_only_a_request_the_pipe_holds_whole_is_sent_before_the_worker_is_ready():
    """A worker that hangs while it starts must not block the server's write (the start's
    time limit applies): a long request (a document's text) waits until the worker is ready."""
    from distlint.lsp_worker import EARLY_MESSAGE_BYTES, Worker

    class Proc:
        stdin = io.BytesIO()

    small, large = b"x" * 100, b"x" * (EARLY_MESSAGE_BYTES + 1)
    assert Worker._send_early(Proc, small) == b""  # type: ignore[arg-type]
    assert Worker._send_early(Proc, large) == large  # type: ignore[arg-type]
    assert Proc.stdin.getvalue() == small


def test_a_lint_without_findings_publishes_without_splitting_the_text(tmp_path, monkeypatch):
    """The lines are for the findings' positions (~0.6 ms a re-lint of 1,000 lines)."""
    from distlint import lsp_start

    split: list[str] = []
    monkeypatch.setattr(lsp_start, "split_lines", lambda text: split.append(text) or [])
    out = io.BytesIO()
    _open(_Start(_RecordingWorker(), out, "0"), (tmp_path / "train.py").as_uri(), "x = 1\n")
    assert [m["params"]["diagnostics"] for m in _messages(out) if "params" in m] == [[]]
    assert split == []
