"""Replaying an editing session through the language server's worker: after every edit, the
buffer's incremental re-lint (the last parse reused, only the edited statements parsed again,
the project's answers about the modules the script follows kept) must publish exactly what
`distlint check` reports for that text saved to disk and linted cold.

The edits are those that change what the analysis knows: a statement typed in the training
loop, the learning rate, the Accelerator's arguments, the data loader, the imports, the seeding
helper called, the order of seeding and model creation, a syntax error mid-typing, a function
deleted, comments and blank lines."""

from __future__ import annotations

import pytest

from distlint import api
from distlint.analysis import project as project_module
from distlint.lsp_worker import _Engine

SEEDING = """\
import random

import numpy as np
import torch


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_torch(seed):
    torch.manual_seed(seed)
"""

DATA = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader(batch_size):
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 4))
    return DataLoader(data, batch_size=batch_size, shuffle=True)
"""

TRAIN = '''\
"""A training script edited in an editor, one version after another."""

import random

import torch
from accelerate import Accelerator

from helpers.data import make_loader
from helpers.seeding import seed_torch


def evaluate(model, loader):
    total = 0.0
    for inputs, targets in loader:
        total += torch.nn.functional.mse_loss(model(inputs), targets).item()
    return total / len(loader)


def main():
    accelerator = Accelerator()
    seed_torch(0)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = make_loader(8)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    order = list(range(10))
    random.shuffle(order)
    for epoch in order[:2]:
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        print(epoch, evaluate(model, loader))


if __name__ == "__main__":
    main()
'''

BACKWARD = "            accelerator.backward(loss)\n"


def _and_back(what: str, old: str, new: str) -> list[tuple[str, str, str]]:
    """An edit, then the edit that undoes it."""
    return [(what, old, new), (f"{what}: undone", new, old)]


# (what the edit does, the text it replaces, its replacement): applied one after another, each
# to the previous version
EDITS = [
    ("type a statement in the training loop", BACKWARD, "            step = 1\n" + BACKWARD),
    ("change the typed statement", "step = 1", "step = 2"),
    *_and_back("scale the learning rate", "lr=0.01)", "lr=0.01 * accelerator.num_processes)"),
    *_and_back("split batches", "Accelerator()", "Accelerator(split_batches=True)"),
    *_and_back("seed everything", "seed_torch", "seed_everything"),
    *_and_back(
        "seed after the model",
        "    seed_torch(0)\n    model = torch.nn.Linear(4, 4)\n",
        "    model = torch.nn.Linear(4, 4)\n    seed_torch(0)\n",
    ),
    (
        "import a set_seed",
        "from accelerate import Accelerator\n",
        "from accelerate import Accelerator\nfrom accelerate.utils import set_seed\n",
    ),
    ("call it", "    seed_torch(0)\n", "    set_seed(0)\n"),
    *_and_back("a syntax error mid-typing", "make_loader(8)\n", "make_loader(8\n"),
    (
        "a loader built here",
        "    loader = make_loader(8)\n",
        "    loader = torch.utils.data.DataLoader(list(range(64)), batch_size=8)\n",
    ),
    ("a comment in the header", '"""A training', '# edited\n"""A training'),
    ("blank lines in the loop", BACKWARD, "\n\n" + BACKWARD),
    (
        "delete the evaluation function",
        TRAIN[TRAIN.index("def evaluate") : TRAIN.index("def main")],
        "",
    ),
    ("and its call", "        print(epoch, evaluate(model, loader))\n", "        print(epoch)\n"),
    (
        "rename the loop variable",
        "for inputs, targets in loader:\n            loss",
        "for xs, targets in loader:\n            loss",
    ),
]


def _versions() -> list[tuple[str, str]]:
    text, out = TRAIN, []
    for what, old, new in EDITS:
        assert old in text, what
        text = text.replace(old, new, 1)
        out.append((what, text))
    return out


def _write_tree(root) -> None:
    (root / "helpers").mkdir(parents=True)
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "seeding.py").write_text(SEEDING)
    (root / "helpers" / "data.py").write_text(DATA)
    (root / "pyproject.toml").write_text('[tool.distlint]\nselect = ["ALL"]\n')
    (root / "train.py").write_text(TRAIN)


