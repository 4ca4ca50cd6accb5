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

from distlint.verify.probe import distlint_probe_schema as schema

PROBE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe")
TAG_VAR = schema.ENV_TAG

LAUNCHERS = ("torchrun", "accelerate", "fabric")
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


def plan_devices(device: str, nprocs: int | None, minimum: int = 2) -> DevicePlan:
    """Pick devices and N: GPUs when visible (N = their count, at least 2), else CPU with N = 2."""
    if device not in DEVICES:
        raise LaunchError(f"unknown device {device!r}; choose from {', '.join(DEVICES)}")
    if nprocs is not None and nprocs < minimum:
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
    local_nprocs: int | None = None  # ranks on this machine (several nodes: fewer than nprocs)
    notes: list[str] = field(default_factory=list)  # what verify changed in the command, and why

    @property
    def local(self) -> int:
        return self.local_nprocs or self.nprocs


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


def main_function_of(script: str) -> str | None:
    """The function the script's `if __name__ == "__main__":` block calls (what xmp.spawn needs)."""
    import ast

    try:
        with open(script, "rb") as f:
            tree = ast.parse(f.read(), script)
    except (OSError, SyntaxError, ValueError):
        return None
    functions = {
        n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                    if sub.func.id in functions:
                        return sub.func.id
    return "main" if "main" in functions else None


@dataclass
class Nodes:
    """Several machines: torchrun's multi-node rendezvous (c10d), optionally started by srun."""

    nnodes: int
    node_rank: int | None = None  # None with srun: each node's torchrun takes its rank from SLURM
    rdzv_endpoint: str | None = None  # host:port of the rendezvous
    rdzv_id: str = "distlint-verify"
    slurm: bool = False

    def torchrun_args(self) -> list[str]:
        endpoint = self.rdzv_endpoint or "127.0.0.1:29400"
        if self.node_rank is not None:
            # Static rendezvous: each node keeps the rank it was given (node 0 hosts the store
            # and global rank 0, so its verify reads every rank's records).
            host, _, port = endpoint.rpartition(":")
            return [
                "--nnodes",
                str(self.nnodes),
                "--node-rank",
                str(self.node_rank),
                "--master-addr",
                host,
                "--master-port",
                port,
            ]
        # srun: one torchrun per node, ranks assigned by the c10d rendezvous.
        return [
            "--nnodes",
            str(self.nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            self.rdzv_id,
        ]


def slurm_master(environ: dict[str, str] | None = None) -> str | None:
    """The first host of the SLURM allocation (scontrol show hostnames), without a port."""
    environ = dict(os.environ if environ is None else environ)
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        return None
    scontrol = shutil.which("scontrol")
    if scontrol:
        try:
            out = subprocess.run(
                [scontrol, "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return nodelist.split(",")[0].split("[")[0] or None


def python_module(module: str) -> list[str]:
    """`python -m module` with an isolated import path: the runs start in a copy of the user's
    folder, and `-m` would put it first on sys.path, so a `torch/` or `uuid.py` planted there
    would run inside the launcher. `-P` (Python 3.11+) leaves it out; before 3.11 the same is
    done by hand. PYTHONPATH stays (it carries the probe), and the script itself still runs as
    `python script.py` does, with its own folder first."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module]
    code = (
        "import sys, runpy; del sys.path[0]; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", code]


def _torchrun(nprocs: int, launcher_args: Sequence[str], log_dir: str | None, nodes) -> list[str]:
    argv = python_module("torch.distributed.run")
    multi_node = nodes is not None or _has_option(
        launcher_args,
        "--nnodes",
        "--rdzv-endpoint",
        "--rdzv_endpoint",
        "--master-addr",
        "--master_addr",
    )
    if nodes is not None:
        argv += nodes.torchrun_args()
    if not multi_node and not _has_option(launcher_args, "--standalone"):
        argv.append("--standalone")  # a free port of its own: several verifies can run at once
    if not _has_option(launcher_args, "--nproc-per-node", "--nproc_per_node"):
        argv += ["--nproc_per_node", str(nprocs)]
    if log_dir and not _has_option(launcher_args, "--log-dir", "--log_dir"):
        argv += ["--log-dir", log_dir, "--tee", "3"]
    return argv + list(launcher_args)


def _single_node_args(args: Sequence[str]) -> list[str]:
    """Launcher arguments without the multi-node ones (the 1-process run stays on this machine)."""
    drop = {"--nnodes", "--node-rank", "--node_rank", "--rdzv-endpoint", "--rdzv_endpoint",
            "--rdzv-backend", "--rdzv_backend", "--rdzv-id", "--rdzv_id", "--master-addr",
            "--master_addr", "--master-port", "--master_port", "--num_machines", "--machine_rank",
            "--main_process_ip", "--num_processes", "--num-processes", "--nproc_per_node",
            "--nproc-per-node", "--multi_gpu", "--multi-gpu", "--devices", "--num-nodes"}  # fmt: skip
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in drop:
            skip = "=" not in a and name not in ("--multi_gpu", "--multi-gpu")
            continue
        out.append(a)
    return out


def single_plan(
    script: str,
    script_args: Sequence[str],
    device: str,
    launcher: str = "python",
    launcher_args: Sequence[str] = (),
    log_dir: str | None = None,
) -> LaunchPlan:
    """The 1-process run, through the same launcher as the N-process run with one process.

    torchrun --nproc_per_node 1 sets RANK/LOCAL_RANK/WORLD_SIZE as scripts written for torchrun
    expect; accelerate launch --num_processes 1 honours --config_file; "python" runs it bare.
    """
    env = device_env(device)
    args = _single_node_args(launcher_args)
    if launcher == "torchrun":
        argv = _torchrun(1, args, log_dir, None) + [script, *script_args]
        return LaunchPlan("1 process", 1, "torchrun", device, argv, env, log_dir)
    if launcher == "accelerate":
        argv = [*python_module("accelerate.commands.accelerate_cli"), "launch"]
        argv += ["--num_processes", "1", *args, script, *script_args]
        return LaunchPlan("1 process", 1, "accelerate", device, argv, env)
    if launcher == "fabric":
        argv = _fabric(1, device, args) + [script, *script_args]
        return LaunchPlan("1 process", 1, "fabric", device, argv, env)
    argv = [sys.executable, script, *script_args]
    return LaunchPlan("1 process", 1, "python", device, argv, env)


def _fabric(nprocs: int, device: str, launcher_args: Sequence[str]) -> list[str]:
    """Lightning Fabric's own launcher, `fabric run`, from this Python: `python -m
    lightning.fabric.cli` IS the run command (no `run` word: that would be taken for the
    script), and another `fabric` on PATH may belong to another Python or another tool."""
    argv = python_module("lightning.fabric.cli")
    if not _has_option(launcher_args, "--accelerator"):
        argv += ["--accelerator", "cpu" if device == "cpu" else "cuda"]
    if not _has_option(launcher_args, "--devices"):
        argv += ["--devices", str(nprocs)]
    if nprocs > 1 and not _has_option(launcher_args, "--strategy"):
        argv += ["--strategy", "ddp"]
    return argv + list(launcher_args)


def multi_plan(
    script: str,
    script_args: Sequence[str],
    nprocs: int,
    device: str,
    launcher: str = "torchrun",
    launcher_args: Sequence[str] = (),
    log_dir: str | None = None,
    main_function: str | None = None,
    nodes: Nodes | None = None,
) -> LaunchPlan:
    """The N-process command through an existing launcher (nprocs: processes on this node)."""
    launcher_args = list(launcher_args)
    world = nprocs * (nodes.nnodes if nodes else 1)
    label = f"{world} processes" + (f" on {nodes.nnodes} nodes" if nodes else "")
    env = device_env(device)
    if device == "xla":
        # Accelerate's TPU launcher imports the script and xmp.spawn()s its main function.
        argv = [*python_module("accelerate.commands.accelerate_cli"), "launch", "--tpu"]
        if not _has_option(launcher_args, "--num_processes"):
            argv += ["--num_processes", str(nprocs)]
        if not _has_option(launcher_args, "--main_training_function"):
            if not main_function:
                raise LaunchError(
                    f"--device xla: accelerate's TPU launcher spawns a function of {script}, but "
                    'its `if __name__ == "__main__":` block calls none; pass '
                    "--launcher-arg=--main_training_function=NAME"
                )
            argv += ["--main_training_function", main_function]
        argv += [*launcher_args, script, *script_args]
        return LaunchPlan(label, world, "accelerate-tpu", device, argv, env)
    if launcher == "torchrun":
        argv = _torchrun(nprocs, launcher_args, log_dir, nodes) + [script, *script_args]
        if nodes is not None and nodes.slurm:
            srun = [shutil.which("srun") or "srun", "--nodes", str(nodes.nnodes)]
            srun += ["--ntasks-per-node", "1", "--kill-on-bad-exit=1"]
            return LaunchPlan(
                label, world, "srun+torchrun", device, srun + argv, env, log_dir, world
            )
        return LaunchPlan(label, world, "torchrun", device, argv, env, log_dir, nprocs)
    if launcher == "fabric":
        argv = _fabric(nprocs, device, launcher_args) + [script, *script_args]
        return LaunchPlan(label, world, "fabric", device, argv, env)
    if launcher == "accelerate":
        argv = [*python_module("accelerate.commands.accelerate_cli"), "launch"]
        user_configured = _has_option(launcher_args, "--config_file", "--config-file")
        if not _has_option(launcher_args, "--num_processes", "--num-processes"):
            argv += ["--num_processes", str(nprocs)]
        chosen = _has_option(
            launcher_args,
            "--multi_gpu",
            "--multi-gpu",
            "--cpu",
            "--tpu",
            "--use_deepspeed",
            "--use_fsdp",
        )
        config = accelerate_config(launcher_args) if user_configured else {}
        notes = []
        # A MULTI_CPU config (what `accelerate config` writes for CPU processes) starts ONE
        # process without an MPI hostfile: accelerate's torchrun route with ACCELERATE_USE_CPU=1
        # forms the gloo group of N it asks for.
        multi_cpu = (
            config.get("distributed_type") == "MULTI_CPU"
            and not config.get("mpirun_hostfile")
            and device == "cpu"
            and nprocs > 1
        )
        if not chosen and (not user_configured or multi_cpu):
            # With ACCELERATE_USE_CPU=1 this forms a gloo group on CPU. (`--cpu` would not: it
            # starts ONE process whatever --num_processes says.)
            argv.append("--multi_gpu")
            if multi_cpu:
                notes.append(
                    f"{config_file_of(launcher_args)} sets distributed_type: MULTI_CPU without "
                    "an mpirun_hostfile, with which accelerate launch starts one process: verify "
                    f"added --multi_gpu (torchrun's route, gloo on CPU) to start {nprocs}"
                )
        if not _has_option(launcher_args, "--main_process_port", "--main-process-port"):
            argv += ["--main_process_port", "0"]  # accelerate picks a free port
        if log_dir and not _has_option(launcher_args, "--log_dir", "--log-dir"):
            argv += ["--log_dir", log_dir, "--tee", "3"]
        argv += [*launcher_args, script, *script_args]
        return LaunchPlan(label, world, "accelerate", device, argv, env, log_dir, notes=notes)
    raise LaunchError(f"unknown launcher {launcher!r}; choose from {', '.join(LAUNCHERS)}")


CONFIG_FILE_OPTIONS = ("--config_file", "--config-file")


def config_file_of(launcher_args: Sequence[str]) -> str | None:
    """The path given to `accelerate launch --config_file` among the launcher arguments."""
    args = list(launcher_args)
    path = None
    for i, a in enumerate(args):
        name, sep, value = a.partition("=")
        if name in CONFIG_FILE_OPTIONS:
            path = value if sep else (args[i + 1] if i + 1 < len(args) else None)
    return path


def with_absolute_config_file(launcher_args: Sequence[str], cwd: str) -> list[str]:
    """The launcher arguments with --config_file made absolute (relative to the user's working
    directory): the runs start in scratch folders, where `../cfg.yaml` would name nothing."""
    out: list[str] = []
    args = list(launcher_args)
    i = 0
    while i < len(args):
        name, sep, value = args[i].partition("=")
        if name in CONFIG_FILE_OPTIONS and sep:
            out.append(f"{name}={os.path.join(cwd, os.path.expanduser(value))}")
        elif name in CONFIG_FILE_OPTIONS and i + 1 < len(args):
            out += [name, os.path.join(cwd, os.path.expanduser(args[i + 1]))]
            i += 1
        else:
            out.append(args[i])
        i += 1
    return out


def accelerate_config(launcher_args: Sequence[str]) -> dict[str, str]:
    """Top-level scalar settings of an `accelerate launch --config_file` file (YAML or JSON, as
    `accelerate config` writes them), as strings; {} without a readable file."""
    path = config_file_of(launcher_args)
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)  # an accelerate config is a few hundred bytes
    except (OSError, UnicodeDecodeError):
        return {}
    if path.endswith(".json"):
        import json

        try:
            data = json.loads(text)
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items() if not isinstance(v, (dict, list))}
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in " \t#-":
            continue  # nested mappings (fsdp_config: ...) and comments
        key, sep, value = line.partition(":")
        value = value.split(" #", 1)[0].strip().strip("'\"")
        if sep and value:
            found[key.strip()] = value
    return found


def accelerate_config_processes(launcher_args: Sequence[str]) -> int | None:
    """num_processes of an `accelerate launch --config_file` file (to honour it as N)."""
    value = accelerate_config(launcher_args).get("num_processes", "")
    return int(value) if value.isdigit() else None


# -- processes --------------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def _proc_state(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return stat[0] if stat else None


def short_command(argv: Sequence[bytes], limit: int = 200) -> str:
    """A command line for the report: whole words only, ` ...` where it was shortened."""
    words = [a.decode(errors="replace") for a in argv if a]
    text = " ".join(words)
    if len(text) <= limit:
        return text
    kept: list[str] = []
    size = 0
    for word in words:
        if size + len(word) + 1 > limit - 4 and kept:
            break
        kept.append(word if len(word) <= limit - 4 else word[: limit - 7] + "...")
        size += len(word) + 1
    return " ".join(kept) + " ..."


def _info(pid: int, environ: list[bytes] | None = None) -> dict[str, str]:
    info: dict[str, str] = {}
    if environ is None:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            environ = []
    for item in environ:
        key, _, value = item.partition(b"=")
        if key in (b"RANK", b"LOCAL_RANK"):
            info[key.decode()] = value.decode(errors="replace")
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            info["cmdline"] = short_command(f.read().split(b"\0"))
    except OSError:
        pass
    return info


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
        info = _info(int(name), environ)
        info["found_by"] = "environment tag"
        found[int(name)] = info
    return found


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    if not os.path.isdir("/proc"):
        return children
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _proc_stat(int(name))
        if stat is None or stat[0] in ("Z", "X"):
            continue
        children.setdefault(stat[1], []).append(int(name))
    return children


def set_child_subreaper(on: bool) -> bool:
    """PR_SET_CHILD_SUBREAPER (Linux): orphans of the run become our children, not init's, so
    a helper that left the launcher's tree (a new session, a double fork, a clean environment)
    can still be found by the process tree. Returns whether it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1 if on else 0, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


def _set_parent_death_signal() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Tracker:
    """Everything one run started: by environment tag, and by process tree (the launcher's
    descendants, and orphans re-parented to verify while it is a subreaper)."""

    def __init__(self, tag: str):
        self.tag = tag
        self.me = os.getpid()
        self.before = set(_children_map().get(self.me, []))
        self.root: int | None = None

    def processes(self) -> dict[int, dict[str, str]]:
        found = tagged_processes(self.tag)
        children = _children_map()
        roots = [c for c in children.get(self.me, []) if c not in self.before]
        stack = list(roots)
        seen: set[int] = set()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            stack.extend(children.get(pid, []))
        for pid in seen:
            if pid not in found:
                info = _info(pid)
                info["found_by"] = "process tree"
                found[pid] = info
        return found

    def reap(self) -> None:
        """Collect exit statuses of orphans that became our children (no zombies left)."""
        for pid in list(_children_map().get(self.me, [])) + list(self.orphans_done()):
            if pid in self.before or pid == self.root:
                continue
            try:
                os.waitpid(pid, os.WNOHANG)
            except (ChildProcessError, OSError):
                pass

    def orphans_done(self) -> list[int]:
        out: list[int] = []
        try:
            names = os.listdir("/proc")
        except OSError:
            return out
        for name in names:
            if name.isdigit():
                stat = _proc_stat(int(name))
                if stat and stat[0] == "Z" and stat[1] == self.me:
                    out.append(int(name))
        return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_all(
    popen: subprocess.Popen, tracker: Tracker, grace: float = 2.0
) -> dict[int, dict[str, str]]:
    """SIGTERM the launcher's group and everything the run started, SIGKILL what is left after
    `grace`. Returns the processes that had to be killed with SIGKILL (they ignored SIGTERM)."""
    try:
        os.killpg(popen.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in tracker.processes():
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        popen.poll()
        tracker.reap()
        if popen.returncode is not None and not tracker.processes():
            return {}
        time.sleep(0.05)
    stubborn = tracker.processes()
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in stubborn:
        _signal(pid, signal.SIGKILL)
    _wait_gone(popen, tracker, 5.0)
    return stubborn


def _wait_gone(popen: subprocess.Popen, tracker: Tracker, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        popen.poll()
        tracker.reap()
        if popen.returncode is not None and not tracker.processes():
            return
        time.sleep(0.05)
    try:
        popen.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        pass


TAIL_BYTES = 256 * 1024  # at most this much of the end of a log is read
LINE_CHARS = 2000  # a longer line (progress bars, output without newlines) is cut


def tail_text(path: str, lines: int, max_bytes: int = TAIL_BYTES) -> str:
    """The last `lines` lines of a log, reading at most `max_bytes` from its end (a rank may
    write gigabytes, with or without newlines); each line at most LINE_CHARS characters."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_bytes))
            data = f.read(max_bytes)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > max_bytes:
        text = text.split("\n", 1)[1] if "\n" in text else text  # the first line is partial
    kept = text.splitlines(keepends=True)[-lines:]
    cut = []
    for line in kept:
        if len(line) > LINE_CHARS:
            line = "... " + line[-LINE_CHARS:]
        cut.append(line)
    return "".join(cut)


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
    leftovers: dict[int, dict[str, str]] = field(default_factory=dict)  # alive after the launcher
    end_t: float = 0.0  # time.time() when the run ended
    cwd: str | None = None
    stderr_tails: dict[int, str] | None = None  # replayed runs: the tails as recorded
    at_timeout: list[str] = field(default_factory=list)  # command lines alive when it timed out

    def output_tail(self, lines: int = 30) -> str:
        return tail_text(self.output_path, lines)

    def rank_stderr_tails(self, lines: int = 15) -> dict[int, str]:
        """Per local rank, the tail of stderr the launcher logged (torchrun/accelerate --log-dir)."""
        if self.stderr_tails is not None:
            return self.stderr_tails
        tails: dict[int, str] = {}
        if not self.plan.log_dir:
            return tails
        for path in glob.glob(os.path.join(self.plan.log_dir, "*", "attempt_*", "*", "stderr.log")):
            try:
                rank = int(os.path.basename(os.path.dirname(path)))
            except ValueError:
                continue
            tails[rank] = tail_text(path, lines)
        return tails


def run_plan(
    plan: LaunchPlan,
    work_dir: str,
    timeout: float,
    extra_env: dict[str, str],
    on_poll: Callable[[float], None] | None = None,
    cwd: str | None = None,
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
    env[schema.ENV_OUT] = record_dir
    env[schema.ENV_PARENT] = str(os.getpid())
    env.pop(schema.ENV_LAUNCHER, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [PROBE_DIR] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    )
    env["PYTHONUNBUFFERED"] = "1"
    tracker = Tracker(tag)
    start = time.monotonic()
    with open(output_path, "wb") as out:
        popen = subprocess.Popen(
            plan.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: one killpg reaches the launcher's family
            preexec_fn=_set_parent_death_signal if sys.platform.startswith("linux") else None,
        )
    tracker.root = popen.pid
    timed_out = launcher_stopped = False
    killed: dict[int, dict[str, str]] = {}
    alive: list[str] = []
    stray: dict[int, dict[str, str]] = {}
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
                alive = [i.get("cmdline", "") for i in tracker.processes().values()]
                killed = terminate_all(popen, tracker)
                break
            if plan.launcher != "python" and _ranks_done(record_dir, plan.local, popen.pid, tag):
                # Every rank has finished and exited: torchrun's own teardown (closing the
                # rendezvous, ~1.5 s) is not part of the run. Give it a moment, then end it.
                all_done_since = all_done_since or time.monotonic()
                if time.monotonic() - all_done_since > 0.3:
                    launcher_stopped = True
                    # What is alive now besides the launcher was left behind by the script.
                    stray = {p: i for p, i in tracker.processes().items() if p != popen.pid}
                    terminate_all(popen, tracker, grace=2.0)
                    break
    except BaseException:
        terminate_all(popen, tracker, grace=0.5)
        raise
    wall = time.monotonic() - start
    leftovers: dict[int, dict[str, str]] = {}
    # Workers of a launcher that exited, or processes the script forked, may still be alive.
    deadline = time.monotonic() + 1.0
    while not timed_out and time.monotonic() < deadline and tracker.processes():
        time.sleep(0.05)
    if not timed_out:
        leftovers = {**stray, **tracker.processes()}
        leftovers.pop(popen.pid, None)
        if leftovers:
            terminate_all(popen, tracker, grace=1.0)
    popen.poll()
    tracker.reap()
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
        end_t=time.time(),
        cwd=cwd,
        at_timeout=alive,
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
