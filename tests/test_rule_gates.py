"""Cheap necessary conditions the analysis asks before its costly questions, and the answers it
shares between facts: each must leave every finding where it was. A fooling case reaches the
fact the gate looks for the long way round (an alias, a re-export, a module attribute, a
method of an imported class, a helper of the file), so a gate that only looked at the obvious
spelling would drop its finding."""

from __future__ import annotations

import os

import libcst as cst
import pytest

from distlint.analysis import ordering
from distlint.analysis.facts import Seeds, facts_for
from distlint.analysis.project import Project
from distlint.api import LintOptions, lint_paths
from distlint.registry import all_rules
from distlint.runner import lint_source

ROOT = os.path.abspath(os.sep + "proj")

_SEEDS = {
    "seeds.py": (
        "import torch\n\n\ndef fix_seed(seed):\n    torch.manual_seed(seed)\n\n\n"
        "class Seeder:\n    def seed(self, value):\n        torch.manual_seed(value)\n"
    ),
    "pkg/__init__.py": "from pkg.impl import fix_seed\n",
    "pkg/impl.py": "import torch\n\n\ndef fix_seed(seed):\n    torch.manual_seed(seed)\n",
}
_HEAD = (
    "import torch\nimport seeds\nfrom pkg import fix_seed\nfrom seeds import fix_seed as fs\n"
    "from seeds import Seeder\n\n\ndef local_seed():\n    fs(0)\n\n\n"
    "model = torch.nn.Linear(2, 2)\n"
)


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _lint(root, select: str) -> list[tuple[str, int]]:
    old = os.getcwd()
    os.chdir(root)
    try:
        results = list(lint_paths(["train.py"], LintOptions(select=(select,), jobs=1)))
    finally:
        os.chdir(old)
    return [(f.code, f.line) for r in results for f in r.findings]


def _facts_asked(sources: dict[str, str], rel: str):
    """The Facts of module ``rel`` of a project of ``sources``, and the list of the calls whose
    helper's summary they ask from now on."""
    project = Project.from_sources(ROOT, sources)
    info = project.module(os.path.join(ROOT, rel))
    assert info is not None
    facts = facts_for(info.index, os.path.join(ROOT, rel), project)
    asked: list[object] = []
    summaries = facts.summaries
    real = summaries._external_summary
    summaries._external_summary = lambda call, needs=None: asked.append(call) or real(call, needs)
    return facts, asked


@pytest.mark.parametrize(
    "seeding",
    [
        pytest.param("fs(0)", id="alias"),
        pytest.param("fix_seed(0)", id="re-export"),
        pytest.param("seeds.fix_seed(0)", id="module-attribute"),
        pytest.param("s = Seeder()\ns.seed(0)", id="method-of-imported-class"),
        pytest.param("local_seed()", id="helper-of-the-file"),
        pytest.param("torch.manual_seed(0)", id="direct"),
    ],
)
def test_seeding_after_the_model_is_found_however_the_seeder_is_reached(tmp_path, seeding):
    _write(tmp_path, {**_SEEDS, "train.py": _HEAD + seeding + "\n"})
    line = _HEAD.count("\n") + seeding.count("\n") + 1
    assert _lint(tmp_path, "DL102") == [("DL102", line)]


def test_the_order_is_not_worked_out_where_nothing_seeds_torch(monkeypatch):
    """A module that builds models but does not seed torch (it seeds python's `random`): DL102
    cannot report,
    and the order of its calls (every function as an entry, every call's targets) is not
    computed. A module whose helper seeds it still is."""
    walked: list[object] = []
    real = ordering.Ordering.roots
    monkeypatch.setattr(
        ordering.Ordering, "roots", lambda self, **kw: walked.append(self) or real(self, **kw)
    )
    sources = {
        **_SEEDS,
        "lib.py": (
            "import random\nimport torch\n\n\ndef build(seed):\n    random.seed(seed)\n"
            "    return torch.nn.Linear(2, 2)\n"
        ),
        "train.py": _HEAD + "fs(0)\n",
    }
    project = Project.from_sources(ROOT, sources)
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    rule = next(r for r in all_rules() if r.CODE == "DL102")
    for rel in ("lib.py", "train.py"):
        lint_source(sources[rel], os.path.join(ROOT, rel), rules=[rule()], project=project)
    assert len(walked) == 1  # train.py's only


def test_what_a_helper_seeds_is_asked_once_per_call():
    """DL101's seeding, DL102's order and the torch-seeding gate ask what the same helper
    calls seed: each call's summary is looked up once."""
    facts, asked = _facts_asked({**_SEEDS, "train.py": _HEAD + "fs(0)\nfix_seed(1)\n"}, "train.py")
    seeding = facts.seeding
    assert seeding.seeds_torch
    first = len(asked)
    assert first > 0
    ordering.Ordering(facts).roots()
    for call in facts.index.calls:
        seeding.kind_of(call, facts.index.qualname(call.func))
    _ = seeding.by_kind
    assert len(asked) == len(set(map(id, asked)))  # no call asked twice


