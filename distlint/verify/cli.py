"""The CLI hook for `distlint check --verify` / `distlint verify` (and `python -m distlint.verify`).

Importing this module is cheap: no torch, no accelerate; the runs import them in subprocesses.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from distlint.verify_options import VERIFY_HELP, verify_options  # noqa: F401 (re-exported)


def run_verify_command(
    script: str,
    script_args: Sequence[str],
    fmt: str,
    static_findings: list,
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
    **_ignored: Any,
) -> int:
    """Run the verification, print the report on stdout (progress on stderr), return 0, 1 or 2."""
    from distlint.verify.core import verify
    from distlint.verify.report import Progress, render_json, render_text

    script_args = list(script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
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
    )
    if plot_path:
        if result.runs and any(r.curve for r in result.runs):
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
