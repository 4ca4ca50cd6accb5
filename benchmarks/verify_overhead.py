"""How much does `distlint verify` cost over simply running the script twice?

    python benchmarks/verify_overhead.py [--script fixtures/verify/correct.py] [--repeat 3] [--nprocs 2]

For each repetition, interleaved so that background load hits all three alike:
  bare 1   verify's 1-process command with `--steps K*N` (as many samples): `python SCRIPT` for
           a script that runs alone that way (Accelerate, Fabric), else `torchrun
           --standalone --nproc_per_node 1 SCRIPT`
  bare N   `torchrun --standalone --nproc_per_node N SCRIPT --steps K` with ACCELERATE_USE_CPU=1
  verify   `python -m distlint.verify --device cpu --format json SCRIPT` (--max-steps K)

and reports the medians, the ratio  verify / (bare 1 + bare N)  (target <= 1.1) and the absolute
verify time. The script must accept `--steps` (stop after that many updates), as the fixtures do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv, env=None):
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    return took, proc


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--script", default=os.path.join(ROOT, "fixtures", "verify", "correct.py"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()

    n, k = args.nprocs, args.max_steps
    cpu_env = dict(os.environ, ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="")
    # verify's own 1-process command: plain python for a script that runs alone that way
    # (Accelerate / Fabric, no torchrun variable read), torchrun with one process otherwise
    sys.path.insert(0, ROOT)
    from distlint.verify.core import one_process_launcher
    from distlint.verify.static import script_facts

    alone, _why = one_process_launcher(script_facts(args.script), "torchrun")
    launcher_one = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    bare_one = [sys.executable, *(launcher_one if alone == "torchrun" else [])]
    bare_one += [args.script, "--steps", str(k * n)]
    bare_many = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(n),
        args.script,
        "--steps",
        str(k),
    ]
    verify = [
        sys.executable,
        "-m",
        "distlint.verify",
        "--device",
        "cpu",
        "--format",
        "json",
        "-n",
        str(n),
        "--max-steps",
        str(k),
        args.script,
    ]

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    samples = {"bare_1": [], "bare_n": [], "verify": [], "verify_run_1": [], "verify_run_n": []}
    for i in range(args.repeat):
        for name, argv, env in (
            ("bare_1", bare_one, cpu_env),
            ("bare_n", bare_many, cpu_env),
            ("verify", verify, None),
        ):
            took, proc = timed(argv, env)
            if name == "verify":
                if proc.returncode not in (0, 1):
                    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
                    raise SystemExit(f"verify failed with status {proc.returncode}")
                report = json.loads(proc.stdout)
                samples["verify_run_1"].append(report["runs"]["one"]["wall_s"])
                samples["verify_run_n"].append(report["runs"]["many"]["wall_s"])
            elif proc.returncode != 0:
                sys.stderr.write(proc.stderr[-3000:])
                raise SystemExit(f"{name} failed with status {proc.returncode}")
            samples[name].append(took)
        sys.stderr.write(
            f"repetition {i + 1}/{args.repeat}: "
            + ", ".join(f"{k}={v[-1]:.2f}s" for k, v in samples.items())
            + "\n"
        )

    med = {name: statistics.median(values) for name, values in samples.items()}
    bare = med["bare_1"] + med["bare_n"]
    result = {
        "script": os.path.relpath(args.script, ROOT),
        "bare_1_command": " ".join(bare_one),
        "nprocs": n,
        "max_steps": k,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "median_s": {name: round(v, 3) for name, v in med.items()},
        "bare_total_s": round(bare, 3),
        "overhead_ratio": round(med["verify"] / bare, 3),
        "target_ratio": 1.1,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"script {result['script']}  N={n}  max-steps={k}  repeat={args.repeat}  cpus={result['cpus']}  "
            f"load (1 min) {load_before[0]:.1f} before, {result['load_average'][0]:.1f} after"
            if load_before and result["load_average"]
            else ""
        )
        print(f"  bare 1-process command  {' '.join(bare_one)}")
        print(f"  bare 1-process run     {med['bare_1']:6.2f} s")
        print(f"  bare {n}-process run     {med['bare_n']:6.2f} s")
        print(
            f"  verify (total)         {med['verify']:6.2f} s   (its 1-process run {med['verify_run_1']:.2f} s, "
            f"{n}-process run {med['verify_run_n']:.2f} s)"
        )
        print(
            f"  overhead ratio         {result['overhead_ratio']:6.3f}   (verify / (bare 1 + bare {n}); target <= 1.1)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
