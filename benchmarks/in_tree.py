"""distlint where users run it: inside a real repository, against the LibCST floor and the peers.

    python benchmarks/in_tree.py --tree ~/src/diffusers                       # a git checkout
    python benchmarks/in_tree.py --tree ~/src/diffusers --sections entry,sample --rounds 3
    python benchmarks/in_tree.py                                               # diffusers' sdist
    python benchmarks/in_tree.py --sections shapes                             # generated shapes only

Why: linting a file copied out of its repository follows nothing, so the figures of
benchmarks/run.py hold only there. Inside a repository the linted file's imports resolve to
project modules (diffusers' ``examples/`` scripts import ``src/diffusers`` through the ``src/``
layout), and what the project analysis does with them is the cost users pay.

The tree: ``--tree`` (a checkout of diffusers, transformers, or a training project of yours), or
else diffusers' sdist from PyPI (``pip download --no-deps --no-binary :all:``, sources only,
unpacked under benchmarks/_work/, never committed) with benchmarks/project_tree.py's
examples-style script written into ``examples/``. The linted part of the tree is ``--paths``
(default: ``examples`` and ``src`` where they exist).

Sections (``--sections``), each a set of subprocesses run alternately round after round (as
run.py does; medians; ratios are medians of per-round ratios; CPU is user + sys of the whole
process tree from ``wait4``; RSS is the peak of the largest process):

- ``entry``: one training script (``--entry``; default the largest ``examples/**/train_*.py``
  that makes an ``Accelerator``) linted inside the tree against the same file copied alone into an
  empty repository, cold (``--no-cache``), a first run (the cache on but emptied by an untimed
  ``distlint clean``: it is written, as on a user's first run) and warm (the cache filled by an
  untimed run first), and
  the floor (``python -c "import libcst; libcst.parse_module(...)"`` of that file); TorchFix and
  Fixit on the file in the tree.
- ``sample``: every k-th Python file of ``--paths`` (``--sample`` files) named on one command
  line, in the tree: the floor (parse them), distlint cold ``-j1`` / ``-j2``, a first run ``-j1``
  (empty cache, written) and warm, the peers.
- ``tree``: all of ``--paths``: the floor, distlint cold ``-j1`` / ``-j2``, first run and warm (the peers
  only with ``--tree-peers``: TorchFix lints ~2 files a second).
- ``shapes``: generated projects at n, 2n, 4n: a package of modules importing each other in a
  chain (the entry calls the head; the whole package linted), and a class whose methods chain
  ``self`` attributes; distlint's CPU against the parse of the same files, and the exponent of
  its growth (log(t(4n) / t(n)) / log 4).

Peers are installed by run.py's ``install_peers`` into benchmarks/_work/venv-<name>.

The tree is left as it was: a ``.distlint_cache`` it had is moved aside while the benchmark runs
and put back afterwards; the one the warm runs fill is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import WORK, install_peers  # noqa: E402

PY = sys.executable
SDIST = "diffusers==0.31.0"
DISTLINT = [PY, "-m", "distlint"]
FLOOR_FILES = (
    "import sys, libcst\n"
    "for p in open(sys.argv[1]).read().split('\\n'):\n"
    "    if p:\n"
    "        try: libcst.parse_module(open(p, 'rb').read())\n"
    "        except Exception: pass\n"
)


# ------------------------------------------------------------------------------------ trees
def sdist_tree() -> Path:
    """diffusers' sdist unpacked under _work, with an examples-style training script."""
    from project_tree import SCRIPT

    name = SDIST.replace("==", "-")
    tree = WORK / f"tree-{name}"
    if tree.exists():
        return tree
    download = WORK / "download"
    found = sorted(download.glob(f"{name}.tar.gz"))
    if not found:
        subprocess.run(
            [PY, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST]
            + ["-d", str(download)],
            check=True,
        )
        found = sorted(download.glob(f"{name}.tar.gz"))
    tmp = Path(tempfile.mkdtemp(dir=WORK))
    with tarfile.open(found[0]) as archive:
        archive.extractall(tmp, filter="data")
    (inner,) = list(tmp.iterdir())
    script = inner / "examples" / "train_text_to_image.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT)
    subprocess.run(["git", "init", "-q", str(inner)], check=True)
    inner.rename(tree)
    shutil.rmtree(tmp)
    return tree


