"""Build the launch commands (torchrun, accelerate launch, accelerate's TPU launcher) and run them.

Nothing here imports torch or accelerate: devices are found with nvidia-smi and the environment,
and every launch goes through an existing launcher in a subprocess.

Every process of a run carries DISTLINT_VERIFY_TAG=<token> in its environment. Launchers put
workers in sessions of their own, and a script may fork or daemonize, so process groups alone
cannot find everything a run started; the tag can, through /proc/<pid>/environ. When a run ends
(or times out) every tagged process still alive is sent SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable

PROBE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe")
TAG_VAR = "DISTLINT_VERIFY_TAG"

LAUNCHERS = ("torchrun", "accelerate")
DEVICES = ("auto", "cpu", "cuda", "xla")

XLA_ON_CPU = (
    "torch_xla cannot form a multi-process group on CPU: its CPU backend runs the replicas as threads "
    "in one process and deadlocks in all-reduce. Verifying on XLA needs a TPU host."
)


class LaunchError(Exception):
    """The runs cannot be made as asked (bad options, no TPU for --device xla, ...)."""


# -- devices ----------------------------------------------------------------------------------


def visible_gpu_count() -> int:
    """CUDA GPUs this process may use, without importing torch (nvidia-smi + CUDA_VISIBLE_DEVICES)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        if not ids:
            return 0
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    if visible is not None:
        count = min(count, len(ids))
    return count


