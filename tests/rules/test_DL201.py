"""DL201 unscaled-learning-rate (rules/unscaled_learning_rate.py): its snippets, fixtures/DL201/
and its own cases.

The rule's snippets cover the headline cases; these pin down import forms, dataflow corner cases,
the framework decisions (DDP / torch_xla / Fabric / SPMD / tensor parallel), options and the shape
of the fixes. The reported cases are snapshotted in tests/rules/snapshots/test_DL201/ (the
position, code and message of every finding and the diff of every fix; `pytest
--update-snapshots` writes them); the cases that must stay silent are valid snippets (``VALID``).
"""

import textwrap

import pytest
from helpers import fixed_and_bound, lint_snippet
from rule_tests import FixtureTests, SnippetTests

ACC = "from accelerate import Accelerator\naccelerator = Accelerator()\n"


def not_an_optimizer(call):
    return f"""
    import torch
    import transformers
    from accelerate import Accelerator
    accelerator = Accelerator()
    opt = torch.optim.SGD([], lr=0.1 * accelerator.num_processes)
    x = {call}
    """


def timm_legacy_factory(scaling):
    """timm's `create_optimizer(args, model)` takes its LR from `args.lr`: the finding and
    the fix are about that attribute, and scaling it before the call is enough."""
    return (
        "from accelerate import Accelerator\nfrom timm.optim import create_optimizer\n\n"
        "def main(args, model):\n    accelerator = Accelerator()\n"
        + scaling
        + "    opt = create_optimizer(args, model)\n"
        "    model, opt = accelerator.prepare(model, opt)\n"
    )


def config_object(scaled, lr):
    return f"""
    import os
    import torch
    from dataclasses import dataclass
    from accelerate import Accelerator, PartialState
    @dataclass
    class Config:
        lr: float = 1e-3
    BASE = 1e-3
    accelerator = Accelerator()
    cfg = {scaled}
    opt = torch.optim.AdamW([], lr={lr})
    """


def global_batch_held(held):
    head = """
    import torch
    from torch.utils.data import DataLoader
    from accelerate import Accelerator
    accelerator = Accelerator()
    args = object()
    ds = []
    ngpus_per_node = torch.cuda.device_count()
    """
    return textwrap.dedent(head) + held + "\nopt = torch.optim.AdamW([], lr=3e-4)\n"


def unpacked_kwargs(kwargs):
    return (
        "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
        f"{kwargs}\nopt = torch.optim.SGD([], **kw)\n"
    )


def fabric_devices(devices):
    return f"""
    import torch
    import lightning as L

    DEVICES = 1

    def main(n):
        fabric = L.Fabric({devices})
        opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
        model, opt = fabric.setup(torch.nn.Linear(2, 2), opt)
    """


def world_size_helper(imports, call):
    """A helper of a module distlint cannot read: its name is the only evidence."""
    return f"""
    import torch
    {imports}

    def main(model, base_lr):
        torch.distributed.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(model)
        lr = base_lr * {call}
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    """


ARGS_REASSIGNED = """
    import torch
    from accelerate import Accelerator

    def scale(args, accelerator):
        args.lr = args.lr * accelerator.num_processes

    def build(model, args):
        return torch.optim.Adam(model.parameters(), lr=args.lr)

    def main(args, model):
        accelerator = Accelerator()
        scale(args, accelerator)
        opt = build(model, args)
    """
MP_SPAWN_WORKER = """
    import torch
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel

    def worker(rank, world_size, base_lr):
        model = DistributedDataParallel(torch.nn.Linear(2, 2))
        opt = torch.optim.SGD(model.parameters(), lr=base_lr * world_size)

    mp.spawn(worker, args=(4, 0.1), nprocs=4)
    """
TORCH_XLA_SPMD = """
    import torch
    import torch_xla.runtime as xr
    import torch_xla.distributed.parallel_loader as pl

    xr.use_spmd()
    opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    loader = pl.MpDeviceLoader([], "xla")
    """
