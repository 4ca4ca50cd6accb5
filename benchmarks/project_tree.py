"""Whole-project analysis in a real 300+-module tree: what following imports costs.

    python benchmarks/project_tree.py            # ~1-2 min on 2 cores
    python benchmarks/project_tree.py --rounds 9

The tree is diffusers' own sources from its sdist (``pip download --no-deps --no-binary :all:
diffusers==0.30.0``: 464 modules under ``src/diffusers``, a ``setup.py`` / ``pyproject.toml`` at
the root), unpacked into a temporary folder, plus one examples-style training script written here
(``examples/train_text_to_image.py``: accelerate, argparse, ``from diffusers import ...``,
``diffusers.optimization.get_scheduler``, ``diffusers.training_utils``), so the script's
``diffusers`` imports resolve to project files through the ``src/`` layout.

Measured (subprocesses, alternating rounds, medians, as benchmarks/run.py does):

- *single file*: ``distlint check --no-cache`` on the same script copied alone into an empty
  folder (nothing to follow): the single-file cold start;
- *in tree*: the same command on the script inside the tree (its imports are followed);
- the ratio in-tree / single-file (issue #11: at most 2x when few modules are reachable).

In-process, a whole-tree run (``api.lint_paths`` over ``src`` and ``examples`` with ``-j1``):
files linted, modules parsed by the shared project, and whether every module was parsed once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

SDIST = "diffusers==0.30.0"

SCRIPT = """\
import argparse
import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration, set_seed
from torch.utils.data import DataLoader

from diffusers import DDPMScheduler, UNet2DConditionModel
from diffusers.optimization import get_scheduler
from diffusers.training_utils import EMAModel, compute_snr


def parse_args():
    parser = argparse.ArgumentParser(description="text-to-image fine-tuning")
    parser.add_argument("--pretrained_model_name_or_path", type=str, required=True)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--scale_lr", action="store_true")
    parser.add_argument("--lr_scheduler", type=str, default="constant")
    parser.add_argument("--lr_warmup_steps", type=int, default=500)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--num_train_epochs", type=int, default=100)
    parser.add_argument("--snr_gamma", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output_dir", type=str, default="out")
    return parser.parse_args()


def main():
    args = parse_args()
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        project_config=ProjectConfiguration(project_dir=args.output_dir),
    )
    if args.seed is not None:
        set_seed(args.seed)
    noise_scheduler = DDPMScheduler.from_pretrained(args.pretrained_model_name_or_path, subfolder="scheduler")
    unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
    ema_unet = EMAModel(unet.parameters())
    if args.scale_lr:
        args.learning_rate = (
            args.learning_rate * args.gradient_accumulation_steps * args.train_batch_size * accelerator.num_processes
        )
    optimizer = torch.optim.AdamW(unet.parameters(), lr=args.learning_rate)
    train_dataloader = DataLoader(list(range(64)), batch_size=args.train_batch_size, shuffle=True)
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or args.num_train_epochs * num_update_steps_per_epoch
    lr_scheduler = get_scheduler(
        args.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=args.lr_warmup_steps * accelerator.num_processes,
        num_training_steps=max_train_steps * accelerator.num_processes,
    )
    unet, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        unet, optimizer, train_dataloader, lr_scheduler
    )
    for epoch in range(args.num_train_epochs):
        for batch in train_dataloader:
            with accelerator.accumulate(unet):
                latents = torch.randn(4, 4, 8, 8)
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (4,))
                noisy = noise_scheduler.add_noise(latents, noise, timesteps)
                pred = unet(noisy, timesteps, None).sample
                if args.snr_gamma is None:
                    loss = F.mse_loss(pred, noise)
                else:
                    snr = compute_snr(noise_scheduler, timesteps)
                    loss = (F.mse_loss(pred, noise, reduction="none").mean() * snr).mean()
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            ema_unet.step(unet.parameters())


if __name__ == "__main__":
    main()
