"""The language server, driven as editors drive it: the real `distlint lsp` process over stdio,
a real LSP client (pytest-lsp), and the results compared with the CLI's own output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the lsp extra is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types as lsp  # noqa: E402

from distlint.lsp import FIX_ALL_KIND, IMPORTED_MODULES_COMMAND, split_lines  # noqa: E402

SERVER = [sys.executable, "-m", "distlint", "lsp"]
TIMEOUT = 30

# An Accelerate script: the hand-written torch seeding has a SAFE fix (accelerate is imported).
SAFE_SCRIPT = '''\
"""Train a tiny model with Accelerate."""
import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main(seed=42, batch_size=16):
    accelerator = Accelerator()
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    features = torch.randn(256, 8)
    order = np.random.permutation(len(features))
    loader = DataLoader(TensorDataset(features[order], torch.randn(256, 1)), batch_size=batch_size, shuffle=True)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * accelerator.num_processes)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
'''

# Plain torch: the fix adds a dependency on accelerate, so it is UNSAFE.
UNSAFE_SCRIPT = """\
import random

import torch

torch.manual_seed(0)
data = list(range(10))
random.shuffle(data)
"""

# The seeding call sits after non-ASCII text on its line: an emoji is 1 code point (our
# columns) but 2 UTF-16 code units (LSP's default position encoding).
EMOJI_SCRIPT = UNSAFE_SCRIPT.replace(
    "torch.manual_seed(0)", 'label = "caf\u00e9 \U0001f600"; torch.manual_seed(0)'
)


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


class Session:
    """One server process and a client talking to it."""

    def __init__(self, client, workspace: Path):
        self.client = client
        self.workspace = workspace
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

    async def open(self, path: Path, text: str | None = None) -> str:
        uri = _uri(path)
        text = path.read_text() if text is None else text
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.diagnostics.pop(uri, None)
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return uri

    async def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(
                    uri=uri, version=self.versions[uri]
                ),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def diagnostics(self, uri: str) -> list[lsp.Diagnostic]:
        """Wait for the next diagnostics of ``uri``."""

        async def wait():
            while uri not in self.client.diagnostics:
                await self.client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            return self.client.diagnostics.pop(uri)

        return await asyncio.wait_for(wait(), TIMEOUT)

    async def code_actions(
        self, uri: str, rng: lsp.Range, diagnostics=(), only=None
    ) -> list[lsp.CodeAction]:
        result = await asyncio.wait_for(
            self.client.text_document_code_action_async(
                lsp.CodeActionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    range=rng,
                    context=lsp.CodeActionContext(diagnostics=list(diagnostics), only=only),
                )
            ),
            TIMEOUT,
        )
        return list(result or [])


def apply_edit(text: str, uri: str, edit: lsp.WorkspaceEdit) -> str:
    """Apply a WorkspaceEdit as an editor would (positions in UTF-16 code units)."""
    edits: list[lsp.TextEdit] = []
    if edit.document_changes:
        for change in edit.document_changes:
            assert change.text_document.uri == uri
            edits.extend(change.edits)
    else:
        edits.extend(edit.changes[uri])
    lines = split_lines(text)

    def offset(pos: lsp.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        line = lines[pos.line]
        units = 0
        for i, ch in enumerate(line):
            if units >= pos.character:
                return sum(map(len, lines[: pos.line])) + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return sum(map(len, lines[: pos.line])) + len(line.rstrip("\r\n"))

    for e in sorted(
        edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
    ):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distlint", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextlib.asynccontextmanager
async def session(workspace: Path, init_options=None, server=SERVER):
    client = pytest_lsp.make_test_lsp_client()
    client.registrations = []

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register(params: lsp.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    await client.start_io(*server, cwd=str(workspace))
    try:
        await asyncio.wait_for(
            client.initialize_session(
                lsp.InitializeParams(
                    capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
                    root_uri=_uri(workspace),
                    initialization_options=init_options,
                )
            ),
            TIMEOUT,
        )
        yield Session(client, workspace)
    finally:
        # Always end the server, also when the test failed (a live server would hang the run).
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        server = getattr(client, "_server", None)
        if server is not None and server.returncode is None:
            server.kill()
        await client.stop()


def whole(text: str) -> lsp.Range:
    return lsp.Range(
        start=lsp.Position(line=0, character=0),
        end=lsp.Position(line=len(split_lines(text)), character=0),
    )


@pytest.mark.asyncio
async def test_diagnostics_match_the_cli_and_fix_all_matches_distlint_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    expected = json.loads(cli("check", "--format", "json", "train.py", cwd=tmp_path).stdout)
    expected = expected["findings"] if isinstance(expected, dict) else expected
    assert any(f["code"] == "DL101" for f in expected)

    async with session(tmp_path) as s:
        uri = await s.open(script)
        diags = await s.diagnostics(uri)
        got = sorted(
            (
                d.range.start.line + 1,
                d.range.start.character + 1,
                d.range.end.line + 1,
                d.range.end.character + 1,
                d.code,
                d.message,
            )
            for d in diags
        )
        want = sorted(
            (f["line"], f["column"], f["end_line"], f["end_column"], f["code"], f["message"])
            for f in expected
        )
        assert got == want  # ASCII text: LSP columns are our columns minus one
        assert all(d.source == "distlint" and d.severity is not None for d in diags)

        actions = await s.code_actions(uri, whole(SAFE_SCRIPT), only=["source.fixAll"])
        assert [a.kind for a in actions] == [FIX_ALL_KIND]
        fixed = apply_edit(SAFE_SCRIPT, uri, actions[0].edit)

    assert cli("fix", "train.py", cwd=tmp_path).returncode in (0, 1)
    assert fixed == script.read_text() != SAFE_SCRIPT
    assert "set_seed(seed)" in fixed and "manual_seed" not in fixed


@pytest.mark.asyncio
async def test_quick_fix_and_noqa_for_one_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        diags = await s.diagnostics(uri)
        [seed] = [d for d in diags if d.code == "DL101"]
        assert seed.range.start.line == SAFE_SCRIPT.splitlines().index(
            "    torch.manual_seed(seed)"
        )

        actions = await s.code_actions(uri, seed.range, [seed])
        quick = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix]
        [fix] = [a for a in quick if "set_seed" in a.title]
        assert fix.title.startswith("DL101:") and "unsafe" not in fix.title and fix.is_preferred
        [noqa] = [a for a in quick if "noqa" in a.title]

        fixed = apply_edit(SAFE_SCRIPT, uri, fix.edit)
        assert "torch.manual_seed" not in fixed and "torch.cuda.manual_seed_all" not in fixed
        assert "from accelerate.utils import set_seed" in fixed and "    set_seed(seed)\n" in fixed
        await s.change(uri, fixed)
        assert not [d for d in await s.diagnostics(uri) if d.code == "DL101"]

        suppressed = apply_edit(SAFE_SCRIPT, uri, noqa.edit)
        line = suppressed.splitlines()[seed.range.start.line]
        assert line == "    torch.manual_seed(seed)  # noqa: DL101"
        untouched = [
            line for line in SAFE_SCRIPT.splitlines() if line.strip() != "torch.manual_seed(seed)"
        ]
        assert [line for line in suppressed.splitlines() if "noqa" not in line] == untouched
        await s.change(uri, suppressed)
        assert not [d for d in await s.diagnostics(uri) if d.code == "DL101"]


@pytest.mark.asyncio
async def test_unsafe_fix_is_marked_in_the_title(tmp_path):
    script = tmp_path / "seed.py"
    script.write_text(UNSAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        [diag] = [d for d in await s.diagnostics(uri) if d.code == "DL101"]
        actions = await s.code_actions(uri, diag.range, [diag])
        [fix] = [a for a in actions if "set_seed" in a.title]
        assert fix.title.endswith("(unsafe fix)") and not fix.is_preferred
        fixed = apply_edit(UNSAFE_SCRIPT, uri, fix.edit)
        assert "\nset_seed(0)\n" in fixed and "from accelerate.utils import set_seed" in fixed
        # Without unsafe-fixes configured, fix-all has nothing to do (the only fix is unsafe).
        assert await s.code_actions(uri, whole(UNSAFE_SCRIPT), only=[FIX_ALL_KIND]) == []


@pytest.mark.asyncio
async def test_positions_are_utf16_code_units(tmp_path):
    script = tmp_path / "seed.py"
    script.write_text(EMOJI_SCRIPT, encoding="utf-8")
    async with session(tmp_path) as s:
        uri = await s.open(script)
        [diag] = [d for d in await s.diagnostics(uri) if d.code == "DL101"]
        line = EMOJI_SCRIPT.splitlines()[4]
        prefix = line[: line.index("torch.manual_seed")]
        assert diag.range.start == lsp.Position(
            line=4, character=len(prefix.encode("utf-16-le")) // 2
        )
        assert diag.range.start.character == len(prefix) + 1  # the emoji counts twice
        assert diag.range.end.character == diag.range.start.character + len("torch.manual_seed(0)")
        # The noqa edit lands on the right line, after the non-ASCII text.
        [noqa] = [a for a in await s.code_actions(uri, diag.range, [diag]) if "noqa" in a.title]
        assert apply_edit(EMOJI_SCRIPT, uri, noqa.edit).splitlines()[4] == line + "  # noqa: DL101"


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["distlint.toml", "initializationOptions"])
async def test_fix_all_applies_unsafe_fixes_when_configured(tmp_path, where):
    init = None
    if where == "distlint.toml":
        (tmp_path / "distlint.toml").write_text("unsafe-fixes = true\n")
    else:
        init = {"unsafeFixes": True}
    script = tmp_path / "seed.py"
    script.write_text(UNSAFE_SCRIPT)
    async with session(tmp_path, init) as s:
        uri = await s.open(script)
        await s.diagnostics(uri)
        [action] = await s.code_actions(uri, whole(UNSAFE_SCRIPT), only=["source.fixAll"])
        fixed = apply_edit(UNSAFE_SCRIPT, uri, action.edit)
    flags = () if init is None else ("--unsafe-fixes",)
    assert cli("fix", *flags, "seed.py", cwd=tmp_path).returncode in (0, 1)
    assert fixed == script.read_text() != UNSAFE_SCRIPT
    assert "set_seed(0)" in fixed


@pytest.mark.asyncio
async def test_unparsable_text_keeps_the_server_alive_without_new_diagnostics(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        first = await s.diagnostics(uri)
        assert first
        broken = SAFE_SCRIPT.replace(
            "    model = torch.nn.Linear(8, 1)\n", "    model = torch.nn.Linear(8,\n"
        )
        await s.change(uri, broken)
        await asyncio.sleep(1.0)  # well past the debounce
        assert uri not in s.client.diagnostics, "a syntax error must not replace the diagnostics"
        assert any("syntax error" in m.message for m in s.client.log_messages)
        assert await s.code_actions(uri, whole(broken)) == []
        # Typing goes on: the next parsable text is linted again.
        await s.change(uri, SAFE_SCRIPT.replace("seed)", "seed )", 1))
        assert [d.code for d in await s.diagnostics(uri)] == [d.code for d in first]


@pytest.mark.asyncio
async def test_debounce_lints_only_the_last_of_rapid_changes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        await s.diagnostics(uri)
        for i in range(5):
            await s.change(uri, SAFE_SCRIPT + "\n" * (i + 1))
        published = []
        while True:
            try:
                published.append(await asyncio.wait_for(s.diagnostics(uri), 1.5))
            except asyncio.TimeoutError:
                break
        assert len(published) == 1


@pytest.mark.asyncio
async def test_bad_config_is_logged_and_does_not_crash(tmp_path):
    config = tmp_path / "distlint.toml"
    config.write_text('select = ["DL101"\n')  # invalid TOML
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)

        def logged():
            return any(
                "distlint.toml" in m.message and m.type == lsp.MessageType.Error
                for m in s.client.log_messages
            )

        for _ in range(TIMEOUT * 10):
            if logged():
                break
            await asyncio.sleep(0.1)
        assert logged(), [(m.type, m.message) for m in s.client.log_messages]
        assert uri not in s.client.diagnostics
        hover = await s.client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=9, character=6),
            )
        )
        assert hover is None

        config.write_text('select = ["DL1"]\n')
        s.client.workspace_did_change_watched_files(
            lsp.DidChangeWatchedFilesParams(
                changes=[lsp.FileEvent(uri=_uri(config), type=lsp.FileChangeType.Changed)]
            )
        )
        assert [d.code for d in await s.diagnostics(uri)] == ["DL101"]


@pytest.mark.asyncio
async def test_hover_shows_the_rule_docs(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        [seed] = [d for d in await s.diagnostics(uri) if d.code == "DL101"]
        hover = await s.client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), position=seed.range.start
            )
        )
        text = hover.contents.value
        assert "seed-only-torch (DL101)" in text and "## Why is this bad?" in text
        nothing = await s.client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=0, character=0),
            )
        )
        assert nothing is None


@pytest.mark.asyncio
async def test_server_never_imports_torch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        assert await s.diagnostics(uri)
        await s.code_actions(uri, whole(SAFE_SCRIPT))
        modules = await asyncio.wait_for(
            s.client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command=IMPORTED_MODULES_COMMAND)
            ),
            TIMEOUT,
        )
    assert (
        "libcst" in modules and "distlint" in modules
    )  # the command really lists the server's modules
    assert not {"torch", "accelerate", "torch_xla", "numpy"} & set(modules)


# --------------------------------------------------------------------------------------------
# Robustness (issue #16 items 11-13, issue #14 item 6): the server lints in a worker process.

NESTED = "import torch\ntorch.manual_seed(0)\nx = " + "(\n" * 3000 + "1" + "\n)" * 3000 + "\n"


@pytest.mark.asyncio
async def test_a_document_that_crashes_libcst_does_not_take_the_server_down(tmp_path):
    good = tmp_path / "train.py"
    good.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        uri = await s.open(good)
        first = await s.diagnostics(uri)
        # 3,000 nested parentheses over lines: LibCST's native parser segfaults on this (or the
        # engine refuses it beyond its nesting bound); either way the server must live on.
        bad_uri = await s.open(tmp_path / "nested.py", NESTED)
        await asyncio.sleep(3)
        hover = await asyncio.wait_for(
            s.client.text_document_hover_async(
                lsp.HoverParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri), position=first[0].range.start
                )
            ),
            TIMEOUT,
        )
        assert hover is not None and first[0].code in hover.contents.value
        assert bad_uri not in s.client.diagnostics or not s.client.diagnostics[bad_uri]
        # the other document is still linted after an edit
        await s.change(uri, SAFE_SCRIPT + "\n")
        assert [d.code for d in await s.diagnostics(uri)] == [d.code for d in first]
        messages = " ".join(m.message for m in s.client.log_messages)
        assert "nested.py" in messages, messages


def test_worker_crash_and_timeout_become_errors_and_the_worker_restarts():
    from lsp_hooks import hooked_worker

    from distlint.lsp_worker import WorkerError

    worker = hooked_worker()
    try:
        with pytest.raises(WorkerError, match="SIGSEGV"):
            worker.call("crash", timeout=30)
        with pytest.raises(WorkerError, match="longer than 0.5 s"):
            worker.call("sleep", 5, timeout=0.5)
        assert "torch" not in worker.call("modules", timeout=30)  # a fresh worker answers
        assert worker.restarts == 2
    finally:
        worker.close()


def test_the_worker_frees_what_each_request_left_once_it_has_replied(tmp_path):
    """Nothing a lint, a fix or a code action's check left (the analysis of the text's own
    parse) waits past the request's reply: it is freed after the reply is sent."""
    from lsp_hooks import hooked_worker

    from distlint.api import LintOptions

    text = "import torch\n\ntorch.manual_seed(0)\n"
    worker = hooked_worker(str(tmp_path))
    try:
        script = str(tmp_path / "train.py")
        (tmp_path / "train.py").write_text(text)
        status, result, config, _ = worker.call("lint", text, script, LintOptions(), {})
        assert status == "ok" and worker.call("pending") == 0
        worker.call("fix", text, script, config, result)
        assert worker.call("pending") == 0
        worker.call("suppresses", text, script, config, "DL101", 3)
        assert worker.call("pending") == 0
    finally:
        worker.close()


