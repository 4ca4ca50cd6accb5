"""The training facts (distlint.analysis.facts): recognition by value, summaries across
modules (through a tiny in-memory project), and the precision idioms of issue #11 item 9."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from typing import Any

import libcst as cst
import pytest

from distlint.analysis import Index
from distlint.analysis.facts import Facts, How, Made, Mode, Seeds, facts_for
from distlint.config import Config
from distlint.rule import RuleContext
from distlint.rules.dataloader_not_sharded import DataloaderNotSharded
from distlint.rules.ignored_split_batches_keyword import IgnoredSplitBatchesKeyword
from distlint.rules.per_device_batch_as_global import PerDeviceBatchAsGlobal
from distlint.rules.seed_only_torch import SeedOnlyTorch
from distlint.rules.unscaled_learning_rate import UnscaledLearningRate
from distlint.runner import lint_source


def facts_of(code: str) -> Facts:
    code = textwrap.dedent(code)
    return facts_for(Index(cst.parse_module(code), code))


def codes(rule_cls, code: str) -> list[int]:
    result = lint_source(textwrap.dedent(code), "t.py", Config(), rules=[rule_cls()])
    return [f.range.line for f in result.findings]


# ------------------------------------------------------------------ a fake Project
@dataclass
class _Info:
    path: str
    text: str
    module: Any
    index: Index


class FakeProject:
    """Implements the part of distlint.analysis.project.Project that facts use (INTERFACE.md)."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.root = "/proj"
        self.sources = {os.path.join(self.root, p): textwrap.dedent(s) for p, s in sources.items()}
        self.memo: dict[Any, Any] = {}
        self.errors: list[Any] = []
        self._modules: dict[str, _Info] = {}
        self.asked: list[str] = []

    def _candidates(self, importer: str, module: str, level: int) -> list[str]:
        base = os.path.dirname(importer)
        for _ in range(max(level - 1, 0)):
            base = os.path.dirname(base)
        bases = [base] if level else [base, self.root]
        rel = module.replace(".", "/") if module else ""
        out = []
        for b in bases:
            out += [os.path.join(b, rel + ".py"), os.path.join(b, rel, "__init__.py")]
        return out

    def resolve_import(self, importer: str, module: str, level: int = 0) -> str | None:
        for path in self._candidates(importer, module, level):
            if path in self.sources:
                return path
        return None

    def resolve_from_import(self, importer, module, name, level=0):
        joined = f"{module}.{name}" if module else name
        return self.resolve_import(importer, joined, level)

    def module(self, path: str):
        self.asked.append(path)
        if path not in self._modules:
            text = self.sources[path]
            tree = cst.parse_module(text)
            self._modules[path] = _Info(path, text, tree, Index(tree, text))
        return self._modules[path]


def project_facts(sources: dict[str, str], entry: str = "train.py") -> tuple[Facts, FakeProject]:
    project = FakeProject(sources)
    path = os.path.join(project.root, entry)
    info = project.module(path)
    return facts_for(info.index, path, project), project


def run_rule(rule_cls, sources: dict[str, str], entry: str = "train.py") -> list[int]:
    facts, project = project_facts(sources, entry)
    ctx = RuleContext(facts.index, facts.path, facts.index.source, facts, project)
    ctx._rule = rule = rule_cls()
    rule.check(ctx)
    return [facts.index.module.code_for_node(r.node).strip() for r in ctx.reports]


# ------------------------------------------------------------------ mode
@pytest.mark.parametrize(
    "code, mode",
    [
        ("from accelerate import Accelerator\nacc = Accelerator()\n", Mode.ACCELERATE),
        ("import lightning as L\nfabric = L.Fabric()\n", Mode.FABRIC),
        ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", Mode.DDP),
        (
            "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(print, args=())\n",
            Mode.XLA_MULTIPROCESS,
        ),
        ("import torch_xla.runtime as xr\nxr.use_spmd()\n", Mode.XLA_SPMD),
        ("import torch\nx = torch.zeros(1)\n", Mode.NONE),
    ],
)
def test_mode(code, mode):
    assert facts_of(code).mode is mode


