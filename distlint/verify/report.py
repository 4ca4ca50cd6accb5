"""Render a VerifyResult: a readable table, or JSON; and the progress lines shown while runs go."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from distlint.verify import checks as checks_mod
from distlint.verify.checks import loss_window, window_losses
from distlint.verify.compare import TAIL_LINES, Check, RunSummary, rule_name
from distlint.verify.core import VerifyResult

STATUS = {"pass": "PASS", "info": "INFO", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value) if value else "-"
    return str(value)


def _known(value: Any, known: bool = True) -> str:
    return _fmt(value) if known and value is not None else "unknown"


def _run_rows(
    run: RunSummary | None,
    exact_note: str = "",
    window: tuple[int, int] | None = None,
    duplicated: bool = False,
) -> dict[str, str]:
    if run is None:
        return {}
    backend = run.config("backend")
    dtype = run.config("distributed_type")
    device = run.device + (f" / {backend}" if backend else "")
    ranks = run.records.ranks
    end = None
    if window is not None:
        values = window_losses(run.curve, *window)
        end = sum(values) / len(values) if values else None
    rows = {
        "launcher": run.launcher,
        "device / backend": device
        + (f" ({dtype})" if dtype and dtype not in ("NO", "None") else ""),
        # A refused or failed run formed no group to speak of, and has no global batch.
        "ranks in the group": f"{len(ranks)} of {run.nprocs}" if run.ok else "-",
        "precision (observed)": run.precision_text(),
        "forwards / update": _known(run.accumulation),
        "per-device batch": _known(run.per_device_batch) + exact_note,
        "global batch / update": "-"
        if not run.ok
        else "- (every rank the same inputs)"
        if duplicated
        else _known(run.global_batch),
        "LR (first update)": _fmt(run.curve[0].lrs if run.curve else None),
        "updates": _fmt(len(run.curve)),
        "samples seen": _known(run.samples_seen, run.samples_known),
    }
    if window is not None:
        rows[f"mean loss, samples {window[0]}-{window[1]}"] = _fmt(end)
    rows["time"] = f"{run.outcome.wall_s:.1f} s"
    return rows


def _batch_scaled(run: RunSummary) -> bool:
    return run.rank0 is not None and run.rank0.batch_scaled


def _lrs_given(run: RunSummary) -> bool:
    """--exact gave this run's prepared optimizers the other run's LRs."""
    return run.rank0 is not None and any(o.get("lrs") for o in run.rank0.optimizers)


def _exact_header(result: VerifyResult, one: RunSummary, s1: Any, sn: Any) -> str:
    """What --exact really changed in the 1-process run (asking is not doing)."""
    given = [
        what
        for what, done in (
            (f"the {result.nprocs}-process run's LR", _lrs_given(one)),
            (f"per-device batch × {result.nprocs}", _batch_scaled(one)),
        )
        if done
    ]
    if given:
        text = " (--exact: the 1-process run with " + " and ".join(given) + ")"
        many = result.many
        if many is not None:
            text += "; " + _equal_lrs(one, many)
    else:
        text = (
            " (--exact changed nothing: no DataLoader with a batch_size and no optimizer went "
            "through Accelerator.prepare)"
        )
    return text + ("" if s1 == sn else f"; samples {s1} vs {sn}")


def _equal_lrs(one: RunSummary, many: RunSummary) -> str:
    """Whether the per-update LRs really were equal (asking for the same LR is not getting it:
    a schedule may step differently)."""
    pairs = [(a.lrs, b.lrs) for a, b in zip(one.curve, many.curve) if a.lrs and b.lrs]
    for i, (a, b) in enumerate(pairs, start=1):
        if any(abs(x - y) > 1e-9 * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b)):
            return f"the per-update LRs differed from update {i} ({a[0]:g} vs {b[0]:g})"
    return f"the per-update LRs were equal over {len(pairs)} updates" if pairs else "no LR recorded"


def _header(result: VerifyResult) -> str:
    """What happened (not the plan)."""
    one, many = result.one, result.many
    if not result.runs:
        return "The script was not run."
    parts = []
    for run in (many, one):
        if run is None:
            continue
        state = "" if run.ok else " (failed)"
        parts.append(f"{run.label} for {len(run.curve)} updates{state}")
    text = "Ran the script (only verify does): " + ", then ".join(parts)
    if one and many and one.ok and many.ok:
        s1, sn = one.samples_seen, many.samples_seen
        if not (one.samples_known and many.samples_known):
            text += "; the samples seen are unknown"
        elif result.exact:
            text += _exact_header(result, one, s1, sn)
        elif checks_mod.duplicated(result.checks):
            text += (
                f"; {sn} samples counted on {many.nprocs} ranks, but every rank trained the same "
                f"inputs ({(sn or 0) // many.nprocs} distinct), and {s1} on 1 process"
            )
        elif s1 == sn:
            text += f"; both trained on {s1} samples"
        else:  # in the order the runs were made (and named above)
            text += f"; they trained on {sn} and {s1} samples"
    elif many is not None and not many.ok:
        text += "; the 1-process run was not made" if one is None else ""
    return text + "."


def _first_failed(result: VerifyResult) -> RunSummary | None:
    """The run whose failure is the script's own error, shown first (runs in the order made)."""
    for run in (result.many, result.one):
        if run is not None and not run.ok and run.failures and not run.outcome.timed_out:
            return run
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _script_failure(result: VerifyResult) -> list[str]:
    """The script's own error first: the first failed rank's exception or output tail."""
    run = _first_failed(result)
    if run is None:
        return []
    first = run.failures[0]
    who = f" (rank {first.rank} first)" if first.rank is not None else ""
    out = [f"The script failed in the {run.label} run{who}:", _wrap(first.reason, 2)]
    lines = first.detail.strip("\n").splitlines()[-TAIL_LINES:]
    out.extend("      | " + line for line in lines)
    out.append("")
    return out