ONECYCLE_MAX_LR_SCALED = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    opt = torch.optim.SGD([], lr=0.004)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1 * accelerator.num_processes, total_steps=10)
    """
SPLIT_BATCHES_IN_CONFIG = """
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    dl = DataLoaderConfiguration(split_batches=True)
    accelerator = Accelerator(dataloader_config=dl)
    opt = torch.optim.SGD([], lr=0.1)
    """


class TestDL201(SnippetTests, FixtureTests):
    CODE = "DL201"
    # scaled learning rates, what is not an optimizer, one process: silent
    VALID = {
        "not-an-optimizer-StepLR": not_an_optimizer(
            "torch.optim.lr_scheduler.StepLR(opt, step_size=1)"
        ),
        "not-an-optimizer-SWALR": not_an_optimizer("torch.optim.swa_utils.SWALR(opt, swa_lr=0.05)"),
        "not-an-optimizer-Optimizer-base": not_an_optimizer("torch.optim.Optimizer([], {})"),
        "not-an-optimizer-Adafactor-fixed-lr": not_an_optimizer(
            "transformers.Adafactor([], lr=1e-3, relative_step=False)"
        ),
        "args-reassigned-in-another-function": ARGS_REASSIGNED,
        "timm-legacy-factory-reads-args-lr-scaled": timm_legacy_factory(
            "    args.lr = args.lr * accelerator.num_processes\n"
        ),
        "config-object-dataclass": config_object(
            "Config(lr=BASE * accelerator.num_processes)", "cfg.lr"
        ),
        "config-object-dict-env": config_object(
            "{'lr': BASE * int(os.environ['WORLD_SIZE'])}", "cfg['lr']"
        ),
        "config-object-dict-call": config_object(
            "dict(lr=BASE * PartialState().num_processes)", "cfg['lr']"
        ),
        "config-object-dict-getenv": config_object(
            "{'lr': BASE * int(os.getenv('WORLD_SIZE', '1'))}", "cfg['lr']"
        ),
        "global-batch-held-floordiv-in-place": global_batch_held(
            "args.batch_size //= accelerator.num_processes"
        ),
        "global-batch-held-per-device-loader": global_batch_held(
            "per_device = args.global_batch // accelerator.num_processes\n"
            "loader = DataLoader(ds, batch_size=per_device)"
        ),
        "global-batch-held-accumulation": global_batch_held(
            "accum = max(1, 64 // (8 * accelerator.num_processes))"
        ),
        "global-batch-held-ngpus-per-node": global_batch_held(
            "loader = DataLoader(ds, batch_size=int(args.batch_size / ngpus_per_node))"
        ),
        "unpacked-kwargs-scaled-later": unpacked_kwargs(
            "kw = {'lr': 0.1}\nkw['lr'] *= accelerator.num_processes"
        ),
        "unpacked-kwargs-unknown": unpacked_kwargs("kw = load_kwargs()"),
        "mp-spawn-worker-with-world-size-parameter-is-scaled": MP_SPAWN_WORKER,
        "torch-xla-spmd": TORCH_XLA_SPMD,
        "fabric-devices=1": fabric_devices("devices=1"),
        "fabric-one-device-list": fabric_devices("devices=[0]"),
        "fabric-constant-1": fabric_devices("devices=DEVICES"),
        "fabric-strategy-one-device": fabric_devices("devices=DEVICES, strategy='ddp'"),
        "world-size-helper-module": world_size_helper(
            "import dist_utils", "dist_utils.get_world_size()"
        ),
        "world-size-helper-from-import": world_size_helper(
            "from comm import world_size", "world_size()"
        ),
        "split-batches-dataloader-config": SPLIT_BATCHES_IN_CONFIG,
        "onecycle-checks-max-lr-not-the-optimizer-lr": ONECYCLE_MAX_LR_SCALED,
    }


@pytest.mark.parametrize(
    "imports,ctor",
    [
        pytest.param("import torch", "torch.optim.AdamW", id="torch.optim.AdamW"),
        pytest.param("import torch.optim as optim", "optim.SGD", id="import-as-optim"),
        pytest.param("from torch import optim", "optim.RMSprop", id="from-torch-import-optim"),
        pytest.param("from torch.optim import AdamW as W", "W", id="AdamW-as-W"),
        pytest.param("from torch.optim.adamw import AdamW", "AdamW", id="torch.optim.adamw"),
        pytest.param("import transformers", "transformers.AdamW", id="transformers.AdamW"),
        pytest.param(
            "from transformers.optimization import AdamW", "AdamW", id="transformers.optimization"
        ),
        pytest.param(
            "from bitsandbytes.optim import PagedAdamW8bit", "PagedAdamW8bit", id="bnb-paged"
        ),
        pytest.param("import bitsandbytes as bnb", "bnb.optim.Lion8bit", id="bnb.optim.Lion8bit"),
    ],
)
def test_dl201_optimizer_import_forms(imports, ctor, snapshot):
    code = f"{imports}\n{ACC}opt = {ctor}([], lr=1e-3)\n"
    snapshot(lint_snippet("DL201", code))


def test_dl201_scaling_after_the_optimizer_does_not_count(snapshot):
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    lr = 0.1
    opt = torch.optim.SGD([], lr=lr)
    lr *= accelerator.num_processes
    """
    snapshot(lint_snippet("DL201", code))


@pytest.mark.parametrize("scaling", [pytest.param("", id="unscaled")])
def test_dl201_timm_legacy_factory_reads_args_lr(scaling, snapshot):
    """timm's `create_optimizer(args, model)`: scaled, it is a valid snippet (``VALID``)."""
    linted = snapshot(lint_snippet("DL201", timm_legacy_factory(scaling)))
    assert len(linted.findings) == 1


