"""distlint against its peers, side by side in one run.

    python benchmarks/run.py                 # build corpus + peers once, then measure
    python benchmarks/run.py --sample 0      # the whole diffusers package (slow: TorchFix ~2 files/s)
    python benchmarks/run.py --skip-peers    # only distlint and the LibCST floor

Corpus: the .py files of a pinned diffusers wheel from PyPI (mostly torch code), a deterministic
sample of them by default, plus the project's fixtures. Peers (TorchFix, Fixit, ruff) are installed
in their own virtualenvs under benchmarks/_work/ (git-ignored; TorchFix pins an older libcst).
Every command runs as a subprocess, alternately, --repeats times; we report medians of wall time,
CPU time (user + sys of the whole process tree) and peak RSS, and the ratios of each round.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / "_work"
PY = sys.executable
DIFFUSERS = "0.30.0"
PEERS = {"torchfix": "torchfix==0.7.0", "fixit": "fixit==2.2.1", "ruff": "ruff==0.17.6"}
COLD_LINES = 300


# ------------------------------------------------------------------------------------ setup
def sh(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run(cmd, check=True, **kw)


def install_peers() -> dict:
    found = {}
    for name, spec in PEERS.items():
        venv = WORK / f"venv-{name}"
        exe = venv / "bin" / name
        if not exe.exists():
            try:
                sh([PY, "-m", "venv", str(venv)])
                sh([str(venv / "bin" / "pip"), "install", "-q", spec])
            except subprocess.CalledProcessError as exc:
                print(
                    f"!! could not install {spec}: {exc}; it is left out of the table", flush=True
                )
                continue
        found[name] = str(exe)
    return found


def build_corpus(sample: int) -> Path:
    corpus = WORK / f"corpus-{DIFFUSERS}-{sample}"
    if corpus.exists():
        return corpus
    download = WORK / "download"
    wheels = glob.glob(str(download / f"diffusers-{DIFFUSERS}-*.whl"))
    if not wheels:
        sh(
            [
                PY,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                f"diffusers=={DIFFUSERS}",
                "-d",
                str(download),
            ]
        )
        wheels = glob.glob(str(download / f"diffusers-{DIFFUSERS}-*.whl"))
    tmp = corpus.with_name(corpus.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = sorted(n for n in wheel.namelist() if n.endswith(".py"))
        if sample:
            step = max(1, len(names) // sample)
            names = names[::step][:sample]
        for name in names:
            target = tmp / "diffusers" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(wheel.read(name))
    for path in sorted(ROOT.glob("fixtures/**/*.py")):
        try:  # fixtures written not to parse test error paths, not throughput: left out
            compile(path.read_bytes(), str(path), "exec", flags=0x400, dont_inherit=True)
        except (SyntaxError, ValueError):
            print(f"   corpus: {path.relative_to(ROOT)} does not parse; left out", flush=True)
            continue
        target = tmp / "fixtures" / path.relative_to(ROOT / "fixtures")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    # its own repository: no tool applies this repo's .gitignore (which ignores _work/) or config
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)
    tmp.rename(corpus)
    return corpus


def cold_script() -> Path:
    """A ~300-line training script: whole fixture scripts concatenated (so it has findings).
    In its own repository: Fixit skips files this repository's .gitignore ignores (_work/)."""
    target = WORK / "cold" / "train.py"
    if not (target.parent / ".git").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(target.parent)], check=True)
    parts, lines = [], 0
    for path in sorted(ROOT.glob("fixtures/scripts/*.py")):
        text = path.read_text()
        if lines and lines + text.count("\n") > COLD_LINES + 40:
            continue
        parts.append(text)
        lines += text.count("\n")
        if lines >= COLD_LINES:
            break
    target.write_text("".join(parts))
    return target