def test_the_worker_collects_garbage_only_after_a_request_s_reply_is_sent(tmp_path):
    """A request that allocates past the collector's threshold (a lint's analysis, the
    dependencies worked out after it) is answered first: the collection it triggers walks
    what it allocated after the reply is sent, not on the way to the editor."""
    import gc

    from lsp_hooks import hooked_worker

    from distlint.api import LintOptions

    worker = hooked_worker(str(tmp_path))
    try:
        text = "import torch\n\ntorch.manual_seed(0)\n"
        script = str(tmp_path / "train.py")
        # (the first lint ends the worker's start-up, whose collector is paused)
        assert worker.call("lint", text, script, LintOptions(), {}, timeout=30)[0] == "ok"
        count = 20 * gc.get_threshold()[0]
        for _ in range(3):
            assert worker.call("churn", count, timeout=30) == count
        collected = worker.call("collections", timeout=30)
        assert collected, "the requests triggered no collection at all"
        assert not [generation for generation, answering in collected if answering]
    finally:
        worker.close()


def test_a_request_waiting_when_the_worker_is_ready_spares_it_the_warm_up_lint():
    """The first request of a worker still starting is sent at once (an editor's first
    message comes before the worker has loaded LibCST and the rules); finding it waiting, the
    worker goes straight to it instead of linting its warm-up script first (issue 32: the
    first diagnostics)."""
    from lsp_hooks import hooked_worker

    worker = hooked_worker()
    try:
        assert worker.call("passes", timeout=60) == {}  # (the warm-up's parse: {"parse": 1, ...})
        assert worker.call("passes", timeout=60) == {}
    finally:
        worker.close()


