"""Time from starting `distlint lsp` to the first diagnostics, against the LibCST floor.

    python benchmarks/lsp_first_diagnostics.py [--repeats 7] [--lines 500 300]

For each size, a training script of exactly that many lines is written to a temporary directory
(whole fixture scripts from fixtures/scripts, so the rules have real work to do, padded with
plain helper functions). Each round then runs, alternately:

- the server: spawn `distlint lsp`, send `initialize`, wait for its answer, send `initialized`
  and `textDocument/didOpen`, and stop the clock at the first `textDocument/publishDiagnostics`
  (what an editor waits for after opening a file);
- the floor: `python -c "import libcst; libcst.parse_module(src)"` on the same file.

Reported: medians of wall time, and the median of the per-round ratios server / floor (both run
in the same round, so a busy machine slows both alike). Targets: well under a second, and within
1.8x of the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "fixtures" / "scripts"

HELPER = '''\
def running_mean_{i}(values, scale=1.0):
    """Mean of a logged metric, scaled for display."""
    total = 0.0
    count = 0
    for value in values:
        total += value * scale
        count += 1
    if count == 0:
        return 0.0
    return total / count

'''


def training_script(lines: int) -> str:
    """A valid script of exactly ``lines`` lines: whole fixture scripts, then helpers, then blanks."""
    out: list = []
    for path in sorted(SCRIPTS.glob("*.py")):
        body = [
            line
            for line in path.read_text().splitlines(keepends=True)
            if not line.startswith("from __future__")
        ]
        if len(out) + len(body) + 1 > lines:
            continue
        out += body + ["\n"]
    i = 0
    while len(out) + HELPER.count("\n") <= lines:
        out += HELPER.format(i=i).splitlines(keepends=True)
        i += 1
    out += ["\n"] * (lines - len(out))
    return "".join(out)


def _send(proc: subprocess.Popen, message: dict) -> None:
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def _receive(proc: subprocess.Popen) -> dict:
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(
                "the server exited: " + proc.stderr.read().decode(errors="replace")[-2000:]
            )
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def server_round(command: list, path: Path) -> tuple:
    """(seconds to the initialize answer, seconds to the first diagnostics, number of diagnostics)."""
    uri = path.resolve().as_uri()
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=path.parent,
    )
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "processId": os.getpid(),
                    "rootUri": path.parent.resolve().as_uri(),
                    "capabilities": {},
                },
            },
        )
        while "id" not in (msg := _receive(proc)) or msg.get("method"):
            pass
        initialized = time.perf_counter() - start
        _send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": path.read_text(),
                    }
                },
            },
        )
        while (msg := _receive(proc)).get("method") != "textDocument/publishDiagnostics":
            pass
        first = time.perf_counter() - start
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        proc.wait(timeout=30)
        return initialized, first, len(msg["params"]["diagnostics"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def floor_round(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", f"import libcst; libcst.parse_module(open({str(path)!r}).read())"],
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lines", type=int, nargs="+", default=[500, 300])
    args = parser.parse_args()
    exe = shutil.which("distlint")
    command = [exe, "lsp"] if exe else [sys.executable, "-m", "distlint", "lsp"]
    print(
        f"server: {' '.join(command)}   python {sys.version.split()[0]}   {os.cpu_count()} CPUs   "
        f"{args.repeats} rounds, medians   load average {os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for lines in args.lines:
            path = Path(tmp) / f"train_{lines}.py"
            path.write_text(training_script(lines))
            assert path.read_text().count("\n") == lines
            init, first, floor, ratio = [], [], [], []
            server_round(
                command, path
            )  # warm the OS file cache and .pyc files: editors start warm too
            for _ in range(args.repeats):
                i, f, n = server_round(command, path)
                fl = floor_round(path)
                init.append(i)
                first.append(f)
                floor.append(fl)
                ratio.append(f / fl)
            print(
                f"{lines:4d} lines ({n} diagnostics): first diagnostics {statistics.median(first) * 1000:6.0f} ms "
                f"(initialize answered at {statistics.median(init) * 1000:4.0f} ms)   "
                f"libcst import+parse {statistics.median(floor) * 1000:6.0f} ms   "
                f"ratio {statistics.median(ratio):.2f}x (target < 1.8x, and < 1000 ms)"
            )


if __name__ == "__main__":
    main()
