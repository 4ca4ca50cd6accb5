"""`--plot`: both loss curves against samples seen, as a PNG (matplotlib, the `plot` extra)."""

from __future__ import annotations

import os

from distlint.verify.core import VerifyResult


def write_plot(result: VerifyResult, path: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("--plot needs matplotlib: pip install 'distlint[plot]'") from exc
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    all_positive = True
    for run, style in ((result.one, "-"), (result.many, "--")):
        if run is None or not run.curve:
            continue
        points = [
            (p.samples, p.loss) for p in run.curve if p.loss is not None and p.samples is not None
        ]
        if not points:
            continue
        lr = run.curve[0].lrs[0] if run.curve[0].lrs else None
        label = f"{run.label}: global batch {run.global_batch}" + (
            f", LR {lr:g}" if lr is not None else ""
        )
        all_positive = all_positive and all(v > 0 for _, v in points)
        ax.plot(
            [s for s, _ in points],
            [v for _, v in points],
            style,
            marker=".",
            markersize=3,
            label=label,
        )
    ax.set_xlabel("samples seen (all ranks)")
    ax.set_ylabel("training loss (mean over ranks)")
    if all_positive:
        ax.set_yscale("log")
    ax.set_title(f"distlint verify: {os.path.basename(result.script)} ({result.verdict})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
