"""The click options of `distlint verify` / `check --verify`.

They live outside the ``distlint.verify`` package so that building the CLI for a plain
`check` never imports that package: only asking for a verify run does.
"""

from __future__ import annotations

from typing import Callable

import click

VERIFY_HELP = (
    "--verify RUNS the script: once on 1 process and once on N processes (torchrun, or accelerate "
    "launch), each stopped after --max-steps updates, then compares what every rank recorded."
)


def verify_options(f: Callable) -> Callable:
    """Add the verify-specific options to a click command (the caller adds --format and the script)."""
    options = [
        click.option(
            "-n",
            "--nprocs",
            type=click.IntRange(min=2),
            default=None,
            help="Processes of the N-process run [default: visible GPUs (at least 2), 2 on CPU].",
        ),
        click.option(
            "--max-steps",
            type=click.IntRange(min=1),
            default=20,
            show_default=True,
            help="Stop every rank cleanly after this many optimizer updates (x N for the 1-process run "
            "without --exact, so both runs see the same samples).",
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
            type=click.Choice(["torchrun", "accelerate"]),
            default="torchrun",
            show_default=True,
            help="Launcher of the N-process run.",
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
            "and the N-process run's LR; per-update losses must match (rtol 1e-5 in fp32).",
        ),
        click.option(
            "--loss-rtol",
            type=click.FloatRange(min=0),
            default=None,
            help="Relative tolerance of the loss comparison [default: 0.25 (+ mixed precision, "
            "+ gradient accumulation); 1e-5 with --exact].",
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
