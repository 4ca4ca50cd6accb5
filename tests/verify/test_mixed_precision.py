"""Precision as set by the framework that trained (the Accelerator's mixed_precision, the Fabric's
precision) beside the precision observed per update: the table, the --exact tolerance, the note
when the setting was not applied. One test runs the real probe in one plain process over a
stand-in of Lightning's Fabric (tests/verify/fake_fabric: Lightning is not a dependency)."""

import os
import subprocess
import sys

import pytest
from records_by_hand import summarize, ups, write_rank

from distlint.verify import checks, launch
from distlint.verify.compare import setting_kind
from distlint.verify.records import read_run

FAKE = os.path.join(os.path.dirname(__file__), "fake_fabric")
BF16 = {"autocast": ["bfloat16"], "outputs": ["float32"], "param": "float32", "grad": "float32"}
FP32 = {"autocast": ["off"], "outputs": ["float32"], "param": "float32", "grad": "float32"}


def _fabric_run(tmp_path, name, nprocs, precision, setting="bf16-mixed"):
    folder = tmp_path / name
    folder.mkdir()
    config = {"kind": "config", "t": 1000.0, "source": "fabric", "num_processes": nprocs,
              "process_index": 0, "mixed_precision": setting,
              "modules": ["lightning.fabric"]}  # fmt: skip
    for rank in range(nprocs):
        updates = ups([1.0, 0.9, 0.8][: 6 // (2 * nprocs) + 1], precision=precision)
        write_rank(folder, 10 + rank, rank, nprocs, updates, config=False,
                   extra=[{**config, "process_index": rank}])  # fmt: skip
    return summarize(folder, nprocs)


@pytest.mark.parametrize(
    "setting, kind",
    [("bf16-mixed", "bf16"), ("bf16-true", "bf16"), ("16-mixed", "fp16"), ("32-true", "fp32"),
     ("bf16", "bf16"), ("fp16", "fp16"), ("no", "fp32"), ("fp8", "bf16"), (None, "fp32")],
)  # fmt: skip
def test_framework_settings_map_to_the_precision_they_apply(setting, kind):
    assert setting_kind(setting) == kind


def test_fabric_precision_is_shown_and_sets_the_exact_tolerance(tmp_path):
    one = _fabric_run(tmp_path, "one", 1, BF16)
    many = _fabric_run(tmp_path, "many", 2, BF16)
    assert many.precision["setting_of"] == "Fabric precision"
    assert many.precision_text() == (
        "bfloat16 autocast in 2/2 updates; params float32, grads float32; Fabric bf16-mixed"
    )
    assert not [n for n in many.notes if "fp32" in n]  # applied as set: nothing to say
    loss = checks.check_loss(one, many, exact=True)
    assert loss.data["rtol"] == checks.EXACT_RTOL["bf16"]
    assert "Fabric bf16-mixed" in loss.data["tolerance_for"]


def test_fabric_precision_not_applied_is_said_with_the_fix(tmp_path):
    """Set to bf16-mixed, but the forward bypassed the module fabric.setup returned."""
    run = _fabric_run(tmp_path, "many", 2, FP32)
    assert run.precision["kind"] == "fp32"  # what ran, not what was set
    [note] = [n for n in run.notes if "Fabric precision" in n]
    assert note.startswith(
        "2 processes: Fabric precision is bf16-mixed, but every update ran in fp32"
    )
    assert "forward through the module fabric.setup() returned" in note


def test_no_note_when_autocast_could_not_be_seen(tmp_path):
    """A model with no submodule (one Linear) whose forward the framework patched to enter
    autocast: nothing runs inside it to see the autocast, so nothing is claimed."""
    run = _fabric_run(tmp_path, "many", 2, {**FP32, "opaque": 1})
    assert run.precision["opaque_updates"] == 2
    assert not [n for n in run.notes if "Fabric precision" in n]


def test_unobserved_precision_falls_back_to_the_framework_setting(tmp_path):
    run = _fabric_run(tmp_path, "many", 2, None, setting="bf16-true")
    assert run.precision["observed"] is False and run.precision["kind"] == "bf16"
    assert run.precision_text() == "bf16-true (Fabric precision; not observed)"


def test_accelerate_setting_not_applied_names_the_prepared_model(tmp_path):
    folder = tmp_path / "acc"
    folder.mkdir()
    config = {"kind": "config", "t": 1000.0, "source": "accelerate", "num_processes": 1,
              "process_index": 0, "mixed_precision": "bf16"}  # fmt: skip
    write_rank(folder, 10, 0, 1, ups([1.0, 0.9], precision=FP32), config=False, extra=[config])
    [note] = [n for n in summarize(folder, 1).notes if "mixed_precision" in n]
    assert "Accelerator mixed_precision is bf16" in note and "accelerator.prepare()" in note


@pytest.mark.parametrize(
    "bypass",
    [False, pytest.param(True, marks=pytest.mark.slow)],  # a process each (torch's import)
    ids=["through-fabric", "bypassing-fabric"],
)
def test_the_probe_records_the_fabric_that_trained_and_its_inner_autocast(tmp_path, bypass):
    """Fabric enters autocast inside its module's forward and returns fp32 outputs: the probe
    sees the autocast there, and records the precision from the Fabric whose setup trained (one
    made after training is not the run's)."""
    script = os.path.join(FAKE, "train_fabric.py")
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([launch.PROBE_DIR, FAKE]),
            launch.schema.ENV_OUT: str(tmp_path),
            launch.schema.ENV_SCRIPT: script,
            launch.schema.ENV_MAX_STEPS: "0",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    argv = [sys.executable, script] + (["--bypass"] if bypass else [])
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [rank] = read_run(str(tmp_path)).ranks
    assert rank.config["source"] == "fabric" and rank.config["mixed_precision"] == "bf16-mixed"
    assert not rank.later_configs
    casts = {tuple(u.precision["autocast"]) for u in rank.updates}
    assert len(rank.updates) == 3 and casts == ({("off",)} if bypass else {("bfloat16",)})