def test_dl201_division_of_something_else_does_not_hold_the_batch(snapshot):
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    workers = 16 // accelerator.num_processes
    opt = torch.optim.AdamW([], lr=3e-4)
    """
    snapshot(lint_snippet("DL201", code))


def test_dl201_optimizer_class_chosen_by_flag(snapshot):
    code = """
    import torch
    import bitsandbytes as bnb
    from accelerate import Accelerator

    def main(args, params):
        accelerator = Accelerator()
        if args.use_8bit_adam:
            optimizer_cls = bnb.optim.AdamW8bit
        else:
            optimizer_cls = torch.optim.AdamW
        optimizer = optimizer_cls(params, lr=args.learning_rate)
    """
    snapshot(lint_snippet("DL201", code))


def test_dl201_fix_inserts_for_a_local_name_and_sqrt_option(snapshot):
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    def main(model):
        lr = 1e-3
        return torch.optim.Adam(model.parameters(), lr=lr)
    """
    linted = snapshot(lint_snippet("DL201", code, {"lr-scaling": "sqrt"}))
    fixed_and_bound(linted)


def test_dl201_fix_multiplies_in_place_for_a_module_constant_used_in_a_function(snapshot):
    # `LR *= ...` inside the function would make LR local and unbound
    code = """
    import torch
    LR = 1e-3
    from accelerate import Accelerator
    accelerator = Accelerator()
    def main(model):
        return torch.optim.Adam(model.parameters(), lr=LR)
    """
    fixed_and_bound(snapshot(lint_snippet("DL201", code)))


def test_dl201_fix_multiplies_in_place_inside_a_loop(snapshot):
    # an inserted `lr *= n` would compound on every iteration
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    lr = 0.1
    for model in []:
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    """
    assert "lr *=" not in fixed_and_bound(snapshot(lint_snippet("DL201", code)))


def test_dl201_fix_scales_before_an_earlier_read_of_the_same_value():
    # k-diffusion: the parameter groups copy `lr` before the optimizer is built; `lr *= n`
    # just before the optimizer would leave every group at the old LR
    code = """
    import torch
    from accelerate import Accelerator
    def main(args, model):
        accelerator = Accelerator()
        lr = args.lr
        groups = [{"params": model.parameters(), "lr": lr}]
        return torch.optim.AdamW(groups, lr=lr)
    """
    fixed = fixed_and_bound(lint_snippet("DL201", code))
    assert fixed.index("lr *= accelerator.num_processes") < fixed.index("groups = ")
    # ... and when the optimizer is built in a branch below that read
    branched = code.replace(
        "        return torch.optim.AdamW(groups, lr=lr)",
        "        if args.sgd:\n            return torch.optim.SGD(groups, lr=lr)\n"
        "        return torch.optim.AdamW(groups, lr=lr)",
    )
    fixed = fixed_and_bound(lint_snippet("DL201", branched))
    assert fixed.count("lr *= accelerator.num_processes") == 1
    assert fixed.index("lr *= accelerator.num_processes") < fixed.index("groups = ")


def test_dl201_fix_ignores_an_earlier_read_the_optimizer_is_not_given():
    # diffusers' imagic: the LR is logged in a main-process branch before the optimizer
    code = """
    import torch
    from accelerate import Accelerator
    def main(args, model):
        accelerator = Accelerator()
        lr = args.lr
        if accelerator.is_main_process:
            accelerator.init_trackers("run", config={"lr": lr})
        return torch.optim.AdamW(model.parameters(), lr=lr)
    """
    fixed = fixed_and_bound(lint_snippet("DL201", code))
    assert fixed.index("lr *= accelerator.num_processes") > fixed.index("init_trackers")


def test_dl201_no_fix_when_an_earlier_read_is_in_another_block():
    code = """
    import torch
    from accelerate import Accelerator
    def main(args, model, flag):
        accelerator = Accelerator()
        lr = args.lr
        if flag:
            groups = [{"params": model.parameters(), "lr": lr}]
        else:
            groups = model.parameters()
        return torch.optim.AdamW(groups, lr=lr)
    """
    linted = lint_snippet("DL201", code)
    assert [f.code for f in linted.findings] == ["DL201"]
    assert linted.fixed_source is None or "num_processes" not in linted.fixed_source


def test_dl201_fix_parenthesises_low_precedence_values(snapshot):
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    opt = torch.optim.SGD([], lr=0.1 if True else 0.2)
    """
    fixed_and_bound(snapshot(lint_snippet("DL201", code)))


