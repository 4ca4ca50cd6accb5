"""DL101 and DL102 ask only what decides their answer: the script's own seeding calls first,
what a project helper seeds (a summary of another module) only where no cheaper answer
decides, and the order of a run only up to its first seeding. Each counter below fails where
every call's helper is asked; each fooling case reaches the seeding (or its absence) the long
way round, so a shortcut that trusted a name or the first answer would change its finding."""

from __future__ import annotations

import os

import pytest

from distlint.analysis import ordering, seeding
from distlint.analysis.facts import facts_for
from distlint.analysis.project import Project
from distlint.registry import all_rules
from distlint.runner import lint_source

ROOT = os.path.abspath(os.sep + "proj")

_HELPERS = {
    "helpers.py": (
        "import torch\n\n\ndef load():\n    return [1, 2]\n\n\ndef augment(x):\n    return x\n\n\n"
        "def build():\n    return torch.nn.Linear(2, 2)\n"
    ),
    "setup.py": "from seeds import seed_torch\n\n\ndef prepare(seed):\n    seed_torch(seed)\n",
    "seeds.py": (
        "import torch\nfrom accelerate.utils import set_seed\n\n\n"
        "def seed_torch(seed):\n    torch.manual_seed(seed)\n\n\n"
        "def seed_everything(seed):\n    set_seed(seed)\n\n\n"
        "class Seeder:\n    def seed(self, value):\n        torch.manual_seed(value)\n"
    ),
    "lookalike.py": (
        "def set_seed(seed):\n    print('seed', seed)\n\n\n"
        "def seed_everything(seed):\n    return seed\n"
    ),
}


def _lint(code: str, train: str, monkeypatch=None) -> tuple[list[tuple[str, int]], list[str]]:
    """The findings of rule ``code`` on ``train`` in a project with the helper modules, and
    the source of every call whose project helper the seeding was asked about."""
    asked: list[str] = []
    if monkeypatch is not None:
        real = seeding.SeedingFacts._external_kind

        def counted(self, call):
            asked.append(self.facts.index.module.code_for_node(call))
            return real(self, call)

        monkeypatch.setattr(seeding.SeedingFacts, "_external_kind", counted)
    project = Project.from_sources(ROOT, {**_HELPERS, "train.py": train})
    rule = next(r for r in all_rules() if r.CODE == code)
    result = lint_source(train, os.path.join(ROOT, "train.py"), rules=[rule()], project=project)
    return [(f.code, f.line) for f in result.findings], asked


# ------------------------------------------------------------------ what is asked


_ASKED = [
    pytest.param(
        "DL101",
        "import numpy as np\nimport torch\nfrom accelerate.utils import set_seed\n"
        "from helpers import load, augment, build\n\n"
        "torch.manual_seed(0)\nset_seed(0)\nmodel = build()\ndata = augment(load())\n"
        "order = np.random.permutation(10)\n",
        [],
        {"build()", "load()", "augment(load())", "np.random.permutation(10)"},
        id="dl101-a-library-helper-seeds-everything",
    ),
    # hand-written seeding of every generator the script draws from: what each drawing call
    # is decides what is drawn (a project helper that seeds does not count as drawing)
    pytest.param(
        "DL101",
        "import random\nimport numpy as np\nimport torch\nfrom helpers import load, augment, build\n\n"
        "torch.manual_seed(0)\nnp.random.seed(0)\nrandom.seed(0)\nmodel = build()\n"
        "data = augment(load())\nrandom.shuffle(data)\nnoise = np.random.rand(2)\n",
        [],
        {"build()", "load()", "augment(load())"},
        id="dl101-only-the-drawing-calls-where-the-script-seeds-what-it-draws",
    ),
    # the order is asked for its first event and its first seeding after it: nothing later
    # (a function calling itself keeps this)
    pytest.param(
        "DL102",
        "import torch\nfrom helpers import load, augment, build\n\n\n"
        "def walk(n):\n    return walk(n - 1) if n else 0\n\n\n"
        "def main():\n    model = torch.nn.Linear(2, 2)\n    torch.manual_seed(0)\n"
        "    extra = build()\n    data = augment(load())\n    walk(3)\n\n\nmain()\n",
        [11],
        {"build()", "load()", "augment(load())", "walk(3)"},
        id="dl102-nothing-after-the-first-seeding",
    ),
    # `set_seed` runs before anything that may build a model (an argument parser, helpers of
    # other modules that build nothing the order sees): the order starts with a seeding,
    # whatever those helpers seed
    pytest.param(
        "DL102",
        "import argparse\nimport torch\nfrom accelerate.utils import set_seed\n"
        "from helpers import load, augment\n\n\n"
        "def parse_args():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--lr')\n"
        "    return parser.parse_args()\n\n\n"
        "def main():\n    args = parse_args()\n    data = augment(load())\n    set_seed(0)\n"
        "    model = torch.nn.Linear(2, 2)\n\n\nmain()\n",
        [],
        {"parse_args()", "load()", "augment(load())", "parser.add_argument('--lr')"},
        id="dl102-nothing-before-a-known-seeding-that-comes-before-any-model",
    ),
    # a function no call of the file runs (a loader's `collate_fn`) is an entry point of its
    # own: where neither it nor what it calls builds a model, its order cannot start with one
    pytest.param(
        "DL102",
        "import torch\nfrom helpers import load, augment\n\n\n"
        "def collate(batch):\n    return augment(load())\n\n\n"
        "def main():\n    model = torch.nn.Linear(2, 2)\n    torch.manual_seed(0)\n"
        "    loader = torch.utils.data.DataLoader([], collate_fn=collate)\n\n\nmain()\n",
        [11],
        {"load()", "augment(load())"},
        id="dl102-nothing-of-an-entry-point-that-builds-no-model",
    ),
]