def python_files(tree: Path, paths: list[str]) -> list[str]:
    out = []
    for top in paths:
        for directory, dirs, files in os.walk(tree / top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    out.append(os.path.relpath(os.path.join(directory, name), tree))
    return out


def default_entry(tree: Path, files: list[str]) -> str:
    scripts = [
        f
        for f in files
        if f.startswith("examples") and os.path.basename(f).startswith("train")
        if "Accelerator(" in (tree / f).read_text(errors="replace")
    ]
    if not scripts:
        raise SystemExit("no examples/**/train*.py making an Accelerator: pass --entry")
    return max(scripts, key=lambda f: (tree / f).stat().st_size)


def alone(tree: Path, entry: str) -> Path:
    """The entry copied into an empty repository of its own (nothing to follow)."""
    folder = WORK / "alone"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    shutil.copy(tree / entry, folder / os.path.basename(entry))
    return folder / os.path.basename(entry)


# ------------------------------------------------------------------------------------ rounds
# An installed distlint has its .pyc files (pip writes them); a checkout gets them at its first
# import unless PYTHONDONTWRITEBYTECODE forbids it: every timed run would then compile distlint's
# sources again (~150 ms a process), which no user pays. The runs are given an environment
# without it, and the checkout is compiled before anything is timed (`compiled`).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compiled() -> None:
    """distlint's and the rules' .pyc files written (for the checkout the benchmark runs)."""
    where = subprocess.run(
        [
            PY,
            "-c",
            "import distlint, rules, os; print(os.path.dirname(distlint.__file__));"
            " print(os.path.dirname(rules.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=_ENV,
    ).stdout.split()
    subprocess.run([PY, "-m", "compileall", "-q", *where], check=True, env=_ENV)


def measure(cmd: list, cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s of the process tree, peak RSS MiB of the largest process). Exit 2 is
    accepted: a real tree holds files that do not parse (a notebook cell), reported per file."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_ENV
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    # distlint runs with --exit-zero: its 1 is a Python that could not run it (no distlint
    # importable), never findings; the floor and the peers exit 1 on findings
    allowed = (0, 2) if cmd[: len(DISTLINT)] == DISTLINT else (0, 1, 2)
    if code not in allowed or (code == 2 and "error:" not in err):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed with {code}:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def rounds(commands: dict, repeats: int, before: dict | None = None) -> dict:
    """``commands``: name -> (argv, cwd). ``before[name]``: (argv, cwd) run untimed first."""
    out: dict[str, list] = {name: [] for name in commands}
    for r in range(repeats):
        for name, (cmd, cwd) in commands.items():
            if before and name in before:
                bcmd, bcwd = before[name]
                subprocess.run(bcmd, cwd=bcwd, stdout=subprocess.DEVNULL, check=False, env=_ENV)
            out[name].append(measure(cmd, cwd))
        print(
            f"  round {r + 1}/{repeats}: "
            + ", ".join(f"{n} {v[-1][1]:.2f}s CPU" for n, v in out.items()),
            flush=True,
        )
    return out


def med(values: list, i: int) -> float:
    return statistics.median(v[i] for v in values)


def paired(a: list, b: list, i: int) -> float:
    return statistics.median(x[i] / y[i] for x, y in zip(a, b))


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, name: str, values: list, ratio: str = "") -> None:
        self.rows.append(
            (
                name,
                f"{med(values, 1):.2f} s CPU, {med(values, 0):.2f} s wall, {med(values, 2):.0f} MiB",
                ratio,
            )
        )

    def note(self, name: str, value: str, ratio: str = "") -> None:
        self.rows.append((name, value, ratio))

    def show(self) -> None:
        width = max(len(r[0]) for r in self.rows)
        vwidth = max(len(r[1]) for r in self.rows)
        print(f"| {'measure':<{width}} | {'median':<{vwidth}} | ratio |")
        print(f"| {'-' * width} | {'-' * vwidth} | ----- |")
        for name, value, note in self.rows:
            print(f"| {name:<{width}} | {value:<{vwidth}} | {note} |")


def ratio(a: list, b: list, label: str) -> str:
    return f"{paired(a, b, 1):.2f}x {label} CPU, {paired(a, b, 2):.2f}x RSS"


def peer_commands(peers: dict, files: list[str], cwd: Path) -> dict:
    out = {}
    if "torchfix" in peers:
        out["torchfix"] = ([peers["torchfix"], *files], cwd)
    if "fixit" in peers:
        out["fixit"] = ([peers["fixit"], "lint", *files], cwd)
    return out


def clean(cwd: Path) -> tuple:
    return (DISTLINT + ["clean"], cwd)


# ------------------------------------------------------------------------------------ sections
def section_entry(tree: Path, entry: str, peers: dict, repeats: int, table: Table) -> None:
    single = alone(tree, entry)
    print(f"entry: {entry} in {tree} vs alone in {single.parent}", flush=True)
    floor = [PY, "-c", "import libcst, sys; libcst.parse_module(open(sys.argv[1], 'rb').read())"]
    cmds = {
        "floor": (floor + [entry], tree),
        "alone cold": (
            DISTLINT + ["check", "--no-cache", "--exit-zero", single.name],
            single.parent,
        ),
        "in tree cold": (DISTLINT + ["check", "--no-cache", "--exit-zero", entry], tree),
        "in tree first run": (DISTLINT + ["check", "--exit-zero", entry], tree),
        "alone warm": (DISTLINT + ["check", "--exit-zero", single.name], single.parent),
        "in tree warm": (DISTLINT + ["check", "--exit-zero", entry], tree),
        **peer_commands(peers, [entry], tree),
    }
    # warm: the cache is filled by an untimed run of the same command
    before = {
        "in tree first run": clean(tree),
        "alone warm": cmds["alone warm"],
        "in tree warm": cmds["in tree warm"],
    }
    subprocess.run(DISTLINT + ["clean"], cwd=tree, stdout=subprocess.DEVNULL, check=False)
    res = rounds(cmds, repeats, before)
    table.add("entry: floor (parse the file)", res["floor"], "1.00x")
    for name in cmds:
        if name == "floor":
            continue
        note = ratio(res[name], res["floor"], "floor")
        if name == "in tree cold":
            note += f"; **{paired(res[name], res['alone cold'], 1):.2f}x alone cold**"
        if name == "in tree warm":
            note += f"; **{paired(res[name], res['alone warm'], 1):.2f}x alone warm**"
        if name in peers:
            note += (
                f"; distlint cold in tree {paired(res[name], res['in tree cold'], 1):.1f}x faster"
            )
        table.add(f"entry: {name}", res[name], note)


def section_files(
    label: str,
    tree: Path,
    files: list[str],
    targets: list[str],
    peers: dict,
    repeats: int,
    table: Table,
) -> None:
    """``files``: what the floor parses; ``targets``: what the tools are given (the same files,
    or the folders holding them)."""
    listing = WORK / f"{label}-files.txt"
    listing.write_text("\n".join(str(tree / f) for f in files))
    print(f"{label}: {len(files)} files", flush=True)
    cmds = {
        "floor": ([PY, "-c", FLOOR_FILES, str(listing)], tree),
        "cold -j1": (DISTLINT + ["check", "--no-cache", "-j1", "--exit-zero", *targets], tree),
        "cold -j2": (DISTLINT + ["check", "--no-cache", "-j2", "--exit-zero", *targets], tree),
        "first run -j1": (DISTLINT + ["check", "-j1", "--exit-zero", *targets], tree),
        "warm -j1": (DISTLINT + ["check", "-j1", "--exit-zero", *targets], tree),
        **peers,
    }
    res = rounds(cmds, repeats, {"first run -j1": clean(tree), "warm -j1": cmds["warm -j1"]})
    table.add(f"{label}: floor ({len(files)} files parsed)", res["floor"], "1.00x")
    for name in cmds:
        if name == "floor":
            continue
        note = ratio(res[name], res["floor"], "floor")
        if name == "cold -j2":
            note += f"; -j2 speed-up {paired(res['cold -j1'], res['cold -j2'], 0):.2f}x (wall)"
        if name in ("torchfix", "fixit"):
            note += f"; distlint -j1 {paired(res[name], res['cold -j1'], 1):.1f}x faster"
        table.add(f"{label}: {name}", res[name], note)


@contextlib.contextmanager
def own_cache(tree: Path):
    """The warm runs fill ``tree``'s result cache: a cache the tree already had is moved aside
    for the run and put back afterwards, and the one the run made is removed (measuring in a
    checkout of yours leaves it as it was)."""
    cache = tree / ".distlint_cache"
    aside = tree / ".distlint_cache.in_tree-aside"
    had = cache.exists() and not aside.exists()
    if had:
        cache.rename(aside)
    try:
        yield
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if had:
            aside.rename(cache)


# ------------------------------------------------------------------------------------ shapes
def chain_package(folder: Path, n: int) -> None:
    """``pkg/m0 .. m{n-1}``: m_i's ``step_i`` calls m_{i+1}'s; the last makes the Accelerator."""
    pkg = folder / "pkg"
    pkg.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("")
    (pkg / "__init__.py").write_text("")
    for i in range(n):
        if i == n - 1:
            body = (
                "from accelerate import Accelerator\n\n\n"
                f"def step_{i}(lr):\n    return Accelerator(), lr\n"
            )
        else:
            body = (
                f"import random\n\nfrom pkg.m{i + 1} import step_{i + 1}\n\n\n"
                f"def step_{i}(lr):\n    x = random.random()\n    return step_{i + 1}(lr * x)\n"
            )
        (pkg / f"m{i}.py").write_text(body)
    (folder / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n\nfrom pkg.m0 import step_0\n\n"
        "model = torch.nn.Linear(2, 2)\naccelerator, lr = step_0(1e-3)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        "loader = DataLoader(range(8), batch_size=4)\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "for batch in loader:\n    accelerator.backward(model(batch).sum())\n"
        "    optimizer.step()\n    optimizer.zero_grad()\n"
    )


def method_class(folder: Path, n: int) -> None:
    """One class, ``n`` methods, each reading the attribute the previous one set."""
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("")
    lines = [
        "import torch",
        "from accelerate import Accelerator",
        "",
        "",
        "class Trainer:",
        "    def __init__(self, lr):",
        "        self.accelerator = Accelerator()",
        "        self.a0 = lr",
    ]
    for i in range(1, n + 1):
        lines += [
            f"    def m{i}(self):",
            f"        self.a{i} = self.a{i - 1} * 2",
            f"        return self.a{i}",
        ]
    lines += [
        "    def fit(self, model):",
        f"        opt = torch.optim.AdamW(model.parameters(), lr=self.m{n}())",
        "        model, opt = self.accelerator.prepare(model, opt)",
        "        return model, opt",
        "",
        "",
        "Trainer(1e-3).fit(torch.nn.Linear(2, 2))",
    ]
    (folder / "train.py").write_text("\n".join(lines) + "\n")


def section_shapes(sizes: list[int], class_sizes: list[int], repeats: int, table: Table) -> None:
    base = Path(tempfile.mkdtemp(prefix="shapes-", dir=WORK))
    shapes = {
        "chain package, entry": (chain_package, ["train.py"], sizes),
        "chain package, whole": (chain_package, ["."], sizes),
        "class methods": (method_class, ["train.py"], class_sizes),
    }
    for label, (make, args, ns) in shapes.items():
        times = {}
        for n in ns:
            folder = base / f"{make.__name__}-{n}"
            if not folder.exists():
                make(folder, n)
            files = python_files(folder, ["."])
            listing = folder.parent / f"{folder.name}.txt"
            listing.write_text("\n".join(str(folder / f) for f in files))
            cmds = {
                "floor": ([PY, "-c", FLOOR_FILES, str(listing)], folder),
                "distlint": (
                    DISTLINT + ["check", "--no-cache", "-j1", "--exit-zero", *args],
                    folder,
                ),
            }
            print(f"shape {label} n={n}", flush=True)
            res = rounds(cmds, repeats)
            times[n] = (med(res["distlint"], 1), med(res["floor"], 1))
            table.note(
                f"shape: {label}, n={n}",
                f"{times[n][0]:.2f} s CPU (floor {times[n][1]:.2f} s)",
                f"{paired(res['distlint'], res['floor'], 1):.2f}x floor",
            )
        small, big = min(ns), max(ns)
        # the raw exponent of the whole process's CPU (start-up included: it flatters no one)
        exponent = math.log(times[big][0] / times[small][0]) / math.log(big / small)
        table.note(f"shape: {label}, growth n={small}..{big}", f"n^{exponent:.2f}", "")
    shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------------ main
def measure_tree(
    tree: Path,
    entry: str,
    files: list[str],
    paths: list[str],
    peers: dict,
    args: argparse.Namespace,
    table: Table,
) -> None:
    sections = set(args.sections.split(","))
    if "entry" in sections:
        section_entry(tree, entry, peers, args.rounds, table)
    if "sample" in sections:
        step = max(1, len(files) // max(1, args.sample))
        sample = files[::step][: args.sample]
        section_files(
            "sample", tree, sample, sample, peer_commands(peers, sample, tree), args.rounds, table
        )
    if "tree" in sections:
        extra = peer_commands(peers, paths, tree) if args.tree_peers else {}
        section_files("tree", tree, files, paths, extra, args.tree_rounds, table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", help="a repository to measure in (default: diffusers' sdist)")
    parser.add_argument("--entry", help="the training script, relative to the tree")
    parser.add_argument(
        "--paths", nargs="*", help="folders of the tree to lint (default: examples src)"
    )
    parser.add_argument("--sample", type=int, default=34, help="files in the sample section")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree-rounds", type=int, default=1)
    parser.add_argument("--sections", default="entry,sample,tree,shapes")
    parser.add_argument("--sizes", default="250,500,1000", help="chain sizes n,2n,4n")
    parser.add_argument("--class-sizes", default="500,1000,2000", help="methods n,2n,4n")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--tree-peers", action="store_true", help="peers on the whole tree (slow)")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    WORK.mkdir(exist_ok=True)
    sections = set(args.sections.split(","))
    peers = {} if args.skip_peers else install_peers()
    compiled()
    peers = {k: v for k, v in peers.items() if k in ("torchfix", "fixit")}
    table = Table()
    if sections & {"entry", "sample", "tree"}:
        tree = Path(args.tree).resolve() if args.tree else sdist_tree()
        paths = args.paths or [p for p in ("examples", "src") if (tree / p).is_dir()]
        files = python_files(tree, paths)
        entry = args.entry or default_entry(tree, files)
        print(f"tree {tree}: {len(files)} files under {', '.join(paths)}", flush=True)
        with own_cache(tree):
            measure_tree(tree, entry, files, paths, peers, args, table)
    if "shapes" in sections:
        section_shapes(
            [int(s) for s in args.sizes.split(",")],
            [int(s) for s in args.class_sizes.split(",")],
            max(1, args.rounds - 1),
            table,
        )
    print()
    print(f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; medians of rounds")
    table.show()


if __name__ == "__main__":
    main()