def test_an_imported_name_is_resolved_once_for_every_fact_that_asks(monkeypatch):
    """The mode, the seeding and the optimizers each ask what the script's calls of imported
    helpers are: once the mode has asked about every call, the others resolve none of the
    script's imports again, and what each asks is still answered (the seeding helper seeds,
    whatever the mode asked of it before)."""
    train = os.path.join(ROOT, "train.py")
    sources = {**_SEEDS, "train.py": _HEAD + "fs(0)\nfix_seed(1)\nseeds.fix_seed(2)\n"}
    project = Project.from_sources(ROOT, sources)
    info = project.module(train)
    assert info is not None
    facts = facts_for(info.index, train, project)
    resolved: list[tuple[str, ...]] = []
    for name in ("resolve_import", "resolve_from_import"):
        real = getattr(project, name)
        monkeypatch.setattr(project, name, lambda *a, real=real: resolved.append(a) or real(*a))
    _ = facts.mode
    assert [a for a in resolved if a[0] == train]  # the mode asked about the helpers
    resolved.clear()
    _ = facts.optimizers, facts.seeding.by_kind
    assert [a for a in resolved if a[0] == train] == []
    seeded = [facts.index.module.code_for_node(c) for c in facts.seeding.by_kind[Seeds.TORCH]]
    assert seeded == ["fs(0)", "fs(0)", "fix_seed(1)", "seeds.fix_seed(2)"]  # (local_seed's first)


def test_calls_to_answers_in_source_order_from_one_pass_over_the_calls(monkeypatch):
    """`calls_to` is asked for a dozen sets of names per module: the callees' qualified names
    are worked out in one pass, and every answer keeps the calls in source order."""
    source = (
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "import torch.distributed as dist\n\n"
        "def main():\n    dist.init_process_group('nccl')\n    m = DDP(torch.nn.Linear(2, 2))\n"
        "    dist.barrier()\n    return DDP(m)\n"
    )
    project = Project.from_sources(ROOT, {"train.py": source})
    info = project.module(os.path.join(ROOT, "train.py"))
    assert info is not None
    facts = facts_for(info.index, os.path.join(ROOT, "train.py"), project)
    asked: list[object] = []
    real = info.index.qualname
    monkeypatch.setattr(info.index, "qualname", lambda node: asked.append(node) or real(node))
    names = {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.distributed.barrier",
        "torch.distributed.init_process_group",
    }
    first = facts.calls_to(names)
    assert [facts.index.module.code_for_node(c).split("(")[0] for c in first] == [
        "dist.init_process_group",
        "DDP",
        "dist.barrier",
        "DDP",
    ]
    passes = len(asked)
    assert facts.calls_to({"torch.distributed.barrier"}) == [first[2]]
    assert facts.calls_to({"torch.nn.Linear"}) == [c for c in info.index.calls if c not in first]
    assert facts.calls_to({"nothing.here"}) == []
    assert len(asked) == passes  # answered from the one pass


def test_the_logged_loss_is_followed_without_libcst_visitors(monkeypatch):
    """DL403 follows what each logged value reads, read by read: through the index's child
    lists. LibCST's `children` runs a visitor over a node each time it is asked (seconds on
    a long training step); the finding is the same either way."""
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    rule = next(r for r in all_rules() if r.CODE == "DL403")
    visited: list[object] = []
    real = cst.CSTNode.children
    monkeypatch.setattr(
        cst.CSTNode, "children", property(lambda node: visited.append(node) or real.fget(node))
    )
    for invalid in rule.INVALID:
        result = lint_source(invalid.code, "t.py", rules=[rule()])
        assert [f.code for f in result.findings] == ["DL403"]
    assert visited == []


_FOLDED_LOSS = """\
from accelerate import Accelerator


def train(model, optimizer, loader):
    accelerator = Accelerator(log_with='wandb')
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        loss = model(**batch).loss
        accelerator.backward(loss)
        a = loss.detach() + loss.detach()
        b = a * a + a
        c = b + b * a
        d = c + c + b + a
        accelerator.log({'train_loss': d.item(), 'aux': c.item(), 'b': b.item()})
"""


