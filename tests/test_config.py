"""[tool.distlint] configuration: discovery, overrides, and clear errors (exit 2, never a traceback)."""

import os
import subprocess

import pytest
from helpers import FIXTURES

from distlint.config import Config, ConfigError, config_from_table, resolve_config

BAD = (FIXTURES / "DL101" / "bad.py").read_text()


def run(exe, *args, cwd):
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "toml,key,expected",
    [
        ('selectt = ["DL1"]', "selectt", "unknown key 'selectt'"),
        ('select = "DL1"', "select", "expected a list of strings"),
        ('ignore = ["DL777"]', "ignore", "unknown rule code or prefix 'DL777'"),
        ("unsafe-fixes = 1", "unsafe-fixes", "expected true or false"),
        ('per-file-ignores = {"a.py" = "DL101"}', "per-file-ignores", "expected a list of codes"),
        (
            'per-file-ignores = {"a.py" = ["XX1"]}',
            "per-file-ignores.'a.py'",
            "unknown rule code or prefix 'XX1'",
        ),
        (
            '[tool.distlint.seed-only-torch]\nseed-function = "random.seed"',
            "seed-only-torch.seed-function",
            "expected one of",
        ),
        (
            "[tool.distlint.DL101]\nno-such-option = 1",
            "DL101.no-such-option",
            "unknown option 'no-such-option'",
        ),
        ("extend-select = [1]", "extend-select", "expected a list of strings"),
    ],
)
def test_invalid_configuration_exits_2_with_file_key_and_expectation(
    distlint_exe, tmp_path, toml, key, expected
):
    if not toml.startswith("[tool"):
        toml = "[tool.distlint]\n" + toml
    (tmp_path / "pyproject.toml").write_text(toml + "\n")
    (tmp_path / "train.py").write_text(BAD)
    proc = run(distlint_exe, "check", "train.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(tmp_path / "pyproject.toml") in proc.stderr
    assert f"[tool.distlint] {key}:" in proc.stderr
    assert expected in proc.stderr


def test_broken_toml_is_reported_not_skipped(distlint_exe, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.distlint\nselect = []\n")
    (tmp_path / "train.py").write_text(BAD)
    proc = run(distlint_exe, "check", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "invalid TOML" in proc.stderr and "Traceback" not in proc.stderr


def test_nearest_config_above_the_file_and_command_line_overrides(distlint_exe, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nignore = ["DL101"]\n')
    sub = tmp_path / "experiments"
    sub.mkdir()
    (sub / "train.py").write_text(BAD)
    assert run(distlint_exe, "check", "experiments/train.py", cwd=tmp_path).returncode == 0
    # a nearer distlint.toml wins over the pyproject.toml above it
    (sub / "distlint.toml").write_text('select = ["DL1"]\n')
    assert run(distlint_exe, "check", "experiments/train.py", cwd=tmp_path).returncode == 1
    (sub / "distlint.toml").unlink()
    # --isolated ignores every file; --config names one
    assert (
        run(distlint_exe, "check", "--isolated", "experiments/train.py", cwd=tmp_path).returncode
        == 1
    )
    (tmp_path / "strict.toml").write_text('[tool.distlint]\nselect = ["ALL"]\n')
    assert (
        run(
            distlint_exe, "check", "--config", "strict.toml", "experiments/train.py", cwd=tmp_path
        ).returncode
        == 1
    )
    # the command line adds to the file's ignore list
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nselect = ["DL1"]\n')
    assert (
        run(
            distlint_exe, "check", "--ignore", "DL101", "experiments/train.py", cwd=tmp_path
        ).returncode
        == 0
    )
    missing = run(
        distlint_exe, "check", "--config", "nope.toml", "experiments/train.py", cwd=tmp_path
    )
    assert missing.returncode == 2 and "nope.toml" in missing.stderr


def test_per_file_ignores_and_excludes(distlint_exe, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.distlint]\n"
        'per-file-ignores = {"notebooks/*.py" = ["DL1"]}\n'
        'extend-exclude = ["legacy"]\n'
    )
    for rel in ("notebooks/a.py", "legacy/b.py", "train.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(BAD)
    proc = run(distlint_exe, "check", ".", cwd=tmp_path)
    assert proc.returncode == 1
    reported = {
        os.path.normpath(line.split(":")[0]) for line in proc.stdout.splitlines() if ": DL" in line
    }
    assert reported == {"train.py"}
    # a file named explicitly is linted even if excluded, unless --force-exclude (pre-commit)
    assert run(distlint_exe, "check", "legacy/b.py", cwd=tmp_path).returncode == 1
    assert (
        run(distlint_exe, "check", "--force-exclude", "legacy/b.py", cwd=tmp_path).returncode == 0
    )


def test_unsafe_fixes_and_fix_safety_overrides_from_config(tmp_path):
    config = config_from_table({"unsafe-fixes": True, "extend-unsafe-fixes": ["DL101"]})
    assert config.unsafe_fixes is True
    assert config.applicability_override("DL101") == "unsafe"
    assert (
        config_from_table({"extend-safe-fixes": ["DL1"]}).applicability_override("DL101") == "safe"
    )
    assert Config().applicability_override("DL101") is None


def test_rule_options_by_name_by_code_and_top_level():
    for table in (
        {"seed-only-torch": {"seed-function": "transformers.set_seed"}},
        {"DL101": {"seed-function": "transformers.set_seed"}},
        {"seed-function": "transformers.set_seed"},
    ):
        assert config_from_table(table).options_for("DL101") == {
            "seed-function": "transformers.set_seed"
        }


def test_rule_option_changes_the_fix(tmp_path):
    from distlint.runner import lint_source

    config = config_from_table({"seed-only-torch": {"seed-function": "transformers.set_seed"}})
    result = lint_source(BAD, "train.py", config, fix=True)
    assert "from transformers import set_seed" in result.fixed_source


def test_resolve_config_isolated_and_explicit(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.distlint]\nignore = ["DL1"]\n')
    (tmp_path / "train.py").write_text(BAD)
    assert resolve_config(str(tmp_path / "train.py")).ignore == ("DL1",)
    assert resolve_config(str(tmp_path / "train.py"), isolated=True).ignore == ()
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_table({"nope": 1}, "x.toml")
