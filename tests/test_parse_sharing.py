"""A whole-project run parses each file once: a file of the run that the project parsed for an
importer (a fact of the importer flowed through it) is linted next, from that parse, instead of
being parsed again at its turn (#32). The results, and which file reports the error of a module
outside the run, are those of linting the files in the run's order."""

from __future__ import annotations

import os

import pytest

from distlint import api, runner
from distlint.analysis import project as project_mod
from distlint.analysis.project import forget_projects

OPTIONS = api.LintOptions(select=("ALL",), cache=False, jobs=1)

# The entry calls a seeding helper: whether it seeds every generator the script uses is asked of
# `utils.py`'s parse, and `utils.py` (after `train.py` in the run's order) is linted too.
ENTRY = (
    "import random\n\nimport torch\nfrom accelerate import Accelerator\n\n"
    "from utils import fix_seeds\n\n"
    "accelerator = Accelerator()\nfix_seeds(0)\nsamples = list(range(10))\n"
    "random.shuffle(samples)\nmodel = torch.nn.Linear(4, 4)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    "model, optimizer = accelerator.prepare(model, optimizer)\n"
)
UTILS = (
    "import torch\n\nfrom broken import helper\n\n"
    "def fix_seeds(seed):\n    torch.manual_seed(seed)\n\n"
    "def seed_more(seed):\n    helper(seed)\n\n"
    "seed_more(2)\n"
)
# a module the run does not lint, reached by `utils.py`'s own code (not by `fix_seeds`), that
# cannot be parsed
BROKEN = "def helper(:\n    pass\n"
# between the entry and `utils.py` in the run's order, reaching the broken module too
MIDDLE = (
    "import torch\n\nfrom broken import helper\n\n"
    "def seed_all(seed):\n    helper(seed)\n    torch.manual_seed(seed)\n\n"
    "seed_all(1)\n"
)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.distlint]\n")
    (tmp_path / "train.py").write_text(ENTRY)
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "broken.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    forget_projects()
    yield tmp_path
    forget_projects()


def _run(files: list[str], options: api.LintOptions = OPTIONS):
    """The results of a run over ``files``, and (runner parses, project parses) it cost."""
    forget_projects()
    runner.PASSES.clear()
    results = list(api.lint_paths(files, options))
    parsed = sum(p.parse_count for p in project_mod._PROJECTS.values())
    return results, (runner.PASSES["parse"], parsed)


def _shown(results) -> list[tuple[str, list[tuple[int, str]], list[tuple[str, str]]]]:
    """What a run reports, per file in order: its findings and its errors (by file name)."""
    return [
        (
            os.path.basename(r.path),
            [(f.line, f.code) for f in r.findings],
            [(os.path.basename(e.path), e.message) for e in r.errors],
        )
        for r in results
    ]


def test_a_module_linted_after_its_importer_is_parsed_once(tree, monkeypatch):
    # `other.py` (between them in the run's order) parses a helper of its own (whether it seeds
    # after the model is built), which takes the place of `utils.py`'s parse in the project (a
    # budget of one small module)
    (tree / "other.py").write_text(
        "import torch\nfrom seeds import seed_all\n\nmodel = torch.nn.Linear(2, 2)\nseed_all(0)\n"
    )
    (tree / "seeds.py").write_text("import torch\n\ndef seed_all(s):\n    torch.manual_seed(s)\n")
    monkeypatch.setattr(project_mod, "KEEP_PARSED_CHARS", len(UTILS) + 10)
    results, (linted, followed) = _run(["train.py", "other.py", "utils.py"])
    assert [os.path.basename(r.path) for r in results] == ["train.py", "other.py", "utils.py"]
    # utils.py: parsed for train.py's seeding question, then linted from that parse before
    # other.py's helper took its place
    assert followed == 2  # utils.py and seeds.py (broken.py's attempt does not parse)
    assert linted == 2  # train.py's and other.py's own parses only


def test_results_are_those_of_the_files_linted_alone(tree):
    together, _ = _run(["train.py", "utils.py"])
    alone = []
    for name in ("train.py", "utils.py"):
        alone += _run([name])[0]
    shown = _shown(together)
    assert [(name, findings) for name, findings, _ in shown] == [
        (name, findings) for name, findings, _ in _shown(alone)
    ]
    assert shown[0][1], "the entry has findings"


def test_a_run_reports_what_it_reports_in_the_runs_order(tree, monkeypatch):
    """`utils.py` is linted ahead of `middle.py` (right after `train.py`, which parsed it);
    all three reach `broken.py`, whose error is reported once, by the first in the run's order.
    Findings and errors are those of the run linting each file at its turn."""
    (tree / "middle.py").write_text(MIDDLE)
    files = ["train.py", "middle.py", "utils.py"]
    results, (linted, _) = _run(files)
    assert linted == 2  # utils.py was linted from train.py's parse of it
    shown = _shown(results)
    owners = [name for name, _, errors in shown for err in errors if err[0] == "broken.py"]
    assert owners == ["train.py"]
    monkeypatch.setattr(project_mod, "held_parses", lambda: [])  # each file at its turn
    in_order, _ = _run(files)
    assert shown == _shown(in_order)


def test_a_file_linted_ahead_claims_the_errors_it_reports_only_at_its_turn(tmp_path):
    """The errors of a module outside the run go to the first file in the run's order that
    reaches it, even when a file after it was linted first (the analysis reaches modules
    conservatively, so a run rarely shows it; here the lints' reports are made directly)."""
    project = project_mod.Project(str(tmp_path))
    broken = str(tmp_path / "broken.py")
    project.errors.append(project_mod.FileError(broken, "syntax error: invalid syntax", 1))
    deps = {broken: "x"}
    deferred: project_mod.Deferred = {}
    with project_mod.deferring_reports(deferred):  # utils.py, ahead of its turn
        ahead = project.report_errors(deps, exclude=str(tmp_path / "utils.py"))
    assert len(ahead) == 1  # reported, not claimed
    # middle.py at its turn, before utils.py in the run: it takes the error
    assert project.report_errors(deps, exclude=str(tmp_path / "middle.py")) == ahead
    taken = project_mod.claim_reports(deferred, str(tmp_path / "utils.py"))
    assert taken == {(broken, "syntax error: invalid syntax")}  # utils.py leaves it out
    assert project.report_errors(deps, exclude=str(tmp_path / "other.py")) == []
    assert project_mod.claim_reports(deferred, str(tmp_path / "other.py")) == set()


def test_a_writing_fix_run_lints_in_the_runs_order(tree):
    _, (linted, _) = _run(["train.py", "utils.py"], OPTIONS._replace(fix=True, write=True))
    assert linted >= 2  # each file its own parse: none is fixed ahead of the files before it
