"""The CLI hook for `distlint check --verify` / `distlint verify` (and `python -m distlint.verify`).

Importing this module is cheap: no torch, no accelerate; the runs import them in subprocesses.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from distlint.verify_options import VERIFY_HELP, verify_options  # noqa: F401 (re-exported)

INSTALL_HINT = (
    "distlint verify needs torch and accelerate in this Python: "
    "pip install 'torch>=2.1' 'accelerate>=0.26' (from a clone: pip install -e '.[verify]')"
)


def _parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env {pair!r}: expected KEY=VALUE")
        env[key] = value
    return env


def run_verify_command(
    script: str,
    script_args: Sequence[str],
    fmt: str,
    static_findings: list | None,
    *,
    nprocs: Any = None,
    max_steps: int = 20,
    timeout: float = 300.0,
    launcher: str = "torchrun",
    launcher_args: Sequence[str] = (),
    device: str = "auto",
    exact: bool = False,
    loss_rtol: Any = None,
    plot_path: Any = None,
    env: Sequence[str] = (),
    nnodes: int | None = None,
    node_rank: int | None = None,
    rdzv_endpoint: str | None = None,
    slurm: bool = False,
    keep_dir: str | None = None,
    epochs: int | None = None,
    **_ignored: Any,
) -> int:
    """Run the verification, print the report on stdout (progress on stderr).

    Returns 0 comparable, 1 a check failed, 2 a run could not be made (or bad usage),
    128 + signal when SIGTERM / SIGHUP stopped it, 130 on Ctrl-C.
    """
    import importlib.util

    from distlint.verify import launch
    from distlint.verify.core import verify
    from distlint.verify.report import Progress, render_json, render_text

    missing = [m for m in ("torch", "accelerate") if importlib.util.find_spec(m) is None]
    if missing and launcher != "fabric":
        sys.stderr.write(f"error: {INSTALL_HINT} (missing: {', '.join(missing)})\n")
        return 2
    try:
        env_vars = _parse_env(env)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    nodes = None
    if nnodes and nnodes > 1 or slurm:
        endpoint = rdzv_endpoint
        if slurm and not endpoint:
            master = launch.slurm_master()
            if master is None:
                sys.stderr.write(
                    "error: --slurm needs a SLURM allocation (SLURM_JOB_NODELIST) or --rdzv-endpoint\n"
                )
                return 2
            endpoint = f"{master}:29400"
        if not endpoint:
            sys.stderr.write("error: --nnodes needs --rdzv-endpoint HOST:PORT\n")
            return 2
        if slurm and not keep_dir:
            sys.stderr.write(
                "error: --slurm needs --keep DIR on a filesystem every node sees: the c10d "
                "rendezvous numbers the ranks, so rank 0 may be on any node, and every rank "
                "writes its records there\n"
            )
            return 2
        if not slurm and node_rank is None:
            sys.stderr.write("error: --nnodes needs --node-rank on every node\n")
            return 2
        count = nnodes or int(os.environ.get("SLURM_JOB_NUM_NODES", "0") or 0)
        if count < 2:
            sys.stderr.write(
                "error: --slurm needs --nnodes (or SLURM_JOB_NUM_NODES) of 2 or more\n"
            )
            return 2
        nodes = launch.Nodes(count, None if slurm else node_rank, endpoint, slurm=slurm)
    script_args = list(script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    try:
        result = verify(
            script,
            script_args,
            nprocs=nprocs,
            max_steps=max_steps,
            timeout=timeout,
            launcher=launcher,
            launcher_args=list(launcher_args),
            exact=exact,
            device=device,
            loss_rtol=loss_rtol,
            static_findings=static_findings,
            progress=Progress(sys.stderr),
            keep_dir=keep_dir,
            env=env_vars,
            nodes=nodes,
            epochs=epochs,
        )
    except KeyboardInterrupt:
        sys.stderr.write("distlint verify: interrupted (Ctrl-C)\n")
        return 130
    if plot_path and not result.interrupted:
        if result.exit_code == 2:
            result.notes.append("no plot: the runs could not be compared (see above)")
        elif result.runs and any(r.curve for r in result.runs):
            from distlint.verify.plot import write_plot

            try:
                write_plot(result, plot_path)
                result.notes.append(f"loss curves written to {plot_path}")
            except Exception as exc:  # a plot must not hide the verdict
                result.notes.append(f"could not write the plot: {exc}")
        else:
            result.notes.append("no loss curve to plot")
    sys.stdout.write(render_json(result) if fmt == "json" else render_text(result))
    sys.stdout.flush()
    return result.exit_code
