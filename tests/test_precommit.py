"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit run` in scratch repos.

Each scratch repository has a `.pre-commit-config.yaml` as the README shows it: this repository
at a fixed revision, `distlint-fix` then `distlint`. pre-commit clones the hook repository and
builds the hook's virtualenv from PyPI (libcst, click): it needs the network, as CI has. On a
clean checkout the repository root itself is used. In a working tree with uncommitted work we
use a snapshot of the tree instead (the tracked files as they are in the working tree, as a
clone would have them, committed once), so all runs share one hook environment.
"""

import os
import shutil
import subprocess

import pytest
from conftest import pre_commit_command
from helpers import FIXTURES, ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None, reason="git is needed to run pre-commit"
)


def git(*args, cwd):
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def scratch_repo(path):
    path.mkdir()
    git("init", "-q", cwd=path)
    git("config", "user.email", "ci@example.com", cwd=path)
    git("config", "user.name", "CI", cwd=path)
    git("config", "commit.gpgsign", "false", cwd=path)
    return path


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    if (ROOT / ".git").exists() and git(
        "status", "--porcelain", "--untracked-files=normal", cwd=ROOT
    ).strip() == "":
        return ROOT
    snapshot = scratch_repo(tmp_path_factory.mktemp("hooks") / "distlint")
    # tracked files only, as a clone has them: a virtualenv or build output inside the
    # working tree (`v/`, `venv/`) is never copied
    files = git("ls-files", "-z", "--cached", cwd=ROOT).split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snapshot / rel)
    git("add", "-A", cwd=snapshot)
    git("commit", "-q", "-m", "snapshot", cwd=snapshot)
    return snapshot


@pytest.fixture(scope="module")
def pre_commit(hook_repo, tmp_path_factory):
    command = pre_commit_command()
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(home)

    sha = git("rev-parse", "HEAD", cwd=hook_repo).strip()

    def run(cwd):
        # As a user configures it (README, "pre-commit"): the hook repository at a fixed
        # revision, the fix hook first. `pre-commit run` checks the staged files.
        config = cwd / ".pre-commit-config.yaml"
        if not config.exists():
            config.write_text(
                "repos:\n"
                f"  - repo: {hook_repo}\n"
                f"    rev: {sha}\n"
                "    hooks:\n"
                "      - id: distlint-fix\n"
                "      - id: distlint\n"
            )
            git("add", ".pre-commit-config.yaml", cwd=cwd)
        return subprocess.run(
            [*command, "run"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


# Plain torch: DL101's only fix adds a dependency on accelerate, so it is UNSAFE: `distlint fix`
# leaves it, and the fix hook must not fail because of it.
UNSAFE_ONLY = """\
import random

import torch

torch.manual_seed(0)
data = list(range(10))
random.shuffle(data)
"""


def hook_status(out: str, name: str) -> str:
    """'Passed' / 'Failed' / 'Skipped' of the hook whose name starts the line."""
    for line in out.splitlines():
        if line.startswith(name + "..."):
            return line.rstrip(".").rsplit(".", 1)[-1].split()[-1]
    raise AssertionError(f"no line for hook {name!r} in:\n{out}")


def test_fix_hook_fails_only_when_it_changed_files_and_findings_print_once(pre_commit, tmp_path):
    """The real pre-commit, two runs: safe-fixable, unsafe-only and clean files."""
    repo = scratch_repo(tmp_path / "work")
    safe = (FIXTURES / "DL101" / "bad.py").read_text()
    good = (FIXTURES / "DL101" / "good.py").read_text()
    (repo / "train_safe.py").write_text(safe)
    (repo / "train_unsafe.py").write_text(UNSAFE_ONLY)
    (repo / "train_good.py").write_text(good)
    git("add", "-A", cwd=repo)

    # Run 1: the fix hook rewrites the safe-fixable file (and fails for that reason only); the
    # check hook then reports what remains: the unsafe-only finding, once.
    first = pre_commit(repo)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert out.index("distlint (fix)...") < out.index("\ndistlint..."), out  # the config's order
    assert hook_status(out, "distlint (fix)") == "Failed", out
    assert "files were modified by this hook" in out
    assert hook_status(out, "distlint") == "Failed", out
    fixed = (repo / "train_safe.py").read_text()
    assert "set_seed(args.seed)" in fixed and "torch.manual_seed" not in fixed
    assert (repo / "train_unsafe.py").read_text() == UNSAFE_ONLY
    assert (repo / "train_good.py").read_text() == good
    assert out.count("train_unsafe.py:5:1: DL101") == 1, out
    assert "train_safe.py:" not in out.split("distlint (fix)...", 1)[1].split("\ndistlint...")[0]

    # Run 2, with the fixes staged: nothing left to fix, so the fix hook passes although an
    # unsafe-only finding remains; the check hook still fails on it, printed once.
    git("add", "-A", cwd=repo)
    second = pre_commit(repo)
    out = second.stdout + second.stderr
    assert second.returncode == 1, out
    assert hook_status(out, "distlint (fix)") == "Passed", out
    assert hook_status(out, "distlint") == "Failed", out
    assert out.count("train_unsafe.py:5:1: DL101") == 1, out
    assert "train_safe.py" not in out and "train_good.py" not in out


def test_clean_files_pass_both_hooks_twice(pre_commit, tmp_path):
    repo = scratch_repo(tmp_path / "clean")
    good = (FIXTURES / "DL101" / "good.py").read_text()
    (repo / "train.py").write_text(good)
    git("add", "-A", cwd=repo)
    for _ in range(2):
        proc = pre_commit(repo)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert hook_status(out, "distlint (fix)") == "Passed", out
        assert hook_status(out, "distlint") == "Passed", out
    assert (repo / "train.py").read_text() == good


def test_commit_without_python_files_passes(pre_commit, tmp_path):
    repo = scratch_repo(tmp_path / "docs-only")
    (repo / "README.md").write_text("# notes\n\ntorch.manual_seed(0) is not code here.\n")
    git("add", "README.md", cwd=repo)
    proc = pre_commit(repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "(no files to check)Skipped" in out


def test_the_hook_repository_holds_the_tracked_files_only(hook_repo):
    """A virtualenv or any other untracked folder inside the clone (`v/`, `venv/`) is not
    copied into the snapshot the hooks are built from (it took minutes, issue #30)."""
    tracked = {rel for rel in git("ls-files", "-z", cwd=ROOT).split("\0") if rel}
    present = {rel for rel in tracked if (ROOT / rel).is_file()}
    in_snapshot = {rel for rel in git("ls-files", "-z", cwd=hook_repo).split("\0") if rel}
    assert in_snapshot == (present if hook_repo != ROOT else tracked)
