"""Time from starting `distlint lsp` to the first diagnostics, against the LibCST floor, and
the time to re-lint after an edit; `ruff server` on the same file in the same rounds.

    python benchmarks/lsp_first_diagnostics.py [--repeats 7] [--lines 500 300]
    python benchmarks/lsp_first_diagnostics.py --file ~/src/diffusers/examples/x/train_x.py

``--file``: a script inside its own repository instead of the generated ones (the server then
starts in the repository's root, where the script's imports resolve to project modules, as an
editor opening that repository does); the edit types one statement into the training loop (a
line before its ``backward`` call, else a comment line at the end).

The server stores what it learns of the modules a script reaches in the repository's answer
store (``.distlint_cache``, as ``distlint check`` does), so that the next start of an editor
reads it: the rounds after the warm-up one find the store that one wrote. ``--cold-store``
removes it before each round instead (the first opening of a repository). A store the
repository had before the run is left alone (and used); one the run created is removed at the
end.

``--breakdown``: also where the time goes, measured in one fresh process that drives the lint
worker's engine as the server does (CPU time, medians): the engine's start, the first lint, the
first lint of the same text outside its tree (what the project costs), and that first lint in
its tree and each re-lint split into the parse (re-parse), the rules' trigger filter, the module
index, each rule (with the facts it is the first to ask for), and the rest.

For each size, a training script of exactly that many lines is written to a temporary directory
(whole fixture scripts from fixtures/scripts, so the rules have real work to do, padded with
plain helper functions). Each round then runs, alternately:

- the server: spawn `distlint lsp`, send `initialize`, wait for its answer, send `initialized`
  and `textDocument/didOpen`, and stop the clock at the first `textDocument/publishDiagnostics`
  (what an editor waits for after opening a file);
- then a hover request, answered (an editor's first edit comes seconds after opening, when the
  server is fully loaded: distlint loads pygls only after the first diagnostics), and
  ``--edits`` + 1 edits, each a full-text `textDocument/didChange` changing one line of the
  previous version; all but the first (a warm-up) are timed, from the change to the
  diagnostics of the new version; distlint waits its debounce (DEBOUNCE_SECONDS) before it
  lints, so its re-lint time is reported without it;
- the floor: `python -c "import libcst; libcst.parse_module(src)"` on the same file;
- `ruff server` (when ruff is installed), the same steps, the same file.

Reported: medians of wall time (the re-lint: over every timed edit of every round), and the
median of the per-round ratios server / floor (both run in the same round, so a busy machine
slows both alike). On Linux also the CPU time the lint worker (from its fork, early in the
server's start), the server and the floor had used when the first diagnostics came: steadier
than wall time where other work shares the cores; on an idle machine the first diagnostics
take about the server's start before the fork plus the worker's CPU. Targets (issue #17): first diagnostics
within 1.5x of the floor, a re-lint within 30 ms plus the debounce on 500 lines.
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


def _edited(text: str, version: int) -> str:
    """``text`` with one line changed from the previous version's: a helper's constant
    (generated scripts), else a statement typed before the training loop's ``backward`` call,
    else a comment appended."""
    if "total = 0.0" in text:
        return text.replace("total = 0.0", f"total = 0.{version}", 1)
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if ".backward(" in line and not line.lstrip().startswith("#"):
            indent = line[: len(line) - len(line.lstrip())]
            return "".join([*lines[:i], f"{indent}edit_step = {version}\n", *lines[i:]])
    return text + f"# edit {version}\n"


# An installed distlint has its .pyc files (pip compiles them); a checkout gets them at its
# first import, which the warm-up round does, unless PYTHONDONTWRITEBYTECODE forbids it: every
# server start would then compile distlint's sources (~150 ms) and that is what would be timed.
_WARM_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU time so far of process ``pid`` (all its threads), or of its child processes (Linux;
    0.0 elsewhere)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        if children:
            pids = []
            for task in tasks:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    pids += f.read().split()
            return sum(_cpu_seconds(int(child)) for child in pids)
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return total / 1e9


def server_round(command: list, path: Path, root: Path | None = None, edits: int = 1) -> tuple:
    """(seconds to the initialize answer, seconds to the first diagnostics, number of
    diagnostics, [seconds from a didChange to the new version's diagnostics] for ``edits``
    edits after a warm-up one, (CPU seconds of the server and of its lint worker when the first
    diagnostics came))."""
    uri = path.resolve().as_uri()
    text = path.read_text()
    root = root or path.parent
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=root,
        env=_WARM_ENV,
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
                    "rootUri": root.resolve().as_uri(),
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
                        "text": text,
                    }
                },
            },
        )
        while (msg := _receive(proc)).get("method") != "textDocument/publishDiagnostics":
            pass
        first = time.perf_counter() - start
        cpu = (_cpu_seconds(proc.pid), _cpu_seconds(proc.pid, children=True))
        count = len(msg["params"]["diagnostics"])
        # An editor's first edit comes seconds after opening, when the server is fully loaded:
        # a hover request (answered by the full server only) waits for that.
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "textDocument/hover",
                "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
            },
        )
        while (msg := _receive(proc)).get("id") != 3:
            pass
        # Edits, one line changed each, the whole text sent (as most clients do). The first
        # warms up (an editor's first edit comes seconds after opening: by then the server is
        # fully loaded); the others are measured.
        relints = []
        for version in range(2, 3 + edits):
            edited = _edited(text, version)
            changed = time.perf_counter()
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": edited}],
                    },
                },
            )
            while True:
                msg = _receive(proc)
                if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"].get(
                    "version"
                ) in (version, None):
                    break
            if version > 2:
                relints.append(time.perf_counter() - changed)
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        proc.wait(timeout=30)
        return initialized, first, count, relints, cpu
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _repository_root(path: Path) -> Path:
    for folder in path.parents:
        if any((folder / m).exists() for m in (".git", "pyproject.toml", "setup.py")):
            return folder
    return path.parent


def floor_round(path: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) of the floor: python, `import libcst`, the file's parse."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import libcst; libcst.parse_module(open({str(path)!r}).read())"],
        env=_WARM_ENV,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


# Run in a fresh interpreter by --breakdown: argv = path, root, edits; prints one JSON object.
BREAKDOWN = r"""
import json, os, shutil, statistics, sys, tempfile, time
path, root, edits = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[4])))
from lsp_first_diagnostics import _edited
clock = time.process_time
os.chdir(root)
start = clock()
from distlint import api, runner
from distlint.lsp_worker import _Engine
engine = _Engine()
out = {"engine start": clock() - start}
options, text = api.LintOptions(), open(path).read()
with tempfile.TemporaryDirectory() as alone:
    copy = os.path.join(alone, os.path.basename(path))
    shutil.copy(path, copy)
    start = clock()
    engine.lint(text, copy, options, {})
    out["first lint, file alone"] = clock() - start