def _check(path: str) -> api.FileResult:
    """What `distlint check` reports for the file on disk, in a process that knows nothing yet
    (the worker's projects are put aside meanwhile, and back after)."""
    projects, run = dict(project_module._PROJECTS), set(project_module._RUN_FILES)
    project_module.forget_projects()
    try:
        (result,) = list(api.lint_paths([path], api.LintOptions(cache=False, jobs=1)))
    finally:
        project_module.forget_projects()
        project_module._PROJECTS.update(projects)
        project_module._RUN_FILES.update(run)
    return result


def _shown(result: api.FileResult, root) -> list[str]:
    """The findings (positions, codes, messages, fixes) and errors, paths made relative."""
    lines = [repr(f).replace(str(root), "<root>") for f in result.findings]
    return lines + [e.message.replace(str(root), "<root>") for e in result.errors]


@pytest.fixture
def trees(tmp_path):
    project_module.forget_projects()
    work, cold = tmp_path / "work", tmp_path / "cold"
    _write_tree(work)
    _write_tree(cold)
    yield work, cold
    project_module.forget_projects()


def test_every_version_of_an_editing_session_lints_as_check_does(trees):
    work, cold = trees
    engine = _Engine()
    path = str(work / "train.py")
    options = api.LintOptions()

    def lint(text: str) -> api.FileResult:
        status, result, _, _ = engine.lint(text, path, options, {})
        assert status == "ok"
        engine.idle()  # as the worker does between requests
        return result

    first = lint(TRAIN)
    assert {f.code for f in first.findings} == {"DL101", "DL201"}
    project = api.project_for(path, api.config_for(path))
    parsed = project.parse_count
    seen: set[str] = set()
    nested = 0
    for what, text in _versions():
        result = lint(text)
        nested += engine.documents[path].nested
        (cold / "train.py").write_text(text)
        expected = _check(str(cold / "train.py"))
        assert _shown(result, work) == _shown(expected, cold), what
        seen |= {f.code for f in result.findings}
        assert api.project_for(path, api.config_for(path)) is project, what
    # the session went through findings appearing and going, and edits re-parsed in place
    assert {"DL101", "DL102", "DL201"} <= seen
    assert nested >= 5
    assert project.parse_count == parsed  # the helper modules were never parsed again


# the seeding helper, open in a second buffer and edited there (never saved)
HELPER_EDITS = [
    (
        "the torch seeder seeds python too",
        "def seed_torch(seed):\n",
        "def seed_torch(seed):\n    random.seed(seed)\n",
    ),
    (
        "and numpy",
        "    random.seed(seed)\n    torch",
        "    random.seed(seed)\n    np.random.seed(seed)\n    torch",
    ),
    (
        "not python any more",
        "def seed_torch(seed):\n    random.seed(seed)\n",
        "def seed_torch(seed):\n",
    ),
]


def test_an_edited_helper_buffer_lints_as_if_saved_and_never_reaches_the_store(trees):
    # the entry is linted while its seeding helper is edited in another buffer: each lint
    # equals a cold check of the tree with the buffer saved; the answers the session wrote to
    # the store are those of the files on disk only, so the next server start (a new process,
    # reading the store) lints the entry as a cold check of the disk does
    from distlint import cache

    work, cold = trees
    engine = _Engine()
    path, helper = str(work / "train.py"), str(work / "helpers" / "seeding.py")
    options = api.LintOptions()

    def lint(buffers: dict) -> api.FileResult:
        status, result, _, _ = engine.lint(TRAIN, path, options, buffers)
        assert status == "ok"
        engine.idle()
        return result

    lint({})  # the helper as saved: its answers go to the store
    text, seen = SEEDING, []
    for what, old, new in HELPER_EDITS:
        assert old in text, what
        text = text.replace(old, new, 1)
        result = lint({helper: text})
        seen.append("DL101" in {f.code for f in result.findings})
        (cold / "helpers" / "seeding.py").write_text(text)
        expected = _check(str(cold / "train.py"))
        assert _shown(result, work) == _shown(expected, cold), what
    assert seen == [False, False, True]  # python's generator seeded by the buffer, then not
    assert (work / ".distlint_cache" / "answers").is_dir()
    project_module.forget_projects()  # a new server process, the helper's buffer closed
    cache._STORES.clear()
    cache._CACHES.clear()
    again = _Engine()
    status, result, _, _ = again.lint(TRAIN, path, options, {})
    project = api.project_for(path, api.config_for(path))
    assert project.answer_counts["disk"] > 0  # (answered from the store)
    (cold / "helpers" / "seeding.py").write_text(SEEDING)
    assert _shown(result, work) == _shown(_check(str(cold / "train.py")), cold)
