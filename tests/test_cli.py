"""End-to-end: the installed `distlint` command, run as a subprocess as users and CI run it."""

import io
import json
import os
import subprocess
import sys

import pytest
from helpers import FIXTURES

BAD = (FIXTURES / "DL101" / "bad.py").read_text()
GOOD = (FIXTURES / "DL101" / "good.py").read_text()

# A training script with a syntax error (it mentions manual_seed, so distlint must parse it).
BROKEN = "import torch\n\ntorch.manual_seed(0)\nfor x in range(3)\n    print(x)\n"

JSON_KEYS = {
    "path",
    "line",
    "column",
    "end_line",
    "end_column",
    "code",
    "name",
    "message",
    "fix",
    "cell",
}


def run(exe, *args, cwd, stdin=None):
    return subprocess.run(
        [exe, *args], cwd=cwd, capture_output=True, text=True, input=stdin, timeout=120
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def test_exit_codes(distlint_exe, project):
    assert run(distlint_exe, "check", "good.py", cwd=project).returncode == 0
    bad = run(distlint_exe, "check", "bad.py", cwd=project)
    assert bad.returncode == 1
    assert "bad.py:20:5: DL101" in bad.stdout
    missing = run(distlint_exe, "check", "nope.py", cwd=project)
    assert missing.returncode == 2
    assert "nope.py" in missing.stderr
    assert run(distlint_exe, "check", "--exit-zero", "bad.py", cwd=project).returncode == 0
    assert run(distlint_exe, "check", "--no-such-option", cwd=project).returncode == 2


def test_json_schema_has_exactly_the_fixed_keys(distlint_exe, project):
    proc = run(distlint_exe, "check", "--format", "json", ".", cwd=project)
    assert proc.returncode == 1
    findings = json.loads(proc.stdout)
    assert [f["code"] for f in findings] == ["DL101"]
    (finding,) = findings
    assert set(finding) == JSON_KEYS
    assert (os.path.normpath(finding["path"]), finding["line"], finding["column"]) == (
        "bad.py",
        20,
        5,
    )
    assert finding["end_line"] == 20 and finding["end_column"] > finding["column"]
    assert set(finding["fix"]) == {"applicability", "title", "edits"}
    assert finding["fix"]["applicability"] == "safe"
    # ruff's edit shape: content, location {row, column}, end_location
    assert finding["fix"]["edits"] and all(
        set(e) == {"content", "location", "end_location"}
        and set(e["location"]) == set(e["end_location"]) == {"row", "column"}
        for e in finding["fix"]["edits"]
    )


def test_diff_leaves_files_untouched(distlint_exe, project):
    before = (project / "bad.py").read_bytes()
    proc = run(distlint_exe, "check", "--diff", "bad.py", cwd=project)
    assert proc.returncode == 1
    assert "-    torch.manual_seed(args.seed)" in proc.stdout
    assert "+    set_seed(args.seed)" in proc.stdout
    assert (project / "bad.py").read_bytes() == before
    proc = run(distlint_exe, "fix", "--diff", "bad.py", cwd=project)
    assert "+from accelerate.utils import set_seed" in proc.stdout
    assert (project / "bad.py").read_bytes() == before


def test_fix_writes_and_a_second_run_is_clean(distlint_exe, project):
    proc = run(distlint_exe, "fix", "bad.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "set_seed(args.seed)" in (project / "bad.py").read_text()
    assert run(distlint_exe, "check", "bad.py", cwd=project).returncode == 0


def test_syntax_error_is_reported_and_other_files_still_linted(distlint_exe, project):
    (project / "broken.py").write_text(BROKEN)
    proc = run(distlint_exe, "check", ".", cwd=project)
    assert proc.returncode == 2
    assert "broken.py:4:" in proc.stderr
    assert "syntax error" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "bad.py:20:5: DL101" in proc.stdout  # the good and bad files were linted all the same


@pytest.mark.parametrize(
    "args,expected_rc",
    [
        (("--select", "DL1"), 1),
        (("--select", "DL101"), 1),
        (("--select", "dl10"), 1),
        (("--select", "ALL"), 1),
        (("--ignore", "DL1"), 0),
        (("--ignore", "DL101"), 0),
        (("--select", "DL1", "--ignore", "DL10"), 0),
        (("--select", "DL3"), 0),
        (("--select", "seed-only-torch"), 1),
        (("--select", "unscaled-learning-rate,seed-only-torch"), 1),
        (("--ignore", "seed-only-torch"), 0),
        (("--select", "DL1", "--ignore", "SEED-ONLY-TORCH"), 0),
    ],
)
def test_select_and_ignore_prefixes(distlint_exe, project, args, expected_rc):
    proc = run(distlint_exe, "check", *args, "bad.py", cwd=project)
    assert proc.returncode == expected_rc, proc.stdout + proc.stderr
    assert ("DL101" in proc.stdout) == (expected_rc == 1)


def test_unknown_selector_is_a_usage_error(distlint_exe, project):
    proc = run(distlint_exe, "check", "--select", "XY9", "bad.py", cwd=project)
    assert proc.returncode == 2
    assert "XY9" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--select", "DL2O1"),
            "--select: unknown rule code, prefix or name 'DL2O1' (did you mean DL201?)",
        ),
        (("--ignore", "seed-only-torh"), "(did you mean seed-only-torch?)"),
        (("--ignore", ""), "--ignore: empty rule code ''"),
        (("--select", " "), "--select: empty rule code ' '"),
        (("--extend-select", "DL101,,DL201"), "--extend-select: empty rule code ''"),
    ],
)
def test_empty_and_mistyped_selectors_are_usage_errors_with_a_suggestion(
    distlint_exe, project, args, expected
):
    proc = run(distlint_exe, "check", *args, "bad.py", cwd=project)
    assert proc.returncode == 2, proc.stdout
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_rule_suggests_the_closest_code(distlint_exe, project):
    proc = run(distlint_exe, "rule", "DL2O1", cwd=project)
    assert proc.returncode == 2 and "did you mean DL201?" in proc.stderr