def _wrap(text: str, indent: int, width: int = 100) -> str:
    return textwrap.fill(
        text, width=width, initial_indent=" " * indent, subsequent_indent=" " * indent
    )


def render_text(result: VerifyResult) -> str:
    out: list[str] = []
    rel = os.path.relpath(result.script)
    rel = result.script if rel.startswith("..") else rel
    out.append(f"distlint verify: {rel} {' '.join(result.script_args)}".rstrip())
    out.append(_header(result))
    out.append("")
    out.extend(_script_failure(result))
    if result.runs:
        out.extend(_runs_table(result))
        out.extend(_commands(result))
    for run in result.runs:
        if not run.ok:
            out.extend(_failed_run(result, run))
    if result.checks:
        out.extend(_checks_section(result))
    if result.table:
        out.extend(_setups_table(result.table))
    if result.static_findings is not None:
        out.extend(_static_section(result.static_findings))
    notes = result.problems + result.notes + [n for r in result.runs for n in r.notes]
    if notes:
        out.append("Notes")
        out.extend(_wrap("- " + n, 2) for n in notes)
        out.append("")
    out.append(f"Verdict: {result.verdict} (exit {result.exit_code}) in {result.wall_s:.1f} s")
    return "\n".join(out) + "\n"


def _runs_table(result: VerifyResult) -> list[str]:
    """The two runs side by side, one row per measure."""
    scaled = result.exact and result.one is not None and _batch_scaled(result.one)
    window = (
        loss_window(result.one, result.many)
        if result.one and result.many and result.one.curve and result.many.curve
        else None
    )
    dup = checks_mod.duplicated(result.checks)
    if dup:
        window = None  # no loss at equal samples from a run that repeated one rank's inputs
    cols = [
        _run_rows(result.one, " (x N, --exact)" if scaled else "", window),
        _run_rows(result.many, "", window, duplicated=dup),
    ]
    labels = [r.label if r else "-" for r in (result.one, result.many)]
    keys = list(next(c for c in cols if c).keys())
    w0 = max(len(k) for k in keys) + 2
    w1 = max([len(labels[0])] + [len(v) for v in cols[0].values()]) + 3
    out = [" " * (w0 + 2) + labels[0].ljust(w1) + labels[1]]
    for key in keys:
        out.append("  " + key.ljust(w0) + cols[0].get(key, "-").ljust(w1) + cols[1].get(key, "-"))
    out.append("")
    return out


