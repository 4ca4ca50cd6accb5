"""Generated single-file shapes (issue #17): does distlint's own analysis grow like the parse?

    python benchmarks/shapes.py                 # every shape at n, 2n, 4n
    python benchmarks/shapes.py --scale 0.5     # smaller n (quick check)
    python benchmarks/shapes.py --files fixtures/scripts --lines 10000   # whole-file ratio

For each shape: CPU seconds of the raw LibCST parse (the cyclic collector on, as a plain call
runs), of the same parse with the collector paused (as distlint parses: the stricter floor on big
inputs, where the collections during a parse grow with it), and of the whole lint (parse
included, every default rule enabled, in process), timed alternately, each after a
``gc.collect()``, best of ``--repeats``; the growth exponent of the lint between n and 4n
(log2(t4n / tn) / 2); and the ratio of the lint to the raw parse at 4n (and to the paused one).
Targets (#17): every exponent <= 1.2 and no ratio to the raw parse over 2.0 at 4n.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

import libcst

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from distlint.config import Config
from distlint.runner import lint_source

HEAD = (
    "import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n\n"
    "accelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
    "loader = DataLoader(range(64), batch_size=8)\n"
    "model, loader = accelerator.prepare(model, loader)\n"
)


def optimizer_scheduler_pairs(n: int) -> str:
    body = [
        f"opt{i} = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"sched{i} = torch.optim.lr_scheduler.CosineAnnealingLR(opt{i}, T_max=len(loader))\n"
        f"opt{i}, sched{i} = accelerator.prepare(opt{i}, sched{i})\n"
        for i in range(n)
    ]
    return HEAD + "".join(body)


def onecycle_schedulers(n: int) -> str:
    body = [
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        *(
            f"sched{i} = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.{i + 1}, total_steps=100)\n"
            for i in range(n)
        ),
    ]
    return HEAD + "".join(body)


def lr_reassignments(n: int) -> str:
    body = [
        f"lr = 0.1 * {i + 1}\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        for i in range(n)
    ]
    return HEAD + "".join(body)


def distinct_functions(n: int) -> str:
    body = [
        f"def build{i}(m, lr):\n    scaled = lr * {i + 1}\n"
        f"    return torch.optim.SGD(m.parameters(), lr=scaled)\n\n"
        f"opt{i} = build{i}(model, 0.1)\n\n"
        for i in range(n)
    ]
    return HEAD + "".join(body)


def one_name_reassigned(n: int) -> str:
    return HEAD + "x = 0\n" + "x = x + 1\n" * n + "print(x)\n"


def elif_chain(n: int) -> str:
    lines = ["mode = 3\n", "if mode == 0:\n    lr = 0.0\n"]
    lines += [f"elif mode == {i}:\n    lr = 0.{i}\n" for i in range(1, n)]
    lines.append("optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n")
    return HEAD + "".join(lines)


SHAPES = {
    "optimizer+scheduler pairs": (optimizer_scheduler_pairs, 100),
    "OneCycleLR schedulers": (onecycle_schedulers, 100),
    "LR reassigned, optimizer after each": (lr_reassignments, 250),
    "distinct functions": (distinct_functions, 250),
    "one name reassigned": (one_name_reassigned, 2000),
    "elif chain": (elif_chain, 100),
}


def cpu(fn) -> float:
    gc.collect()  # start each timing with no garbage of the previous one to collect
    start = time.process_time()
    fn()
    return time.process_time() - start


def paused_parse(source: str) -> None:
    """LibCST's parse with the cyclic collector paused, as distlint parses (the tree holds no
    cycles; a collection while it grows only walks it): the stricter floor."""
    gc.disable()
    try:
        libcst.parse_module(source)
    finally:
        gc.enable()


def measure(source: str, repeats: int) -> tuple[float, float, float]:
    """Best CPU times of the raw parse (the collector on, as a plain call runs), of the same
    parse with the collector paused, and of the lint, timed alternately. No size budget
    (``max-file-size = 0``): a 100,000-line file is over the default 512 KiB, which the lint
    would refuse unparsed."""
    config = Config(max_file_size=0)
    parse = paused = lint = math.inf
    for _ in range(repeats):
        parse = min(parse, cpu(lambda: libcst.parse_module(source)))
        paused = min(paused, cpu(lambda: paused_parse(source)))
        lint = min(lint, cpu(lambda: lint_source(source, "shape.py", config)))
    return parse, paused, lint


def run_shapes(scale: float, repeats: int, only: str | None) -> bool:
    ok = True
    print(
        f"{'shape':38} {'n':>6} {'parse s':>8} {'paused':>8} {'lint s':>8} {'ratio':>6} "
        f"{'ratio*':>6}  (ratio*: to the parse with the collector paused)"
    )
    for name, (make, base) in SHAPES.items():
        if only and only not in name:
            continue
        n = max(4, int(base * scale))
        times = []
        for k in (1, 2, 4):
            parse, paused, lint = measure(make(n * k), repeats)
            times.append((n * k, parse, paused, lint))
            print(
                f"{name:38} {n * k:>6} {parse:8.3f} {paused:8.3f} {lint:8.3f} "
                f"{lint / parse:6.2f} {lint / paused:6.2f}"
            )
        exponent = math.log2(max(times[2][3], 1e-6) / max(times[0][3], 1e-6)) / 2
        ratio = times[2][3] / times[2][1]  # the floor: the raw parse as a plain call
        strict = times[2][3] / times[2][2]
        verdict = "ok" if exponent <= 1.2 and ratio <= 2.0 else "OVER"
        ok = ok and verdict == "ok"
        print(
            f"{'':38} growth n^{exponent:.2f}, {ratio:.2f}x the raw parse at 4n: {verdict} "
            f"({strict:.2f}x the paused parse)"
        )
    return ok


def run_files(folder: str, lines: int, repeats: int) -> None:
    texts = []
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(".py"):
            with open(os.path.join(folder, entry), encoding="utf-8") as handle:
                texts.append(handle.read())
    blob = "\n".join(texts)
    total = blob.count("\n")
    source = ""
    while source.count("\n") < lines:
        source += blob + "\n"
    for size in (lines // 4, lines // 2, lines):
        part = "\n".join(source.splitlines()[:size]) + "\n"
        try:
            libcst.parse_module(part)
        except Exception:  # cut inside a statement: back off to a blank line
            cut = part.rfind("\n\n\n")
            part = part[:cut] + "\n"
        parse, paused, lint = measure(part, repeats)
        print(
            f"{folder} x{lines / max(total, 1):.1f} {part.count(chr(10)):>7} lines "
            f"parse {parse:7.3f}s (collector paused {paused:7.3f}s) lint {lint:7.3f}s "
            f"ratio {lint / parse:5.2f} ({lint / paused:5.2f} to the paused parse)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", help="run the shapes whose name contains this")
    parser.add_argument("--files", help="a folder of scripts to concatenate instead")
    parser.add_argument("--lines", type=int, default=10_000)
    args = parser.parse_args()
    if args.files:
        run_files(args.files, args.lines, args.repeats)
        return 0
    return 0 if run_shapes(args.scale, args.repeats, args.only) else 1


if __name__ == "__main__":
    sys.exit(main())