engine.free_after_replies()  # as the worker's loop does: freed once the reply is sent (idle)
phases = {}
def timed(name, fn):
    def call(*args, **kwargs):
        began = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + clock() - began
    return call
run_rules = runner._run_rules
def each_rule(ctx, active, path, debug):
    return [e for rule in active for e in timed(rule.CODE, run_rules)(ctx, [rule], path, debug)]
runner._parse = timed("parse", runner._parse)
runner._reuse = timed("re-parse", runner._reuse)
runner._triggered = timed("trigger filter", runner._triggered)
runner.Index = timed("index", runner.Index)
runner._run_rules = each_rule
start = clock()
engine.lint(text, path, options, {})
out["first lint, in its tree"] = clock() - start
out["first"] = dict(phases)
engine.idle()
samples = {}
for version in range(2, 3 + edits):
    phases.clear()
    start = clock()
    engine.lint(_edited(text, version), path, options, {})
    phases["re-lint"] = clock() - start
    engine.idle()
    if version > 2:
        for name, seconds in phases.items():
            samples.setdefault(name, []).append(seconds)
for name, values in samples.items():
    out[name] = statistics.median(values)
print(json.dumps(out))
"""


def breakdown(path: Path, root: Path, edits: int) -> dict:
    """Seconds of CPU per phase (see --breakdown), from a fresh process; under "first", the
    phases of the first lint in the file's tree."""
    done = subprocess.run(
        [sys.executable, "-c", BREAKDOWN, str(path), str(root), str(edits), __file__],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_breakdown(phases: dict) -> None:
    first = {name: seconds * 1000 for name, seconds in phases.pop("first").items()}
    ms = {name: seconds * 1000 for name, seconds in phases.items()}
    starts = ("engine start", "first lint, file alone", "first lint, in its tree")
    print("   worker CPU: " + "   ".join(f"{name} {ms[name]:.0f} ms" for name in starts))
    print("   " + _parts("first lint in its tree", ms["first lint, in its tree"], first))
    relint = {name: value for name, value in ms.items() if name not in starts}
    print("   " + _parts("worker CPU per re-lint", relint.pop("re-lint"), relint))


def _parts(title: str, total: float, parts: dict[str, float]) -> str:
    """``title``, ``total`` ms and its parts of 0.5 ms or more, largest first, and the rest."""
    ordered = sorted(parts.items(), key=lambda item: -item[1])
    shown = "   ".join(f"{name} {value:.1f}" for name, value in ordered if value >= 0.5)
    return f"{title} {total:.1f} ms: {shown}   rest {total - sum(parts.values()):.1f} (ms)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lines", type=int, nargs="+", default=[500, 300])
    parser.add_argument("--file", help="a script inside its repository (instead of --lines)")
    parser.add_argument("--edits", type=int, default=3, help="timed edits per round")
    parser.add_argument(
        "--breakdown", action="store_true", help="also where the worker's time goes (CPU)"
    )
    parser.add_argument(
        "--cold-store",
        action="store_true",
        help="remove the answer store the run created before each round (a first opening)",
    )
    args = parser.parse_args()
    from distlint.cache import CACHE_DIR
    from distlint.lsp import DEBOUNCE_SECONDS

    exe = shutil.which("distlint")
    command = [exe, "lsp"] if exe else [sys.executable, "-m", "distlint", "lsp"]
    ruff = shutil.which("ruff")
    ruff_command = [ruff, "server"] if ruff else None
    print(
        f"server: {' '.join(command)}   python {sys.version.split()[0]}   {os.cpu_count()} CPUs   "
        f"{args.repeats} rounds, medians   load average {os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        given = Path(args.file).resolve() if args.file else None
        for lines in [given.read_text().count("\n")] if given else args.lines:
            if given is not None:
                path, root = given, _repository_root(given)
                print(f"{path} in {root}")
            else:
                path, root = Path(tmp) / f"train_{lines}.py", None
                path.write_text(training_script(lines))
                assert path.read_text().count("\n") == lines
            init, first, floor, ratio, relint = [], [], [], [], []
            worker_cpu, server_cpu, floor_cpu = [], [], []
            ruff_first, ruff_relint = [], []
            store = Path(root or path.parent) / CACHE_DIR
            ours = not store.exists()  # (a store the repository had is the user's: left alone)
            # warm the OS file cache and .pyc files: editors start warm too
            server_round(command, path, root)
            for _ in range(args.repeats):
                if args.cold_store and ours:
                    shutil.rmtree(store, ignore_errors=True)
                i, f, n, r, (sc, wc) = server_round(command, path, root, args.edits)
                fl, fc = floor_round(path)
                init.append(i)
                first.append(f)
                floor.append(fl)
                ratio.append(f / fl)
                relint += [x - DEBOUNCE_SECONDS for x in r]
                server_cpu.append(sc)
                worker_cpu.append(wc)
                floor_cpu.append(fc)
                if ruff_command:
                    _, rf, _, rr, _ = server_round(ruff_command, path, root, args.edits)
                    ruff_first.append(rf)
                    ruff_relint += rr
            ms = lambda values: statistics.median(values) * 1000  # noqa: E731
            print(
                f"{lines:4d} lines ({n} diagnostics): first diagnostics {ms(first):6.0f} ms "
                f"(initialize answered at {ms(init):4.0f} ms)   "
                f"libcst import+parse {ms(floor):6.0f} ms   "
                f"ratio {statistics.median(ratio):.2f}x (target <= 1.5x)   "
                f"re-lint after an edit {ms(relint):5.1f} ms + {DEBOUNCE_SECONDS * 1000:.0f} ms "
                f"debounce (target <= 30 ms)"
            )
            if any(worker_cpu):  # (CPU time: steadier than wall time on a busy machine)
                print(
                    f"{'':4s}       CPU until the first diagnostics: lint worker "
                    f"{ms(worker_cpu):4.0f} ms (from its fork), server {ms(server_cpu):4.0f} ms;"
                    f"   floor {ms(floor_cpu):4.0f} ms (python's start included)"
                )
            if ruff_command:
                print(
                    f"{'':4s}       ruff server: first diagnostics {ms(ruff_first):6.0f} ms   "
                    f"re-lint after an edit {ms(ruff_relint):5.1f} ms"
                )
            kind = "removed before each round" if args.cold_store and ours else "kept"
            print(f"{'':4s}       answer store: {kind}" + ("" if ours else " (the repository's)"))
            if args.breakdown:
                if args.cold_store and ours:
                    shutil.rmtree(store, ignore_errors=True)
                print_breakdown(breakdown(path, root or path.parent, max(args.edits, 5)))
            if ours:
                shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