def _commands(result: VerifyResult) -> list[str]:
    """The exact command of each run, in the order made (each ran in its own scratch copy)."""
    runs = [r for r in (result.many, result.one) if r is not None]
    width = max(len(r.label) for r in runs) + 1
    out = ["Commands (each run in its own scratch copy of your working directory)"]
    out.extend(f"  {(r.label + ':').ljust(width)} {shlex.join(r.command)}" for r in runs)
    out.append("")
    return out


def _failed_run(result: VerifyResult, run: RunSummary) -> list[str]:
    """Why a run could not be made: its problems, its ranks' failures, how the launcher ended."""
    out = [f"The {run.label} run could not be made (the launcher's view):"]
    for problem in run.problems:
        out.append(_wrap(problem, 2))
    shown_first = run is _first_failed(result)
    for failure in run.failures[1:] if shown_first else run.failures:
        who = f"rank {failure.rank}" if failure.rank is not None else "process"
        out.append(_wrap(f"{who}: {failure.reason}", 2))
        detail = failure.detail.strip("\n")
        if detail:
            lines = detail.splitlines()[-12:]
            out.extend("      | " + line for line in lines)
    code = run.outcome.returncode
    if run.outcome.launcher_stopped:
        pass  # every rank had exited; verify ended the launcher's own teardown
    elif code is not None and code < 0:
        name = _signal_name(-code)
        sender = "verify, at the timeout" if run.outcome.timed_out else "outside verify"
        out.append(_wrap(f"the launcher ended by {name} (sent by {sender})", 2))
    elif code:
        out.append(f"  the launcher exited with status {code}")
    out.append(f"  command: {' '.join(run.command)}")
    out.append("")
    return out


def _checks_section(result: VerifyResult) -> list[str]:
    out = ["Checks"]
    for check in result.checks:
        out.append(f"  {STATUS[check.status]}  {check.title}{_rule_note(check)}")
        out.append(_wrap(check.detail, 8))
    out.append("")
    return out


def _rule_note(check: Check) -> str:
    """`[DL201 name: confirms the static finding at ...]` after a check's title."""
    if not check.rule:
        return ""
    rule = f"  [{check.rule} {rule_name(check.rule) or '?'}"
    if check.static == "confirmed":
        rule += f": confirms the static finding at {', '.join(check.static_where)}"
    elif check.static == "refuted":
        rule += f": refutes the static finding at {', '.join(check.static_where)}"
    elif check.static == "missed":
        rule += ": happened at run time; not reported by the static check"
    return rule + "]"


def _setups_table(t: dict[str, Any]) -> list[str]:
    """The guide's table of equivalent setups for the script."""
    out = [
        f"Equivalent setups (the guide's table for this script: {t['what']}, per-device "
        "batch_size below):"
    ]
    heads = [row["setup"] + (" (per device)" if i else "") for i, row in enumerate(t["rows"])]
    vals = [_fmt(row["per_device_batch"]) for row in t["rows"]]
    widths = [max(len(h), len(v)) + 3 for h, v in zip(heads, vals)]
    out.append("  " + "".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip())
    out.append("  " + "".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip())
    if t.get("note"):
        out.append("  (" + t["note"] + ")")
    if t.get("lr_advice"):
        out.append(_wrap(t["lr_advice"][0].upper() + t["lr_advice"][1:] + ".", 2))
    out.append("")
    return out


