"""The README stays true: every shell, TOML and YAML snippet is run here, or is listed below
with the reason it cannot be (issue #14 item 1)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pre_commit_command
from helpers import ROOT

import distlint

README = (ROOT / "README.md").read_text()


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block, fences paired in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)


BLOCKS = fenced_blocks(README)

# Commands of the README that the suite does not run, each with why.
NOT_RUN = {
    "pip install -e .": "installs into the test environment (it is the environment's own install)",
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu": (
        "installs into the test environment; .ci/run runs it before the suite"
    ),
    "pip install -e '.[dev,verify,lsp,plot]'": "the same: .ci/run runs it before the suite",
    "python -m pytest -q": "the suite itself",
    "python -m build": "release only: builds into an isolated environment (minutes, network)",
    "twine check dist/*": "release only: needs python -m build's output",
    "distlint check --verify train.py": "runs the script on 1 and N processes: tests/verify",
}


def sh_commands() -> list[str]:
    out = []
    for lang, body in BLOCKS:
        if lang != "sh":
            continue
        for line in body.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line:
                out += [part.strip() for part in line.split("&&")]
    return out


def yaml_blocks() -> list:
    yaml = pytest.importorskip("yaml")
    return [yaml.safe_load(body) for lang, body in BLOCKS if lang == "yaml"]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_second():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert len(commands) == 2, commands
    assert commands[0].startswith("pip install -e . && distlint check examples/train.py")
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_every_shell_command_is_run_or_has_a_reason():
    run_here = {
        "distlint check examples/train.py",
        "git tag \"v$(python -c 'import distlint; print(distlint.__version__)')\"",
    }
    for command in sh_commands():
        assert command in NOT_RUN or command in run_here or command.startswith("distlint "), (
            f"README command {command!r}: run it in tests/test_readme.py or say why not"
        )


def test_quick_start_output_is_what_distlint_prints(distlint_exe):
    """The README shows the example's output and says it exits 1: both must be true."""
    proc = subprocess.run(
        [distlint_exe, "check", "--no-cache", "examples/train.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    [shown] = [body for lang, body in fenced_blocks(quick) if lang == "text"]
    assert proc.stdout == shown
    assert "exits\nwith status 1" in quick or "exits with status 1" in quick


def test_shipped_example_shows_the_three_mistakes(distlint_exe):
    proc = subprocess.run(
        [distlint_exe, "check", "--no-cache", "--format", "json", "examples/train.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    codes = sorted(f["code"] for f in json.loads(proc.stdout))
    assert codes == ["DL101", "DL201", "DL301"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project: train.py and src/train.py (both the example)."""
    shutil.copy(ROOT / "examples" / "train.py", tmp_path / "train.py")
    (tmp_path / "src").mkdir()
    shutil.copy(ROOT / "examples" / "train.py", tmp_path / "src" / "train.py")
    return tmp_path


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[0] == "distlint"
    return subprocess.run(
        [sys.executable, "-m", "distlint", *argv[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_usage_commands_run(project):
    commands = [
        c
        for c in sh_commands()
        if c.startswith("distlint ") and c not in NOT_RUN and "examples/" not in c
    ]
    assert len(commands) >= 7, commands
    for command in commands:
        target = project / "run"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(project, target, ignore=shutil.ignore_patterns("run"))
        proc = run(command, target)
        assert proc.returncode in (0, 1), f"{command}: exit {proc.returncode}\n{proc.stderr}"


def test_configuration_example_is_valid(project):
    [toml] = [body for lang, body in BLOCKS if lang == "toml"]
    (project / "pyproject.toml").write_text(toml)
    proc = run("distlint check train.py", project)
    assert proc.returncode == 1, proc.stderr  # findings, not a configuration error (exit 2)


def test_ci_workflow_steps_run(project):
    [workflow] = [y for y in yaml_blocks() if isinstance(y, dict) and "jobs" in y]
    steps = workflow["jobs"]["distlint"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    install, *lint = runs
    # distlint is not on PyPI: installed from its git repository at the revision the
    # repository variables name (the README says how to set them)
    assert install == (
        'pip install "distlint @ git+https://github.com/${{ vars.DISTLINT_REPOSITORY }}'
        '@${{ vars.DISTLINT_REF }}"'
    )
    assert "`DISTLINT_REF`" in README and "`DISTLINT_REPOSITORY`" in README
    annotations, sarif = lint
    proc = run(annotations, project)
    assert proc.returncode == 1 and proc.stdout.startswith("::error "), proc.stdout
    proc = run(sarif, project)
    assert proc.returncode == 0, proc.stderr
    log = json.loads((project / "distlint.sarif").read_text())
    assert log["version"] == "2.1.0" and len(log["runs"][0]["results"]) == 6  # 3 in each copy
    upload = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload")]
    assert upload and upload[0]["with"]["sarif_file"] == "distlint.sarif"


def test_release_tag_command_names_the_version():
    [tag] = [c for c in sh_commands() if c.startswith("git tag")]
    value = subprocess.run(
        ["bash", "-c", tag.replace("git tag", "echo", 1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        },
    ).stdout.strip()
    assert value == f"v{distlint.__version__}"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to run pre-commit")
def test_pre_commit_local_hooks_snippet_runs(tmp_path):
    """The README's local-hooks configuration, with the real pre-commit, two runs."""
    command = pre_commit_command()
    [config] = [body for lang, body in BLOCKS if lang == "yaml" and "repo: local" in body]
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    git("config", "user.email", "ci@example.com")
    git("config", "user.name", "CI")
    (repo / ".pre-commit-config.yaml").write_text(config)
    shutil.copy(ROOT / "examples" / "train.py", repo / "train.py")
    git("add", "-A")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "home")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")

    def pre_commit():
        proc = subprocess.run(
            [*command, "run"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
        )
        return proc.returncode, proc.stdout + proc.stderr

    code, out = pre_commit()
    assert code == 1 and "files were modified by this hook" in out, out
    assert "set_seed(" in (repo / "train.py").read_text()
    git("add", "-A")
    code, out = pre_commit()
    assert code == 1, out  # DL201 and DL301 remain (unsafe fixes): the check hook fails ...
    assert re.search(r"distlint \(fix\)\.+Passed", out), out  # ... the fix hook does not
    assert out.count("train.py:") == 2, out


# issue #30 item 2: every revision of distlint the docs pin resolves in this repository
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def pinned_revisions(text: str) -> list[str]:
    """The revisions of distlint the docs pin: a YAML `rev:` value, the `@ref` of a
    `distlint @ git+...` requirement, and a release tag named in prose (`` `v1.2.3` ``). A
    `${{ vars.X }}` is the user's setting, not a revision: the text must say how to set it
    (checked separately)."""
    found = re.findall(r"^\s*rev:\s*([^\s`#]+)", text, re.M)
    found += re.findall(r"distlint\S*\s*@\s*git\+[^\s\"']*?[^\s\"'}]@([^\s\"'/]+)", text)
    found += re.findall(r"distlint\S*\s*@\s*git\+[^\s\"']*\}\}@([^\s\"'/]+)", text)
    found += re.findall(r"`(v\d+(?:\.\d+)+)`", text)
    return sorted({rev for rev in found if not rev.startswith("${{")})


@pytest.mark.skipif(shutil.which("git") is None, reason="git resolves the revisions")
def test_every_pinned_revision_of_the_docs_exists_in_this_repository():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: there is no history to resolve revisions in")
    checked = []
    for doc in DOCS:
        for rev in pinned_revisions(doc.read_text()):
            proc = subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, f"{doc.name} pins {rev!r}, which is not in this repository"
            checked.append(rev)
    for variable in re.findall(r"\$\{\{ vars\.(\w+) \}\}", README):
        assert f"`{variable}`" in README, f"the README never says how to set {variable}"


def test_the_revision_finder_sees_what_the_docs_used_to_pin():
    """The finder is not vacuous: the forms the docs used (a tag in prose, a tag after a
    requirement's URL) are found, and a variable is not."""
    old = (
        "`rev:` a release tag such as `v0.1.0` (see Releasing)\n"
        '- run: pip install "distlint @ git+https://github.com/${{ vars.R }}@v0.1.0"\n'
        "    rev: 0123abc\n"
        '- run: pip install "distlint @ git+https://github.com/${{ vars.R }}@${{ vars.REF }}"\n'
    )
    assert pinned_revisions(old) == ["0123abc", "v0.1.0"]
    assert pinned_revisions('pip install "distlint @ git+https://x.org/d.git@1a2b3c"') == ["1a2b3c"]


def test_every_folder_of_modules_is_a_listed_package():
    """`python -m build` (the Releasing section) warns "Package ... is absent from the
    `packages` configuration" for a folder of modules shipped as data: every folder of the
    installed tree holding .py files is a listed package (rules/ is installed as
    distlint.rules)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {"distlint.rules"} | {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "distlint").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert folders == listed
    assert not any(
        f.endswith(".py") for data in setuptools.get("package-data", {}).values() for f in data
    )


def test_editors_page_says_how_emacs_saves():
    """Emacs runs `before-save-hook` only for a modified buffer: the page says so and how to
    save anyway; its elisp forms are balanced."""
    doc = (ROOT / "docs" / "editors.md").read_text()
    emacs = doc[doc.index("### Emacs") : doc.index("### Editors without LSP")]
    assert "only a modified buffer" in emacs and "C-u M-~" in emacs
    for lang, body in fenced_blocks(emacs):
        assert lang == "elisp"
        depth = 0
        for ch in re.sub(r'"(?:\\.|[^"\\])*"', "", body):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            assert depth >= 0, body
        assert depth == 0, body
    assert "(set-buffer-modified-p t)" in emacs


def test_the_slow_marker_is_registered_for_the_inner_loop(pytestconfig, request):
    """`pytest -m "not slow"` (CONTRIBUTING) is the inner loop: the marker is registered (an
    unknown one would only warn) and end-to-end tests carry it."""
    assert any(line.startswith("slow:") for line in pytestconfig.getini("markers"))
    from conftest import _is_slow

    assert not _is_slow(request.node)

    class EndToEnd:
        fixturenames = ("distlint_exe", "tmp_path")
        path = ROOT / "tests" / "test_cli.py"
        name = originalname = "test_exit_codes"

    assert _is_slow(EndToEnd())
