"""The README stays true: its quick start commands, and what the shipped example reports."""

import re
import subprocess

from helpers import ROOT


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert len(commands) == 2, commands
    assert commands[0].startswith("pip install -e . && distlint check examples/train.py")
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_shipped_example_shows_the_three_mistakes(distlint_exe):
    proc = subprocess.run(
        [distlint_exe, "check", "--no-cache", "--format", "json", "examples/train.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    import json

    codes = sorted(f["code"] for f in json.loads(proc.stdout))
    assert codes == ["DL101", "DL201", "DL301"]