@pytest.mark.parametrize(("code", "train", "expected", "never"), _ASKED)
def test_what_a_helper_seeds_is_asked_only_where_it_decides(
    monkeypatch, code, train, expected, never
):
    found, asked = _lint(code, train, monkeypatch)
    assert found == [(code, line) for line in expected]
    assert not never & set(asked)


def test_dl102_looks_for_the_file_s_functions_only_under_their_names(monkeypatch):
    """What a call runs in the file (a function, a method, a class's `__init__`) is named as
    it is called: a call by any other name (`parser.add_argument`, `torch.cat`) is not
    resolved to find out; the helper of the file is, and its seeding is still found."""
    from distlint.analysis.index import Index

    resolved: list[str] = []
    real = Index.local_function

    def counted(self, func):
        resolved.append(self.module.code_for_node(func))
        return real(self, func)

    monkeypatch.setattr(Index, "local_function", counted)
    train = (
        "import argparse\nimport torch\n\n\ndef seed_all(seed):\n    torch.manual_seed(seed)\n\n\n"
        "def main():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--lr')\n"
        "    model = torch.nn.Linear(2, 2)\n    x = torch.cat([torch.ones(1)])\n    seed_all(0)\n"
        "\n\nmain()\n"
    )
    found, _asked = _lint("DL102", train)
    assert found == [("DL102", 14)]
    assert resolved and set(resolved) <= {"seed_all", "main"}


def test_dl102_reads_the_whole_order_where_functions_call_each_other(monkeypatch):
    """`f` seeds then calls `g`, `g` builds a model then calls `f`, `h` calls `g`: which of
    them a recursion guard cuts short depends on where the cycle was entered first. Entered
    from the module's `f()`, as the whole order does, `h` sees `g` build a model and no
    seeding after it; cut at `f`'s seeding, `g` would be entered from `h` and report it."""
    train = (
        "import torch\nfrom accelerate.utils import set_seed\n\n\n"
        "def f():\n    set_seed(0)\n    g()\n\n\n"
        "def g():\n    model = torch.nn.Linear(2, 2)\n    f()\n\n\n"
        "def h():\n    g()\n\n\nf()\n"
    )
    assert _lint("DL102", train)[0] == []
    monkeypatch.setattr(ordering.Ordering, "_cyclic", False)
    assert _lint("DL102", train)[0] == [("DL102", 12)]  # what the cut alone would say


def test_the_torch_seeding_gate_asks_the_known_seeders_first(monkeypatch):
    """`seeds_torch` (DL102's gate): a seeding call the knowledge base knows answers before
    any helper called earlier is summarised."""
    train = (
        "import torch\nfrom helpers import load, augment, build\n\n"
        "data = augment(load())\nmodel = build()\ntorch.manual_seed(0)\n"
    )
    project = Project.from_sources(ROOT, {**_HELPERS, "train.py": train})
    info = project.module(os.path.join(ROOT, "train.py"))
    assert info is not None
    facts = facts_for(info.index, os.path.join(ROOT, "train.py"), project)
    asked: list[object] = []
    real = facts.summaries._external_summary
    monkeypatch.setattr(
        facts.summaries,
        "_external_summary",
        lambda call, needs=None: asked.append(call) or real(call, needs),
    )
    assert facts.seeding.seeds_torch
    assert asked == []


