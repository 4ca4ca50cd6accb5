"""Issue #29 items 2 and 3: roles recognised by use, and the batch followed through helpers.
Each fact is asked directly on small modules; the whole shapes (entry + modules + config) are
fixture projects in fixtures/projects/ (tests/test_projects.py)."""

from __future__ import annotations

import pytest
from test_facts import facts_of, project_facts

from distlint.analysis.facts import How, Made, Mode
from distlint.analysis.records import BatchUse


def _use(code: str, name: str) -> BatchUse:
    facts = facts_of(code)
    return facts.summary_of(name).batch  # type: ignore[union-attr]


def test_a_loader_builder_names_the_parameter_that_becomes_the_batch_size():
    use = _use(
        """
        from torch.utils.data import DataLoader

        def create_dataloader(path, batch_size, rank=-1):
            bs = batch_size
            return DataLoader(path, batch_size=bs)
        """,
        "create_dataloader",
    )
    assert use.loader_params == (("batch_size", 1),)
    assert not use.divides


@pytest.mark.parametrize(
    "divisor, divides",
    [
        pytest.param("dist.get_world_size()", True, id="world-size"),
        pytest.param("accumulation", False, id="accumulation-steps"),
    ],
)
def test_a_loader_builder_that_divides_the_batch_it_is_given(divisor, divides):
    use = _use(
        f"""
        import torch.distributed as dist
        from torch.utils.data import DataLoader

        def build(ds, total_batch_size, accumulation=4):
            batch_size = total_batch_size // {divisor}
            return DataLoader(ds, batch_size=batch_size)
        """,
        "build",
    )
    assert use.divides is divides
    assert use.loader_params == ()  # the share is not the value given


@pytest.mark.parametrize(
    "body, sliced",
    [
        pytest.param("yield batch[rank::world_size]", True, id="strided-by-rank"),
        pytest.param("yield batch.chunk(world_size)[rank]", True, id="chunk-by-rank"),
        pytest.param("yield batch[: max_len]", False, id="truncated"),
        pytest.param("yield batch[::2]", False, id="every-other"),
    ],
)
def test_an_iterator_that_keeps_each_ranks_slice_of_every_batch(body, sliced):
    use = _use(
        f"""
        def shard(loader, rank, world_size, max_len=8):
            for batch in loader:
                {body}
        """,
        "shard",
    )
    assert use.slices_items_of == ((("loader", 0),) if sliced else ())


def test_a_slice_helper_and_an_iterator_through_it():
    facts = facts_of(
        """
        def take(batch, rank, world_size):
            n = len(batch) // world_size
            return batch[rank * n : (rank + 1) * n]

        def iterate(loader, rank, world_size):
            for b in loader:
                yield take(b, rank, world_size)
        """
    )
    assert facts.summary_of("take").batch.slices == (("batch", 0),)
    assert facts.summary_of("iterate").batch.slices_items_of == (("loader", 0),)


def test_an_argument_helper_that_sets_a_share_on_what_it_returns():
    use = _use(
        """
        import argparse

        def parse_args():
            args = argparse.ArgumentParser().parse_args()
            args.batch_size = args.global_batch_size // (args.devices * args.num_nodes)
            args.steps = args.max_tokens // args.block_size
            return args
        """,
        "parse_args",
    )
    assert ("batch_size", False, (".devices", ".num_nodes")) in use.shares
    # a share of something the caller never gives its launcher is kept, the caller decides
    assert all(attr in ("batch_size", "steps") for attr, _c, _d in use.shares)


OPTIMIZER_BY_USE = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main(cfg):
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(2, 2))
    optimizer = cfg.optimizer.build(model.parameters())
    {uses}
