"""Targeted tests for the learning-rate family: DL201, DL202, DL203.

The snippets in each rule cover the headline cases; these pin down import forms, dataflow corner
cases, the framework decisions (DDP / torch_xla / Fabric / SPMD / tensor parallel), options and
the shape of the fixes.
"""

import textwrap

import pytest
from helpers import undefined_names

from distlint.config import Config
from distlint.rules.loss_divided_for_accumulation import LossDividedForAccumulation
from distlint.rules.scheduler_length_per_process import SchedulerLengthPerProcess
from distlint.rules.unscaled_learning_rate import UnscaledLearningRate
from distlint.runner import lint_source


def lint(rule, code, fix=False, **options):
    source = textwrap.dedent(code)
    result = lint_source(
        source, "t.py", Config(), fix=fix, unsafe_fixes=True, rules=[rule(options)]
    )
    assert not result.errors, result.errors
    return result


def lines(result, code):
    return [f.line for f in result.findings if f.code == code]


def fixed(rule, code, **options):
    result = lint(rule, code, fix=True, **options)
    assert result.fixed_source is not None, "no fix applied"
    assert undefined_names(result.fixed_source) == []
    return result.fixed_source


ACC = "from accelerate import Accelerator\naccelerator = Accelerator()\n"


# ------------------------------------------------------------------------------------- DL201
@pytest.mark.parametrize(
    "imports,ctor",
    [
        ("import torch", "torch.optim.AdamW"),
        ("import torch.optim as optim", "optim.SGD"),
        ("from torch import optim", "optim.RMSprop"),
        ("from torch.optim import AdamW as W", "W"),
        ("from torch.optim.adamw import AdamW", "AdamW"),
        ("import transformers", "transformers.AdamW"),
        ("from transformers.optimization import AdamW", "AdamW"),
        ("from bitsandbytes.optim import PagedAdamW8bit", "PagedAdamW8bit"),
        ("import bitsandbytes as bnb", "bnb.optim.Lion8bit"),
    ],
)
def test_dl201_optimizer_import_forms(imports, ctor):
    code = f"{imports}\n{ACC}opt = {ctor}([], lr=1e-3)\n"
    assert lines(lint(UnscaledLearningRate, code), "DL201") == [4]


@pytest.mark.parametrize(
    "call",
    [
        "torch.optim.lr_scheduler.StepLR(opt, step_size=1)",
        "torch.optim.swa_utils.SWALR(opt, swa_lr=0.05)",
        "torch.optim.Optimizer([], {})",
        "transformers.Adafactor([], lr=1e-3, relative_step=False)",
    ],
)
def test_dl201_not_an_optimizer(call):
    code = f"import torch\nimport transformers\n{ACC}opt = torch.optim.SGD([], lr=0.1 * accelerator.num_processes)\nx = {call}\n"
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


def test_dl201_scaling_after_the_optimizer_does_not_count():
    code = f"import torch\n{ACC}lr = 0.1\nopt = torch.optim.SGD([], lr=lr)\nlr *= accelerator.num_processes\n"
    assert lines(lint(UnscaledLearningRate, code), "DL201") == [5]


def test_dl201_args_reassigned_in_another_function():
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
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


@pytest.mark.parametrize(
    "scaled",
    [
        "cfg = Config(lr=BASE * accelerator.num_processes)\n",
        "cfg = {'lr': BASE * int(os.environ['WORLD_SIZE'])}\n",
        "cfg = dict(lr=BASE * PartialState().num_processes)\n",
        "cfg = {'lr': BASE * int(os.getenv('WORLD_SIZE', '1'))}\n",
    ],
)
def test_dl201_config_objects_carry_the_scaling(scaled):
    subscript = "cfg['lr']" if "{" in scaled else "cfg.lr" if "Config(" in scaled else "cfg['lr']"
    code = (
        "import os\nimport torch\nfrom dataclasses import dataclass\nfrom accelerate import Accelerator, PartialState\n"
        "@dataclass\nclass Config:\n    lr: float = 1e-3\nBASE = 1e-3\naccelerator = Accelerator()\n"
        + scaled
        + f"opt = torch.optim.AdamW([], lr={subscript})\n"
    )
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


@pytest.mark.parametrize(
    "held",
    [
        "args.batch_size //= accelerator.num_processes\n",
        "per_device = args.global_batch // accelerator.num_processes\nloader = DataLoader(ds, batch_size=per_device)\n",
        "accum = max(1, 64 // (8 * accelerator.num_processes))\n",
        "loader = DataLoader(ds, batch_size=int(args.batch_size / ngpus_per_node))\n",
    ],
)
def test_dl201_global_batch_held_constant(held):
    code = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        + ACC
        + "args = object()\nds = []\nngpus_per_node = torch.cuda.device_count()\n"
        + held
        + "opt = torch.optim.AdamW([], lr=3e-4)\n"
    )
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


