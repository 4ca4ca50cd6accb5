"""Memory of `distlint lsp` over many edits (issue #27 item 5: it must stay flat).

    python benchmarks/lsp_memory.py [--edits 100000] [--steps 10]

Starts `distlint lsp` on a small training script, opens it, and sends ``--edits`` ranged
`textDocument/didChange` notifications (a character typed, then deleted, so the text stays the
same size). After every tenth of them it sends a hover request and waits for its answer (so
everything before it has been handled) and reads the server's resident memory (VmRSS, Linux).
Reported: the RSS after each step and the growth per 1,000 edits from the first step to the
last (the first step includes the warm-up). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRIPT = """\
import torch
from accelerate import Accelerator

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Linear(2, 2)
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="distlint-lsp-memory-"))
    (work / "train.py").write_text(SCRIPT)
    server = Path(sys.executable).with_name("distlint")
    proc = subprocess.Popen(
        [str(server), "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=work
    )
    assert proc.stdin is not None and proc.stdout is not None
    answered: set[int] = set()

    def read() -> None:
        tail = b""
        while chunk := proc.stdout.read1(1 << 16):  # type: ignore[union-attr]
            tail += chunk
            answered.update(int(m) for m in re.findall(rb'"id": ?(\d+)', tail))
            tail = tail[-64:]

    threading.Thread(target=read, daemon=True).start()

    def send(message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)  # type: ignore[union-attr]

    def round_trip(request_id: int) -> None:
        hover = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
        send({"id": request_id, "method": "textDocument/hover", "params": hover})
        proc.stdin.flush()  # type: ignore[union-attr]
        while request_id not in answered:
            time.sleep(0.02)

    uri = (work / "train.py").as_uri()
    send(
        {"id": 1, "method": "initialize", "params": {"capabilities": {}, "rootUri": work.as_uri()}}
    )
    send({"method": "initialized", "params": {}})
    item = {"uri": uri, "languageId": "python", "version": 1, "text": SCRIPT}
    send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
    round_trip(2)
    step = max(1, args.edits // args.steps)
    at = {"line": 5, "character": 0}
    after = {"line": 5, "character": 1}
    rows = []
    started = time.monotonic()
    for i in range(args.edits):
        change = (
            {"range": {"start": at, "end": at}, "text": "x"}
            if i % 2 == 0
            else {"range": {"start": at, "end": after}, "text": ""}
        )
        params = {"textDocument": {"uri": uri, "version": i + 2}, "contentChanges": [change]}
        send({"method": "textDocument/didChange", "params": params})
        if (i + 1) % step == 0:
            round_trip(10 + i)
            rows.append((i + 1, rss_mb(proc.pid), time.monotonic() - started))
            print(
                f"{rows[-1][0]:>8} edits  {rows[-1][1]:7.1f} MB  {rows[-1][2]:6.1f} s", flush=True
            )
    send({"id": 3, "method": "shutdown"})
    send({"method": "exit"})
    proc.stdin.close()
    proc.wait(timeout=60)
    (first, rss0, _), (last, rss1, _) = rows[0], rows[-1]
    per_k = (rss1 - rss0) / max(1, last - first) * 1000
    print(f"growth from {first} to {last} edits: {rss1 - rss0:+.1f} MB ({per_k:+.3f} MB / 1,000)")


if __name__ == "__main__":
    main()