"""


def fetch_tree(work: str) -> str:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        + [SDIST, "-d", work],
        check=True,
    )
    archive = next(os.path.join(work, n) for n in os.listdir(work) if n.endswith(".tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data") if sys.version_info >= (3, 12) else tar.extractall(work)
    tree = next(
        os.path.join(work, n) for n in os.listdir(work) if os.path.isdir(os.path.join(work, n))
    )
    os.makedirs(os.path.join(tree, "examples"), exist_ok=True)
    with open(os.path.join(tree, "examples", "train_text_to_image.py"), "w") as handle:
        handle.write(SCRIPT)
    return tree


def timed(cmd: list[str], cwd: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed, proc.stdout


def entry_dependencies(script: str) -> list[str]:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from distlint import api
    from distlint.analysis import project as project_mod

    project_mod.forget_projects()
    result = api.lint_file(script)
    return [path for path, _digest in result.dependencies]


def whole_tree(tree: str) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import hashlib

    import libcst

    from distlint import api
    from distlint.analysis import project as project_mod

    project_mod.forget_projects()
    counts: dict[str, int] = {}  # sha256 of a parsed source -> how many times LibCST parsed it
    original = libcst.parse_module

    def counting(source, *args, **kwargs):
        raw = source if isinstance(source, bytes) else source.encode("utf-8")
        key = hashlib.sha256(raw).hexdigest()
        counts[key] = counts.get(key, 0) + 1
        return original(source, *args, **kwargs)

    libcst.parse_module = counting
    try:
        start = time.perf_counter()
        results = list(
            api.lint_paths(
                [os.path.join(tree, "src"), os.path.join(tree, "examples")],
                api.LintOptions(jobs=1),
            )
        )
        elapsed = time.perf_counter() - start
    finally:
        libcst.parse_module = original
    projects = list(project_mod._PROJECTS.values())
    return {
        "files": len(results),
        "seconds": elapsed,
        "projects": len(projects),
        "project parses": sum(p.parse_count for p in projects),
        "sources parsed": len(counts),
        "parses": sum(counts.values()),
        "parsed more than once": sorted(p for p, n in counts.items() if n > 1),
        "findings": sum(len(r.findings) for r in results),
        "errors": sum(len(r.errors) for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree")
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="distlint-project-tree-")
    try:
        tree = fetch_tree(work)
        n_modules = sum(
            1
            for _d, _s, files in os.walk(os.path.join(tree, "src"))
            for f in files
            if f.endswith(".py")
        )
        alone = os.path.join(work, "alone")
        os.makedirs(alone)
        shutil.copy(os.path.join(tree, "examples", "train_text_to_image.py"), alone)
        cmd = [sys.executable, "-m", "distlint", "check", "--no-cache", "train_text_to_image.py"]
        single, inside = [], []
        out_single = out_inside = ""
        timed(cmd, alone)  # warm the OS file cache and bytecode once, untimed
        timed(cmd, os.path.join(tree, "examples"))
        for _ in range(opts.rounds):
            t, out_single = timed(cmd, alone)
            single.append(t)
            t, out_inside = timed(cmd, os.path.join(tree, "examples"))
            inside.append(t)
        ratios = [b / a for a, b in zip(single, inside)]
        print(
            f"tree: {SDIST} sdist, {n_modules} modules under src/, + examples/train_text_to_image.py"
        )
        print(f"single file (nothing to follow): median {statistics.median(single) * 1000:.0f} ms")
        print(f"in the tree (imports followed):  median {statistics.median(inside) * 1000:.0f} ms")
        print(
            f"ratio in-tree / single-file:     median {statistics.median(ratios):.2f}x "
            f"(target <= 2x)"
        )
        print("findings alone:   ", out_single.strip().splitlines()[-1:] or ["none"])
        print("findings in tree: ", out_inside.strip().splitlines()[-1:] or ["none"])
        reached = entry_dependencies(os.path.join(tree, "examples", "train_text_to_image.py"))
        print(f"modules and config files the script reached: {len(reached)}")
        for path in reached[:12]:
            print("   ", os.path.relpath(path, tree))
        info = whole_tree(tree)
        print(
            f"whole-tree run (-j1): {info['files']} files in {info['seconds']:.1f} s; "
            f"{info['sources parsed']} distinct sources parsed by LibCST in {info['parses']} parses "
            f"({info['project parses']} of them for imports), parsed more than once: "
            f"{len(info['parsed more than once'])}; findings {info['findings']}, errors {info['errors']}"
        )
    finally:
        if opts.keep:
            print("tree kept in", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