"""


@pytest.mark.parametrize(
    "uses, is_optimizer",
    [
        pytest.param("optimizer.step()\n    optimizer.zero_grad()", True, id="stepped-and-zeroed"),
        pytest.param(
            "torch.optim.lr_scheduler.StepLR(optimizer, 10)\n    optimizer.step()",
            True,
            id="scheduled",
        ),
        pytest.param("optimizer.step()", False, id="stepped-only-ema-like"),
        pytest.param("optimizer.zero_grad()", False, id="never-stepped"),
    ],
)
def test_an_unresolved_call_given_parameters_is_an_optimizer_by_use(uses, is_optimizer):
    facts = facts_of(OPTIMIZER_BY_USE.format(uses=uses))
    found = [o for o in facts.optimizers if o.how is How.BY_USE]
    assert bool(found) is is_optimizer


def test_an_object_used_as_an_accelerator_only_when_nothing_resolves_it():
    unresolved = """
    import torch

    def main(cfg):
        accelerator = cfg.accelerator.build()
        model = accelerator.prepare(torch.nn.Linear(2, 2))
        accelerator.backward(model(torch.ones(2)).sum())
    """
    assert facts_of(unresolved).mode is Mode.ACCELERATE
    own_class = unresolved.replace("cfg.accelerator.build()", "Engine()").replace(
        "import torch", "import torch\n\n    class Engine:\n        pass"
    )
    assert facts_of(own_class).mode is Mode.NONE


def test_no_sync_without_an_argument_is_a_ddp_model():
    wrapped = """
    import torch

    def main(launcher):
        model = launcher.wrap(torch.nn.Linear(2, 2))
        with model.no_sync():
            model(torch.ones(2)).sum().backward()
    """
    assert facts_of(wrapped).mode is Mode.DDP
    # a parameter is described by its callers; Accelerate's `no_sync(model)` takes the model
    for code in (
        "def step(model, x):\n    with model.no_sync():\n        model(x).backward()\n",
        "def step(acc, model, x):\n    with acc.no_sync(model):\n        model(x).backward()\n",
    ):
        assert facts_of(code).mode is Mode.NONE


def test_a_process_group_started_two_helper_calls_deep_in_another_module():
    facts, _ = project_facts(
        {
            "dist_utils.py": """
                import torch.distributed as dist

                def _backend(name):
                    dist.init_process_group(name)

                def setup():
                    _backend("nccl")
            """,
            "train.py": """
                from dist_utils import setup

                setup()
            """,
        }
    )
    assert facts.mode is Mode.DDP
    assert Made.PROCESS_GROUP in facts.summaries._external_makes(facts.index.calls[0])


WRAPPED = """
import os
import torch
{imports}

def main(cfg):
    model = {wrap}
    optimizer = torch.optim.SGD(model.module.parameters(), lr=0.1)
    {evidence}