_FIRST_AND_RESTARTED = """\
import json, os, sys, threading
from distlint.api import LintOptions
from distlint.lsp_worker import Worker, _Forked

root, script = sys.argv[1], sys.argv[2]
worker = Worker(root=root, fork=True)
worker.start()  # as `distlint lsp` starts it: one thread, first thing
first = worker._proc
status, result, _, _ = worker.call("lint", open(script).read(), script, LintOptions(), {}, timeout=60)
out = {"forked": isinstance(first, _Forked), "codes": [f.code for f in result.findings]}
parent = int(open(f"/proc/{first.pid}/stat").read().split(") ")[1].split()[1])
out["child_of_this_process"] = parent == os.getpid()
worker._kill(first)  # it crashed: the next call restarts it, from a server thread
threading.Thread(target=lambda: None).start()
done = {}
thread = threading.Thread(target=lambda: done.update(m=worker.call("modules", timeout=60)))
thread.start()
thread.join()
out["restarted_forked"] = isinstance(worker._proc, _Forked)
out["restarted_torch"] = "torch" in done["m"]
out["first_gone"] = first.poll() is not None
worker.close()
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker forks on Linux only")
def test_the_first_worker_is_forked_and_a_restart_is_a_new_interpreter(tmp_path):
    # `distlint lsp` forks its first worker (a second interpreter's start is on the way to the
    # first diagnostics); a restart, from the server's threads, starts an isolated interpreter
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-I", "-c", _FIRST_AND_RESTARTED, str(tmp_path), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    cli = subprocess.run(
        [sys.executable, "-m", "distlint", "check", "--no-cache", "--isolated", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    expected = [line.split()[1] for line in cli.stdout.splitlines() if ": DL" in line]
    assert out["forked"] and out["child_of_this_process"]
    assert out["codes"] == expected and out["codes"]
    assert out["first_gone"] and not out["restarted_forked"] and not out["restarted_torch"]
    # a library caller's worker (one thread as well) is never forked from its process
    plain = (
        "from distlint.lsp_worker import Worker, _Forked\n"
        "w = Worker()\nw.start()\nprint(isinstance(w._proc, _Forked))\nw.close()\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", plain], capture_output=True, text=True)
    assert done.stdout.split() == ["False"], done.stderr


@pytest.mark.asyncio
async def test_hover_on_a_never_opened_fifo_does_not_block(tmp_path):
    import os

    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    async with session(tmp_path) as s:
        hover = await asyncio.wait_for(
            s.client.text_document_hover_async(
                lsp.HoverParams(
                    text_document=lsp.TextDocumentIdentifier(uri=_uri(fifo)),
                    position=lsp.Position(line=0, character=0),
                )
            ),
            15,  # a read of the FIFO would never end; the first request also loads pygls
        )
        assert hover is None
        actions = await s.code_actions(_uri(fifo), whole(""))
        assert actions == []
        uri = await s.open(script)  # and the server still works
        assert await s.diagnostics(uri)


@pytest.mark.asyncio
async def test_config_edit_applies_without_file_watching(tmp_path):
    """Neovim on Linux sends no didChangeWatchedFiles: the stamps are checked on each lint."""
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.distlint]\n")
    async with session(tmp_path) as s:
        uri = await s.open(script)
        assert "DL101" in [d.code for d in await s.diagnostics(uri)]
        pyproject.write_text('[tool.distlint]\nignore = ["DL101"]\n')
        await s.change(uri, SAFE_SCRIPT + "\n")  # the next keystroke
        assert "DL101" not in [d.code for d in await s.diagnostics(uri)]


def _raw_server_exit_code(messages: list[dict]) -> int:
    body = b""
    for message in messages:
        data = json.dumps(message).encode()
        body += b"Content-Length: %d\r\n\r\n" % len(data) + data
    proc = subprocess.run(SERVER, input=body, capture_output=True, timeout=60)
    return proc.returncode


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}


def test_exit_without_shutdown_exits_1_and_after_shutdown_0():
    exit_ = {"jsonrpc": "2.0", "method": "exit"}
    shutdown = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    assert _raw_server_exit_code([INIT, exit_]) == 1
    assert _raw_server_exit_code([INIT, shutdown, exit_]) == 0


def _initialize_answer(init_options) -> dict:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "capabilities": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
            "initializationOptions": init_options,
        },
    }
    exit_ = [
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    body = b""
    for m in [message, *exit_]:
        data = json.dumps(m).encode()
        body += b"Content-Length: %d\r\n\r\n" % len(data) + data
    out = subprocess.run(SERVER, input=body, capture_output=True, timeout=60).stdout
    head, _, rest = out.partition(b"\r\n\r\n")
    length = int(head.split(b"\r\n")[0].split(b":")[1])
    return json.loads(rest[:length])


def test_start_up_answer_to_initialize_is_what_pygls_answers():
    """distlint.lsp_start answers `initialize` before pygls is loaded; a `lintTimeout` option
    makes it leave the answer to the pygls server: both answers must be the same."""
    fast = _initialize_answer({"unsafeFixes": False})
    pygls_answer = _initialize_answer({"lintTimeout": 20})
    assert fast["result"] == pygls_answer["result"]
    assert fast["result"]["capabilities"]["positionEncoding"] == "utf-8"


def test_start_up_code_applies_ranged_changes_as_an_editor_does():
    """Before pygls is loaded the start-up code follows the buffer itself: LSP ranges in the
    client's units (UTF-16 by default), a range past a line's end clamped to it."""
    from distlint.lsp_start import apply_change

    text = 'a = "\U0001f600"\nb = 2\r\nc = 3\n'
    at = lambda line, ch: {"line": line, "character": ch}  # noqa: E731
    # after the emoji: 2 UTF-16 units, 1 code point, 4 UTF-8 bytes
    for encoding, units in (("utf-16", 7), ("utf-32", 6), ("utf-8", 9)):
        change = {"range": {"start": at(0, units), "end": at(0, units)}, "text": "!"}
        assert apply_change(text, change, encoding).startswith('a = "\U0001f600!"')
    change = {"range": {"start": at(1, 4), "end": at(1, 99)}, "text": "20"}
    assert apply_change(text, change, "utf-16") == 'a = "\U0001f600"\nb = 20\r\nc = 3\n'
    change = {"range": {"start": at(1, 0), "end": at(3, 0)}, "text": ""}
    assert apply_change(text, change, "utf-16") == 'a = "\U0001f600"\n'
    assert apply_change(text, {"text": "x = 1\n"}, "utf-16") == "x = 1\n"
    assert apply_change(text, {"range": "bad", "text": ""}, "utf-16") is None
    bad = {"range": {"start": at(2, 0), "end": at(1, 0)}, "text": ""}
    assert apply_change(text, bad, "utf-16") is None


@pytest.mark.asyncio
async def test_typing_right_after_opening_gets_the_diagnostics_of_the_last_text(tmp_path):
    """Ranged edits sent at once after opening (before pygls is loaded, when the start-up
    code follows the buffer) end in the diagnostics the CLI gives for the final text, and the
    full server, once loaded, holds that text too."""
    script = tmp_path / "train.py"
    script.write_text(UNSAFE_SCRIPT)
    final = UNSAFE_SCRIPT.replace("torch.manual_seed(0)\n", "x = 1\ntorch.manual_seed(0)\n")
    (tmp_path / "final.py").write_text(final)
    expected = json.loads(cli("check", "--format", "json", "final.py", cwd=tmp_path).stdout)
    expected = expected["findings"] if isinstance(expected, dict) else expected
    want = sorted((f["line"], f["code"]) for f in expected)
    async with session(tmp_path) as s:
        uri = await s.open(script)
        line = split_lines(UNSAFE_SCRIPT).index("torch.manual_seed(0)\n")
        for version, (column, piece) in enumerate(((0, "x"), (1, " = "), (4, "1\n")), start=2):
            pos = lsp.Position(line=line, character=column)
            s.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        lsp.TextDocumentContentChangePartial(
                            range=lsp.Range(start=pos, end=pos), text=piece
                        )
                    ],
                )
            )
        seen = []
        for _ in range(4):  # the opened text's diagnostics may come first
            diags = await s.diagnostics(uri)
            seen.append(sorted((d.range.start.line + 1, d.code) for d in diags))
            if seen[-1] == want:
                break
        assert seen[-1] == want, seen
        # the server's own document is the final text: its noqa edit lands on the right line
        actions = await s.code_actions(uri, whole(final))
        [noqa] = [a for a in actions if "noqa" in a.title]
        assert "x = 1\ntorch.manual_seed(0)  # noqa: DL101\n" in apply_edit(final, uri, noqa.edit)


# --------------------------------------------------------------------------------------------
# Opening a folder runs none of its code (issue #27 item 1); a worker that cannot start is
# reported and the server goes on answering (issue #33).


async def _server_modules(workspace: Path) -> set[str]:
    (workspace / "train.py").write_text(SAFE_SCRIPT)
    async with session(workspace) as s:
        await s.diagnostics(await s.open(workspace / "train.py"))
        modules = await asyncio.wait_for(
            s.client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command=IMPORTED_MODULES_COMMAND)
            ),
            TIMEOUT,
        )
    return set(modules)


@pytest.mark.asyncio
async def test_a_folder_with_shadowing_modules_gets_diagnostics_and_none_of_them_runs(tmp_path):
    """The server started by an editor in a folder holding a `distlint/` package and a module
    named after each one the server and its worker import: the document gets its diagnostics
    within seconds and none of the planted modules is imported."""
    from shadowing import cli_modules, distlint_command, plant, ran, worker_modules

    clean, folder, markers = tmp_path / "clean", tmp_path / "repo", tmp_path / "markers"
    clean.mkdir()
    folder.mkdir()
    names = await _server_modules(clean) | worker_modules() | cli_modules(clean)
    planted = plant(folder, names, markers)
    assert {"pygls", "lsprotocol", "libcst", "select", "pickle", "distlint"} <= set(planted)
    (folder / "train.py").write_text(SAFE_SCRIPT)
    async with session(folder, server=[distlint_command(), "lsp"]) as s:
        uri = await s.open(folder / "train.py")
        diagnostics = await s.diagnostics(uri)  # (before the fix: never)
        assert "DL101" in [d.code for d in diagnostics]
        assert await s.code_actions(uri, whole(SAFE_SCRIPT))  # the full server answers too
    assert ran(markers) == []


@pytest.mark.asyncio
async def test_a_worker_that_cannot_start_is_reported_and_the_server_keeps_answering(
    tmp_path, capfd
):
    hooks = str(Path(__file__).with_name("lsp_hooks.py"))
    script = tmp_path / "train.py"
    script.write_text(SAFE_SCRIPT)
    server = [sys.executable, "-I", hooks, "serve-with-broken-worker"]
    async with session(tmp_path, server=server) as s:
        uri = await s.open(script)

        async def told(words: str) -> list[str]:
            while True:
                shown = [m.message for m in s.client.messages if words in m.message]
                if shown:
                    return shown
                await asyncio.sleep(0.05)

        [first] = await asyncio.wait_for(told("could not start"), TIMEOUT)
        assert "ModuleNotFoundError" in first and "distlint_is_not_installed_here" in first
        assert "Fix:" in first
        # the server answers meanwhile: no findings, no actions, no hover
        assert await s.code_actions(uri, whole(SAFE_SCRIPT)) == []
        hover = await asyncio.wait_for(
            s.client.text_document_hover_async(
                lsp.HoverParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    position=lsp.Position(line=9, character=6),
                )
            ),
            TIMEOUT,
        )
        assert hover is None
        # two more attempts (after 1 s and 2 s), then it gives up and says so
        [last] = await asyncio.wait_for(told("gave up after 3 attempts"), TIMEOUT)
        assert "ModuleNotFoundError" in last
        attempts = [m.message for m in s.client.log_messages if "could not start" in m.message]
        assert len(attempts) == 3, attempts
        shown = [m.message for m in s.client.messages if "could not start" in m.message]
        assert shown == [attempts[0], attempts[-1]]  # the user is told twice, not per attempt
        assert uri not in s.client.diagnostics
        await asyncio.wait_for(s.client.shutdown_session(), 10)
        assert s.client._server.returncode == 0
    err = capfd.readouterr().err
    assert "distlint: the lint worker could not start" in err and "ModuleNotFoundError" in err


def test_worker_start_failures_back_off_then_give_up():
    import time

    from lsp_hooks import BROKEN_WORKER

    from distlint.lsp_worker import RETRY_DELAYS, Worker, WorkerStartError

    worker = Worker(command=BROKEN_WORKER)
    try:
        with pytest.raises(WorkerStartError, match="ModuleNotFoundError") as first:
            worker.call("rules", timeout=30)
        assert first.value.retry_in == RETRY_DELAYS[0] and not first.value.final
        started = time.monotonic()
        with pytest.raises(WorkerStartError) as waiting:  # no new process before it is due
            worker.call("rules", timeout=30)
        assert time.monotonic() - started < 0.5 and worker.start_failures == 1
        assert 0 < waiting.value.retry_in <= RETRY_DELAYS[0]
        for attempt, delay in enumerate(RETRY_DELAYS, start=2):
            time.sleep(delay + 0.05)
            with pytest.raises(WorkerStartError) as failed:
                worker.call("rules", timeout=30)
            assert worker.start_failures == attempt
        assert failed.value.final and "gave up after 3 attempts" in str(failed.value)
        started = time.monotonic()
        with pytest.raises(WorkerStartError, match="gave up"):
            worker.call("rules", timeout=30)
        assert time.monotonic() - started < 0.5  # given up: answered at once, nothing started
    finally:
        worker.close()


def test_a_worker_that_finds_no_rules_says_so():
    from distlint.lsp_worker import Worker, WorkerStartError

    no_rules = (
        "import distlint.registry as registry\n"
        "registry.all_rules = lambda: ()\n"
        "from distlint.lsp_worker import main\n"
        "main()\n"
    )
    worker = Worker(command=[sys.executable, "-I", "-c", no_rules])
    try:
        with pytest.raises(WorkerStartError, match="no rules found in distlint.rules"):
            worker.call("rules", timeout=60)
    finally:
        worker.close()


@pytest.mark.asyncio
async def test_a_slow_document_does_not_hold_up_the_others(tmp_path):
    """One document's lint takes 12 s: an edit of another is linted meanwhile (by a second
    worker, started once the first has been busy for a second), and the slow one gets its
    diagnostics in the end."""
    hooks = str(Path(__file__).with_name("lsp_hooks.py"))
    server = [sys.executable, "-I", hooks, "serve-with-hooked-worker"]
    (tmp_path / "train.py").write_text(SAFE_SCRIPT)
    slow_text = SAFE_SCRIPT + "# test: lint takes 12 s\n"
    async with session(tmp_path, server=server) as s:
        uri = await s.open(tmp_path / "train.py")
        await s.diagnostics(uri)
        await s.code_actions(uri, whole(SAFE_SCRIPT))  # the full server has taken over
        slow = await s.open(tmp_path / "slow.py", slow_text)
        await asyncio.sleep(0.5)  # its lint has started
        await s.change(uri, SAFE_SCRIPT + "\n")
        assert "DL101" in [d.code for d in await s.diagnostics(uri)]
        assert slow not in s.client.diagnostics, "the edit waited for the slow document"
        assert "DL101" in [d.code for d in await s.diagnostics(slow)]


# --------------------------------------------------------------------------------------------
# The protocol under abuse (issue #27 item 5).


def _frame(message: dict) -> bytes:
    data = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def _answers(stdout: bytes) -> dict:
    """The responses in a server's output, by id."""
    out = {}
    while stdout:
        head, _, rest = stdout.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
        message, stdout = json.loads(rest[:length]), rest[length:]
        if "id" in message and "method" not in message:
            out[message["id"]] = message
    return out