def test_whether_a_logged_value_was_gathered_is_worked_out_once_per_binding(monkeypatch):
    """DL403 asks, for every read it follows, whether the value was combined across processes
    first: each (name, place, depth) is worked out once, however many reads lead to it."""
    from distlint.analysis import logged
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    asked: list[tuple[str, int, int]] = []
    real = logged.LoggedLosses._combined_now

    def counted(self, key, values, at, depth):
        asked.append((key, at, depth))
        return real(self, key, values, at, depth)

    monkeypatch.setattr(logged.LoggedLosses, "_combined_now", counted)
    rule = next(r for r in all_rules() if r.CODE == "DL403")
    result = lint_source(_FOLDED_LOSS, "t.py", rules=[rule()])
    assert [(f.code, f.line) for f in result.findings] == [("DL403", 14)]
    assert asked and len(asked) == len(set(asked))


def test_a_module_without_a_for_loop_has_no_evaluation_loop_to_judge(monkeypatch):
    """DL401 judges metrics computed from an evaluation loop's shard: a module with no `for`
    loop (a library module full of `==` and `mean`) is left before its calls are judged as
    collectives; one with an evaluation loop in a method still is judged and reported."""
    from distlint.analysis import metrics
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    judged: list[object] = []
    real = metrics.Metrics.is_collective
    monkeypatch.setattr(
        metrics.Metrics, "is_collective", lambda self, call: judged.append(call) or real(self, call)
    )
    rule = next(r for r in all_rules() if r.CODE == "DL401")
    flat = "import torch\n\ndef accuracy(pred, y):\n    return (pred == y).float().mean()\n"
    assert lint_source(flat, "t.py", rules=[rule()]).findings == ()
    assert judged == []
    for invalid in rule.INVALID:
        result = lint_source(invalid.code, "t.py", rules=[rule()])
        assert [f.code for f in result.findings] == ["DL401"]
    assert judged


def test_the_torch_seeding_gate_asks_only_calls_that_run_in_order():
    """The order of seeding and model building follows the calls that run in a function's or
    the module's code: a helper called as a method's decorator or in a class body is not
    summarised to decide whether the module seeds (the order would never ask it)."""
    sources = {
        **_SEEDS,
        "docs.py": "def with_doc(text):\n    return lambda fn: fn\n",
        "lib.py": (
            "import torch\nfrom docs import with_doc\n\n\nclass Block(torch.nn.Module):\n"
            "    scale = with_doc('scale')\n\n"
            "    @with_doc('forward')\n    def forward(self, x):\n        return x\n"
        ),
    }
    facts, asked = _facts_asked(sources, "lib.py")
    assert not facts.seeding.seeds_torch
    assert asked == []


def _traced_loaders(monkeypatch, code: str) -> tuple[list[object], type]:
    """The expressions whose loaders' origins are traced from now on, and rule ``code``."""
    from distlint.analysis import loops

    traced: list[object] = []
    real = loops.Loops.loader_origins
    monkeypatch.setattr(
        loops.Loops,
        "loader_origins",
        lambda self, expr, *a: traced.append(expr) or real(self, expr, *a),
    )
    return traced, next(r for r in all_rules() if r.CODE == code)


def test_loaders_are_not_traced_where_no_metric_is_computed(monkeypatch):
    """DL401 reports a metric sink of an evaluation loop over a sharded loader: a module whose
    nodes have no sink's form (a training loop over a prepared loader, `==` and `mean` only in
    names and strings) is left before any loader's origin is traced; a sink reached through an
    alias (`from numpy import mean as avg`) or written as `sum(xs) / len(xs)` still reports."""
    traced, rule = _traced_loaders(monkeypatch, "DL401")
    head = (
        "from accelerate import Accelerator\n\n\ndef evaluate_model(model, loader):\n"
        "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
        "    losses = []\n    for batch in loader:\n        losses.append(model(**batch).loss.item())\n"
    )
    quiet = head + "    mean_name = 'x == y'\n    return losses\n"
    assert lint_source(quiet, "t.py", rules=[rule()]).findings == ()
    assert traced == []
    for sink in ("avg(losses)", "sum(losses) / len(losses)"):
        code = "from numpy import mean as avg\n" + head + f"    return {sink}\n"
        result = lint_source(code, "t.py", rules=[rule()])
        assert [f.code for f in result.findings] == ["DL401"], sink
    assert traced


