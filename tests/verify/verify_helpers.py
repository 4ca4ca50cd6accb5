"""Helpers of the verify tests: fixture paths, a process-table check."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERIFY_FIXTURES = ROOT / "fixtures" / "verify"


def fixture_script(name: str) -> str:
    return str(VERIFY_FIXTURES / name)


def processes_with_env(needle: str):
    """Live processes whose environment mentions `needle` (read from /proc, independent of verify's own scan)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


DATA = Path(__file__).resolve().parent / "data"


def load_case(case: str, static_findings=None, loss_rtol=None):
    """A recorded run (see record_runs.py) replayed in-process: the VerifyResult verify would give."""
    import json

    from distlint.verify import compare
    from distlint.verify.core import VerifyResult, compare_runs
    from distlint.verify.launch import LaunchPlan, RunOutcome
    from distlint.verify.records import read_run
    from distlint.verify.static import script_facts

    base = DATA / case
    meta = json.loads((base / "meta.json").read_text(encoding="utf-8"))
    exact = bool(meta["kwargs"].get("exact"))
    result = VerifyResult(
        str(VERIFY_FIXTURES / meta["script"]),
        meta["script_args"],
        meta["nprocs"],
        meta["max_steps"],
        exact,
        static_findings=static_findings,
        script_facts=script_facts(str(VERIFY_FIXTURES / meta["script"])),
    )
    for name, info in meta["runs"].items():
        folder = base / name
        plan = LaunchPlan(
            info["label"], info["nprocs"], info["launcher"], info["device"], info["argv"], {}
        )
        tails = {}
        for f in folder.glob("rank*.stderr.log"):
            tails[int(f.name[4:].split(".")[0])] = f.read_text(encoding="utf-8")
        outcome = RunOutcome(
            plan=plan,
            record_dir=str(folder / "records"),
            returncode=info["returncode"],
            wall_s=info["wall_s"],
            timed_out=info["timed_out"],
            output_path=str(folder / "output.log"),
            tag=info["tag"],
            launcher_stopped=info["launcher_stopped"],
            killed_after_timeout={int(k): v for k, v in info["killed_after_timeout"].items()},
            leftovers={int(k): v for k, v in info["leftovers"].items()},
            end_t=info["end_t"],
            stderr_tails=tails,
        )
        records = read_run(outcome.record_dir)
        max_steps = meta["max_steps"] if name == "many" or exact else meta["max_steps"] * 8
        summary = compare.summarize_run(outcome, records, plan.nprocs, max_steps)
        setattr(result, name, summary)
    if result.one and result.many and result.one.ok and result.many.ok:
        compare_runs(result, loss_rtol)
    return result