"""


@pytest.mark.parametrize(
    "imports, wrap, evidence, mode",
    [
        pytest.param(
            "import torch.distributed as dist",
            "cfg.build_model()",
            "dist.barrier()",
            Mode.DDP,
            id="unresolved-and-torch-distributed",
        ),
        pytest.param(
            "",
            "cfg.build_model()",
            'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
            Mode.DDP,
            id="unresolved-and-launcher-env",
        ),
        pytest.param(
            "",
            "cfg.build_model()",
            'torch.cuda.set_device(int(os.getenv("LOCAL_RANK", "0")))',
            Mode.DDP,
            id="unresolved-and-getenv",
        ),
        pytest.param("", "cfg.build_model()", "pass", Mode.NONE, id="unresolved-alone"),
        pytest.param(
            "import torch.distributed as dist",
            "cfg.build_model()",
            "print(dist.is_initialized())",
            Mode.NONE,
            id="unresolved-and-only-asks-whether-distributed",
        ),
        pytest.param(
            "",
            "cfg.build_model()",
            'torch.cuda.set_device(int(os.environ["CUDA_DEVICE"]))',
            Mode.NONE,
            id="unresolved-and-other-env",
        ),
        pytest.param(
            "import torch.distributed as dist",
            "torch.nn.DataParallel(cfg.build_model())",
            "dist.is_available()",
            Mode.NONE,
            id="resolved-data-parallel",
        ),
    ],
)
def test_model_module_means_ddp_only_where_the_run_is_distributed(imports, wrap, evidence, mode):
    """`model.module` is where both DDP and DataParallel keep the model: on a model nothing
    resolves, the rest of the script says which (DataParallel is one process)."""
    code = WRAPPED.format(imports=imports, wrap=wrap, evidence=evidence)
    assert facts_of(code).mode is mode


@pytest.mark.parametrize(
    "hparams, share",
    [
        pytest.param(
            "DEVICES = 8\nGLOBAL_BATCH = 512\nbatch_size = GLOBAL_BATCH // DEVICES\n",
            ("batch_size", "GLOBAL_BATCH // DEVICES", "DEVICES", 8),
            id="share-by-a-constant-count",
        ),
        pytest.param(
            "DEVICES = 1\nGLOBAL_BATCH = 512\nbatch_size = GLOBAL_BATCH // DEVICES\n",
            None,
            id="one-device",
        ),
        pytest.param(
            "GLOBAL_BATCH = 512\nMICRO_BATCH = 8\naccum_steps = GLOBAL_BATCH // MICRO_BATCH\n",
            None,
            id="accumulation-count",
        ),
        pytest.param("GLOBAL_BATCH = 512\nbatch_size = GLOBAL_BATCH // 4\n", None, id="literal"),
    ],
)
def test_a_global_batch_shared_by_a_constant_in_a_hyperparameter_module(hparams, share):
    facts, _ = project_facts(
        {
            "hparams.py": hparams,
            "train.py": "from hparams import batch_size\n",
        }
    )
    found = facts.processes.constant_share
    assert (tuple(found) if found is not None else None) == share


@pytest.mark.parametrize(
    "reads, given, lr, key",
    [
        pytest.param("cfg.lr", "Cfg(lr=args.lr)", "args.lr", "args.lr", id="config-keyword"),
        pytest.param(
            "cfg.optim.lr", "Cfg(optim=Cfg(lr=args.base))", "args.base", "args.base", id="nested"
        ),
        pytest.param("cfg.lr", "dict(lr=args.lr)", "args.lr", "args.lr", id="dict-call"),
        pytest.param("cfg.lr", "Cfg(lr=1e-3)", "1e-3", None, id="a-number"),
        pytest.param("cfg.lr", "cfg", "cfg", "cfg.lr", id="a-name-read-as-before"),
    ],
)
def test_a_factory_reading_a_config_objects_field_names_what_the_keyword_is_given(
    reads, given, lr, key
):
    facts, _ = project_facts(
        {
            "optim.py": f"""
                import torch

                def create_optimizer(model, cfg):
                    return torch.optim.AdamW(model.parameters(), lr={reads})
            """,
            "train.py": f"""
                import torch
                from optim import create_optimizer

                def main(args, model, Cfg, cfg):
                    return create_optimizer(model, {given})
            """,
        }
    )
    (opt,) = facts.optimizers
    assert opt.lr_key == key
    assert facts.index.module.code_for_node(opt.lr) == lr


DEEP_GROUP = {
    "pkg/__init__.py": "",
    "pkg/distributed.py": """
        import os
        from torch import distributed as dist

        def get_rank():
            return dist.get_rank()

        def initialize():
            {start}
    """,
    "pkg/context.py": """
        import pkg.distributed as dist

        class ParallelContext:
            def __init__(self, tp):
                self.tp = tp
                if not dist.is_initialized():
                    dist.initialize()
                self.rank = dist.get_rank()
    """,
    "pkg/engine.py": """
        from pkg.context import ParallelContext

        class Engine:
            def __init__(self, cfg):
                self.context = ParallelContext(cfg.tp)
    """,
    "train.py": """
        from pkg.engine import Engine

        def main(cfg):
            engine = Engine(cfg)
    """,
}


@pytest.mark.parametrize(
    "start, mode",
    [
        pytest.param(
            'dist.init_process_group("nccl", world_size=int(os.environ["WORLD_SIZE"]))',
            Mode.DDP,
            id="started-three-modules-deep",
        ),
        pytest.param(
            'dist.init_process_group("nccl", world_size=1, rank=0)', Mode.NONE, id="one-process"
        ),
        pytest.param("return dist.get_rank()", Mode.NONE, id="only-reads-the-rank"),
    ],
)
def test_a_process_group_started_through_constructors_three_modules_deep(start, mode):
    sources = dict(DEEP_GROUP)
    sources["pkg/distributed.py"] = sources["pkg/distributed.py"].replace("{start}", start)
    facts, _ = project_facts(sources)
    assert facts.mode is mode


def test_a_process_group_of_one_process_started_in_the_script_is_not_data_parallel():
    code = "import torch.distributed as dist\ndist.init_process_group('gloo', world_size={})\n"
    assert facts_of(code.format("1")).mode is Mode.NONE
    assert facts_of(code.format("2")).mode is Mode.DDP
    assert facts_of("WORLD = 1\n" + code.format("WORLD")).mode is Mode.NONE


def test_a_chain_of_constructors_is_summarised_once_per_link(monkeypatch):
    """Each class of a 40-module chain is asked once whether it starts the process group:
    the cost grows with the chain, not with its square."""
    from distlint.analysis.processes import Processes

    n = 40
    sources = {
        f"m{k}.py": f"from m{k + 1} import C{k + 1}\n\nclass C{k}:\n"
        f"    def __init__(self):\n        self.inner = C{k + 1}()\n"
        for k in range(n)
    }
    sources[f"m{n}.py"] = (
        f"import torch.distributed as dist\n\nclass C{n}:\n"
        "    def __init__(self):\n        dist.init_process_group('nccl')\n"
    )
    sources["train.py"] = "from m0 import C0\n\nC0()\n"
    asked: list[object] = []
    original = Processes.starts_process_group

    def counting(self, fn):
        asked.append(fn)
        return original(self, fn)

    monkeypatch.setattr(Processes, "starts_process_group", counting)
    facts, project = project_facts(sources)
    assert facts.mode is Mode.DDP
    assert len(asked) == len({id(fn) for fn in asked}) == n + 1


def test_a_project_instantiate_is_recognised_by_what_it_does():
    facts = facts_of(
        """
        import importlib

        def instantiate(node, *args):
            module, _, name = node["_component_"].rpartition(".")
            return getattr(importlib.import_module(module), name)(*args)

        def lookup(node):
            return node["_component_"]
        """
    )
    module = facts.index.module_scope.bindings
    instantiate = module["instantiate"][0].node
    lookup = module["lookup"][0].node
    assert facts.optimization.instantiates_component(instantiate)
    assert not facts.optimization.instantiates_component(lookup)


@pytest.mark.parametrize(
    "setup, model_parallel",
    [
        pytest.param("ParallelismConfig(tp_size=args.tp)", False, id="tp-default-1"),
        pytest.param("ParallelismConfig(tp_size=2)", True, id="tp-2"),
        pytest.param("ParallelismConfig(dp_shard_size=8)", False, id="fsdp-only"),
        pytest.param("ParallelismConfig(cp_size=args.tp * 2)", True, id="cp-not-1"),
    ],
)
def test_tensor_parallel_wording_only_when_the_default_size_is_not_1(setup, model_parallel):
    facts = facts_of(
        f"""
        import argparse
        from accelerate import Accelerator, ParallelismConfig

        parser = argparse.ArgumentParser()
        parser.add_argument("--tp", type=int, default=1)
        args = parser.parse_args()
        accelerator = Accelerator(parallelism_config={setup})
        """
    )
    assert facts.model_parallel is model_parallel


@pytest.mark.parametrize("default, model_parallel", [(1, False), (2, True)])
def test_a_tensor_parallel_path_guarded_by_its_size(default, model_parallel):
    facts = facts_of(
        f"""
        TP = {default}

        def build(model, mesh):
            if TP > 1:
                from torch.distributed.tensor.parallel import parallelize_module

                parallelize_module(model, mesh, {{}})
        """
    )
    assert facts.model_parallel is model_parallel


@pytest.mark.parametrize("default, model_parallel", [(1, False), (4, True)])
def test_an_optional_sequence_parallel_path_of_a_dataclass_argument(default, model_parallel):
    """open-instruct's shape: `sequence_parallel_size: int = field(default=1)` parsed into
    `args`, and the ParallelismConfig built only under `if args.sequence_parallel_size > 1 and ...`."""
    facts = facts_of(
        f"""
        from dataclasses import dataclass, field
        from accelerate import Accelerator, ParallelismConfig

        @dataclass
        class Args:
            sequence_parallel_size: int = field(default={default})

        def main(args: Args, world_size):
            parallelism_config = None
            if args.sequence_parallel_size > 1 and not args.cache_only:
                parallelism_config = ParallelismConfig(
                    sp_size=args.sequence_parallel_size,
                    dp_shard_size=world_size // args.sequence_parallel_size,
                )
            return Accelerator(parallelism_config=parallelism_config)
        """
    )
    assert facts.model_parallel is model_parallel
