"""Read what the probe recorded (one JSON-lines file per process) into per-rank and per-run data."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Update:
    """One real optimizer update of one rank, with the batches and losses that led to it."""

    n: int
    lrs: list[float]
    samples: int  # samples this rank consumed for this update (all accumulation micro-batches)
    checksum: tuple[float, float] | None
    losses: list[float]
    t: float

    @property
    def loss(self) -> float | None:
        return sum(self.losses) / len(self.losses) if self.losses else None


@dataclass
class RankRecord:
    pid: int
    path: str
    header: dict[str, Any]
    config: dict[str, Any] | None = None
    seeds: list[dict[str, Any]] = field(default_factory=list)
    rng: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # point -> generator -> fingerprint
    dataloaders: list[dict[str, Any]] = field(default_factory=list)
    optimizers: list[dict[str, Any]] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    exception: dict[str, Any] | None = None
    stopped: bool = False
    exited: bool = False
    notes: list[str] = field(default_factory=list)
    last_t: float = 0.0
    n_batches: int = 0
    n_losses: int = 0

    @property
    def rank(self) -> int | None:
        if self.config and self.config.get("process_index") is not None:
            return int(self.config["process_index"])
        env_rank = (self.header.get("env") or {}).get("RANK")
        return int(env_rank) if env_rank not in (None, "") else None

    @property
    def num_processes(self) -> int | None:
        return self.config.get("num_processes") if self.config else None

    @property
    def env_rank(self) -> int | None:
        value = (self.header.get("env") or {}).get("RANK")
        return int(value) if value not in (None, "") else None

    @property
    def finished(self) -> bool:
        """Left cleanly: reached --max-steps, or the interpreter exited without an exception."""
        return self.stopped or (self.exited and self.exception is None)

    @property
    def progress(self) -> tuple[int, int, int]:
        return (len(self.updates), self.n_batches, self.n_losses)

    @property
    def per_device_batch(self) -> int | None:
        for dl in self.dataloaders:
            if dl.get("batch_size"):
                return int(dl["batch_size"])
        sizes = [u.samples for u in self.updates if u.samples]
        return max(sizes) if sizes else None

    @property
    def native_per_device_batch(self) -> int | None:
        for dl in self.dataloaders:
            if dl.get("native_batch_size"):
                return int(dl["native_batch_size"])
        return self.per_device_batch

    def lrs(self, opt: int = 0) -> list[float] | None:
        """LRs of the first update of optimizer `opt` (what the script really used)."""
        for u in self.updates:
            if u.lrs:
                return u.lrs
        return None

    def native_lrs(self) -> list[float] | None:
        """The script's own LRs, before --exact gave this run the other run's LRs."""
        for opt in self.optimizers:
            if opt.get("index") == 0 and opt.get("native_lrs"):
                return opt["native_lrs"]
        return self.lrs()


def read_rank(path: str) -> RankRecord | None:
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
    if not records or records[0].get("kind") != "header":
        return None
    header = records[0]
    rank = RankRecord(pid=int(header.get("pid", 0)), path=path, header=header)
    samples = 0
    sums = [0.0, 0.0]
    have_checksum = True
    losses: list[float] = []
    for r in records[1:]:
        kind = r.get("kind")
        rank.last_t = max(rank.last_t, float(r.get("t", 0.0)))
        if kind == "config":
            rank.config = r
        elif kind == "seed":
            rank.seeds.append(r)
        elif kind == "rng":
            rank.rng.setdefault(r["point"], r.get("fp", {}))
        elif kind == "dataloader":
            rank.dataloaders.append(r)
        elif kind == "optimizer":
            rank.optimizers.append(r)
        elif kind == "batch":
            rank.n_batches += 1
            samples += int(r.get("size") or 0)
            checksum = r.get("checksum")
            if isinstance(checksum, list) and len(checksum) == 2:
                sums[0] += checksum[0]
                sums[1] += checksum[1]
            else:
                have_checksum = False
        elif kind == "loss":
            rank.n_losses += 1
            losses.append(float(r["value"]))
        elif kind == "step":
            if r.get("opt", 0) != 0:
                continue  # updates are counted on the first optimizer
            rank.updates.append(
                Update(
                    n=int(r["n"]),
                    lrs=r.get("lrs") or [],
                    samples=samples,
                    checksum=(sums[0], sums[1]) if have_checksum and samples else None,
                    losses=losses,
                    t=float(r["t"]),
                )
            )
            samples, sums, have_checksum, losses = 0, [0.0, 0.0], True, []
        elif kind == "stop":
            rank.stopped = True
        elif kind == "exit":
            rank.exited = True
        elif kind == "exception":
            rank.exception = r
        elif kind == "note":
            rank.notes.append(str(r.get("message")))
    return rank


@dataclass
class RunRecords:
    ranks: list[RankRecord]  # the processes that acted as ranks, ordered by rank
    others: list[RankRecord]  # other processes that wrote something (a launcher's exception, ...)


def read_run(record_dir: str, single_pid: int | None = None) -> RunRecords:
    ranks, others = [], []
    for path in sorted(glob.glob(os.path.join(record_dir, "*.jsonl"))):
        try:
            rank = read_rank(path)
        except OSError:
            continue
        if rank is None:
            continue
        is_rank = (
            rank.config is not None
            or rank.updates
            or rank.n_losses
            or rank.env_rank is not None
            or (single_pid is not None and rank.pid == single_pid)
        )
        (ranks if is_rank else others).append(rank)
    ranks.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.pid))
    return RunRecords(ranks, others)