def test_requests_before_initialize_and_after_shutdown_get_the_specs_errors(tmp_path):
    hover = {
        "textDocument": {"uri": _uri(tmp_path / "x.py")},
        "position": {"line": 0, "character": 0},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": hover},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},  # dropped
        INIT | {"id": 2},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": hover},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    proc = subprocess.run(
        SERVER, input=b"".join(map(_frame, messages)), capture_output=True, timeout=60
    )
    answers = _answers(proc.stdout)
    assert answers[1]["error"]["code"] == -32002  # ServerNotInitialized
    assert "capabilities" in answers[2]["result"]
    assert answers[3]["result"] is None
    assert answers[4]["error"]["code"] == -32600  # InvalidRequest
    assert proc.returncode == 0  # exit after shutdown


@pytest.mark.parametrize("length", [b"abc", b"-5"])
@pytest.mark.parametrize("when", ["first", "after the server took over"])
def test_a_malformed_header_ends_the_session_with_a_message(length, when, tmp_path):
    """No Content-Length to go by: the stream cannot be re-synchronised (a body may contain
    anything), so the server says why on stderr and exits 1 at once (as rust-analyzer and
    gopls do), instead of waiting for ever; the client keeps its pipe open meanwhile."""
    import time

    proc = subprocess.Popen(
        SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        if when != "first":
            hover = {
                "textDocument": {"uri": _uri(tmp_path / "x.py")},
                "position": {"line": 0, "character": 0},
            }
            ask = {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": hover}
            proc.stdin.write(_frame(INIT) + _frame(ask))  # a hover: only pygls answers it
            proc.stdin.flush()
            seen = b""
            while b'"id": 2' not in seen:
                chunk = proc.stdout.read1(65536)
                assert chunk, "the server ended before answering"
                seen += chunk
        proc.stdin.write(b"Content-Length: " + length + b'\r\n\r\n{"jsonrpc": "2.0"}')
        proc.stdin.flush()
        started = time.monotonic()
        assert proc.wait(timeout=30) == 1
        assert time.monotonic() - started < 30
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "malformed message from the client" in err and "Content-Length" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.asyncio
async def test_notifications_leave_nothing_behind_in_pygls():
    """pygls 2 keeps a future per notification its generator handlers take (didChange:
    ~2 KB a keystroke, never freed); the server forgets each once it is done."""
    from distlint.lsp import create_server
    from distlint.lsp_worker import WorkerError

    class NoWorker:
        root = None

        def call(self, *args, **kwargs):
            raise WorkerError("not in this test")

        def close(self):
            pass

    server = create_server(NoWorker())  # type: ignore[arg-type]
    protocol = server.protocol
    protocol.set_writer(type("Sink", (), {"write": lambda self, data: None})())

    def send(message: dict) -> None:
        protocol.handle_message(
            json.loads(json.dumps(message), object_hook=protocol.structure_message)
        )

    uri = "file:///nowhere/train.py"
    send(INIT)
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    item = {"uri": uri, "languageId": "python", "version": 1, "text": "a = 1\n"}
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
    for version in range(2, 2002):
        start = {"line": 0, "character": 4}
        change = {"range": {"start": start, "end": {"line": 0, "character": 5}}, "text": "2"}
        params = {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [change],
        }
        send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params})
    await asyncio.sleep(0.05)
    assert server.workspace.get_text_document(uri).source == "a = 2\n"
    assert len(protocol._request_futures) == 0
    for handle in server.pending.values():
        handle.cancel()


# --------------------------------------------------------------------------------------------
# An open document is linted from the editor's text, never from the disk (issue #27 item 4).


@pytest.mark.asyncio
async def test_open_documents_at_a_fifo_and_at_dev_zero_are_linted_from_their_text(tmp_path):
    import os

    os.mkfifo(tmp_path / "train.py")
    os.symlink("/dev/zero", tmp_path / "eval.py")
    async with session(tmp_path) as s:
        for name in ("train.py", "eval.py"):
            uri = await s.open(tmp_path / name, SAFE_SCRIPT)
            # (before the fix: the worker read the disk, timed out after 20 s, no findings)
            diagnostics = await s.diagnostics(uri)
            assert "DL101" in [d.code for d in diagnostics], name
        assert not [m.message for m in s.client.log_messages if "not linted" in m.message]
