"""What the lint path's analysis knows of the script, for verify (read from its source: never
imported, never run here).

verify may import the lint path; the lint path never imports verify. Two questions are asked:

- how the script forms its processes (Accelerate, Fabric, torch.distributed), and whether it
  reads torchrun's environment itself: that decides how its 1-process run is launched (as the
  user would run it alone);
- what the LR scheduler's length arguments count (single-process steps, the per-process length
  of a prepared DataLoader, a value multiplied or divided by the process count): the static side
  of DL202, set against what the recorded schedules show.

Anything the analysis cannot read (a syntax error, a file over the size budget, an internal
error) gives ``None``: verify then goes on from what the runs recorded alone.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

# torchrun's environment: a script that reads one of these (or forms its own group with
# init_process_group) is written for a launcher, and runs alone through one.
TORCHRUN_ENV = frozenset(
    {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}
)
_ENV_READS = frozenset({"os.environ.get()", "os.getenv()"})
_GROUP_CALLS = frozenset({"torch.distributed.init_process_group"})


@dataclass
class Argument:
    """One argument that counts a schedule's steps, as the source writes it."""

    role: str  # "warmup" | "total" | "any" (an lr_lambda: its closure holds both)
    text: str  # the source text (shortened)
    line: int
    counts: str  # "single-process" | "per-process" | "times-processes" | "divided-by-processes"
    constant: bool = False  # a number written in the source

    def expected_ratio(self, n: int, stepped_per_process: bool) -> float | None:
        """How many times the samples this count spans on N processes against 1, from the
        source alone (None: it cannot say). A prepared scheduler steps once per process for
        each update (N steps per update of N shares), one stepped by hand once per update."""
        if stepped_per_process:
            return {"single-process": 1.0, "per-process": 1 / n, "times-processes": float(n),
                    "divided-by-processes": 1 / n}[self.counts]  # fmt: skip
        if self.counts == "single-process":
            return float(n) if self.constant else None  # len(loader) may be sharded or not
        return {"per-process": 1.0, "times-processes": float(n * n),
                "divided-by-processes": 1.0}[self.counts]  # fmt: skip

    @property
    def phrase(self) -> str:
        what = {
            "single-process": "single-process steps",
            "per-process": "per-process steps (the length of a prepared DataLoader)",
            "times-processes": "a count multiplied by the process count",
            "divided-by-processes": "a count divided by the process count",
        }[self.counts]
        steps = self.counts in ("single-process", "per-process")
        verb = "uses" if self.role == "any" else "counts" if steps else "is"
        return f"`{self.text}` (line {self.line}) {verb} {what}"

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "text": self.text, "line": self.line, "counts": self.counts}


@dataclass
class SchedulerFacts:
    kind: str  # qualified name of the scheduler's constructor
    line: int
    prepared: bool  # passed through Accelerator.prepare (then stepped once per process)
    arguments: list[Argument] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "line": self.line,
            "prepared": self.prepared,
            "arguments": [a.to_json() for a in self.arguments],
        }


@dataclass
class ScriptFacts:
    path: str
    mode: str  # accelerate | fabric | ddp | xla | xla-spmd | none
    launcher_reads: list[str]  # "LOCAL_RANK at line 12", "init_process_group at line 20"
    schedulers: list[SchedulerFacts]
    scheduler_stepped_once: bool = False  # Accelerator(step_scheduler_with_optimizer=False)
    split_batches: bool = False

    @property
    def needs_launcher(self) -> bool:
        """The script reads torchrun's environment or forms its group itself."""
        return bool(self.launcher_reads)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "launcher_reads": self.launcher_reads,
            "schedulers": [s.to_json() for s in self.schedulers],
        }


def script_facts(path: str) -> ScriptFacts | None:
    """The script's facts from the lint path's analysis, or None when it cannot be read."""
    try:
        return _read(path)
    except Exception:  # the analysis must never stop a verify run
        return None


def _read(path: str) -> ScriptFacts | None:
    from distlint.analysis.facts import Facts
    from distlint.analysis.index import Index
    from distlint.model import FileError
    from distlint.parse import decode_source, parse

    with open(path, "rb") as f:
        data = f.read()
    decoded = decode_source(data, path)
    if isinstance(decoded, FileError):
        return None
    text = decoded[0]
    parsed = parse(text, path)
    if isinstance(parsed, FileError):
        return None
    module, source_map = parsed
    index = Index(module, text, source_map)
    facts = Facts(index, path)
    try:
        return ScriptFacts(
            path=os.path.abspath(path),
            mode=facts.mode.value,
            launcher_reads=_launcher_reads(index),
            schedulers=_schedulers(facts),
            scheduler_stepped_once=bool(facts.scheduler_stepped_once),
            split_batches=bool(facts.split_batches),
        )
    finally:
        facts.release()
        index.release()


def _line(index: Any, node: Any) -> int:
    from distlint.positions import positions_of

    found = positions_of(index.module, [node], index.source_map).get(node)
    return found.start.line if found is not None else 0