# ------------------------------------------------------------------ optimizers by what they are
def test_optimizers_recognised_by_value_not_name():
    facts = facts_of(
        """
        import torch
        from lion_pytorch import Lion

        class Sophia(torch.optim.Optimizer):
            pass

        class MySophia(Sophia):
            pass

        sched = torch.optim.AdamW(model.parameters(), lr=1e-3)
        a = MySophia(model.parameters(), lr=1e-4)
        b = Lion(model.parameters(), lr=3e-5, weight_decay=0.1)
        opt_cls = torch.optim.SGD if use_sgd else make_custom()
        c = opt_cls(model.parameters(), lr=0.1)
        d = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        e = torch.optim.lr_scheduler.StepLR(sched, step_size=1)
        """
    )
    found = {
        facts.index.module.code_for_node(o.call).split("(")[0]: o.how for o in facts.optimizers
    }
    assert found == {
        "torch.optim.AdamW": How.LIBRARY_CLASS,
        "MySophia": How.PROJECT_CLASS,
        "Lion": How.PARAMETERS_AND_LR,
        "opt_cls": How.PICKED,
    }


def test_library_factory_lr_is_read():
    facts = facts_of(
        "import timm.optim\nopt = timm.optim.create_optimizer_v2(model, 'adamw', lr=1e-3)\n"
    )
    (opt,) = facts.optimizers
    assert opt.how is How.FACTORY
    assert facts.index.module.code_for_node(opt.lr) == "1e-3"


# ------------------------------------------------------------------ the process count by value
def test_process_count_by_value_whatever_the_name():
    facts = facts_of(
        """
        import os
        import torch.distributed as dist
        from accelerate import Accelerator

        def batch():
            return dist.get_world_size() if dist.is_initialized() else 1

        def scale(acc):
            return acc.num_processes

        accelerator = Accelerator()
        sched = int(os.environ.get("WORLD_SIZE", 1))
        a = 0.1 * batch()
        b = 0.1 * sched
        c = 0.1 * scale(accelerator)
        world_size = 4
        d = 0.1 * world_size
        e = 0.1 * args.world_size
        """
    )
    values = {
        b.key: b.value for b in facts.index.module_scope.bindings.values() for b in b if b.op == "="
    }
    assert facts.reads_process_count(values["a"])
    assert facts.reads_process_count(values["b"])
    assert facts.reads_process_count(values["c"])
    # a constant named like the world size is a constant; `args.world_size` nothing sets is
    # judged by its name (the only evidence there is)
    assert not facts.reads_process_count(values["d"])
    assert facts.reads_process_count(values["e"])


def test_accelerator_kwargs_dict_literal_is_read():
    facts = facts_of(
        """
        from accelerate import Accelerator
        from accelerate.utils import DataLoaderConfiguration
        kwargs = {"dataloader_config": DataLoaderConfiguration(split_batches=True)}
        accelerator = Accelerator(**kwargs)
        """
    )
    assert facts.split_batches
    assert facts_of(
        "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration as D\n"
        "a = Accelerator(**dict(dataloader_config=D(split_batches=True)))\n"
    ).split_batches


def test_seeding_facts():
    facts = facts_of(
        "import torch, random\nimport torch_xla\ntorch.manual_seed(0)\ntorch_xla.manual_seed(0)\n"
        "random.shuffle(x)\n"
    )
    assert facts.seeding.by_kind[Seeds.XLA] and facts.seeding.by_kind[Seeds.TORCH]
    assert Seeds.PYTHON in facts.seeding.draws


# ------------------------------------------------------------------ across modules
HELPERS = """
import os
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import set_seed

def world():
    return int(os.environ["WORLD_SIZE"])

def make_accelerator(args):
    return Accelerator(gradient_accumulation_steps=args.accum)

def create_optimizer(args, model):
    return torch.optim.AdamW(model.parameters(), lr=args.lr)

def scaled_optimizer(model, base_lr):
    return torch.optim.AdamW(model.parameters(), lr=base_lr * dist.get_world_size())

def plain_optimizer(model, lr):
    return torch.optim.SGD(model.parameters(), lr=lr)

def seed_all(seed):
    set_seed(seed)

def shard(ds, rank, n):
    return ds.shard(num_shards=n, index=rank)
"""