def test_statistics(distlint_exe, project):
    (project / "bad2.py").write_text(BAD)
    proc = run(distlint_exe, "check", "--statistics", ".", cwd=project)
    assert proc.returncode == 1
    lines = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    assert [(n.strip(), code) for n, code, *_ in lines] == [("2", "DL101")]
    assert "seed-only-torch" in proc.stdout
    # ruff's --statistics: the table and the summary, not every finding
    assert "bad.py:" not in proc.stdout and "bad2.py:" not in proc.stdout
    assert proc.stdout.splitlines()[0] == "2\tDL101\t[*] seed-only-torch"
    clean = run(distlint_exe, "check", "--statistics", "good.py", cwd=project)
    assert clean.returncode == 0 and clean.stdout == ""


FULL_SOURCE = "import random\n\nimport torch\n\ndef main():\n    torch.manual_seed(0)\n    random.shuffle([1])\n"


def test_full_format_shows_the_source_a_caret_and_the_fix(distlint_exe, tmp_path):
    (tmp_path / "t.py").write_text(FULL_SOURCE)
    for option in ("--format", "--output-format"):
        proc = run(distlint_exe, "check", "--no-cache", option, "full", "t.py", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith("t.py:6:5: DL101 torch is seeded by hand")
        assert lines[1:8] == [
            "  |",
            "4 |",
            "5 | def main():",
            "6 |     torch.manual_seed(0)",
            "  |     ^^^^^^^^^^^^^^^^^^^^ DL101",
            "7 |     random.shuffle([1])",
            "  |",
        ]
        assert (
            lines[8]
            == "  = help: Replace the hand-written seeding with `set_seed(...)` (unsafe fix)"
        )
        assert "4 + from accelerate.utils import set_seed" in lines
        at = lines.index("6 | def main():")
        assert lines[at : at + 4] == [
            "6 | def main():",
            "  -     torch.manual_seed(0)",
            "7 +     set_seed(0)",
            "8 |     random.shuffle([1])",
        ]
        assert "\x1b[" not in proc.stdout  # not a terminal: no colours
    concise = run(
        distlint_exe, "check", "--no-cache", "--output-format", "concise", "t.py", cwd=tmp_path
    )
    text = run(distlint_exe, "check", "--no-cache", "t.py", cwd=tmp_path)
    assert concise.stdout == text.stdout and len(text.stdout.splitlines()) == 4


def test_full_format_after_a_fix_points_into_the_fixed_text(distlint_exe, project):
    proc = run(
        distlint_exe, "check", "--fix", "--no-cache", "--format", "full", "bad.py", cwd=project
    )
    assert proc.returncode == 0 and "Fixed 1 finding." in proc.stdout
    (project / "lr.py").write_text(
        "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
        "model = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = accelerator.prepare(model, opt)\n"
    )
    proc = run(
        distlint_exe,
        "check",
        "--no-cache",
        "--format",
        "full",
        "-",
        cwd=project,
        stdin=(project / "lr.py").read_text(),
    )
    assert proc.returncode == 1
    assert "6 | opt = torch.optim.SGD(model.parameters(), lr=0.1)" in proc.stdout
    assert "  |                                              ^^^ DL201" in proc.stdout


def _in_a_terminal(exe, args, cwd, env):
    """Run ``exe args`` with its stdout on a pseudo-terminal; return what it wrote."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout is the terminal
        os.chdir(cwd)
        os.execve(exe, [exe, *args], env)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_colours_on_a_terminal_only_and_never_with_no_color(distlint_exe, project):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    args = ["check", "--no-cache", "bad.py"]
    coloured = _in_a_terminal(distlint_exe, args, project, env)
    assert "\x1b[1;31mDL101\x1b[0m" in coloured
    plain = _in_a_terminal(distlint_exe, args, project, dict(env, NO_COLOR="1"))
    assert "DL101" in plain and "\x1b[" not in plain
    piped = run(distlint_exe, *args, cwd=project)
    assert "\x1b[" not in piped.stdout
    out_file = _in_a_terminal(distlint_exe, [*args, "-o", "report.txt"], project, env)
    assert "\x1b[" not in (project / "report.txt").read_text() and "\x1b[" not in out_file


def test_rules_and_rule(distlint_exe, project):
    rules = run(distlint_exe, "rules", cwd=project)
    assert rules.returncode == 0
    assert any(line.startswith("DL101  seed-only-torch") for line in rules.stdout.splitlines())
    listed = json.loads(run(distlint_exe, "rules", "--format", "json", cwd=project).stdout)
    assert {"DL101", "DL001"} <= {r["code"] for r in listed}
    doc = run(distlint_exe, "rule", "DL101", cwd=project)
    assert doc.returncode == 0
    assert doc.stdout.startswith("# seed-only-torch (DL101)")
    for section in (
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
    ):
        assert section in doc.stdout
    unknown = run(distlint_exe, "rule", "DL999", cwd=project)
    assert unknown.returncode == 2 and "DL999" in unknown.stderr


def test_python_dash_m(project):
    proc = subprocess.run(
        [sys.executable, "-m", "distlint", "check", "bad.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "bad.py:20:5: DL101" in proc.stdout


def test_check_never_imports_torch_accelerate_or_numpy(project):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "distlint",
            "check",
            "--no-cache",
            str(FIXTURES / "DL101" / "bad.py"),
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout
    imported = {
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "libcst" in imported  # the report is real: it lists what the linter imported
    heavy = sorted(
        m for m in imported if m.split(".")[0] in {"torch", "accelerate", "numpy", "torch_xla"}
    )
    assert heavy == []


def test_findings_of_a_followed_module_are_printed_with_its_path_and_said_so(distlint_exe):
    """`distlint check` on an entry script whose Trainer (another module) trains: the finding
    is printed at trainer.py's own path, relative to the working folder, the summary says why,
    and `fix` leaves that file alone."""
    folder = FIXTURES / "projects" / "trainer_owns_accelerator"
    entry = "src/tts/train/train.py"
    proc = run(distlint_exe, "check", "--no-cache", entry, cwd=folder)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("src/tts/model/trainer.py:10:67: DL201 ")
    assert "1 in src/tts/model/trainer.py, imported by the files checked" in proc.stdout
    assert "fixable" not in proc.stdout
    fixed = run(distlint_exe, "fix", "--no-cache", "--unsafe-fixes", "--diff", entry, cwd=folder)
    assert "+++" not in fixed.stdout


# issue #30 item 2: install hints for extras follow how distlint was installed


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (
            {"url": "file:///src/my%20distlint", "dir_info": {"editable": True}},
            "pip install -e '.[lsp]' (in the clone at '/src/my distlint')",
        ),
        (
            {"url": "file:///src/distlint", "dir_info": {}},
            "pip install '.[lsp]' (in the clone at /src/distlint)",
        ),
        (
            {
                "url": "https://github.com/o/distlint",
                "vcs_info": {"vcs": "git", "commit_id": "abc123"},
            },
            "pip install 'distlint[lsp] @ git+https://github.com/o/distlint@abc123'",
        ),
        ({"url": "file:///w/distlint-0.1.0-py3-none-any.whl", "archive_info": {}}, None),
        ({}, None),
    ],
)
def test_extra_install_hint_follows_the_installation(monkeypatch, origin, expected):
    from distlint import install_hint

    monkeypatch.setattr(install_hint, "_direct_url", lambda: origin)
    assert install_hint.extra_install_command("lsp") == (expected or "pip install 'distlint[lsp]'")


def test_this_installation_is_told_to_install_extras_in_its_clone():
    from helpers import ROOT

    from distlint.install_hint import _direct_url, extra_install_command

    origin = _direct_url()
    if not origin.get("dir_info"):
        pytest.skip(f"distlint is not installed from a folder here ({origin or 'no direct_url'})")
    hint = extra_install_command("lsp")
    assert hint.startswith("pip install") and "'.[lsp]'" in hint
    assert str(ROOT) in hint or os.path.realpath(ROOT) in hint


# issue #30 item 5: progress on a terminal, after a couple of seconds, never elsewhere


class FakeTerminal:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return True


def test_progress_shows_files_done_of_total_after_the_delay_only():
    from distlint.progress import DELAY, Progress

    now = [0.0]
    term = FakeTerminal()
    progress = Progress(term, clock=lambda: now[0])
    progress.set_total(300)
    progress.advance()
    assert term.text == ""  # a short run says nothing
    now[0] = DELAY + 0.5
    progress.advance()
    assert term.text.endswith("distlint: 2/300 files")
    now[0] += 0.01
    progress.advance()  # too soon after the last update: not redrawn
    assert term.text.count("distlint:") == 1
    now[0] += 1
    progress.advance()
    assert term.text.endswith("\r\x1b[Kdistlint: 4/300 files")
    progress.clear()
    assert term.text.endswith("\r\x1b[K") and not progress.shown
    piped = io.StringIO()
    assert Progress.for_terminal(piped) is None  # not a terminal: no progress at all


def test_no_progress_in_piped_output(distlint_exe, project):
    for n in range(30):
        (project / f"copy{n}.py").write_text(BAD)
    proc = run(distlint_exe, "check", "--no-cache", ".", cwd=project)
    assert "\r" not in proc.stderr and "distlint:" not in proc.stderr