def test_dl201_division_of_something_else_does_not_hold_the_batch():
    code = (
        "import torch\n"
        + ACC
        + "workers = 16 // accelerator.num_processes\nopt = torch.optim.AdamW([], lr=3e-4)\n"
    )
    assert lines(lint(UnscaledLearningRate, code), "DL201") == [5]


def test_dl201_optimizer_class_chosen_by_flag():
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
    assert lines(lint(UnscaledLearningRate, code), "DL201") == [12]


def test_dl201_fix_inserts_for_a_local_name_and_sqrt_option():
    code = (
        "import torch\n"
        + ACC
        + "def main(model):\n    lr = 1e-3\n    return torch.optim.Adam(model.parameters(), lr=lr)\n"
    )
    out = fixed(UnscaledLearningRate, code, **{"lr-scaling": "sqrt"})
    assert (
        "    lr *= accelerator.num_processes ** 0.5\n    return torch.optim.Adam(model.parameters(), lr=lr)\n"
        in out
    )


def test_dl201_fix_multiplies_in_place_for_a_module_constant_used_in_a_function():
    # `LR *= ...` inside the function would make LR local and unbound
    code = (
        "import torch\nLR = 1e-3\n"
        + ACC
        + "def main(model):\n    return torch.optim.Adam(model.parameters(), lr=LR)\n"
    )
    assert "lr=LR * accelerator.num_processes)" in fixed(UnscaledLearningRate, code)


def test_dl201_fix_multiplies_in_place_inside_a_loop():
    # an inserted `lr *= n` would compound on every iteration
    code = (
        "import torch\n"
        + ACC
        + "lr = 0.1\nfor model in []:\n    opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
    )
    out = fixed(UnscaledLearningRate, code)
    assert "lr=lr * accelerator.num_processes)" in out and "lr *=" not in out


def test_dl201_fix_parenthesises_low_precedence_values():
    code = "import torch\n" + ACC + "opt = torch.optim.SGD([], lr=0.1 if True else 0.2)\n"
    assert "lr=(0.1 if True else 0.2) * accelerator.num_processes)" in fixed(
        UnscaledLearningRate, code
    )


def test_dl201_no_fix_without_a_visible_accelerator():
    code = "import torch\nfrom accelerate import Accelerator\n\ndef build(p, lr):\n    return torch.optim.SGD(p, lr=lr)\n\ndef main():\n    a = Accelerator()\n"
    result = lint(UnscaledLearningRate, code)
    assert lines(result, "DL201") == [5] and result.findings[0].fix is None


def test_dl201_unpacked_kwargs_are_not_guessed():
    code = "import torch\n" + ACC + "kw = {'lr': 0.1}\nopt = torch.optim.SGD([], **kw)\n"
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


def test_dl201_ddp_script_fix_uses_the_existing_dist_binding():
    code = """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def main(model, args):
        dist.init_process_group("nccl")
        model = DDP(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    """
    assert lines(lint(UnscaledLearningRate, code), "DL201") == [9]
    assert "lr=args.lr * dist.get_world_size())" in fixed(UnscaledLearningRate, code)


def test_dl201_mp_spawn_worker_with_world_size_parameter_is_scaled():
    code = """
    import torch
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel

    def worker(rank, world_size, base_lr):
        model = DistributedDataParallel(torch.nn.Linear(2, 2))
        opt = torch.optim.SGD(model.parameters(), lr=base_lr * world_size)

    mp.spawn(worker, args=(4, 0.1), nprocs=4)
    """
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


def test_dl201_torch_xla_multiprocessing_and_spmd():
    mp_code = """
    import torch
    import torch_xla.distributed.xla_multiprocessing as xmp
    import torch_xla.runtime as xr

    def _mp_fn(index, flags):
        opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=flags.lr)

    xmp.spawn(_mp_fn, args=(None,))
    """
    assert lines(lint(UnscaledLearningRate, mp_code), "DL201") == [7]
    assert "lr=flags.lr * xr.world_size())" in fixed(UnscaledLearningRate, mp_code)
    spmd_code = """
    import torch
    import torch_xla.runtime as xr
    import torch_xla.distributed.parallel_loader as pl

    xr.use_spmd()
    opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    loader = pl.MpDeviceLoader([], "xla")
    """
    assert lines(lint(UnscaledLearningRate, spmd_code), "DL201") == []


