"""The click options of `distlint verify` / `check --verify`.

They live outside the ``distlint.verify`` package so that building the CLI for a plain
`check` never imports that package: only asking for a verify run does.
"""

from __future__ import annotations

from typing import Callable

import click

# The scratch copy each run works in (distlint.verify.scratch reads these; the help says them).
COPY_BUDGET = 64 * 1024 * 1024  # bytes copied per run, in all
FILE_COPY_LIMIT = 1024 * 1024  # a larger file (data, weights) is linked (copy on write)
SCRATCH_HELP = (
    "Each run works in a copy of the working directory: every folder level re-created, files "
    f"copied up to {COPY_BUDGET >> 20} MiB per run (a file over {FILE_COPY_LIMIT >> 20} MiB, or "
    "past that, is a link the probe replaces by a copy before the script writes to it); a "
    "change still seen in your tree afterwards fails the verification, naming the file."
)


VERIFY_HELP = (
    "--verify RUNS the script: once on N processes (torchrun, accelerate launch or fabric run) "
    "stopped after --max-steps updates, then on 1 process until it trained on as many samples, "
    "and compares what every rank recorded. " + SCRATCH_HELP
)


def verify_options(f: Callable) -> Callable:
    """Add the verify-specific options to a click command (the caller adds --format and the script)."""
    options = [
        click.option(
            "-n",
            "--nprocs",
            type=click.IntRange(min=1),
            default=None,
            help="Processes of the N-process run (per node with --nnodes) [default: visible GPUs "
            "(at least 2), 2 on CPU].",
        ),
        click.option(
            "--max-steps",
            type=click.IntRange(min=1),
            default=20,
            show_default=True,
            help="Stop every rank of the N-process run cleanly after this many optimizer updates; "
            "the 1-process run then stops once it has trained on as many samples.",
        ),
        click.option(
            "--epochs",
            type=click.IntRange(min=0),
            default=None,
            metavar="E",
            help="Run the N-process run past --max-steps to the first update of its training "
            "data's E-th pass (what the epoch-order and evaluation checks need) [default: 2 when "
            "distlint check reported DL304, DL401 or DL402, else off; 0: off].",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=300.0,
            show_default=True,
            help="Seconds for both runs together; then every process of the run is killed.",
        ),
        click.option(
            "--launcher",
            type=click.Choice(["torchrun", "accelerate", "fabric"]),
            default="torchrun",
            show_default=True,
            help="Launcher of both runs (the 1-process run uses it with one process; fabric: "
            "Lightning Fabric's `fabric run`).",
        ),
        click.option(
            "--env",
            "env",
            multiple=True,
            metavar="KEY=VAL",
            help="Set an environment variable for both runs (repeatable).",
        ),
        click.option(
            "--nnodes",
            type=click.IntRange(min=1),
            default=None,
            help="Several machines: torchrun's multi-node rendezvous (run verify on every node, "
            "node 0 compares).",
        ),
        click.option(
            "--node-rank",
            type=click.IntRange(min=0),
            default=None,
            help="This machine's node rank (with --nnodes; not with --slurm).",
        ),
        click.option(
            "--rdzv-endpoint",
            default=None,
            metavar="HOST:PORT",
            help="Rendezvous of the multi-node run [default with --slurm: the allocation's first "
            "host, port 29400].",
        ),
        click.option(
            "--slurm",
            is_flag=True,
            default=False,
            help="Start the multi-node run with srun inside a SLURM allocation (one torchrun per "
            "node; needs --keep DIR on a filesystem every node sees).",
        ),
        click.option(
            "--keep",
            "keep_dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Keep the records, logs and scratch folders of both runs in this folder "
            "(relative to the working directory).",
        ),
        click.option(
            "--launcher-arg",
            "launcher_args",
            multiple=True,
            metavar="ARG",
            help="Extra argument passed to the launcher (repeatable), "
            "e.g. --launcher-arg=--config_file=cfg.yaml.",
        ),
        click.option(
            "--device",
            type=click.Choice(["auto", "cpu", "cuda", "xla"]),
            default="auto",
            show_default=True,
            help="Where to run: GPUs when visible, else CPU (gloo); xla needs a TPU.",
        ),
        click.option(
            "--exact",
            is_flag=True,
            default=False,
            help="Accelerate's equivalence test on your script: the 1-process run uses per-device batch x N "
            "and the N-process run's LR; per-update losses must match (rtol 1e-5 in fp32, 5e-2 under "
            "bf16, 1e-2 under fp16, as observed).",
        ),
        click.option(
            "--loss-rtol",
            type=click.FloatRange(min=0),
            default=None,
            help="Relative tolerance of the loss comparison [default: a consistent offset beyond "
            "the runs' own noise fails at 5% of the loss, warns from 1%; with --exact, from the "
            "precision that ran].",
        ),
        click.option(
            "--plot",
            "plot_path",
            type=click.Path(dir_okay=False, writable=True),
            default=None,
            help="Write a PNG of both loss curves against samples seen (needs distlint[plot]).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f
