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
        ('ignore = ["DL777"]', "ignore", "unknown rule code, prefix or name 'DL777'"),
        # issue #27: an empty or blank code is an error, not "every rule off" / "every rule on"
        ('ignore = [""]', "ignore", "empty rule code ''"),
        ('select = [" "]', "select", "empty rule code ' '"),
        ('extend-select = ["DL101", ""]', "extend-select", "empty rule code ''"),
        ('per-file-ignores = {"a.py" = [" "]}', "per-file-ignores.'a.py'", "empty rule code"),
        # issue #30: the closest code or name is suggested
        ('select = ["DL2O1"]', "select", "'DL2O1' (did you mean DL201?)"),
        ('ignore = ["seed-only-torc"]', "ignore", "(did you mean seed-only-torch?)"),
        ("unsafe-fixes = 1", "unsafe-fixes", "expected true or false"),
        ('per-file-ignores = {"a.py" = "DL101"}', "per-file-ignores", "expected a list of codes"),
        (
            'per-file-ignores = {"a.py" = ["XX1"]}',
            "per-file-ignores.'a.py'",
            "unknown rule code, prefix or name 'XX1'",
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


# --------------------------------------------------------------------------------------------
# max-file-size, and configuration files that cannot be read (issue #16, items 5 and 10)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [("0", 0), ("1_048_576", 1 << 20), ("-1", None), ("true", None), ('"1MB"', None)],
)
def test_max_file_size_is_validated(value, expected):
    from pathlib import Path

    from distlint.config import _parse_toml

    table = _parse_toml(f"max-file-size = {value}\n".encode(), Path("pyproject.toml"))
    if expected is None:
        with pytest.raises(ConfigError, match=r"max-file-size: expected a number of bytes"):
            config_from_table(table, "pyproject.toml")
    else:
        assert config_from_table(table, "pyproject.toml").max_file_size == expected
    assert Config().max_file_size == 512 << 10


def _no_hang(func, *args):
    import signal

    def alarm(*_):
        raise TimeoutError("hung")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    try:
        return func(*args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize(
    "name,content,expected",
    [
        # was: RecursionError traceback, or "source is too deeply nested" blamed on train.py
        # (3,000 deep through the command below; deeper here, where an earlier lint in this
        # process may have raised the recursion limit)
        (
            "deep",
            b"[tool.distlint]\nselect = " + b"[" * 20_000 + b"]" * 20_000 + b"\n",
            "invalid TOML: nested too deeply to read",
        ),
        # was: silently ignored, defaults used
        (
            "latin1",
            b'[tool.distlint]\n# caf\xe9\nselect = ["DL"]\n',
            "not UTF-8 (TOML must be): byte 0xe9 at line 2",
        ),
        ("fifo", None, "is a FIFO (named pipe), not a regular file: not read"),
    ],
    ids=["deep", "latin1", "fifo"],
)
def test_unusable_pyproject_is_an_error_naming_it(tmp_path, name, content, expected):
    config = tmp_path / "pyproject.toml"
    if content is None:
        os.mkfifo(config)
    else:
        config.write_bytes(content)
    (tmp_path / "train.py").write_text(BAD)
    with pytest.raises(ConfigError) as info:
        _no_hang(resolve_config, str(tmp_path / "train.py"))
    assert str(info.value) == f"{config}: {expected}"


def test_broken_pyproject_of_another_tool_is_passed_over(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.black]\nline-length = \xe9\n")
    assert resolve_config(str(tmp_path / "x.py")).source is None


def test_unreadable_and_deep_pyproject_through_the_cli(distlint_exe, tmp_path):
    import shutil
    import sys

    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "pyproject.toml").write_text("[tool.distlint]\nx = " + "[" * 3000 + "]" * 3000)
    (deep / "train.py").write_text(BAD)
    proc = run(distlint_exe, "check", "--no-cache", "train.py", cwd=deep)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"train.py: error: {deep / 'pyproject.toml'}: invalid TOML: nested too deeply to read"
    ]
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "pyproject.toml").write_text('[tool.distlint]\nselect = ["DL"]\n')
    (locked / "pyproject.toml").chmod(0)
    (locked / "train.py").write_text(BAD)
    cmd = [sys.executable, "-m", "distlint", "check", "--no-cache", "train.py"]
    if os.geteuid() == 0:  # root reads mode 000: drop the capabilities that let it
        assert shutil.which("setpriv"), "running as root without setpriv"
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *cmd]
    proc = subprocess.run(cmd, cwd=locked, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"train.py: error: {locked / 'pyproject.toml'}: permission denied"
    ]


def test_config_option_says_what_the_path_is(distlint_exe, tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "conf.d").mkdir()
    os.mkfifo(tmp_path / "fifo.toml")
    for name, what in (
        ("conf.d", "is a directory, not a file"),
        ("fifo.toml", "is a FIFO (named pipe), not a regular file: not read"),
        ("missing.toml", "not found"),
    ):
        proc = run(distlint_exe, "check", "--config", name, "train.py", cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"error: configuration file {name} {what}"


def test_a_pyproject_that_never_mentions_distlint_is_not_parsed(tmp_path):
    # (a cold start does not import tomllib, or tomli before Python 3.11, for another tool's
    # configuration)
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.distlint]\n')
    code = (
        "import sys; from distlint.config import resolve_config; "
        "toml = lambda: 'tomllib' in sys.modules or 'tomli' in sys.modules; "
        f"print(resolve_config({str(tmp_path / 'x.py')!r}).source, toml()); "
        f"print(resolve_config({str(tmp_path / 'sub' / 'x.py')!r}).source, toml())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "None False",
        f"{tmp_path / 'sub' / 'pyproject.toml'} True",
    ]


@pytest.mark.parametrize(
    "toml",
    [
        'ignore = ["seed-only-torch"]',
        'ignore = ["Seed-Only-Torch"]',
        'select = ["unscaled-learning-rate"]',
        'per-file-ignores = {"train.py" = ["seed-only-torch"]}',
    ],
)
def test_rule_names_are_accepted_wherever_codes_are(distlint_exe, tmp_path, toml):
    (tmp_path / "train.py").write_text(BAD)
    proc = run(distlint_exe, "check", "train.py", cwd=tmp_path)
    assert proc.returncode == 1 and "DL101" in proc.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.distlint]\n" + toml + "\n")
    proc = run(distlint_exe, "check", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_names_become_codes_in_the_configuration():
    config = config_from_table(
        {
            "select": ["seed-only-torch", "dl2"],
            "per-file-ignores": {"a.py": ["unscaled-learning-rate"]},
        }
    )
    assert config.select == ("DL101", "DL2")
    assert config.per_file_ignores == (("a.py", ("DL201",)),)