def test_dl201_fabric_reported_and_scaled_by_world_size():
    code = """
    import torch
    import lightning as L

    fabric = L.Fabric(devices=4)
    opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    ok = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3 * fabric.world_size)
    """
    result = lint(UnscaledLearningRate, code)
    assert lines(result, "DL201") == [6]
    assert "fabric.world_size" in result.findings[0].message
    assert "lr=1e-3 * fabric.world_size)\nok =" in fixed(UnscaledLearningRate, code)


def test_dl201_tensor_parallel_message_and_no_fix():
    code = """
    import torch
    from accelerate import Accelerator, ParallelismConfig

    accelerator = Accelerator(parallelism_config=ParallelismConfig(tp_size=2))
    opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    """
    result = lint(UnscaledLearningRate, code)
    assert lines(result, "DL201") == [6]
    assert "data-parallel size" in result.findings[0].message and result.findings[0].fix is None


def test_dl201_split_batches_forms():
    legacy = "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator(split_batches=True)\nopt = torch.optim.SGD([], lr=0.1)\n"
    assert lines(lint(UnscaledLearningRate, legacy), "DL201") == [4]
    config = (
        "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n"
        "dl = DataLoaderConfiguration(split_batches=True)\naccelerator = Accelerator(dataloader_config=dl)\n"
        "opt = torch.optim.SGD([], lr=0.1)\n"
    )
    assert lines(lint(UnscaledLearningRate, config), "DL201") == []


def test_dl201_onecycle_checks_max_lr_not_the_optimizer_lr():
    code = (
        "import torch\n"
        + ACC
        + (
            "opt = torch.optim.SGD([], lr=0.004)\n"
            "sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1 * accelerator.num_processes, total_steps=10)\n"
        )
    )
    assert lines(lint(UnscaledLearningRate, code), "DL201") == []


# ------------------------------------------------------------------------------------- DL202
def test_dl202_prepared_loader_passed_to_a_helper():
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
    result = lint(SchedulerLengthPerProcess, code)
    assert lines(result, "DL202") == [6]
    assert result.findings[0].fix is None  # no accelerator visible inside the helper


def test_dl202_length_taken_before_the_loader_was_prepared():
    code = """
    import torch
    from accelerate import Accelerator

    def main(model, optimizer, loader):
        accelerator = Accelerator()
        steps = 3 * len(loader)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        scheduler = accelerator.prepare(torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=steps))
    """
    assert lines(lint(SchedulerLengthPerProcess, code), "DL202") == []


def test_dl202_diffusers_get_scheduler_positions():
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
    out = fixed(SchedulerLengthPerProcess, code)
    assert 'get_scheduler("cosine", optimizer, None, 100, total * accelerator.num_processes)' in out


def test_dl202_only_with_an_accelerator():
    code = """
    import torch
    def main(optimizer, loader, fabric):
        loader = fabric.setup_dataloaders(loader)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(loader))
    """
    assert lines(lint(SchedulerLengthPerProcess, code), "DL202") == []


# ------------------------------------------------------------------------------------- DL203
def test_dl203_literal_divisor_is_not_assumed_to_be_the_accumulation():
    code = "from accelerate import Accelerator\naccelerator = Accelerator(gradient_accumulation_steps=4)\ndef f(loss):\n    accelerator.backward(loss / 4)\n"
    assert lines(lint(LossDividedForAccumulation, code), "DL203") == []


def test_dl203_deepspeed_plugin_accumulation():
    code = """
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin

    accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(gradient_accumulation_steps=8))

    def step(loss, grad_accum_steps):
        accelerator.backward(loss / grad_accum_steps)
    """
    assert lines(lint(LossDividedForAccumulation, code), "DL203") == [8]


def test_dl203_fix_in_a_line_with_several_statements():
    code = (
        "from accelerate import Accelerator\naccelerator = Accelerator(gradient_accumulation_steps=2)\n"
        "def f(loss, accum_steps):\n    loss /= accum_steps; accelerator.backward(loss)\n"
    )
    assert fixed(LossDividedForAccumulation, code).endswith(
        "def f(loss, accum_steps):\n    accelerator.backward(loss)\n"
    )


def test_dl203_division_in_another_function_is_not_followed():
    # the loss passed to backward is a parameter: its producer is not this function's business
    code = (
        "from accelerate import Accelerator\naccelerator = Accelerator(gradient_accumulation_steps=2)\n"
        "def f(loss):\n    accelerator.backward(loss)\n"
        "def g(out, grad_accum):\n    f(out / grad_accum)\n"
    )
    assert lines(lint(LossDividedForAccumulation, code), "DL203") == []
