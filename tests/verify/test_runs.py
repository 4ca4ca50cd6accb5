"""The few real runs: accelerate launch, torchrun (two "nodes" on 127.0.0.1, then the 1-process
run), the SLURM route (srun stand-in, two "nodes" on 127.0.0.1) and one fault (SIGTERM while a
rank hangs with a helper). Everything else, lone processes refused included, is tested
in-process on recorded runs (test_recorded.py) and hand-built records (test_checks.py).

Each run is as short as the scripts allow (--max-steps 3); start-up (importing torch in the
launcher and in every rank) is most of its time.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from verify_helpers import ROOT, fixture_script, processes_with_env

pytestmark = [pytest.mark.verify, pytest.mark.usefixtures("linux_proc")]


def _verify_cli(*args, env=None, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "distlint.verify", "--device", "cpu", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def _processes_named(text):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if text.encode() in f.read().replace(b"\0", b" "):
                    found.append(int(name))
        except OSError:
            continue
    return found


# -- accelerate launch (both runs), through the installed `distlint check --verify` -----------


def test_accelerate_launch_with_a_relative_config_file_and_the_static_findings_cited(tmp_path):
    """`accelerate config` on CPU writes MULTI_CPU (one process without MPI); the file is named
    relative to the user's folder although the runs start in scratch folders; N comes from it."""
    (tmp_path / "cpu.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
        "num_machines: 1\nnum_processes: 2\nuse_cpu: true\n"
    )
    (tmp_path / "run").mkdir()
    exe = shutil.which("distlint")
    argv = [exe] if exe else [sys.executable, "-m", "distlint"]
    proc = subprocess.run(
        argv
        + ["check", "--verify", "--device", "cpu", "--launcher", "accelerate", "--max-steps", "3"]
        + ["--launcher-arg=--config_file=../cpu.yaml", fixture_script("unscaled_lr.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path / "run",
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    assert re.search(r"launcher +accelerate +accelerate", text), text
    assert re.search(r"ranks in the group +1 of 1 +2 of 2", text), text
    assert "added --multi_gpu" in text
    assert "FAIL  learning rate  [DL201 unscaled-learning-rate: confirms the static finding" in text
    assert "Static findings cited (distlint check)" in text and ": DL201 " in text


# -- a fault: SIGTERM to verify while rank 1 hangs and a helper left its session -----------------


def test_sigterm_kills_ranks_launcher_and_helper_removes_the_temp_folder(tmp_path):
    marker = "7777.25"  # the helper: `sleep 7777.25`, clean environment, new session
    proc = _verify_cli(
        fixture_script("faults.py"),
        "--fault",
        "helper-hang",
        "--helper-seconds",
        marker,
        env={"TMPDIR": str(tmp_path)},
    )
    deadline = time.monotonic() + 120
    while not _processes_named("sleep " + marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_named("sleep " + marker), "the helper never started"
    assert list(tmp_path.glob("distlint-verify-*"))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    assert "SIGTERM" in out
    assert _processes_named("sleep " + marker) == []
    assert processes_with_env("DISTLINT_VERIFY_OUT=" + str(tmp_path)) == []
    assert list(tmp_path.glob("distlint-verify-*")) == []


# -- two "nodes" on 127.0.0.1: torchrun's multi-node rendezvous ---------------------------------


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_localhost_form_one_group(tmp_path):
    """torchrun on both runs: the multi-node rendezvous (static, node ranks kept), then the
    1-process run on node 0; JSON report and --plot from node 0."""
    endpoint = f"127.0.0.1:{_free_port()}"
    plot = tmp_path / "loss.png"
    common = ["--format", "json", "-n", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint]
    common += ["--max-steps", "3"]
    node0 = _verify_cli(
        *common, "--node-rank", "0", "--plot", str(plot), fixture_script("correct.py")
    )
    node1 = _verify_cli(*common, "--node-rank", "1", fixture_script("correct.py"))
    (out0, err0), (out1, err1) = node0.communicate(timeout=300), node1.communicate(timeout=300)
    assert node1.returncode == 0, out1 + err1
    assert node0.returncode == 0, out0 + err0
    report = json.loads(out0)
    one, many = report["runs"]["one"], report["runs"]["many"]
    assert many["label"] == "2 processes on 2 nodes"
    assert sorted(r["rank"] for r in many["ranks"]) == [0, 1]  # node 1's rank gathered to node 0
    assert {r["num_processes"] for r in many["ranks"]} == {2}
    # correct.py trains through Accelerate and reads no torchrun variable: alone, it is
    # `python correct.py` (no process group of one)
    assert many["launcher"] == "torchrun" and one["launcher"] == "python"
    assert one["command"][1:] == [fixture_script("correct.py")]
    assert one["distributed_type"] == "NO"
    assert (one["global_batch"], many["global_batch"]) == (8, 16)
    assert (one["updates"], many["updates"]) == (6, 3) and one["samples_seen"] == 48
    assert [u["batch"] for u in many["per_update"]] == [16, 16, 16]
    assert {c["id"]: c["status"] for c in report["checks"]}["lr"] == "pass"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "running 2 processes on 2 nodes (torchrun)" in err0
    follower = json.loads(out1)
    assert follower["verdict"] == "node ran its ranks" and follower["runs"]["one"] is None
    for run_ in (one, many, follower["runs"]["many"]):
        assert processes_with_env("DISTLINT_VERIFY_TAG=" + run_["tag"]) == []


def test_slurm_route_two_nodes_on_localhost(tmp_path):
    """--slurm: srun (a stand-in that starts its command once per "node" on this machine) runs
    the same torchrun on each node, ranks numbered by the c10d rendezvous, records in the shared
    --keep folder; the node count comes from the allocation (SLURM_JOB_NUM_NODES)."""
    keep = tmp_path / "keep"
    env = {
        "PATH": f"{ROOT / 'tests' / 'verify' / 'fake_slurm'}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "127.0.0.1",
        "SLURM_JOB_NUM_NODES": "2",
    }
    proc = _verify_cli(
        "--slurm",
        "--rdzv-endpoint",
        f"127.0.0.1:{_free_port()}",
        "--keep",
        str(keep),
        "-n",
        "1",
        "--max-steps",
        "3",
        "--format",
        "json",
        fixture_script("correct.py"),
        env=env,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    report = json.loads(out)
    one, many = report["runs"]["one"], report["runs"]["many"]
    assert many["launcher"] == "srun+torchrun" and many["command"][0].endswith("srun")
    assert many["label"] == "2 processes on 2 nodes"
    assert sorted(r["rank"] for r in many["ranks"]) == [0, 1]
    assert {r["num_processes"] for r in many["ranks"]} == {2}
    assert (one["global_batch"], many["global_batch"]) == (8, 16)
    assert (one["updates"], many["updates"]) == (6, 3)
    names = sorted(p.name for p in (keep / "many" / "records").glob("*.jsonl"))
    assert any(n.startswith("node1-") for n in names), names  # node 1's rank, by its own name
    for run_ in (one, many):
        assert processes_with_env("DISTLINT_VERIFY_TAG=" + run_["tag"]) == []
