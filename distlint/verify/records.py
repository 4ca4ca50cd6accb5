"""Read what the probe recorded (one JSON-lines file per process) into per-rank and per-run data.

The record schema (kinds, required fields, version) is the probe's own module
``distlint.verify.probe.distlint_probe_schema``; a file of another schema version is not read.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Any

from distlint.verify.probe import distlint_probe_schema as schema


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


@dataclass
class Update:
    """One real optimizer update of one rank, with what was trained on for it."""

    n: int
    lrs: list[float]
    samples: int | None  # first dimension of the trained forwards' inputs (None: unknown)
    checksum: tuple[float, float] | None
    losses: list[float]  # per backward, constant factors (1/accumulation, a scaler) undone
    t: float
    numel: int | None = None
    forwards: int = 0
    untrained: int = 0
    loader_samples: int | None = None  # DataLoader batches handed out since the last update
    loaders: list[int] = field(default_factory=list)
    raw_losses: list[float] = field(default_factory=list)
    factors: list[float] = field(default_factory=list)
    base_lrs: list[float | None] = field(default_factory=list)  # scheduler base (peak) LRs
    precision: dict[str, Any] | None = None  # autocast / param / grad dtypes, GradScaler use
    params: dict[str, Any] | None = None  # fingerprint of the parameters after this update
    params_before: dict[str, Any] | None = None  # and before it (first update only)

    @property
    def loss(self) -> float | None:
        return sum(self.losses) / len(self.losses) if self.losses else None

    @property
    def micro_batch(self) -> int | None:
        if self.samples and self.forwards:
            return self.samples // self.forwards
        return None


@dataclass
class RankRecord:
    pid: int
    path: str
    header: dict[str, Any]
    config: dict[str, Any] | None = None
    seeds: list[dict[str, Any]] = field(default_factory=list)
    rng: dict[str, dict[str, str]] = field(default_factory=dict)  # point -> generator -> fp
    loaders: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> `loader` record
    dataloaders: list[dict[str, Any]] = field(default_factory=list)  # prepared
    optimizers: list[dict[str, Any]] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    exception: dict[str, Any] | None = None
    stopped: bool = False
    stop_reason: str | None = None
    stop_children: list[int] = field(default_factory=list)  # alive when verify stopped the rank
    exited: bool = False
    notes: list[str] = field(default_factory=list)
    patches: dict[str, Any] | None = None
    fatal_signal: str | None = None  # from faulthandler: "Segmentation fault", ...
    last_t: float = 0.0
    n_batches: int = 0
    n_losses: int = 0
    invalid: list[str] = field(default_factory=list)  # records that broke the schema
    later_configs: list[dict[str, Any]] = field(default_factory=list)  # made after training began

    @property
    def rank(self) -> int | None:
        if self.config and self.config.get("process_index") is not None:
            return int(self.config["process_index"])
        return self.env_rank

    @property
    def num_processes(self) -> int | None:
        return self.config.get("num_processes") if self.config else None

    @property
    def env_rank(self) -> int | None:
        value = (self.header.get("env") or {}).get("RANK")
        return int(value) if value not in (None, "") else None

    @property
    def env_world(self) -> int | None:
        value = (self.header.get("env") or {}).get("WORLD_SIZE")
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
        """Samples of one forward (a micro-batch) as trained; else the prepared loader's batch."""
        for u in self.updates:
            if u.micro_batch:
                return u.micro_batch
        for dl in self.dataloaders:
            if dl.get("batch_size"):
                return int(dl["batch_size"])
        return None

    @property
    def batch_scaled(self) -> bool:
        """--exact really rebuilt a prepared DataLoader with batch_size × N (asking is not doing:
        hand-built batches and loaders without a batch_size keep their own size)."""
        scale = int(self.header.get("batch_scale") or 1)
        if scale <= 1:
            return False
        for dl in self.dataloaders:
            native, now = dl.get("native_batch_size"), dl.get("batch_size")
            if native and now and int(now) == int(native) * scale:
                return True
        return False

    @property
    def native_per_device_batch(self) -> int | None:
        """The script's own per-device batch (before --exact scaled it)."""
        for dl in self.dataloaders:
            if dl.get("native_batch_size"):
                return int(dl["native_batch_size"])
        # No prepared DataLoader with a batch_size: nothing was scaled, the batch is the script's.
        return self.per_device_batch

    @property
    def scheduler_prepared(self) -> bool:
        """A scheduler went through Accelerator.prepare (it then steps once per process for
        each update)."""
        return any(n.startswith("scheduler prepared:") for n in self.notes)

    def lrs(self) -> list[float] | None:
        for u in self.updates:
            if u.lrs:
                return u.lrs
        return None

    def native_lrs(self) -> list[float] | None:
        """The script's own LRs, before --exact gave this run the other run's LRs."""
        for opt in self.optimizers:
            if opt.get("index") == 0 and opt.get("native_lrs"):
                base = opt.get("native_base") or []
                if not all(opt["native_lrs"]) and base and all(base):
                    return [float(b) for b in base]  # a warmup from 0: its peak
                return opt["native_lrs"]
        return self.lrs()

    def loader_where(self, loader_id: int | None) -> str | None:
        """Where the user's code built a loader (a prepared loader: where its origin was built)."""
        for dl in self.dataloaders:
            if dl.get("loader") == loader_id and dl.get("origin") in self.loaders:
                loader_id = dl["origin"]
        rec = self.loaders.get(loader_id) if loader_id is not None else None
        return rec.get("where") if rec else None