def test_cross_module_summaries():
    facts, project = project_facts(
        {
            "utils/__init__.py": "from .helpers import *\nfrom .helpers import world, make_accelerator\n",
            "utils/helpers.py": HELPERS,
            "train.py": """
            from utils.helpers import create_optimizer, seed_all, shard, plain_optimizer
            from utils import world, make_accelerator
            import utils.helpers as h

            accelerator = make_accelerator(args)
            lr = 0.1 * world()
            opt = create_optimizer(args, model)
            opt2 = h.scaled_optimizer(model, 0.1)
            opt3 = plain_optimizer(model, lr)
            seed_all(0)
            ds = shard(raw, 0, 2)
            """,
        }
    )
    index = facts.index
    assert facts.mode is Mode.ACCELERATE
    values = {
        b.key: b.value for bs in index.module_scope.bindings.values() for b in bs if b.op == "="
    }
    assert facts.reads_process_count(values["lr"])
    by_text = {index.module.code_for_node(o.call).split("(")[0]: o for o in facts.optimizers}
    assert set(by_text) == {"create_optimizer", "h.scaled_optimizer", "plain_optimizer"}
    assert by_text["create_optimizer"].lr_key == "args.lr"
    assert by_text["h.scaled_optimizer"].lr_inside and by_text["h.scaled_optimizer"].lr_scaled
    assert index.module.code_for_node(by_text["plain_optimizer"].lr) == "lr"
    assert facts.seeding.full
    assert facts.data_sharded_by_rank(values["ds"])


def test_cross_module_rule_findings():
    sources = {
        "utils.py": HELPERS,
        "train.py": """
        from utils import create_optimizer, plain_optimizer, make_accelerator

        accelerator = make_accelerator(args)
        opt = create_optimizer(args, model)
        opt2 = plain_optimizer(model, 0.1)
        opt3 = plain_optimizer(model, 0.1 * accelerator.num_processes)
        """,
    }
    assert sorted(run_rule(UnscaledLearningRate, sources)) == ["0.1", "args"]
    scaled = dict(sources)
    scaled["train.py"] = (
        "from utils import create_optimizer, make_accelerator\naccelerator = make_accelerator(args)\n"
        "args.lr = args.lr * accelerator.num_processes\nopt = create_optimizer(args, model)\n"
    )
    assert run_rule(UnscaledLearningRate, scaled) == []


def test_import_cycles_terminate():
    facts, project = project_facts(
        {
            "a.py": "from b import g\n\ndef f():\n    return g()\n",
            "b.py": "from a import f\n\ndef g():\n    return f()\n",
            "train.py": "from a import f\nx = f()\n",
        }
    )
    value = facts.index.module_scope.bindings["x"][0].value
    assert not facts.reads_process_count(value)
    assert len(set(project.asked)) == 3


def test_seeding_helper_in_another_module_counts():
    sources = {
        "utils.py": HELPERS,
        "train.py": "import torch\nfrom utils import seed_all\nseed_all(0)\ntorch.manual_seed(0)\n"
        "import random\nrandom.random()\n",
    }
    assert run_rule(SeedOnlyTorch, sources) == []


