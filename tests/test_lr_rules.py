"""Targeted tests for the learning-rate family: DL201, DL202, DL203.

The snippets in each rule cover the headline cases; these pin down import forms, dataflow corner
cases, the framework decisions (DDP / torch_xla / Fabric / SPMD / tensor parallel), options and
the shape of the fixes. Each case is snapshotted (tests/snapshots/test_lr_rules/): the position,
code and message of every finding and the diff of every fix; `pytest --update-snapshots` writes
them.
"""

import textwrap

import pytest
from helpers import lint_snippet, undefined_names


def fixed_and_bound(linted):
    """The fixed text of a snippet whose every name is bound, which must be bound after the fix."""
    assert linted.fixed_source is not None, "no fix applied"
    assert undefined_names(linted.fixed_source) == []
    return linted.fixed_source


ACC = "from accelerate import Accelerator\naccelerator = Accelerator()\n"


# ------------------------------------------------------------------------------------- DL201
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


@pytest.mark.parametrize(
    "call",
    [
        pytest.param("torch.optim.lr_scheduler.StepLR(opt, step_size=1)", id="StepLR"),
        pytest.param("torch.optim.swa_utils.SWALR(opt, swa_lr=0.05)", id="SWALR"),
        pytest.param("torch.optim.Optimizer([], {})", id="Optimizer-base"),
        pytest.param(
            "transformers.Adafactor([], lr=1e-3, relative_step=False)", id="Adafactor-fixed-lr"
        ),
    ],
)
def test_dl201_not_an_optimizer(call, snapshot):
    code = f"""
    import torch
    import transformers
    from accelerate import Accelerator
    accelerator = Accelerator()
    opt = torch.optim.SGD([], lr=0.1 * accelerator.num_processes)
    x = {call}
    """
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


def test_dl201_args_reassigned_in_another_function(snapshot):
    code = """
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
    snapshot(lint_snippet("DL201", code))


@pytest.mark.parametrize(
    "scaling",
    [
        pytest.param("", id="unscaled"),
        pytest.param("    args.lr = args.lr * accelerator.num_processes\n", id="scaled"),
    ],
)
def test_dl201_timm_legacy_factory_reads_args_lr(scaling, snapshot):
    """timm's `create_optimizer(args, model)` takes its LR from `args.lr`: the finding and
    the fix are about that attribute, and scaling it before the call is enough."""
    code = (
        "from accelerate import Accelerator\nfrom timm.optim import create_optimizer\n\n"
        "def main(args, model):\n    accelerator = Accelerator()\n"
        + scaling
        + "    opt = create_optimizer(args, model)\n"
        "    model, opt = accelerator.prepare(model, opt)\n"
    )
    linted = snapshot(lint_snippet("DL201", code))
    assert len(linted.findings) == (0 if scaling else 1)


@pytest.mark.parametrize(
    "scaled,lr",
    [
        pytest.param("Config(lr=BASE * accelerator.num_processes)", "cfg.lr", id="dataclass"),
        pytest.param("{'lr': BASE * int(os.environ['WORLD_SIZE'])}", "cfg['lr']", id="dict-env"),
        pytest.param("dict(lr=BASE * PartialState().num_processes)", "cfg['lr']", id="dict-call"),
        pytest.param(
            "{'lr': BASE * int(os.getenv('WORLD_SIZE', '1'))}", "cfg['lr']", id="dict-getenv"
        ),
    ],
)
def test_dl201_config_objects_carry_the_scaling(scaled, lr, snapshot):
    code = f"""
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
    snapshot(lint_snippet("DL201", code))


@pytest.mark.parametrize(
    "held",
    [
        pytest.param("args.batch_size //= accelerator.num_processes", id="floordiv-in-place"),
        pytest.param(
            "per_device = args.global_batch // accelerator.num_processes\n"
            "loader = DataLoader(ds, batch_size=per_device)",
            id="per-device-loader",
        ),
        pytest.param("accum = max(1, 64 // (8 * accelerator.num_processes))", id="accumulation"),
        pytest.param(
            "loader = DataLoader(ds, batch_size=int(args.batch_size / ngpus_per_node))",
            id="ngpus-per-node",
        ),
    ],
)
def test_dl201_global_batch_held_constant(held, snapshot):
    head = """
    import torch
    from torch.utils.data import DataLoader
    from accelerate import Accelerator
    accelerator = Accelerator()
    args = object()
    ds = []
    ngpus_per_node = torch.cuda.device_count()
    """
    code = textwrap.dedent(head) + held + "\nopt = torch.optim.AdamW([], lr=3e-4)\n"
    snapshot(lint_snippet("DL201", code))


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
    "kwargs, reported",
    [
        pytest.param("kw = {'lr': 0.1}", True, id="dict-literal"),
        pytest.param("kw = dict(lr=0.1, weight_decay=0.0)", True, id="dict-call"),
        pytest.param(
            "kw = {'lr': 0.1}\nkw['lr'] *= accelerator.num_processes", False, id="scaled-later"
        ),
        pytest.param("kw = load_kwargs()", False, id="unknown"),
    ],
)
def test_dl201_unpacked_kwargs_dict_is_read_not_guessed(kwargs, reported, snapshot):
    code = (
        "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
        f"{kwargs}\nopt = torch.optim.SGD([], **kw)\n"
    )
    linted = snapshot(lint_snippet("DL201", code))
    assert bool(linted.findings) is reported


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


def test_dl201_mp_spawn_worker_with_world_size_parameter_is_scaled(snapshot):
    code = """
    import torch
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel

    def worker(rank, world_size, base_lr):
        model = DistributedDataParallel(torch.nn.Linear(2, 2))
        opt = torch.optim.SGD(model.parameters(), lr=base_lr * world_size)

    mp.spawn(worker, args=(4, 0.1), nprocs=4)
    """
    snapshot(lint_snippet("DL201", code))


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