def _loss_values(losses: list[dict[str, Any]]) -> tuple[list[float], list[float], list[float]]:
    raw = [float(r["value"]) for r in losses]
    factors = [float(r.get("factor") or 1.0) for r in losses]
    corrected = [v / f if f else v for v, f in zip(raw, factors)]
    return corrected, raw, factors


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
    if header.get("schema") != schema.SCHEMA_VERSION:
        raise SchemaError(
            f"{path}: record schema {header.get('schema')!r}, this distlint reads "
            f"{schema.SCHEMA_VERSION} (the probe and distlint come from different versions)"
        )
    rank = RankRecord(pid=int(header.get("pid", 0)), path=path, header=header)
    fault = path[: -len(".jsonl")] + ".fault" if path.endswith(".jsonl") else path + ".fault"
    try:
        with open(fault, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "Fatal Python error:" in text:
            rank.fatal_signal = text.split("Fatal Python error:", 1)[1].splitlines()[0].strip()
    except OSError:
        pass
    batch_samples: int | None = 0
    losses: list[dict[str, Any]] = []
    for r in records[1:]:
        kind = r.get("kind")
        missing = schema.missing_fields(r)
        if missing:
            rank.invalid.append(f"{kind}: missing {', '.join(missing)}")
            continue
        rank.last_t = max(rank.last_t, float(r.get("t", 0.0)))
        if kind == "config":
            # The Accelerator / process group that trained: the last one made before the first
            # update; one made after training began (a later Accelerator(mixed_precision=...))
            # did not train what was recorded.
            if rank.config is None or not rank.updates:
                rank.config = r
            else:
                rank.later_configs.append(r)
        elif kind == "patches":
            rank.patches = r
        elif kind == "seed":
            rank.seeds.append(r)
        elif kind == "rng":
            rank.rng.setdefault(r["point"], r.get("fp", {}))
        elif kind == "loader":
            rank.loaders[int(r["loader"])] = r
        elif kind == "dataloader":
            rank.dataloaders.append(r)
        elif kind == "optimizer":
            rank.optimizers.append(r)
        elif kind == "batch":
            rank.n_batches += 1
            if batch_samples is not None:
                batch_samples = None if r.get("size") is None else batch_samples + int(r["size"])
        elif kind == "loss":
            rank.n_losses += 1
            losses.append(r)
        elif kind == "step":
            if r.get("opt", 0) != 0:
                continue  # updates are counted on the first optimizer
            corrected, raw, factors = _loss_values(losses)
            checksum = r.get("checksum")
            rank.updates.append(
                Update(
                    n=int(r["n"]),
                    lrs=r.get("lrs") or [],
                    samples=None if r.get("samples") is None else int(r["samples"]),
                    checksum=tuple(checksum) if isinstance(checksum, list) else None,
                    losses=corrected,
                    t=float(r["t"]),
                    numel=r.get("numel"),
                    forwards=int(r.get("forwards") or 0),
                    untrained=int(r.get("untrained") or 0),
                    loader_samples=batch_samples or None,
                    loaders=list(r.get("loaders") or []),
                    raw_losses=raw,
                    factors=factors,
                    base_lrs=list(r.get("base_lrs") or []),
                    precision=r.get("precision") if isinstance(r.get("precision"), dict) else None,
                    params=_dict_or_none(r.get("params")),
                    params_before=_dict_or_none(r.get("params_before")),
                )
            )
            batch_samples, losses = 0, []
        elif kind == "stop":
            rank.stopped = True
            rank.stop_reason = r.get("reason")
            rank.stop_children = [int(p) for p in r.get("children") or []]
        elif kind == "exit":
            rank.exited = True
        elif kind == "exception":
            rank.exception = r
        elif kind == "note":
            rank.notes.append(str(r.get("message")))
    return rank


class SchemaError(Exception):
    """A record file written by a probe of another schema version."""


@dataclass
class RunRecords:
    ranks: list[RankRecord]  # the processes that acted as ranks, ordered by rank
    others: list[RankRecord]  # other processes that wrote something (a launcher's exception, ...)
    problems: list[str] = field(default_factory=list)


def read_run(record_dir: str, single_pid: int | None = None) -> RunRecords:
    ranks: list[RankRecord] = []
    others: list[RankRecord] = []
    problems: list[str] = []
    for path in sorted(glob.glob(os.path.join(record_dir, "*.jsonl"))):
        try:
            rank = read_rank(path)
        except OSError:
            continue
        except SchemaError as exc:
            problems.append(str(exc))
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
    return RunRecords(ranks, others, problems)