# ------------------------------------------------------------------ fooling cases

_DL101 = "import numpy as np\nimport torch\n"
_DL102 = "import torch\n\nmodel = torch.nn.Linear(2, 2)\n"


@pytest.mark.parametrize(
    ("code", "train", "expected"),
    [
        pytest.param(
            "DL101",
            _DL101 + "from setup import prepare\n\nprepare(0)\nx = np.random.rand(2)\n",
            [5],
            id="dl101-helper-seeding-torch-two-modules-away",
        ),
        pytest.param(
            "DL101",
            _DL101 + "from setup import prepare\nfrom seeds import seed_everything\n\n"
            "prepare(0)\nseed_everything(0)\nx = np.random.rand(2)\n",
            [],
            id="dl101-helper-seeding-everything-after-the-torch-seeding",
        ),
        pytest.param(
            "DL101",
            _DL101 + "from seeds import Seeder\n\ns = Seeder()\ns.seed(0)\nx = np.random.rand(2)\n",
            [6],
            id="dl101-seeding-through-a-class-method",
        ),
        pytest.param(
            "DL101",
            _DL101 + "from lookalike import set_seed, seed_everything\n\n"
            "set_seed(0)\nseed_everything(0)\ntorch.manual_seed(0)\nx = np.random.rand(2)\n",
            [7],
            id="dl101-helpers-named-like-seeders-that-do-not-seed",
        ),
        pytest.param(
            "DL101",
            "import random\nimport torch\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator()\ntorch.manual_seed(0)\n"
            "if accelerator.is_main_process:\n    random.seed(0)\nx = random.random()\n",
            [6],
            id="dl101-random-seed-only-on-the-main-process",
        ),
        pytest.param(
            "DL101",
            "import random\nimport torch\n\nseed = 0\ntorch.manual_seed(seed)\n"
            "if seed:\n    random.seed(seed)\nx = random.random()\n",
            [],
            id="dl101-random-seed-in-a-branch-of-every-process",
        ),
        pytest.param(
            "DL102",
            _DL102 + "from setup import prepare\n\nprepare(0)\n",
            [6],
            id="dl102-helper-seeding-two-modules-away",
        ),
        pytest.param(
            "DL102",
            _DL102 + "from seeds import Seeder\n\ns = Seeder()\ns.seed(0)\n",
            [7],
            id="dl102-seeding-through-a-class-method",
        ),
        pytest.param(
            "DL102",
            _DL102 + "from lookalike import set_seed\n\nset_seed(0)\n",
            [],
            id="dl102-helper-named-like-a-seeder-that-does-not-seed",
        ),
        pytest.param(
            "DL102",
            "import torch\nfrom seeds import seed_everything\n\n\n"
            "def main():\n    model = torch.nn.Linear(2, 2)\n    torch.manual_seed(0)\n"
            "    seed_everything(1)\n\n\nmain()\n",
            [7],
            id="dl102-seed-after-the-model-then-a-helper",
        ),
        pytest.param(
            "DL102",
            "import torch\n\n\ndef make():\n    return torch.nn.Linear(2, 2)\n\n\n"
            "def main():\n    model = make()\n    torch.manual_seed(0)\n\n\nmain()\n",
            [10],
            id="dl102-model-built-by-a-function-of-the-file-before-the-seeding",
        ),
        pytest.param(
            "DL102",
            "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\n"
            "def main():\n    net = Net()\n    torch.manual_seed(0)\n\n\nmain()\n",
            [10],
            id="dl102-model-class-of-the-file-before-the-seeding",
        ),
        pytest.param(
            "DL102",
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "if accelerator.is_main_process:\n    torch.manual_seed(0)\n"
            "model = torch.nn.Linear(2, 2)\ntorch.manual_seed(1)\n",
            [8],
            id="dl102-seeding-on-one-process-before-the-model-does-not-count",
        ),
        pytest.param(
            "DL102",
            "import torch\nfrom helpers import build\nfrom setup import prepare\n\n\n"
            "def main():\n    model = build()\n    prepare(0)\n\n\nmain()\n",
            [],
            id="dl102-model-built-by-a-helper-is-not-the-script's",
        ),
    ],
)
def test_seeding_reached_the_long_way_round_keeps_its_finding(code, train, expected):
    assert _lint(code, train)[0] == [(code, line) for line in expected]
