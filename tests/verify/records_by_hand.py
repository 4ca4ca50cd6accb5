"""Build a run's records by hand (schema of distlint_probe_schema), and summarize it in-process."""

from __future__ import annotations

import json
import os

from distlint.verify import compare
from distlint.verify.launch import LaunchPlan, RunOutcome
from distlint.verify.probe import distlint_probe_schema as schema
from distlint.verify.records import read_run


def write_rank(
    folder,
    pid,
    rank,
    world,
    updates,
    *,
    seeds=(),
    rng=None,
    config=True,
    finished=True,
    env_rank=None,
    extra=(),
    header=None,
    source="accelerate",
    modules=None,
):
    """updates: dicts with samples, loss, lr, checksum (and optionally forwards, factor, loaders)."""
    t = 1000.0
    lines = [
        {
            "kind": "header",
            "t": t,
            "schema": schema.SCHEMA_VERSION,
            "pid": pid,
            "ppid": 1,
            "argv": ["train.py"],
            "env": {"RANK": None if env_rank is None else str(env_rank), "WORLD_SIZE": None},
            **(header or {}),
        }
    ]
    if config:
        lines.append(
            {
                "kind": "config",
                "t": t,
                "source": source,
                "num_processes": world,
                "process_index": rank,
                "mixed_precision": "no",
                "gradient_accumulation_steps": 1,
                **({"modules": modules} if modules is not None else {}),
            }
        )
    for s in seeds:
        lines.append({"kind": "seed", "t": t, "args": [], "where": "train.py:3", **s})
    for point, fp in (rng or {}).items():
        lines.append({"kind": "rng", "t": t, "point": point, "fp": fp})
    lines.extend(extra)
    for i, u in enumerate(updates, start=1):
        t += 0.1
        for _ in range(u.get("forwards", 1)):
            lines.append(
                {
                    "kind": "loss",
                    "t": t,
                    "value": u["loss"] * u.get("factor", 1.0),
                    "factor": u.get("factor", 1.0),
                    "source": "Tensor.backward",
                }
            )
        lines.append(
            {
                "kind": "step",
                "t": t,
                "n": i,
                "opt": 0,
                "lrs": [u.get("lr", 0.1)],
                "samples": u.get("samples"),
                "numel": u.get("samples"),
                "checksum": u.get("checksum"),
                "forwards": u.get("forwards", 1),
                "untrained": u.get("untrained", 0),
                "loaders": u.get("loaders", []),
                **({"precision": u["precision"]} if "precision" in u else {}),
                **{k: u[k] for k in ("params", "params_before") if k in u},
            }
        )
    if finished:
        lines.append({"kind": "stop", "t": t, "updates": len(updates), "reason": "max_steps"})
    with open(os.path.join(folder, f"{pid}.jsonl"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def summarize(folder, nprocs, *, output="", timed_out=False, launcher="torchrun", max_steps=20):
    """The run's RunSummary, as verify makes it from the records in `folder`."""
    label = "1 process" if nprocs == 1 else f"{nprocs} processes"
    plan = LaunchPlan(label, nprocs, launcher, "cpu", ["torchrun", "train.py"], {})
    out = os.path.join(folder, "output.log")
    with open(out, "w", encoding="utf-8") as f:
        f.write(output)
    outcome = RunOutcome(
        plan=plan,
        record_dir=str(folder),
        returncode=0,
        wall_s=10.0,
        timed_out=timed_out,
        output_path=out,
        tag="t",
        end_t=2000.0,
        stderr_tails={},
    )
    return compare.summarize_run(outcome, read_run(str(folder)), nprocs, max_steps)


def make_run(tmp_path, name, nprocs, per_rank, **kw):
    """per_rank: list (one per rank) of update lists; returns the RunSummary."""
    folder = tmp_path / name
    folder.mkdir()
    rank_kw = kw.pop("rank_kw", {})
    for rank, updates in enumerate(per_rank):
        write_rank(folder, 100 + rank, rank, nprocs, updates, **rank_kw.get(rank, {}))
    return summarize(folder, nprocs, **kw)


def ups(losses, samples=8, lr=0.1, checksums=None, **extra):
    checksums = checksums or [[float(i), float(i * i)] for i in range(1, len(losses) + 1)]
    lrs = lr if isinstance(lr, list) else [lr] * len(losses)
    return [
        {"loss": loss, "samples": samples, "lr": r, "checksum": c, **extra}
        for loss, r, c in zip(losses, lrs, checksums)
    ]