def test_dl201_torch_xla_spmd(snapshot):
    code = """
    import torch
    import torch_xla.runtime as xr
    import torch_xla.distributed.parallel_loader as pl

    xr.use_spmd()
    opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    loader = pl.MpDeviceLoader([], "xla")
    """
    snapshot(lint_snippet("DL201", code))


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
    "devices,reported",
    [
        pytest.param("devices=1", False, id="devices=1"),
        pytest.param("devices=[0]", False, id="one-device-list"),
        pytest.param("devices=DEVICES", False, id="constant-1"),
        pytest.param("devices=1, num_nodes=2", True, id="two-nodes"),
        pytest.param("devices=n", True, id="parameter"),
        pytest.param("devices=DEVICES, strategy='ddp'", False, id="strategy-one-device"),
    ],
)
def test_dl201_fabric_with_one_device_is_one_process(devices, reported, snapshot):
    code = f"""
    import torch
    import lightning as L

    DEVICES = 1

    def main(n):
        fabric = L.Fabric({devices})
        opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
        model, opt = fabric.setup(torch.nn.Linear(2, 2), opt)
    """
    linted = snapshot(lint_snippet("DL201", code))
    assert bool(linted.findings) is reported


@pytest.mark.parametrize(
    "imports,call,reported",
    [
        pytest.param("import dist_utils", "dist_utils.get_world_size()", False, id="module"),
        pytest.param("from comm import world_size", "world_size()", False, id="from-import"),
        pytest.param("import dist_utils", "dist_utils.get_rank()", True, id="rank-is-not"),
    ],
)
def test_dl201_world_size_helper_from_a_module_not_in_the_project(
    imports, call, reported, snapshot
):
    """A helper of a module distlint cannot read: its name is the only evidence."""
    code = f"""
    import torch
    {imports}

    def main(model, base_lr):
        torch.distributed.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(model)
        lr = base_lr * {call}
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    """
    linted = snapshot(lint_snippet("DL201", code))
    assert bool(linted.findings) is reported


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
        pytest.param(
            """
            import torch
            from accelerate import Accelerator
            from accelerate.utils import DataLoaderConfiguration
            dl = DataLoaderConfiguration(split_batches=True)
            accelerator = Accelerator(dataloader_config=dl)
            opt = torch.optim.SGD([], lr=0.1)
            """,
            id="dataloader-config-silent",
        ),
    ],
)
def test_dl201_split_batches_forms(code, snapshot):
    snapshot(lint_snippet("DL201", code))


def test_dl201_onecycle_checks_max_lr_not_the_optimizer_lr(snapshot):
    code = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    opt = torch.optim.SGD([], lr=0.004)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1 * accelerator.num_processes, total_steps=10)
    """
    snapshot(lint_snippet("DL201", code))


# ------------------------------------------------------------------------------------- DL202
def test_dl202_prepared_loader_passed_to_a_helper(snapshot):
    code = """
    import torch
    from accelerate import Accelerator

    def make_scheduler(optimizer, loader, epochs):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))

    def main(model, optimizer, loader):
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        scheduler = make_scheduler(optimizer, loader, 3)
        scheduler = accelerator.prepare(scheduler)
    """
    linted = snapshot(lint_snippet("DL202", code))
    assert linted.findings[0].fix is None  # no accelerator visible inside the helper


def test_dl202_length_taken_before_the_loader_was_prepared(snapshot):
    code = """
    import torch
    from accelerate import Accelerator

    def main(model, optimizer, loader):
        accelerator = Accelerator()
        steps = 3 * len(loader)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        scheduler = accelerator.prepare(torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=steps))
    """
    snapshot(lint_snippet("DL202", code))


def test_dl202_diffusers_get_scheduler_positions(snapshot):
    code = """
    from diffusers.optimization import get_scheduler
    from accelerate import Accelerator

    def main(model, optimizer, loader, args):
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        total = args.epochs * len(loader)
        sched = get_scheduler("cosine", optimizer, None, 100, total)
        sched = accelerator.prepare(sched)
    """
    fixed_and_bound(snapshot(lint_snippet("DL202", code)))


def test_dl202_only_with_an_accelerator(snapshot):
    code = """
    import torch
    def main(optimizer, loader, fabric):
        loader = fabric.setup_dataloaders(loader)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(loader))
    """
    snapshot(lint_snippet("DL202", code))


# ------------------------------------------------------------------------------------- DL203
def test_dl203_literal_divisor_is_not_assumed_to_be_the_accumulation(snapshot):
    code = """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=4)
    def f(loss):
        accelerator.backward(loss / 4)
    """
    snapshot(lint_snippet("DL203", code))


def test_dl203_deepspeed_plugin_accumulation(snapshot):
    code = """
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin

    accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(gradient_accumulation_steps=8))

    def step(loss, grad_accum_steps):
        accelerator.backward(loss / grad_accum_steps)
    """
    snapshot(lint_snippet("DL203", code))


def test_dl203_fix_in_a_line_with_several_statements(snapshot):
    code = """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=2)
    def f(loss, accum_steps):
        loss /= accum_steps; accelerator.backward(loss)
    """
    fixed_and_bound(snapshot(lint_snippet("DL203", code)))


def test_dl203_division_in_another_function_is_not_followed(snapshot):
    # the loss passed to backward is a parameter: its producer is not this function's business
    code = """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=2)
    def f(loss):
        accelerator.backward(loss)
    def g(out, grad_accum):
        f(out / grad_accum)
    """
    snapshot(lint_snippet("DL203", code))
