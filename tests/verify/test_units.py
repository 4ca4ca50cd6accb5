"""Fast tests: launch commands, device planning, the probe's import hygiene, the lint path's isolation."""

import json
import os
import subprocess
import sys

import pytest
from verify_helpers import ROOT, fixture_script

from distlint.model import Finding, Range
from distlint.verify import launch
from distlint.verify.compare import Check, join_static


def test_torchrun_command_is_standalone_with_logs():
    plan = launch.multi_plan(
        "/s/train.py", ["--lr", "1"], 2, "cpu", "torchrun", (), log_dir="/tmp/l"
    )
    assert plan.argv[1:3] == ["-m", "torch.distributed.run"]
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
    assert plan.argv[1:4] == ["-m", "accelerate.commands.accelerate_cli", "launch"]
    assert "--multi_gpu" in plan.argv and "--cpu" not in plan.argv
    assert plan.argv[plan.argv.index("--main_process_port") + 1] == "0"
    configured = launch.multi_plan(
        "t.py", [], 2, "cuda", "accelerate", ["--config_file", "cfg.yaml"]
    )
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


# -- the comparisons on hand-made curves ---------------------------------------------------------

from distlint.verify import compare  # noqa: E402
from distlint.verify.compare import CurvePoint  # noqa: E402


class FakeRun:
    """Just what the checks read from a RunSummary."""

    def __init__(
        self, label, nprocs, batch, losses, checksums, lrs=(0.1,), per_device=None, native_lrs=None
    ):
        self.label, self.nprocs = label, nprocs
        self.curve, seen = [], 0
        for i, (loss, checksum) in enumerate(zip(losses, checksums)):
            seen += batch
            self.curve.append(CurvePoint(i + 1, seen, batch, loss, list(lrs), checksum))
        per_device = per_device or batch // nprocs
        native = list(native_lrs or lrs)

        class Rank0:
            native_per_device_batch = per_device

            @staticmethod
            def native_lrs():
                return native

        self.rank0 = Rank0()
        self.per_device_batch = per_device

    def config(self, key, default=None):
        return default

    @property
    def global_batch(self):
        return self.curve[0].batch

    @property
    def samples_seen(self):
        return self.curve[-1].samples


def sums(values):
    return [(float(v), float(v * v)) for v in values]


def merged(*groups):
    """Checksums of global batches made of the given 1-process batches."""
    return [(sum(v for v in g), sum(v * v for v in g)) for g in groups]


def test_data_order_same_and_different():
    one = FakeRun("1 process", 1, 8, [1.0] * 4, sums([1, 2, 3, 4]))
    same = FakeRun("2 processes", 2, 16, [1.0] * 2, merged((1, 2), (3, 4)))
    assert compare.check_data_order(one, same, exact=False).status == "pass"
    other = FakeRun("2 processes", 2, 16, [1.0] * 2, merged((1, 2), (3, 5)))
    warn = compare.check_data_order(one, other, exact=False)
    assert warn.status == "warn" and warn.data["first_difference_at"] == 32
    fail = compare.check_data_order(one, other, exact=True)
    assert fail.status == "fail" and "use_seedable_sampler=True" in fail.detail


def test_exact_loss_tolerance_and_differing_inputs():
    one = FakeRun("1 process", 1, 16, [1.0, 0.5, 0.25], sums([3, 7, 9]))
    close = FakeRun("2 processes", 2, 16, [1.0, 0.5 * (1 + 5e-6), 0.25], sums([3, 7, 9]))
    check = compare.check_loss(one, close, exact=True)
    assert check.status == "pass" and check.data["worst_update"] == 2
    far = FakeRun("2 processes", 2, 16, [1.0, 0.5 * (1 + 5e-5), 0.25], sums([3, 7, 9]))
    assert compare.check_loss(one, far, exact=True).status == "fail"
    shuffled = FakeRun("2 processes", 2, 16, [1.0, 0.5, 0.25], sums([3, 8, 9]))
    differ = compare.check_loss(one, shuffled, exact=True)
    assert (
        differ.status == "fail"
        and differ.data["inputs_differ_at"] == 2
        and "seeded generator" in differ.detail
    )


def test_lr_scaling_kinds():
    one = FakeRun("1 process", 1, 8, [1.0], sums([1]), lrs=(0.1,))
    for lr, scaling, status in (
        (0.4, "linear", "pass"),
        (0.2, "sqrt", "pass"),
        (0.1, "none", "fail"),
        (0.3, "other", "warn"),
    ):
        many = FakeRun("4 processes", 4, 32, [1.0], sums([1]), lrs=(lr,))
        check = compare.check_lr(one, many, exact=False)
        assert (check.data["scaling"], check.status) == (scaling, status), lr
        assert check.confirms is (scaling == "none")