def test_loaders_are_not_traced_for_duplicates_where_nothing_gathers(monkeypatch):
    """DL402 reports `gather` calls in an evaluation loop over a prepared loader: a module
    with no call of `gather`'s form (the word only in a name, `gather_for_metrics` called) is
    left before any loader's origin is traced; `accelerate.utils.gather` imported under
    another name still reports."""
    traced, rule = _traced_loaders(monkeypatch, "DL402")
    body = (
        "def evaluate_model(model, loader):\n"
        "    accelerator = Accelerator()\n    model, loader = accelerator.prepare(model, loader)\n"
        "    correct = total = 0\n    for x, y in loader:\n"
        "        pred, y = {gather}((model(x).argmax(-1), y))\n"
        "        correct += (pred == y).sum().item()\n        total += y.numel()\n"
        "    return correct / total\n"
    )
    quiet = "from accelerate import Accelerator\n\n\n" + body.format(
        gather="accelerator.gather_for_metrics"
    )
    assert lint_source(quiet, "t.py", rules=[rule()]).findings == ()
    assert traced == []
    loud = (
        "from accelerate import Accelerator\nfrom accelerate.utils import gather as collect\n\n\n"
        + body.format(gather="collect")
    )
    assert [f.code for f in lint_source(loud, "t.py", rules=[rule()]).findings] == ["DL402"]
    assert traced


@pytest.mark.parametrize(
    "built",
    [
        pytest.param("model = torch.nn.Linear(2, 2)", id="layer"),
        pytest.param(
            "class Net(torch.nn.Module):\n    pass\n\n\nmodel = Net()", id="model-class-of-the-file"
        ),
        pytest.param(
            "from torch.utils.data import random_split\n\ntrain, val = random_split(range(10), [8, 2])",
            id="random-split",
        ),
    ],
)
def test_helpers_are_not_asked_whether_they_seed_where_nothing_is_built(built, monkeypatch):
    """DL102 reports seeding that comes after a model was built (or a dataset split at random):
    a module that builds nothing (a pipeline calling helpers of the project) is left before
    any call's helper is asked whether it seeds; one that builds a model by any of the order's
    ways still reports the helper's seeding after it."""
    from distlint.analysis import seeding
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    asked: list[object] = []
    real = seeding.SeedingFacts._external_kind
    monkeypatch.setattr(
        seeding.SeedingFacts,
        "_external_kind",
        lambda self, call: asked.append(call) or real(self, call),
    )
    rule = next(r for r in all_rules() if r.CODE == "DL102")
    quiet = (
        "import torch\nfrom seeds import fix_seed\n\n\n"
        "def run(pipe):\n    fix_seed(0)\n    return pipe()\n"
    )
    project = Project.from_sources(ROOT, {**_SEEDS, "pipe.py": quiet})
    result = lint_source(quiet, os.path.join(ROOT, "pipe.py"), rules=[rule()], project=project)
    assert result.findings == ()
    assert asked == []
    loud = "import torch\nfrom seeds import fix_seed\n\n" + built + "\nfix_seed(0)\n"
    project = Project.from_sources(ROOT, {**_SEEDS, "loud.py": loud})
    result = lint_source(loud, os.path.join(ROOT, "loud.py"), rules=[rule()], project=project)
    assert [f.code for f in result.findings] == ["DL102"]
    assert asked


@pytest.mark.parametrize(
    ("init", "reported"),
    [
        pytest.param("from pkg.impl import fix_seed\n", True, id="re-export"),
        pytest.param(
            "try:\n    from pkg.impl import fix_seed\nexcept ImportError:\n    fix_seed = None\n",
            True,
            id="guarded-re-export",
        ),
        pytest.param(
            "from pkg.impl import fix_seed\n\n\ndef fix_seed(seed):\n    return seed\n",
            False,
            id="redefined-after-the-import",
        ),
        pytest.param(
            "try:\n    from pkg.impl import fix_seed\nexcept ImportError:\n"
            "    from pkg.other import fix_seed\n",
            False,
            id="two-sources",
        ),
    ],
)
def test_a_package_that_only_re_exports_a_helper_is_not_parsed_for_it(init, reported):
    """A helper reached through a package `__init__` that only forwards it (`from pkg.impl
    import fix_seed`, also under `try`) is summarised where it is defined, without parsing the
    `__init__` (which still counts as reached); an `__init__` that redefines the name, or
    takes it from one of two modules, is parsed and decides as before."""
    from distlint.registry import all_rules
    from distlint.runner import lint_source

    sources = {
        **_SEEDS,
        "pkg/__init__.py": init,
        "pkg/other.py": "def fix_seed(seed):\n    return seed\n",
        "train.py": "import torch\nfrom pkg import fix_seed\n\nmodel = torch.nn.Linear(2, 2)\nfix_seed(0)\n",
    }
    project = Project.from_sources(ROOT, sources)
    rule = next(r for r in all_rules() if r.CODE == "DL102")
    train = os.path.join(ROOT, "train.py")
    with project.tracking(train):
        result = lint_source(sources["train.py"], train, rules=[rule()], project=project)
    assert [f.code for f in result.findings] == (["DL102"] if reported else [])
    init_path = os.path.join(ROOT, "pkg", "__init__.py")
    assert (init_path in project._modules) is not reported  # parsed only where it must be
    assert init_path in project.reached
