"""Fast tests: launch commands, device planning, the probe's import hygiene, the lint path's isolation."""

import json
import os
import subprocess
import sys
import time

import pytest
from verify_helpers import ROOT, fixture_script

from distlint.model import Finding, Range
from distlint.verify import launch
from distlint.verify.checks import join_static
from distlint.verify.compare import Check


def test_torchrun_command_is_standalone_with_logs():
    plan = launch.multi_plan(
        "/s/train.py", ["--lr", "1"], 2, "cpu", "torchrun", (), log_dir="/tmp/l"
    )
    assert plan.argv[1:4] == ["-P", "-m", "torch.distributed.run"]
    assert "--standalone" in plan.argv and plan.argv[plan.argv.index("--nproc_per_node") + 1] == "2"
    assert plan.argv[-3:] == ["/s/train.py", "--lr", "1"]
    assert plan.env["ACCELERATE_USE_CPU"] in ("1", os.environ.get("ACCELERATE_USE_CPU"))
    assert plan.env["CUDA_VISIBLE_DEVICES"] == ""


def test_torchrun_multi_node_args_replace_standalone():
    plan = launch.multi_plan(
        "t.py", [], 4, "cuda", "torchrun", ["--nnodes=2", "--rdzv-endpoint=h:29400"]
    )
    assert "--standalone" not in plan.argv
    assert "--nnodes=2" in plan.argv and plan.argv.index("--nnodes=2") < plan.argv.index("t.py")


def test_accelerate_command_forms_a_cpu_group_and_passes_config_through():
    plan = launch.multi_plan("t.py", [], 2, "cpu", "accelerate", [])
    assert plan.argv[1:5] == ["-P", "-m", "accelerate.commands.accelerate_cli", "launch"]
    assert "--multi_gpu" in plan.argv and "--cpu" not in plan.argv
    assert plan.argv[plan.argv.index("--main_process_port") + 1] == "0"
    configured = launch.multi_plan(
        "t.py", [], 2, "cuda", "accelerate", ["--config_file", "cfg.yaml"]
    )
    assert "--multi_gpu" not in configured.argv and "cfg.yaml" in configured.argv


def test_tpu_command_uses_accelerates_tpu_launcher():
    plan = launch.multi_plan("t.py", ["--x"], 8, "xla", "torchrun", [], main_function="main")
    assert plan.launcher == "accelerate-tpu"
    assert "--tpu" in plan.argv and plan.argv[plan.argv.index("--num_processes") + 1] == "8"
    assert plan.argv[plan.argv.index("--main_training_function") + 1] == "main"
    assert plan.env["PJRT_DEVICE"] == "TPU"