def _static_section(findings: Sequence[Any]) -> list[str]:
    if not findings:
        return ["Static findings cited (distlint check): none", ""]
    out = ["Static findings cited (distlint check)"]
    for f in findings:
        out.append(_wrap(f"{f.path}:{f.line}: {f.code} {f.message}", 2))
    out.append("")
    return out


def render_json(result: VerifyResult) -> str:
    return json.dumps(result.to_json(), indent=2, default=str) + "\n"


class Progress:
    """Progress on stderr while the runs go. A start and an end line per run, always (they are
    the run's log in CI). On a terminal only, one live line rewritten in place: the run, its
    update out of those planned (or samples, when the run stops at a sample count), the last
    loss and the seconds elapsed; then "comparing the runs". Nothing else reaches a pipe."""

    INTERVAL = 0.5  # seconds between redraws of the live line

    def __init__(self, stream: TextIO = sys.stderr, live: bool | None = None):
        self.stream = stream
        if live is None:
            try:
                live = stream.isatty()
            except (AttributeError, ValueError):
                live = False
        self.live = live
        self.shown = False  # a live line is on the screen
        self.offsets: dict[str, int] = {}
        self.updates: dict[str, int] = {}  # per record file (rank): updates recorded
        self.samples: dict[str, int] = {}  # per record file (rank): samples trained on
        self.loss: float | None = None
        self.target: dict[str, int] = {}
        self.last_draw = -1e9

    def __call__(self, event: str, payload: Any) -> None:
        if event == "start":
            plan, self.target = payload if isinstance(payload, tuple) else (payload, {})
            self.offsets, self.updates, self.samples, self.loss = {}, {}, {}, None
            self.last_draw = -1e9
            self._clear()
            self.stream.write(f"distlint verify: running {plan.label} ({plan.launcher}) ...\n")
        elif event == "poll" and self.live:
            plan, record_dir, elapsed = payload
            if elapsed - self.last_draw < self.INTERVAL:
                return
            self.last_draw = elapsed
            self._scan(record_dir)
            self._draw(f"{plan.label} ({plan.launcher}): {self._done()}", elapsed)
        elif event == "compare" and self.live:
            self._draw("comparing the runs ...", None)
        elif event == "end":
            run = payload
            self._clear()
            state = "ok" if run.ok else "FAILED: " + "; ".join(run.problems)
            self.stream.write(
                f"  {run.label}: {len(run.curve)} updates, "
                f"{run.samples_seen if run.samples_known else 'unknown'} samples "
                f"in {run.outcome.wall_s:.1f} s, {state}\n"
            )
        elif event == "done":
            self._clear()
        self.stream.flush()

    def _done(self) -> str:
        """Updates (or samples) done out of those planned, and the last loss."""
        updates = max(self.updates.values(), default=0)
        samples = max(self.samples.values(), default=0)
        if self.target.get("samples"):
            text = f"samples {samples}/{self.target['samples']}"
        elif self.target.get("updates"):
            text = f"update {updates}/{self.target['updates']}"
        else:
            text = f"update {updates}"
        return text + (f", loss {self.loss:.4g}" if self.loss is not None else "")

    def _draw(self, text: str, elapsed: float | None) -> None:
        when = f", {elapsed:.0f} s" if elapsed is not None else ""
        self.stream.write(f"\r\x1b[K  {text}{when}")
        self.shown = True

    def _clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.shown = False

    def _scan(self, record_dir: str) -> None:
        try:
            names = os.listdir(record_dir)
        except OSError:
            return
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            path = os.path.join(record_dir, name)
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(path, 0))
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line may still be half written
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            for line in complete.decode("utf-8", "replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("kind") == "step":
                    self.updates[path] = max(self.updates.get(path, 0), int(record.get("n", 0)))
                    self.samples[path] = self.samples.get(path, 0) + int(record.get("samples") or 0)
                elif record.get("kind") == "loss":
                    self.loss = record.get("value")