def _launcher_reads(index: Any) -> list[str]:
    """Where the script reads torchrun's environment (``os.environ["LOCAL_RANK"]``,
    ``os.getenv("RANK")``) or calls ``init_process_group`` itself."""
    import libcst as cst

    from distlint.analysis.index import string_value

    out: list[tuple[Any, str]] = []
    for call in index.calls:
        q = index.qualname(call.func)
        if q in _GROUP_CALLS:
            out.append((call, "init_process_group"))
        elif q in _ENV_READS and call.args:
            name = string_value(call.args[0].value)
            if name in TORCHRUN_ENV:
                out.append((call, name))
    for node in _subscripts(index.module):
        if index.qualname(node.value) != "os.environ":
            continue
        element = node.slice[0].slice if node.slice else None
        name = string_value(element.value) if isinstance(element, cst.Index) else None
        if name in TORCHRUN_ENV:
            out.append((node, name))
    return [f"{what} at line {_line(index, node)}" for node, what in out]


def _subscripts(module: Any) -> list[Any]:
    import libcst as cst

    found: list[cst.Subscript] = []

    class Visitor(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            found.append(node)

    module.visit(Visitor())
    return found


def _schedulers(facts: Any) -> list[SchedulerFacts]:
    from distlint.analysis import knowledge as K
    from distlint.rules.scheduler_length_per_process import _per_process

    out = []
    for sched in facts.schedulers:
        arguments = []
        for value, role in facts.scheduler_lengths(sched):
            if facts.divided_by_process_count(value):
                counts = "divided-by-processes"
            elif facts.reads_process_count(value):
                counts = "times-processes"
            elif _per_process(facts, sched, value):
                counts = "per-process"
            else:
                counts = "single-process"
            text = " ".join(facts.index.module.code_for_node(value).split())
            text = text if len(text) <= 60 else text[:57] + "..."
            if K.SCHEDULER_LENGTHS[sched.kind][0][2] == "lambda":
                role = "any"  # a function's closure: which count is the warmup is not said
            constant = facts.index.constant_value(value) is not None
            arguments.append(Argument(role, text, _line(facts.index, value), counts, constant))
        out.append(
            SchedulerFacts(
                sched.kind, _line(facts.index, sched.call), facts.is_prepared(sched.call), arguments
            )
        )
    return out


def _near(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a > 0 and b > 0 and abs(math.log(a / b)) <= _TOL


_TOL = math.log(1.25)  # the recorded ratios are read at update granularity


def _candidate(facts: ScriptFacts, prepared: bool) -> SchedulerFacts | None:
    """The scheduler the run stepped: the one prepared (or not) as the run recorded, when the
    source builds exactly one such."""
    found = [s for s in facts.schedulers if s.prepared == prepared and s.arguments]
    return found[0] if len(found) == 1 else None


def cross_check_schedule(check: Any, facts: ScriptFacts | None, many: Any) -> None:
    """Set the quantity the recorded schedules name (DL202: warmup, length or steps counted per
    process) against what the scheduler's arguments count in the source, and say whether they
    agree. Amends ``check`` (its detail and ``data["static"]``); says nothing it cannot read."""
    if facts is None or check.status == "skip" or many.rank0 is None:
        return
    n = many.nprocs
    prepared = bool(many.rank0.scheduler_prepared)
    sched = _candidate(facts, prepared)
    if sched is None:
        return
    per_process = prepared and not facts.scheduler_stepped_once and not facts.split_batches
    expected = [(a, a.expected_ratio(n, per_process)) for a in sched.arguments]
    if any(ratio is None for _, ratio in expected):
        return  # a count the source alone cannot place
    data = check.data
    where = f"the scheduler at line {sched.line}"
    args = "; ".join(a.phrase for a, _ in expected)
    if check.status == "pass":
        off = [(a, r) for a, r in expected if not _near(r, 1.0)]
        agrees = not off
        if agrees:
            text = f"{where} agrees: {args}, the same schedule in samples on 1 and {n} processes."
        else:
            text = (
                f"{where} reads otherwise: {args}, which would make the schedule span ×"
                f"{off[0][1]:.2g} the samples on {n} processes. The recorded schedules matched: "
                "that path was not taken in this run, or its effect lies beyond the samples "
                "compared."
            )
    else:
        quantity = data.get("counted_per_process")
        speed = data.get("speed_ratio")
        observed = {
            "warmup": data.get("warmup_ratio"),
            "length": 1 / speed if speed else None,
            "steps": 1 / speed if speed else None,
        }.get(quantity)
        roles = {"warmup": ("warmup", "any"), "length": ("total", "any")}.get(
            quantity, ("warmup", "total", "any")
        )
        named = [(a, r) for a, r in expected if a.role in roles]
        if quantity == "steps" and all(_near(r, 1.0) for _, r in expected):
            agrees = True  # the arguments alike: the stepping differs, as the runs say
            text = f"{where} agrees: {args}, so the scheduler was stepped differently per sample."
        else:
            agrees = any(_near(r, observed) for _, r in named)
            if agrees:
                text = f"{where} agrees: {args}."
            else:
                text = (
                    f"{where} disagrees: {args}, which would not make the {quantity} differ "
                    f"×{observed:.2g}; the divergence comes from elsewhere (how often the "
                    "scheduler is stepped, or a value the static reading cannot follow)."
                    if observed
                    else f"{where} disagrees: {args}."
                )
    data["static"] = {"agrees": agrees, "scheduler": sched.to_json()}
    check.detail = f"{check.detail} Static facts: {text}"