# ------------------------------------------------------------------------------------ measuring
def measure(cmd, cwd) -> tuple:
    """(wall s, CPU s of the process tree, peak RSS MiB of the largest process)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed with {code}:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run_rounds(commands: dict, repeats: int, cwd, before=None) -> dict:
    """Run every command once per round, alternately; ``before[name]`` runs untimed first."""
    out = {name: [] for name in commands}
    for r in range(repeats):
        for name, cmd in commands.items():
            if before and name in before:
                subprocess.run(before[name], cwd=cwd, stdout=subprocess.DEVNULL, check=True)
            out[name].append(measure(cmd, cwd))
        print(
            f"  round {r + 1}/{repeats}: "
            + ", ".join(f"{n} {v[-1][0]:.2f}s wall {v[-1][1]:.2f}s CPU" for n, v in out.items()),
            flush=True,
        )
    return out


def med(values, i):
    return statistics.median(v[i] for v in values)


def paired(a, b, i):
    """Median over rounds of a[i] / b[i] (paired: same round, machine state alike)."""
    ratios = [(x[i] / y[i]) for x, y in zip(a, b)]
    return statistics.median(ratios)


def count_files(corpus: Path) -> int:
    return sum(1 for p in corpus.rglob("*.py") if ".git" not in p.parts)


def prefilter_share(corpus: Path) -> float:
    """Share of corpus files that contain a trigger of an enabled rule (the others are not parsed)."""
    sys.path.insert(0, str(ROOT))
    from distlint.config import Config
    from distlint.registry import all_rules

    codes = Config().enabled_codes({r.CODE: r.DEFAULT_ENABLED for r in all_rules()})
    triggers = [t for r in all_rules() if r.CODE in codes for t in r.TRIGGERS]
    files = [p for p in corpus.rglob("*.py") if ".git" not in p.parts]
    hit = sum(1 for p in files if any(t in p.read_text(errors="replace") for t in triggers))
    return hit / len(files)


# ------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sample", type=int, default=120, help="diffusers files in the corpus (0: all %(default)s)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold-repeats", type=int, default=9)
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument(
        "--sections", default="cold,throughput,cache", help="comma-separated subset to run"
    )
    args = parser.parse_args()
    # Measure what installed users get: bytecode caches on. (Some environments set
    # PYTHONDONTWRITEBYTECODE, which makes every run recompile the modules of an editable
    # install such as distlint's, ~20-40 ms, while wheels of the peers ship compiled.)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    WORK.mkdir(exist_ok=True)
    peers = {} if args.skip_peers else install_peers()
    corpus = build_corpus(args.sample)
    script = cold_script()
    n_files = count_files(corpus)
    distlint = [PY, "-m", "distlint"]
    rows = []

    sections = set(args.sections.split(","))
    thr_res = None
    # 1. cold start on one script
    print(f"cold start: {script} ({script.read_text().count(chr(10))} lines)", flush=True)
    floor_code = "import libcst, sys; libcst.parse_module(open(sys.argv[1], 'rb').read())"
    cold = {
        "floor": [PY, "-c", floor_code, str(script)],
        "distlint": distlint + ["check", "--no-cache", str(script)],
    }
    if "torchfix" in peers:
        cold["torchfix"] = [peers["torchfix"], str(script)]
    if "fixit" in peers:
        cold["fixit"] = [peers["fixit"], "lint", str(script)]
    if "ruff" in peers:
        cold["ruff"] = [peers["ruff"], "check", "--no-cache", "--isolated", str(script)]
    cold_res = run_rounds(cold, args.cold_repeats, script.parent) if "cold" in sections else {}
    for name, values in cold_res.items():
        rows.append(
            (
                f"cold start, 1 script: {name}",
                f"{med(values, 0):.3f} s wall, {med(values, 1):.3f} s CPU",
                "1.00x floor"
                if name == "floor"
                else f"{paired(values, cold_res['floor'], 0):.2f}x floor (wall), {paired(values, cold_res['floor'], 1):.2f}x (CPU)",
            )
        )

    # 2. throughput on the corpus: files per CPU-second
    print(f"throughput: {corpus} ({n_files} files)", flush=True)
    floor = HERE / "_libcst_floor.py"
    thr = {
        "raw parse": [PY, str(floor), "parse", "."],
        "parse+Scope+QualifiedName": [PY, str(floor), "metadata", "."],
        "distlint": distlint + ["check", "--no-cache", "-j1", "--exit-zero", "."],
    }
    if "torchfix" in peers:
        thr["torchfix"] = [peers["torchfix"], "."]
    if "fixit" in peers:
        thr["fixit"] = [peers["fixit"], "lint", "."]
    if "ruff" in peers:
        thr["ruff"] = [peers["ruff"], "check", "--no-cache", "--isolated", "--exit-zero", "."]
    thr_res = run_rounds(thr, args.repeats, corpus) if "throughput" in sections else {}
    for name, values in thr_res.items():
        rate = n_files / med(values, 1)
        if name == "distlint":
            note = f"{paired(thr_res['distlint'], thr_res['raw parse'], 1):.2f}x raw parse CPU"
        else:
            note = f"distlint is {paired(values, thr_res['distlint'], 1):.1f}x faster per CPU-s"
        rows.append((f"throughput: {name}", f"{rate:.1f} files/CPU-s", note))

    # 3. cache, pool, memory (distlint only)
    cache_cmds = {
        "cold cache": distlint + ["check", "--exit-zero", "."],
        "warm cache": distlint + ["check", "--exit-zero", "."],
        "1 process": distlint + ["check", "--no-cache", "-j1", "--exit-zero", "."],
        "2 processes": distlint + ["check", "--no-cache", "-j2", "--exit-zero", "."],
    }
    res = (
        run_rounds(cache_cmds, args.repeats, corpus, before={"cold cache": distlint + ["clean"]})
        if "cache" in sections
        else {}
    )
    if res:
        rows.append(
            (
                "cache: cold vs warm (wall)",
                f"{med(res['cold cache'], 0):.2f} s / {med(res['warm cache'], 0):.3f} s",
                f"warm {paired(res['cold cache'], res['warm cache'], 0):.1f}x faster",
            )
        )
        rows.append(
            (
                "pool: 1 vs 2 processes (wall)",
                f"{med(res['1 process'], 0):.2f} s / {med(res['2 processes'], 0):.2f} s",
                f"speed-up {paired(res['1 process'], res['2 processes'], 0):.2f}x",
            )
        )
    if thr_res:
        rows.append(
            (
                "peak RSS: distlint -j1 vs raw parse",
                f"{med(thr_res['distlint'], 2):.0f} MiB / {med(thr_res['raw parse'], 2):.0f} MiB",
                f"{paired(thr_res['distlint'], thr_res['raw parse'], 2):.2f}x raw parse",
            )
        )

    share = prefilter_share(corpus)
    print()
    print(
        f"corpus: diffusers {DIFFUSERS} ({'all' if not args.sample else args.sample} files) + fixtures = {n_files} files; "
        f"{share:.0%} contain a rule trigger (the rest are skipped unparsed); cold script {script.read_text().count(chr(10))} lines; "
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; medians of {args.repeats} rounds ({args.cold_repeats} for cold start)"
    )
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':<{width}} | {'median':<32} | ratio |")
    print(f"| {'-' * width} | {'-' * 32} | ----- |")
    for name, value, note in rows:
        print(f"| {name:<{width}} | {value:<32} | {note} |")


if __name__ == "__main__":
    main()