def test_dl201_no_fix_without_a_visible_accelerator(snapshot):
    code = """
    import torch
    from accelerate import Accelerator

    def build(p, lr):
        return torch.optim.SGD(p, lr=lr)

    def main():
        a = Accelerator()
    """
    linted = snapshot(lint_snippet("DL201", code))
    assert linted.findings[0].fix is None


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param("kw = {'lr': 0.1}", id="dict-literal"),
        pytest.param("kw = dict(lr=0.1, weight_decay=0.0)", id="dict-call"),
    ],
)
def test_dl201_unpacked_kwargs_dict_is_read_not_guessed(kwargs, snapshot):
    """Reported when the dict is read; scaled later or unknown, it is a valid snippet."""
    linted = snapshot(lint_snippet("DL201", unpacked_kwargs(kwargs)))
    assert linted.findings


def test_dl201_ddp_script_fix_uses_the_existing_dist_binding(snapshot):
    code = """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def main(model, args):
        dist.init_process_group("nccl")
        model = DDP(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    """
    fixed_and_bound(snapshot(lint_snippet("DL201", code)))


def test_dl201_torch_xla_multiprocessing(snapshot):
    code = """
    import torch
    import torch_xla.distributed.xla_multiprocessing as xmp
    import torch_xla.runtime as xr

    def _mp_fn(index, flags):
        opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=flags.lr)

    xmp.spawn(_mp_fn, args=(None,))
    """
    fixed_and_bound(snapshot(lint_snippet("DL201", code)))


def test_dl201_fabric_reported_and_scaled_by_world_size(snapshot):
    code = """
    import torch
    import lightning as L

    fabric = L.Fabric(devices=4)
    opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    ok = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3 * fabric.world_size)
    """
    linted = snapshot(lint_snippet("DL201", code))
    assert "fabric.world_size" in linted.findings[0].message
    fixed_and_bound(linted)


@pytest.mark.parametrize(
    "devices",
    [
        pytest.param("devices=1, num_nodes=2", id="two-nodes"),
        pytest.param("devices=n", id="parameter"),
    ],
)
def test_dl201_fabric_with_one_device_is_one_process(devices, snapshot):
    """More than one process, or maybe: reported; one device is a valid snippet."""
    linted = snapshot(lint_snippet("DL201", fabric_devices(devices)))
    assert linted.findings


@pytest.mark.parametrize(
    "imports,call",
    [pytest.param("import dist_utils", "dist_utils.get_rank()", id="rank-is-not")],
)
def test_dl201_world_size_helper_from_a_module_not_in_the_project(imports, call, snapshot):
    """A helper of a module distlint cannot read: its name is the only evidence (the world-size
    names are valid snippets)."""
    linted = snapshot(lint_snippet("DL201", world_size_helper(imports, call)))
    assert linted.findings


@pytest.mark.parametrize(
    "share, reported",
    [
        pytest.param("GLOBAL_BATCH // NUM_DEVICES", "constant", id="named-constant-count"),
        pytest.param("GLOBAL_BATCH // fabric.world_size", None, id="process-count"),
        pytest.param("GLOBAL_BATCH // 2", "plain", id="literal-is-not-a-count"),
        pytest.param("GLOBAL_BATCH // MICRO_BATCH", "plain", id="accumulation-not-a-share"),
    ],
)
def test_dl201_global_batch_divided_by_a_constant_count(share, reported, snapshot):
    """TinyLlama: the global batch is held by a constant, so only on that many processes; the
    message says so and no LR fix is offered (on 8 processes it would be wrong)."""
    code = f"""
    import torch
    import lightning as L

    NUM_DEVICES = 8
    GLOBAL_BATCH = 512
    MICRO_BATCH = 4

    def main(devices=8):
        fabric = L.Fabric(devices=devices)
        batch_size = {share}
        accumulation = batch_size // MICRO_BATCH
        return torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    """
    linted = snapshot(lint_snippet("DL201", code))
    if reported is None:
        assert not linted.findings
        return
    (finding,) = linted.findings
    constant = "divides by the constant `NUM_DEVICES` (8), not by `fabric.world_size`"
    assert (constant in finding.message) is (reported == "constant")
    assert bool(finding.fix) is (reported == "plain")


def test_dl201_tensor_parallel_message_and_no_fix(snapshot):
    code = """
    import torch
    from accelerate import Accelerator, ParallelismConfig

    accelerator = Accelerator(parallelism_config=ParallelismConfig(tp_size=2))
    opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    """
    linted = snapshot(lint_snippet("DL201", code))
    assert "data-parallel size" in linted.findings[0].message
    assert linted.findings[0].fix is None


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(
            """
            import torch
            from accelerate import Accelerator
            accelerator = Accelerator(split_batches=True)
            opt = torch.optim.SGD([], lr=0.1)
            """,
            id="legacy-keyword-reported",
        ),
    ],
)
def test_dl201_split_batches_forms(code, snapshot):
    snapshot(lint_snippet("DL201", code))