def test_dataset_sharded_in_another_module_is_not_reported():
    sources = {
        "data.py": "def get_dataset(ds, world, rank):\n    return ds.shard(num_shards=world, index=rank)\n",
        "train.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from data import get_dataset
        dist.init_process_group("nccl")
        ds = get_dataset(raw, w, r)
        loader = DataLoader(ds, batch_size=8)
        for batch in loader:
            loss = model(batch)
            loss.backward()
        """,
    }
    assert run_rule(DataloaderNotSharded, sources) == []
    unsharded = dict(sources, **{"data.py": "def get_dataset(ds, world, rank):\n    return ds\n"})
    assert run_rule(DataloaderNotSharded, unsharded) == ["loader"]


def test_summary_makes():
    facts, _ = project_facts({"utils.py": HELPERS, "train.py": "import utils\n"}, "utils.py")
    assert Made.PROCESS_COUNT in facts.summary_of("world").makes
    assert Made.ACCELERATOR in facts.summary_of("make_accelerator").makes
    assert Made.OPTIMIZER in facts.summary_of("plain_optimizer").makes
    assert [lr.param for lr in facts.summary_of("plain_optimizer").lrs] == [("lr", 1, "")]
    assert facts.summary_of("seed_all").seeds == Seeds.ALL


# ------------------------------------------------------------------ #11 item 9 idioms
ACC = "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"


def test_xla_seeding_counts():
    base = (
        "import random\nimport numpy as np\nimport torch\nimport torch_xla\n"
        "import torch_xla.core.xla_model as xm\nrandom.seed(0)\nnp.random.seed(0)\ntorch.manual_seed(0)\n"
    )
    assert codes(SeedOnlyTorch, base) == []  # nothing draws from the XLA generator
    base += "drop = torch.nn.Dropout(0.1)\n"
    assert codes(SeedOnlyTorch, base) == [8]
    assert codes(SeedOnlyTorch, base + "torch_xla.manual_seed(0)\n") == []
    assert codes(SeedOnlyTorch, base + "xm.set_rng_state(0)\n") == []


def test_lr_from_effective_batch_inside_if_lr_is_none_is_scaled():
    code = ACC + (
        "if args.lr is None:\n"
        "    eff_batch_size = args.batch_size * args.accum_iter * accelerator.num_processes\n"
        "    args.lr = args.blr * eff_batch_size / 256\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)\n"
    )
    assert codes(UnscaledLearningRate, code) == []


def test_uncond_tokens_list_is_not_a_sample_count():
    code = ACC + (
        "from torch.utils.data import DataLoader\nbatch_size = 4\n"
        "loader = DataLoader(ds, batch_size=batch_size)\n"
        "uncond_tokens = [''] * batch_size\ntokens_seen = step * batch_size\n"
    )
    assert codes(PerDeviceBatchAsGlobal, code) == [8]


def test_accelerator_split_batches_through_dict_unpacking_is_read():
    assert codes(
        IgnoredSplitBatchesKeyword,
        "from accelerate import Accelerator\naccelerator = Accelerator(**{'split_batches': True})\n",
    ) == [2]
    code = (
        "from accelerate import Accelerator\nkwargs = {'split_batches': True, 'cpu': False}\n"
        "accelerator = Accelerator(**kwargs)\n"
    )
    assert codes(IgnoredSplitBatchesKeyword, code) == [2]


def test_bookkeeping_steps_per_epoch_is_not_global_batch_held_constant():
    code = ACC + (
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, batch_size=args.per_device)\n"
        "steps_per_epoch = len(ds) // (args.per_device * accelerator.num_processes * args.accum)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n"
    )
    assert codes(UnscaledLearningRate, code) == [7]


# ------------------------------------------------------------------ fooling a name-based rule
def test_names_do_not_fool_the_rules():
    # an optimizer in a variable named `sched`, the world size in one named `batch`
    code = ACC + (
        "batch = accelerator.num_processes\n"
        "sched = torch.optim.AdamW(model.parameters(), lr=1e-3 * batch)\n"
        "world_size = 8\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * world_size)\n"
    )
    assert codes(UnscaledLearningRate, code) == [7]


# ------------------------------------------------------------------ loaders from other modules
LOADERS = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

def plain(dataset, bs):
    return DataLoader(dataset, batch_size=bs, shuffle=True)

def sharded(dataset, bs):
    return DataLoader(dataset, batch_size=bs, sampler=DistributedSampler(dataset))

def pair(dataset):
    return DataLoader(dataset, sampler=DistributedSampler(dataset)), DataLoader(dataset)

def custom(dataset, sampler):
    return DataLoader(dataset, sampler=sampler)
"""


@pytest.mark.parametrize(
    "build, reported",
    [
        pytest.param("loader = data.plain(ds, 8)", True, id="plain"),
        pytest.param("loader = data.sharded(ds, 8)", False, id="distributed-sampler"),
        pytest.param("loader, _ = data.pair(ds)", False, id="tuple-first-sharded"),
        pytest.param("_, loader = data.pair(ds)", True, id="tuple-second-plain"),
        pytest.param("loader = data.custom(ds, my_sampler)", False, id="custom-sampler"),
        pytest.param(
            "loader = data.plain(ds.shard(num_shards=dist.get_world_size(), index=dist.get_rank()), 8)",
            False,
            id="given-data-split-by-rank",
        ),
    ],
)
def test_dl302_follows_loader_factories_of_other_modules(build, reported):
    entry = f"""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import data

def main(ds, my_sampler):
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(2, 2))
    {build}
    for x in loader:
        model(x).sum().backward()
"""
    found = run_rule(DataloaderNotSharded, {"data.py": LOADERS, "train.py": entry})
    assert found == (["loader"] if reported else [])


def test_method_of_an_imported_class_returning_the_world_size_is_a_process_count():
    sources = {
        "env.py": (
            "import torch.distributed as dist\n\n"
            "class DistEnv:\n    def size(self):\n        return dist.get_world_size()\n\n"
            "    def rank(self):\n        return dist.get_rank()\n"
        ),
        "train.py": (
            "import torch\nimport torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\nfrom env import DistEnv\n\n"
            "def main(model, base):\n    dist.init_process_group('nccl')\n    model = DDP(model)\n"
            "    env = DistEnv()\n"
            "    ok = torch.optim.SGD(model.parameters(), lr=base * env.size())\n"
            "    bad = torch.optim.SGD(model.parameters(), lr=base * env.rank())\n"
            "    loop = env.x()\n    env2 = loop.y()\n    loop = env2.z()\n"
        ),
    }
    assert run_rule(UnscaledLearningRate, sources) == ["base * env.rank()"]


def test_factory_choosing_a_class_by_name_with_lr_in_a_kwargs_dict_and_a_wrapper():
    """ConvNeXt's optim_factory: `opt_args = dict(lr=args.lr, ...)`, an if/elif chain of
    classes given `**opt_args`, and timm's `Lookahead(optimizer)` around the result: one LR,
    `args.lr`, read from the factory's `args`."""
    sources = {
        "optim_factory.py": (
            "from torch import optim\nfrom timm.optim.lookahead import Lookahead\n\n"
            "def create_optimizer(args, model):\n"
            "    opt_args = dict(lr=args.lr, weight_decay=args.weight_decay)\n"
            "    if args.opt == 'sgd':\n"
            "        optimizer = optim.SGD(model.parameters(), momentum=0.9, **opt_args)\n"
            "    elif args.opt == 'adamw':\n"
            "        optimizer = optim.AdamW(model.parameters(), **opt_args)\n"
            "    else:\n        optimizer = optim.Adam(model.parameters(), **opt_args)\n"
            "    if args.lookahead:\n        optimizer = Lookahead(optimizer)\n"
            "    return optimizer\n"
        ),
        "train.py": (
            "import torch\nimport torch.distributed as dist\n"
            "from optim_factory import create_optimizer\n\n"
            "def main(args, model):\n    dist.init_process_group('nccl')\n"
            "    model = torch.nn.parallel.DistributedDataParallel(model)\n"
            "    optimizer = create_optimizer(args, model.module)\n"
        ),
    }
    facts, _ = project_facts(sources, "train.py")
    assert [(o.lr_key, o.lr_inside) for o in facts.optimizers] == [("args.lr", False)]
    assert run_rule(UnscaledLearningRate, sources) == ["args"]
    scaled = dict(sources)
    scaled["train.py"] = sources["train.py"].replace(
        "    optimizer = create_optimizer",
        "    args.lr *= dist.get_world_size()\n    optimizer = create_optimizer",
    )
    assert run_rule(UnscaledLearningRate, scaled) == []


# ------------------------------------------------ training loops and accumulation by hand
def test_training_loops_are_the_innermost_loops_that_run_backward_through_helpers():
    facts = facts_of(
        """
        def step(model, batch):
            model(batch).backward()

        def fit(model, loader, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    step(model, batch)
                for batch in loader:
                    print(batch)
        """
    )
    loops = facts.loops.training_loops
    assert len(loops) == 1 and isinstance(loops[0], cst.For)
    assert facts.index.module.code_for_node(loops[0].target) == "batch"
    epoch = facts.loops.epoch_loop(loops[0])
    assert epoch is not None and facts.index.module.code_for_node(epoch.target) == "epoch"


def test_epoch_loop_of_a_helper_is_the_loop_around_its_call():
    facts = facts_of(
        """
        def one_epoch(model, loader):
            for x in loader:
                model(x).backward()

        def main(model, loader):
            for epoch in range(3):
                one_epoch(model, loader)
        """
    )
    (loop,) = facts.loops.training_loops
    epoch = facts.loops.epoch_loop(loop)
    assert epoch is not None and facts.index.module.code_for_node(epoch.target) == "epoch"


@pytest.mark.parametrize(
    "body,accumulates",
    [
        pytest.param(
            "with accelerator.accumulate(model):\n        loss.backward()", True, id="accumulate"
        ),
        pytest.param(
            "ctx = model.no_sync if i % 2 else nullcontext\n    loss.backward()",
            True,
            id="no_sync-picked",
        ),
        pytest.param(
            "if accelerator.sync_gradients:\n        opt.step()", True, id="sync_gradients"
        ),
        pytest.param(
            "do = (i + 1) % k == 0\n    if do:\n        opt.step()", True, id="modulo-through-name"
        ),
        pytest.param("if i % 100 == 0:\n        print(i)", False, id="modulo-for-logging"),
        pytest.param("print('%d' % i)\n    opt.step()", False, id="string-format"),
    ],
)
def test_accumulation_done_by_the_module(body, accumulates):
    facts = facts_of(f"for i, batch in enumerate(loader):\n    {body}\n")
    assert facts.accumulation.done_by_the_module is accumulates


# ------------------------------------------------------------------ loops across modules
EVAL_HELPER = "def evaluate(model, loader):\n    for batch in loader:\n        model(batch)\n"
PREPARED_CALLER = (
    "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
    "from evaluation import evaluate\n\naccelerator = Accelerator()\n"
    "model, loader = accelerator.prepare(model, DataLoader(data))\nevaluate(model, loader)\n"
)
PLAIN_CALLER = (
    "import evaluation\nfrom torch.utils.data import DataLoader\n\n"
    "evaluation.evaluate(model, loader=DataLoader(data))\n"
)


def _helper_loop_facts(sources: dict[str, str], linted: list[str]):
    """The facts of evaluation.py and its loop, with ``linted`` the files of the run."""
    from distlint.analysis.project import Project, forget_projects, lint_run

    forget_projects()
    project = Project.from_sources("/proj", sources)
    lint_run([f"/proj/{name}" for name in linted])
    info = project.module("/proj/evaluation.py")
    facts = facts_for(info.index, "/proj/evaluation.py", project)
    return facts, facts.index.loops[0]


def test_helper_loop_over_a_parameter_takes_the_origins_the_importers_pass():
    from distlint.analysis.project import forget_projects
    from distlint.analysis.records import Origin

    sources = {"evaluation.py": EVAL_HELPER, "train.py": PREPARED_CALLER, "other.py": PLAIN_CALLER}
    try:
        facts, loop = _helper_loop_facts(sources, ["train.py", "evaluation.py"])
        loops = facts.loops
        assert loops.loader_origins(loops.iterated(loop)) == [Origin.SHARDED]
        assert loops.is_sharded_loader(loops.iterated(loop))
        assert loop in facts.metrics.sharded_evaluation_loops
        assert facts.mode is Mode.NONE  # the helper sets nothing up: its callers decide
        assert [c.path for c in loops.callers_of_loader(loop)] == ["/proj/train.py"]
        assert [c.mode for c in loops.callers_of_loader(loop)] == [Mode.ACCELERATE]

        # a second caller passing a plain loader (by keyword, through the module): not sharded
        facts, loop = _helper_loop_facts(sources, ["train.py", "other.py", "evaluation.py"])
        origins = facts.loops.loader_origins(facts.loops.iterated(loop))
        assert sorted(o.value for o in origins) == ["sharded", "unsharded"]
        assert loop not in facts.metrics.sharded_evaluation_loops

        # linted alone, the helper's loop has no known loader
        facts, loop = _helper_loop_facts(sources, ["evaluation.py"])
        assert facts.loops.loader_origins(facts.loops.iterated(loop)) == []
        assert facts.loops.callers_of_loader(loop) == []
    finally:
        forget_projects()