def tpu_available() -> bool:
    if os.environ.get("TPU_NAME") or os.environ.get("TPU_ACCELERATOR_TYPE"):
        return True
    return bool(glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"))


@dataclass
class DevicePlan:
    single: str  # device of the 1-process run: "cpu", "cuda", "xla"
    multi: str  # device of the N-process run
    nprocs: int
    notes: list[str] = field(default_factory=list)


def plan_devices(device: str, nprocs: int | None) -> DevicePlan:
    """Pick devices and N: GPUs when visible (N = their count, at least 2), else CPU with N = 2."""
    if device not in DEVICES:
        raise LaunchError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
    if nprocs is not None and nprocs < 2:
        raise LaunchError("-n/--nprocs must be at least 2 (the 1-process run is always made)")
    if device == "xla":
        return DevicePlan("xla", "xla", nprocs or 8)
    gpus = visible_gpu_count() if device in ("auto", "cuda") else 0
    if device == "cuda" and gpus == 0:
        raise LaunchError(
            "--device cuda: no CUDA GPU is visible (nvidia-smi / CUDA_VISIBLE_DEVICES)"
        )
    if gpus == 0:
        return DevicePlan("cpu", "cpu", nprocs or 2)
    n = nprocs or max(2, gpus)
    if gpus >= n:
        return DevicePlan("cuda", "cuda", n)
    return DevicePlan(
        "cuda",
        "cpu",
        n,
        [
            f"{gpus} GPU(s) visible for {n} processes: the {n}-process run uses CPU (gloo); "
            "losses may differ slightly between the devices"
        ],
    )


# -- commands ---------------------------------------------------------------------------------


@dataclass
class LaunchPlan:
    label: str  # "1 process", "2 processes"
    nprocs: int
    launcher: str  # "python", "torchrun", "accelerate", "accelerate-tpu"
    device: str
    argv: list[str]
    env: dict[str, str]  # added to os.environ
    log_dir: str | None = None  # where the launcher writes per-rank stdout/stderr


def _has_option(args: Sequence[str], *names: str) -> bool:
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


def device_env(device: str) -> dict[str, str]:
    if device == "cpu":
        # ACCELERATE_USE_CPU=1 makes Accelerate form a gloo group on CPU; without it, torchrun on a
        # CPU machine starts N independent single-process trainings that all exit 0.
        env = {"CUDA_VISIBLE_DEVICES": ""}
        env["ACCELERATE_USE_CPU"] = os.environ.get("ACCELERATE_USE_CPU", "1")
        return env
    if device == "xla":
        return {"PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "TPU")}
    return {}


def single_plan(script: str, script_args: Sequence[str], device: str) -> LaunchPlan:
    argv = [sys.executable, script, *script_args]
    return LaunchPlan("1 process", 1, "python", device, argv, device_env(device))


def multi_plan(
    script: str,
    script_args: Sequence[str],
    nprocs: int,
    device: str,
    launcher: str = "torchrun",
    launcher_args: Sequence[str] = (),
    log_dir: str | None = None,
    main_function: str = "main",
) -> LaunchPlan:
    """The N-process command through an existing launcher."""
    launcher_args = list(launcher_args)
    label = f"{nprocs} processes"
    env = device_env(device)
    if device == "xla":
        # Accelerate's TPU launcher imports the script and xmp.spawn()s its main function.
        argv = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--tpu"]
        if not _has_option(launcher_args, "--num_processes"):
            argv += ["--num_processes", str(nprocs)]
        if not _has_option(launcher_args, "--main_training_function"):
            argv += ["--main_training_function", main_function]
        argv += [*launcher_args, script, *script_args]
        return LaunchPlan(label, nprocs, "accelerate-tpu", device, argv, env)
    if launcher == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run"]
        multi_node = _has_option(
            launcher_args,
            "--nnodes",
            "--rdzv-endpoint",
            "--rdzv_endpoint",
            "--master-addr",
            "--master_addr",
        )
        if not multi_node and not _has_option(launcher_args, "--standalone"):
            argv.append("--standalone")  # a free port of its own: several verifies can run at once
        if not _has_option(launcher_args, "--nproc-per-node", "--nproc_per_node"):
            argv += ["--nproc_per_node", str(nprocs)]
        if log_dir and not _has_option(launcher_args, "--log-dir", "--log_dir"):
            argv += ["--log-dir", log_dir, "--tee", "3"]
        argv += [*launcher_args, script, *script_args]
        return LaunchPlan(label, nprocs, "torchrun", device, argv, env, log_dir)
    if launcher == "accelerate":
        argv = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch"]
        user_configured = _has_option(launcher_args, "--config_file", "--config-file")
        if not _has_option(launcher_args, "--num_processes", "--num-processes"):
            argv += ["--num_processes", str(nprocs)]
        if not user_configured and not _has_option(
            launcher_args,
            "--multi_gpu",
            "--multi-gpu",
            "--cpu",
            "--tpu",
            "--use_deepspeed",
            "--use_fsdp",
        ):
            # With ACCELERATE_USE_CPU=1 this forms a gloo group on CPU. (`--cpu` would not: it
            # starts ONE process whatever --num_processes says.)
            argv.append("--multi_gpu")
        if not _has_option(launcher_args, "--main_process_port", "--main-process-port"):
            argv += ["--main_process_port", "0"]  # accelerate picks a free port
        if log_dir and not _has_option(launcher_args, "--log_dir", "--log-dir"):
            argv += ["--log_dir", log_dir, "--tee", "3"]
        argv += [*launcher_args, script, *script_args]
        return LaunchPlan(label, nprocs, "accelerate", device, argv, env, log_dir)
    raise LaunchError(f"unknown launcher {launcher!r}; choose from {', '.join(LAUNCHERS)}")


# -- processes --------------------------------------------------------------------------------


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 : data.rindex(b")") + 3].decode()
    except (OSError, ValueError):
        return None


def tagged_processes(tag: str) -> dict[int, dict[str, str]]:
    """Live processes whose environment carries DISTLINT_VERIFY_TAG=tag: pid -> a few env vars."""
    needle = f"{TAG_VAR}={tag}".encode()
    found: dict[int, dict[str, str]] = {}
    if not os.path.isdir("/proc"):
        return found
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if needle not in environ:
            continue
        if _proc_state(int(name)) in (None, "Z", "X"):
            continue
        info = {}
        for item in environ:
            key, _, value = item.partition(b"=")
            if key in (b"RANK", b"LOCAL_RANK"):
                info[key.decode()] = value.decode(errors="replace")
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                info["cmdline"] = (
                    f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
                )
        except OSError:
            pass
        found[int(name)] = info
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_all(
    popen: subprocess.Popen, tag: str, grace: float = 2.0
) -> dict[int, dict[str, str]]:
    """SIGTERM the launcher's group and every tagged process, SIGKILL what is left after `grace`.

    Returns the processes that had to be killed with SIGKILL (they ignored SIGTERM).
    """
    try:
        os.killpg(popen.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in tagged_processes(tag):
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        popen.poll()
        if popen.returncode is not None and not tagged_processes(tag):
            return {}
        time.sleep(0.05)
    stubborn = tagged_processes(tag)
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in stubborn:
        _signal(pid, signal.SIGKILL)
    _wait_gone(popen, tag, 5.0)
    return stubborn


def _wait_gone(popen: subprocess.Popen, tag: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        popen.poll()
        if popen.returncode is not None and not tagged_processes(tag):
            return
        time.sleep(0.05)
    try:
        popen.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class RunOutcome:
    plan: LaunchPlan
    record_dir: str
    returncode: int | None
    wall_s: float
    timed_out: bool
    output_path: str
    tag: str
    launcher_stopped: bool = False  # every rank had finished; verify ended the launcher's teardown
    killed_after_timeout: dict[int, dict[str, str]] = field(default_factory=dict)
    leftovers: dict[int, dict[str, str]] = field(
        default_factory=dict
    )  # alive after the launcher ended

    def output_tail(self, lines: int = 30) -> str:
        try:
            with open(self.output_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def rank_stderr_tails(self, lines: int = 15) -> dict[int, str]:
        """Per local rank, the tail of stderr the launcher logged (torchrun/accelerate --log-dir)."""
        tails: dict[int, str] = {}
        if not self.plan.log_dir:
            return tails
        for path in glob.glob(os.path.join(self.plan.log_dir, "*", "attempt_*", "*", "stderr.log")):
            try:
                rank = int(os.path.basename(os.path.dirname(path)))
                with open(path, encoding="utf-8", errors="replace") as f:
                    tails[rank] = "".join(f.readlines()[-lines:])
            except (OSError, ValueError):
                continue
        return tails


def run_plan(
    plan: LaunchPlan,
    work_dir: str,
    timeout: float,
    extra_env: dict[str, str],
    on_poll: Callable[[float], None] | None = None,
) -> RunOutcome:
    """Run one launch to completion or timeout; nothing it started is left alive afterwards."""
    tag = uuid.uuid4().hex
    record_dir = os.path.join(work_dir, "records")
    os.makedirs(record_dir, exist_ok=True)
    output_path = os.path.join(work_dir, "output.log")
    env = dict(os.environ)
    env.update(plan.env)
    env.update(extra_env)
    env[TAG_VAR] = tag
    env["DISTLINT_VERIFY_OUT"] = record_dir
    env["PYTHONPATH"] = os.pathsep.join(
        [PROBE_DIR] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    )
    env["PYTHONUNBUFFERED"] = "1"
    start = time.monotonic()
    with open(output_path, "wb") as out:
        popen = subprocess.Popen(
            plan.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: one killpg reaches the launcher's family
        )
    timed_out = launcher_stopped = False
    killed: dict[int, dict[str, str]] = {}
    all_done_since: float | None = None
    try:
        while True:
            try:
                popen.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            elapsed = time.monotonic() - start
            if on_poll is not None:
                on_poll(elapsed)
            if elapsed > timeout:
                timed_out = True
                killed = terminate_all(popen, tag)
                break
            if plan.nprocs > 1 and _ranks_done(record_dir, plan.nprocs, popen.pid, tag):
                # Every rank has finished and exited: torchrun's own teardown (closing the
                # rendezvous, ~1.5 s) is not part of the run. Give it a moment, then end it.
                all_done_since = all_done_since or time.monotonic()
                if time.monotonic() - all_done_since > 0.3:
                    launcher_stopped = True
                    terminate_all(popen, tag, grace=2.0)
                    break
    except BaseException:
        terminate_all(popen, tag, grace=0.5)
        raise
    wall = time.monotonic() - start
    leftovers: dict[int, dict[str, str]] = {}
    # Workers of a launcher that exited, or processes the script forked, may still be alive.
    deadline = time.monotonic() + 1.0
    while not timed_out and time.monotonic() < deadline and tagged_processes(tag):
        time.sleep(0.05)
    if not timed_out:
        leftovers = tagged_processes(tag)
        if leftovers:
            terminate_all(popen, tag, grace=1.0)
    popen.poll()
    return RunOutcome(
        plan=plan,
        record_dir=record_dir,
        returncode=popen.returncode,
        wall_s=wall,
        timed_out=timed_out,
        output_path=output_path,
        tag=tag,
        killed_after_timeout=killed,
        leftovers=leftovers,
        launcher_stopped=launcher_stopped,
    )


def _ranks_done(record_dir: str, nprocs: int, launcher_pid: int, tag: str) -> bool:
    """All N ranks wrote their `.done` marker and no process but the launcher is left."""
    try:
        done = sum(1 for name in os.listdir(record_dir) if name.endswith(".done"))
    except OSError:
        return False
    if done < nprocs:
        return False
    return set(tagged_processes(tag)) <= {launcher_pid}
