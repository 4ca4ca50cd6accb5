"""Fast tests: launch commands, device planning, the probe's import hygiene, the lint path's isolation."""

import json
import os
import subprocess
import sys

import pytest

from distlint.verify import launch
from distlint.verify.compare import Check, join_static
from distlint.model import Finding, Range

from conftest import ROOT, fixture_script


def test_torchrun_command_is_standalone_with_logs():
    plan = launch.multi_plan("/s/train.py", ["--lr", "1"], 2, "cpu", "torchrun", (), log_dir="/tmp/l")
    assert plan.argv[1:3] == ["-m", "torch.distributed.run"]
    assert "--standalone" in plan.argv and plan.argv[plan.argv.index("--nproc_per_node") + 1] == "2"
    assert plan.argv[-3:] == ["/s/train.py", "--lr", "1"]
    assert plan.env["ACCELERATE_USE_CPU"] in ("1", os.environ.get("ACCELERATE_USE_CPU"))
    assert plan.env["CUDA_VISIBLE_DEVICES"] == ""


def test_torchrun_multi_node_args_replace_standalone():
    plan = launch.multi_plan("t.py", [], 4, "cuda", "torchrun", ["--nnodes=2", "--rdzv-endpoint=h:29400"])
    assert "--standalone" not in plan.argv
    assert "--nnodes=2" in plan.argv and plan.argv.index("--nnodes=2") < plan.argv.index("t.py")


def test_accelerate_command_forms_a_cpu_group_and_passes_config_through():
    plan = launch.multi_plan("t.py", [], 2, "cpu", "accelerate", [])
    assert plan.argv[1:4] == ["-m", "accelerate.commands.accelerate_cli", "launch"]
    assert "--multi_gpu" in plan.argv and "--cpu" not in plan.argv
    assert plan.argv[plan.argv.index("--main_process_port") + 1] == "0"
    configured = launch.multi_plan("t.py", [], 2, "cuda", "accelerate", ["--config_file", "cfg.yaml"])
    assert "--multi_gpu" not in configured.argv and "cfg.yaml" in configured.argv


def test_tpu_command_uses_accelerates_tpu_launcher():
    plan = launch.multi_plan("t.py", ["--x"], 8, "xla", "torchrun", [])
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
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_probe_imports_nothing_extra_and_chains_existing_sitecustomize(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([launch.PROBE_DIR, str(other)]),
               DISTLINT_VERIFY_OUT=str(tmp_path))
    out = _python("import os, sys, json; print(json.dumps([os.environ.get('CHAINED'), sorted(sys.modules)]))", env)
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
    out = _python("import sys, distlint.verify.cli, distlint.verify.core, distlint.verify.report;"
                  "print(sorted(m for m in ('torch', 'accelerate', 'numpy', 'matplotlib') if m in sys.modules))")
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
