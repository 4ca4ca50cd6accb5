"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit try-repo` in a scratch repo.

try-repo clones the hook repository at HEAD and builds the hook's virtualenv from PyPI (libcst,
click): it needs the network, as CI has. On a clean checkout the repository root itself is
tried. In a working tree with uncommitted work, try-repo would only take tracked changes (and a
new temporary commit each run, so a new virtualenv each run); there we try a snapshot of the
tree instead (tracked and untracked-but-not-ignored files, as a clean clone would have them,
committed once), so both runs below share one hook environment.
"""

import os
import shutil
import subprocess

import pytest
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
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split(
        "\0"
    )
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
    exe = shutil.which("pre-commit")
    assert exe is not None, "pre-commit is a dev dependency: pip install -e '.[dev]'"
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(home)

    def run(cwd):
        return subprocess.run(
            [exe, "try-repo", str(hook_repo)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


def test_check_hook_fails_and_fix_hook_rewrites(pre_commit, tmp_path):
    repo = scratch_repo(tmp_path / "work")
    bad = (FIXTURES / "DL101" / "bad.py").read_text()
    good = (FIXTURES / "DL101" / "good.py").read_text()
    (repo / "train_bad.py").write_text(bad)
    (repo / "train_good.py").write_text(good)
    git("add", "train_bad.py", "train_good.py", cwd=repo)

    proc = pre_commit(repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    # hooks run in file order: `distlint` reports on the staged file, then `distlint-fix` fixes it
    check_part, _, fix_part = out.partition("distlint (fix)")
    assert "- hook id: distlint\n" in check_part and "Failed" in check_part, out
    assert "train_bad.py:20:5: DL101" in check_part
    assert "train_good.py" not in check_part
    assert (
        "- hook id: distlint-fix" in fix_part and "files were modified by this hook" in fix_part
    ), out
    fixed = (repo / "train_bad.py").read_text()
    assert "set_seed(args.seed)" in fixed and "torch.manual_seed" not in fixed
    assert (repo / "train_good.py").read_text() == good


def test_commit_without_python_files_passes(pre_commit, tmp_path):
    repo = scratch_repo(tmp_path / "docs-only")
    (repo / "README.md").write_text("# notes\n\ntorch.manual_seed(0) is not code here.\n")
    git("add", "README.md", cwd=repo)
    proc = pre_commit(repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "(no files to check)Skipped" in out