def test_device_plan_on_cpu_defaults_to_two(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    plan = launch.plan_devices("auto", None)
    assert (plan.single, plan.multi, plan.nprocs) == ("cpu", "cpu", 2)
    with pytest.raises(launch.LaunchError):
        launch.plan_devices("cuda", None)
    with pytest.raises(launch.LaunchError):
        launch.plan_devices("cpu", 1)


def test_device_plan_uses_visible_gpus(monkeypatch):
    monkeypatch.setattr(launch, "visible_gpu_count", lambda: 4)
    assert launch.plan_devices("auto", None).nprocs == 4
    monkeypatch.setattr(launch, "visible_gpu_count", lambda: 1)
    one_gpu = launch.plan_devices("auto", None)
    assert (one_gpu.single, one_gpu.multi, one_gpu.nprocs) == ("cuda", "cpu", 2) and one_gpu.notes


def test_xla_without_tpu_says_so_and_runs_nothing(monkeypatch):
    monkeypatch.setattr(launch, "tpu_available", lambda: False)
    from distlint.verify.core import verify

    result = verify(fixture_script("correct.py"), device="xla")
    assert result.exit_code == 2 and not result.runs
    assert "deadlocks in all-reduce" in result.problems[0]
    assert any("--tpu" in note for note in result.notes)


def _python(code, env=None):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_probe_imports_nothing_extra_and_chains_existing_sitecustomize(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([launch.PROBE_DIR, str(other)]),
        DISTLINT_VERIFY_OUT=str(tmp_path),
    )
    out = _python(
        "import os, sys, json; print(json.dumps([os.environ.get('CHAINED'), sorted(sys.modules)]))",
        env,
    )
    assert out.returncode == 0, out.stderr
    chained, modules = json.loads(out.stdout)
    assert chained == "yes"
    assert not {"torch", "numpy", "accelerate"} & set(modules)
    assert not list(tmp_path.glob("*.jsonl"))  # a process that trains nothing writes nothing


def test_probe_is_inert_without_its_environment_variable(tmp_path):
    env = dict(os.environ, PYTHONPATH=launch.PROBE_DIR)
    env.pop("DISTLINT_VERIFY_OUT", None)
    out = _python("import sys; print(type(sys.meta_path[0]).__name__)", env)
    assert out.returncode == 0 and out.stdout.strip() != "_Finder"


def test_probe_ships_inside_the_package():
    assert os.path.isfile(os.path.join(launch.PROBE_DIR, "sitecustomize.py"))
    assert launch.PROBE_DIR.startswith(os.path.dirname(launch.__file__))


def test_verify_cli_module_does_not_import_torch():
    out = _python(
        "import sys, distlint.verify.cli, distlint.verify.core, distlint.verify.report;"
        "print(sorted(m for m in ('torch', 'accelerate', 'numpy', 'matplotlib') if m in sys.modules))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _finding(code):
    return Finding("train.py", Range(3, 1, 3, 10), code, "name", "message")


def test_join_static_confirms_refutes_and_misses():
    checks = [
        Check("lr", "learning rate", "fail", "", "DL201", confirms=True),
        Check("seeding", "seeding", "pass", "", "DL101", confirms=False),
        Check("batch", "observed batch", "warn", "", "DL301", confirms=True, observes_hazard=False),
    ]
    join_static(checks, [_finding("DL201"), _finding("DL101")])
    assert [c.static for c in checks] == ["confirmed", "refuted", None]
    checks = [Check("lr", "learning rate", "fail", "", "DL201", confirms=True)]
    join_static(checks, [])
    assert checks[0].static == "missed"
    checks = [Check("lr", "learning rate", "fail", "", "DL201", confirms=True)]
    join_static(checks, None)  # the static check did not run: nothing is claimed
    assert checks[0].static is None


# -- commands: the 1-process run, several nodes, SLURM, Fabric, TPU, accelerate config -----------


def test_single_process_run_uses_the_same_launcher():
    torchrun = launch.single_plan("/s/t.py", ["--a"], "cpu", "torchrun", ["--nnodes=2"], "/l")
    assert torchrun.argv[1:4] == ["-P", "-m", "torch.distributed.run"] and torchrun.nprocs == 1
    assert torchrun.argv[torchrun.argv.index("--nproc_per_node") + 1] == "1"
    assert "--standalone" in torchrun.argv and "--nnodes=2" not in torchrun.argv
    acc = launch.single_plan("t.py", [], "cpu", "accelerate", ["--config_file", "c.yaml"])
    assert acc.argv[acc.argv.index("--num_processes") + 1] == "1" and "c.yaml" in acc.argv
    bare = launch.single_plan("t.py", ["--x"], "cpu", "python")
    assert bare.argv == [sys.executable, "t.py", "--x"]


def test_multi_node_rendezvous_command():
    nodes = launch.Nodes(2, node_rank=1, rdzv_endpoint="10.0.0.1:29400")
    plan = launch.multi_plan("t.py", [], 4, "cuda", "torchrun", [], nodes=nodes)
    argv = plan.argv
    assert "--standalone" not in argv
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == "1"
    # static rendezvous: the node keeps its rank (node 0 holds global rank 0 and the records)
    assert argv[argv.index("--master-addr") + 1] == "10.0.0.1"
    assert argv[argv.index("--master-port") + 1] == "29400"
    assert plan.nprocs == 8 and plan.local == 4 and plan.label == "8 processes on 2 nodes"


def test_slurm_route_builds_srun_around_the_same_torchrun(monkeypatch):
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)
    master = launch.slurm_master({"SLURM_JOB_NODELIST": "gpu[01-04]"})
    assert master == "gpu"  # without scontrol: the prefix; with it, the first host name
    monkeypatch.setattr(launch.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(
        launch.subprocess,
        "run",
        lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "gpu01\ngpu02\n", ""),
    )
    assert launch.slurm_master({"SLURM_JOB_NODELIST": "gpu[01-02]"}) == "gpu01"
    nodes = launch.Nodes(2, None, "gpu01:29400", slurm=True)
    plan = launch.multi_plan("t.py", ["--x"], 4, "cuda", "torchrun", [], nodes=nodes)
    srun, rest = plan.argv[:6], plan.argv[6:]
    assert srun[0].endswith("srun") and srun[1:3] == ["--nodes", "2"]
    assert "--ntasks-per-node" in srun
    assert rest[1:4] == ["-P", "-m", "torch.distributed.run"] and "--node-rank" not in rest
    assert rest[rest.index("--rdzv-endpoint") + 1] == "gpu01:29400"
    assert rest[rest.index("--rdzv-backend") + 1] == "c10d"
    assert plan.launcher == "srun+torchrun" and plan.argv[-2:] == ["t.py", "--x"]


def test_slurm_option_needs_a_shared_keep_folder_and_reads_the_allocation(
    monkeypatch, tmp_path, capsys
):
    from distlint.verify import cli, core

    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[01-02]")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)  # no scontrol: the prefix
    script = fixture_script("correct.py")
    assert cli.run_verify_command(script, [], "text", None, slurm=True) == 2
    assert "--slurm needs --keep DIR on a filesystem every node sees" in capsys.readouterr().err
    seen = {}

    def fake_verify(script, args, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(core, "verify", fake_verify)
    code = cli.run_verify_command(script, [], "text", None, slurm=True, keep_dir=str(tmp_path))
    nodes = seen["nodes"]
    assert code == 130 and seen["keep_dir"] == str(tmp_path)
    assert (nodes.nnodes, nodes.node_rank, nodes.rdzv_endpoint, nodes.slurm) == (
        2,
        None,
        "gpu:29400",
        True,
    )


def test_record_files_of_other_nodes_carry_the_node():
    sys.path.insert(0, launch.PROBE_DIR)
    try:
        from distlint_probe_recorder import record_stem
    finally:
        sys.path.remove(launch.PROBE_DIR)
    old = os.environ.pop("GROUP_RANK", None)
    try:
        assert record_stem(41) == "41"
        os.environ["GROUP_RANK"] = "0"
        assert record_stem(41) == "41"
        os.environ["GROUP_RANK"] = "1"
        assert record_stem(41) == "node1-41"
    finally:
        os.environ.pop("GROUP_RANK", None)
        if old is not None:
            os.environ["GROUP_RANK"] = old


def test_fabric_launcher_command():
    plan = launch.multi_plan("t.py", [], 2, "cpu", "fabric", [])
    # `python -m lightning.fabric.cli` is `fabric run` itself: a "run" word would be the SCRIPT
    assert plan.argv[:4] == [sys.executable, "-P", "-m", "lightning.fabric.cli"]
    assert "run" not in plan.argv and plan.argv[plan.argv.index("--devices") + 1] == "2"
    assert plan.argv[-1] == "t.py"
    assert plan.argv[plan.argv.index("--strategy") + 1] == "ddp"
    assert plan.argv[plan.argv.index("--accelerator") + 1] == "cpu"
    one = launch.single_plan("t.py", [], "cpu", "fabric")
    assert one.argv[one.argv.index("--devices") + 1] == "1" and "--strategy" not in one.argv


def test_tpu_launcher_names_the_function_the_script_really_calls(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("def train_fn():\n    pass\n\nif __name__ == '__main__':\n    train_fn()\n")
    assert launch.main_function_of(str(script)) == "train_fn"
    plan = launch.multi_plan(str(script), [], 8, "xla", main_function="train_fn")
    assert plan.argv[plan.argv.index("--main_training_function") + 1] == "train_fn"
    flat = tmp_path / "flat.py"
    flat.write_text("x = 1\n")
    assert launch.main_function_of(str(flat)) is None
    with pytest.raises(launch.LaunchError, match="calls none"):
        launch.multi_plan(str(flat), [], 8, "xla", main_function=None)


def test_accelerate_config_file_num_processes_is_honoured(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 3\n"
    )
    assert launch.accelerate_config_processes([f"--config_file={cfg}"]) == 3
    assert launch.accelerate_config_processes(["--config_file", str(cfg)]) == 3
    assert launch.accelerate_config_processes([]) is None
    as_json = tmp_path / "cfg.json"
    as_json.write_text('{"distributed_type": "MULTI_GPU", "num_processes": 4}')
    assert launch.accelerate_config_processes(["--config-file", str(as_json)]) == 4


def test_accelerate_config_file_is_made_absolute_for_the_scratch_folders(tmp_path, monkeypatch):
    """The runs start in scratch folders: a relative --config_file must still name the file."""
    assert launch.with_absolute_config_file(
        ["--config_file", "../cfg.yaml", "--mixed_precision=no", "--config-file=c.yaml"], "/u/p"
    ) == ["--config_file", "/u/p/../cfg.yaml", "--mixed_precision=no", "--config-file=/u/p/c.yaml"]
    (tmp_path / "cfg.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 3\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    plans = []

    def run_plan(plan, *args, **kwargs):
        plans.append(plan)
        raise KeyboardInterrupt  # stop after the first command was built

    from distlint.verify import core

    monkeypatch.setattr(core.launch, "run_plan", run_plan)
    result = core.verify(
        fixture_script("correct.py"),
        device="cpu",
        launcher="accelerate",
        launcher_args=["--config_file", "../cfg.yaml"],
    )
    assert result.nprocs == 3  # the file's num_processes
    argv = plans[0].argv
    assert argv[argv.index("--config_file") + 1] == str(work / ".." / "cfg.yaml")
    assert argv[argv.index("--num_processes") + 1] == "3" and "--multi_gpu" not in argv


@pytest.mark.parametrize(
    "config, multi_gpu",
    [
        ("distributed_type: MULTI_CPU\nuse_cpu: true\nnum_processes: 2\n", True),
        ("distributed_type: 'MULTI_CPU'  # cpu\nmpirun_hostfile: hosts\n", False),
        ("distributed_type: MULTI_GPU\nnum_processes: 2\n", False),
        ("distributed_type: NO\nfsdp_config:\n  distributed_type: MULTI_CPU\n", False),
    ],
)
def test_accelerate_multi_cpu_config_gets_the_torchrun_route(tmp_path, config, multi_gpu):
    """`accelerate config` on CPU writes MULTI_CPU, with which accelerate launch starts ONE
    process (no MPI hostfile): verify adds --multi_gpu and says so; other configs are kept."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(config)
    plan = launch.multi_plan("t.py", [], 2, "cpu", "accelerate", [f"--config_file={cfg}"])
    assert ("--multi_gpu" in plan.argv) is multi_gpu
    assert bool(plan.notes) is multi_gpu
    if multi_gpu:
        assert "MULTI_CPU" in plan.notes[0] and "added --multi_gpu" in plan.notes[0]


# -- the probe's seams --------------------------------------------------------------------------


def test_schema_is_shared_by_probe_and_reader():
    from distlint.verify import records
    from distlint.verify.probe import distlint_probe_schema as schema

    assert records.schema is schema and schema.SCHEMA_VERSION >= 2
    assert schema.missing_fields({"kind": "step", "n": 1}) == [
        f for f in schema.KINDS["step"] if f != "n"
    ]
    assert schema.missing_fields({"kind": "nonsense"}) == ["kind"]


def test_reader_refuses_another_schema_version(tmp_path):
    from distlint.verify.records import read_run

    (tmp_path / "1.jsonl").write_text(json.dumps({"kind": "header", "schema": 1, "pid": 1}) + "\n")
    run = read_run(str(tmp_path))
    assert not run.ranks and "record schema 1" in run.problems[0]


def test_every_patch_is_guarded_and_recorded(tmp_path):
    """Patches go through the Patcher: a probe error never reaches the user's call."""
    sys.path.insert(0, launch.PROBE_DIR)
    try:
        from distlint_probe_patching import Patcher
    finally:
        sys.path.remove(launch.PROBE_DIR)
    notes = []

    class Target:
        def work(self, x):
            return x * 2

    patcher = Patcher(notes.append)

    def broken(result, args, kwargs):
        raise RuntimeError("probe bug")

    assert patcher.wrap(Target, "work", "Target.work", after=broken)
    assert Target().work(3) == 6  # the user's result, despite the probe error
    assert notes == ["probe error in Target.work: RuntimeError('probe bug')"]
    assert not patcher.wrap(Target, "work", "Target.work")  # never wrapped twice
    assert patcher.skipped["Target.work"] == "already wrapped"
    assert not patcher.wrap(Target, "missing", "Target.missing")
    patcher.restore()
    assert not getattr(Target.work, "_distlint", False)


def test_probe_never_replaces_tensor_backward_unguarded():
    """The probe source: every replacement of a function of torch, accelerate, numpy or random
    goes through Patcher.wrap (the one module allowed to setattr)."""
    import re

    owners = (
        r"(torch|Tensor|cls|module|dist|base|np|numpy|random|accelerate|dl_module|nn_module|owner)"
    )
    for name in os.listdir(launch.PROBE_DIR):
        if not name.endswith(".py") or name == "distlint_probe_patching.py":
            continue
        with open(os.path.join(launch.PROBE_DIR, name), encoding="utf-8") as f:
            source = f.read()
        direct = re.findall(rf"^\s*{owners}(\.\w+)+ = ", source, re.M)
        assert direct == [] and "setattr(" not in source, name
        assert "Tensor.backward = " not in source


def test_real_probe_errors_never_reach_the_script(tmp_path):
    """The real probe on real torch and Accelerate, every recorder method broken: the script's
    losses and weights are bit for bit those of the run without the probe, each patch wrote its
    error once as a note, and Tensor.backward is the guarded wrapper around torch's own."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/verify/probe_sabotaged.py"), launch.PROBE_DIR, tmp_path],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["same"] is True
    assert report["backward_wrapped"] is True and report["backward_original"] == "torch._tensor"
    assert report["skipped"] == {}
    notes = []
    for path in tmp_path.glob("*.jsonl"):
        notes += [
            r["message"]
            for r in map(json.loads, path.read_text().splitlines())
            if r["kind"] == "note"
        ]
    for label in (
        "Tensor.backward",
        "Accelerator.backward",
        "Accelerator.prepare",
        "Accelerator.__init__",
        "forward hook",
        "optimizer pre-hook",
        "DataLoader batches",
        "prepared DataLoader",
        "torch.manual_seed",
        "DataLoader passes",
        "sampler order",
        "accelerator.gather",
    ):
        assert f"probe error in {label}: RuntimeError('probe bug')" in notes, (label, notes)
    assert len(notes) == len(set(notes))  # once per patch, not once per call


def test_checks_name_rules_through_the_registry():
    from distlint.registry import by_code
    from distlint.verify.compare import rule_name

    codes = {"DL101", "DL201", "DL202", "DL301", "DL302"}
    assert {c: rule_name(c) for c in codes} == {c: by_code()[c].NAME for c in codes}
    import inspect

    from distlint.verify import checks

    source = inspect.getsource(checks)
    for code in codes:
        assert by_code()[code].NAME not in source  # names are looked up, not copied


# -- cli: usage errors before anything runs, signals ------------------------------------------


def test_verify_usage_errors_exit_2_before_running(tmp_path):
    from click.testing import CliRunner

    from distlint.cli import main

    runner = CliRunner()
    script = fixture_script("correct.py")
    two = runner.invoke(main, ["check", "--verify", script, fixture_script("grad_accum.py")])
    assert two.exit_code == 2 and "one training script" in two.output
    folder = runner.invoke(main, ["check", "--verify", str(tmp_path)])
    assert folder.exit_code == 2 and "directory" in folder.output
    bad_env = runner.invoke(main, ["verify", "--env", "NOVALUE", script])
    assert bad_env.exit_code == 2 and "KEY=VALUE" in bad_env.output


def test_missing_verify_extra_gives_the_install_hint(monkeypatch, capsys):
    import importlib.util

    from distlint.verify import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    assert cli.run_verify_command(fixture_script("correct.py"), [], "text", None) == 2
    assert "pip install 'torch>=2.1' 'accelerate>=0.26'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "raised, code",
    [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)],
)
def test_signals_stop_verify_with_128_plus_signal_and_remove_the_temp_folder(
    monkeypatch, tmp_path, raised, code
):
    import signal
    import tempfile

    from distlint.verify import core

    made = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real_mkdtemp(dir=tmp_path, **kw))
        return made[-1]

    def run_plan(*args, **kwargs):
        if raised == "SIGINT":
            raise KeyboardInterrupt
        raise core.Interrupted(int(getattr(signal, raised)))

    monkeypatch.setattr(core.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(core.launch, "run_plan", run_plan)
    result = core.verify(fixture_script("correct.py"), device="cpu")
    assert result.exit_code == code and result.interrupted
    assert made and not os.path.exists(made[0])
    assert raised in result.verdict or raised in " ".join(result.problems)


def test_scratch_folder_copies_inputs_and_keeps_outputs_apart(tmp_path):
    from distlint.verify.scratch import changes, mirror_tree, snapshot

    src = tmp_path / "project"
    (src / "data" / "shards").mkdir(parents=True)
    (src / "data" / "train.bin").write_bytes(b"tokens")
    (src / "data" / "shards" / "0.bin").write_bytes(b"0")
    (src / "cfg.yaml").write_text("lr: 1\n")
    keep = src / "verify-out"
    keep.mkdir()
    before = snapshot(str(src), skip=[str(keep)])
    dst = tmp_path / "scratch"
    mirror_tree(str(src), str(dst), skip=[str(keep)])
    assert (dst / "data" / "train.bin").read_bytes() == b"tokens"  # inputs reachable
    assert not (dst / "data" / "shards" / "0.bin").is_symlink()  # copied, every level
    assert not (dst / "verify-out").exists()  # verify's own folder is not mirrored
    (dst / "ckpt.pt").write_bytes(b"new")  # a new output stays in the scratch folder
    (dst / "cfg.yaml").write_text("lr: 2\n")
    assert not (src / "ckpt.pt").exists() and (src / "cfg.yaml").read_text() == "lr: 1\n"
    (keep / "records.jsonl").write_text("{}")  # verify's own writes are not changes
    assert changes(before, snapshot(str(src), skip=[str(keep)])) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")
def test_sigkill_to_verify_leaves_no_launcher_or_rank_running(tmp_path):
    """PR_SET_PDEATHSIG: the launcher dies with verify, a rank with its launcher (no torch here:
    a stand-in launcher that starts one python "rank")."""
    ready = tmp_path / "ready"
    rank = tmp_path / "rank.py"
    rank.write_text(
        f"import pathlib, time\npathlib.Path({str(ready)!r}).write_text('up')\ntime.sleep(60)\n"
    )
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(rank)!r}])\n"
        "time.sleep(60)\n"
    )
    parent = (
        "import sys\n"
        "from distlint.verify import launch\n"
        f"plan = launch.LaunchPlan('x', 1, 'python', 'cpu', [sys.executable, {str(launcher)!r}], {{}})\n"
        f"launch.run_plan(plan, {str(tmp_path / 'run')!r}, 60, {{}})\n"
    )
    verify_like = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    needle = f"DISTLINT_VERIFY_OUT={tmp_path / 'run' / 'records'}"
    from verify_helpers import processes_with_env

    assert len(processes_with_env(needle)) == 2  # the launcher and its rank
    verify_like.kill()  # SIGKILL: no handler runs in verify
    verify_like.wait()
    deadline = time.monotonic() + 10
    while processes_with_env(needle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with_env(needle) == []


def test_writes_in_the_scratch_folder_never_reach_the_users_files(tmp_path):
    """The probe's copy on write: rewriting, appending to or (through pathlib) replacing a file
    linked into the scratch folder changes the scratch copy only; new files and reads work."""
    from distlint.verify.scratch import changes, mirror_tree, snapshot

    user = tmp_path / "user"
    user.mkdir()
    (user / "ckpt.pt").write_text("the user's checkpoint")
    (user / "log.txt").write_text("old log\n")
    (user / "cfg.yaml").write_text("lr: 1\n")
    (user / "data.bin").write_text("tokens")
    (user / "model.pt").write_text("the user's weights")
    scratch = tmp_path / "scratch"
    before = snapshot(str(user))
    mirror_tree(str(user), str(scratch), file_limit=0)  # every file a link: the probe's part
    script = (
        "import pathlib\n"
        "open('ckpt.pt', 'wb').write(b'overwritten by the run')\n"
        "with open('log.txt', 'a') as f: f.write('new line\\n')\n"
        "pathlib.Path('cfg.yaml').write_text('lr: 2\\n')\n"
        "open('new.pt', 'w').write('new')\n"
        "print(open('data.bin').read())\n"
        "import torch\n"
        "torch.save({'w': 1}, 'model.pt')  # torch's zip writer opens the file in C++\n"
        "assert torch.load('model.pt') == {'w': 1}\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=launch.PROBE_DIR,
        DISTLINT_VERIFY_OUT=str(tmp_path / "records"),
        DISTLINT_VERIFY_SCRATCH=str(scratch),
    )
    (tmp_path / "records").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=scratch, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tokens"  # inputs still read through the links
    assert (user / "ckpt.pt").read_text() == "the user's checkpoint"
    assert (user / "log.txt").read_text() == "old log\n"
    assert (user / "cfg.yaml").read_text() == "lr: 1\n"
    assert not (user / "new.pt").exists()
    assert (user / "model.pt").read_text() == "the user's weights"
    assert (scratch / "ckpt.pt").read_text() == "overwritten by the run"
    assert (scratch / "log.txt").read_text() == "old log\nnew line\n"  # appended to a copy
    assert (scratch / "cfg.yaml").read_text() == "lr: 2\n"
    assert (scratch / "data.bin").is_symlink()  # only written files stop being links
    assert changes(before, snapshot(str(user))) == []


def test_the_launchers_start_with_an_isolated_import_path(tmp_path):
    """The runs start in a copy of the user's folder; a module planted there must not run in
    verify's launcher process (`python -m` would put the folder first on sys.path)."""
    import subprocess

    from distlint.verify.launch import python_module

    marker = tmp_path / "planted-ran"
    (tmp_path / "json.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit('planted json ran')\n"
    )
    data = tmp_path / "in.json"
    data.write_text('{"a": 1}')
    done = subprocess.run(
        [*python_module("json.tool"), str(data)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0 and '"a": 1' in done.stdout
    assert not marker.exists()
    # The same command without isolation runs the planted module (the test can fail).
    bare = subprocess.run(
        [sys.executable, "-m", "json.tool", str(data)], cwd=tmp_path, capture_output=True
    )
    assert bare.returncode != 0 and marker.exists()
