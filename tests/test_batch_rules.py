"""Targeted tests for the batch-size / data-loading rules (DL301, DL302, DL303).

The lint cases are snapshotted (tests/snapshots/test_batch_rules/): the position, code and
message of every finding and the diff of every fix; `pytest --update-snapshots` writes them.
"""

import textwrap

import pytest
from helpers import lint_snippet

from distlint.model import Applicability
from distlint.rules.per_device_batch_as_global import GLOBAL, SAMPLES, message_role, name_role

# ------------------------------------------------------------------------------------------ DL301


@pytest.mark.parametrize(
    "name,role",
    [
        ("total_batch_size", GLOBAL),
        ("globalBatchSize", GLOBAL),
        ("effective_bs", GLOBAL),
        ("train_batch_size", None),
        ("total_batch_size_per_device", None),
        ("local_total_batch", None),
        ("samples_per_sec", SAMPLES),
        ("tokens_seen", SAMPLES),
        ("num_batches", None),
        ("total_batches", None),
    ],
)
def test_name_role(name, role):
    assert name_role(name) == role


@pytest.mark.parametrize(
    "before,after,multiplied,role",
    [
        ("Total train batch size (w. parallel, distributed & accumulation) = ", "", False, GLOBAL),
        ("effective batch size: ", "", False, GLOBAL),
        ("Instantaneous batch size per device = ", "", False, None),
        (
            "global step 3, batch size ",
            "",
            False,
            None,
        ),  # "global" describes the step, not this value
        ("Total batch size: ", " x ", False, None),  # the factor is printed next to it
        ("throughput: ", " samples/s", True, SAMPLES),
        ("throughput: ", " samples/s", False, None),  # a bare batch size is not a rate
        ("epoch 1: ", " ms per step", True, None),
    ],
)
def test_message_role(before, after, multiplied, role):
    assert message_role(before, after, multiplied) == role


def test_global_step_label_is_not_a_global_batch(snapshot):
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    bs = 8
    loader = DataLoader(range(8), batch_size=bs)
    print(f"global step {3}, batch size {bs}")
    """
    snapshot(lint_snippet("DL301", code))


@pytest.mark.parametrize(
    "use,fixed",
    [
        pytest.param(
            "print('total batch size %d' % bs)",
            "print('total batch size %d' % (bs * accelerator.num_processes))",
            id="percent-format",
        ),
        pytest.param(
            "print('total %d / global batch %d' % (1, bs))",
            "print('total %d / global batch %d' % (1, bs * accelerator.num_processes))",
            id="percent-tuple",
        ),
        pytest.param(
            "global_batch = 2 * bs",
            "global_batch = 2 * bs * accelerator.num_processes",
            id="product",
        ),
        pytest.param(
            "total_bs = int(bs) * 4",
            "total_bs = int(bs * accelerator.num_processes) * 4",
            id="inside-int",
        ),
        pytest.param(
            "print('Total batch size:', bs)",
            "print('Total batch size:', bs * accelerator.num_processes)",
            id="print-argument",
        ),
        pytest.param(
            "print('Global batch size: {n}'.format(n=bs))",
            "print('Global batch size: {n}'.format(n=bs * accelerator.num_processes))",
            id="str-format",
        ),
    ],
)
def test_fix_parenthesises_and_keeps_every_form(use, fixed, snapshot):
    head = (
        "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
        "accelerator = Accelerator()\nbs = 8\nloader = DataLoader(range(8), batch_size=bs)\n"
    )
    linted = snapshot(lint_snippet("DL301", head + use + "\n"))
    assert linted.fixed_source == head + fixed + "\n"


def test_divisor_use_is_not_a_global_batch(snapshot):
    # steps = samples / per-device batch: the per-device value is right there (per-process steps)
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    bs = 8
    loader = DataLoader(range(64), batch_size=bs)
    total_batch_steps = 64 // bs
    """
    snapshot(lint_snippet("DL301", code))


def test_per_device_derived_from_global_is_still_per_device(snapshot):
    # the division by the world size makes `per_device` per-device; calling it global is wrong
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    per_device = 64 // accelerator.num_processes
    loader = DataLoader(range(64), batch_size=per_device)
    print(f"global batch size {per_device}")
    """
    snapshot(lint_snippet("DL301", code))


def test_xla_multiprocessing_is_per_core_and_reported_without_fix(snapshot):
    code = """
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl
    import torch_xla.distributed.xla_multiprocessing as xmp
    from torch.utils.data import DataLoader

    def _mp_fn(index, flags):
        loader = pl.MpDeviceLoader(DataLoader(range(64), batch_size=flags.batch_size), xm.xla_device())
        xm.master_print(f"global batch size {flags.batch_size}")

    xmp.spawn(_mp_fn, args=(None,))
    """
    linted = snapshot(lint_snippet("DL301", code))
    assert [f.code for f in linted.findings] == ["DL301"]
    assert linted.findings[0].fix is None


def test_model_parallel_message_names_the_data_parallel_size(snapshot):
    code = """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.utils.data import DataLoader
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
    bs = 4
    loader = DataLoader(range(64), batch_size=bs)
    print(f"global batch size {bs}")
    dp_size = mesh["dp"].size()
    print(f"Global batch size {bs * dp_size}")
    """
    linted = snapshot(lint_snippet("DL301", code))
    assert len(linted.findings) == 1
    assert "data-parallel size" in linted.findings[0].message
    assert linted.findings[0].fix is None


DDP_EFFECTIVE_BATCH = """
import torch.distributed
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
model = DistributedDataParallel(object())
bs = 4
loader = DataLoader(range(64), batch_size=bs)
effective_batch_size = bs
"""


@pytest.mark.parametrize(
    "code,fixed",
    [
        pytest.param(
            DDP_EFFECTIVE_BATCH,
            "effective_batch_size = bs * torch.distributed.get_world_size()",
            id="binding-reused",
        ),
        pytest.param(
            DDP_EFFECTIVE_BATCH.replace("import torch.distributed\n", ""),
            None,
            id="no-binding-no-fix",
        ),
    ],
)
def test_ddp_without_torch_distributed_binding_has_no_fix_and_reuses_binding_when_present(
    code, fixed, snapshot
):
    linted = snapshot(lint_snippet("DL301", code))
    if fixed is None:
        assert linted.fixed_source is None and len(linted.findings) == 1
    else:
        assert fixed in linted.fixed_source


def test_unrelated_name_with_the_same_text_in_another_function_is_not_the_batch(snapshot):
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    def make(batch_size):
        return DataLoader(range(64), batch_size=batch_size)

    def report(batch_size):
        print(f"Total batch size: {batch_size}")

    accelerator = Accelerator()
    loader = make(8)
    report(8 * accelerator.num_processes)
    """
    snapshot(lint_snippet("DL301", code))


# ------------------------------------------------------------------------------------------ DL302


def test_prepare_inserted_before_the_epoch_loop_not_inside_it(snapshot):
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    def train():
        accelerator = Accelerator()
        loader = DataLoader(range(8))
        for epoch in range(3):
            while True:
                for batch in loader:
                    accelerator.backward(batch)
                break
    """
    linted = snapshot(lint_snippet("DL302", code))
    assert "    loader = accelerator.prepare(loader)\n    for epoch in range(3):" in (
        linted.fixed_source
    )


def test_loader_rebuilt_each_epoch_is_prepared_where_it_is_built(snapshot):
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    for epoch in range(3):
        loader = DataLoader(range(8 * (epoch + 1)))
        for batch in loader:
            accelerator.backward(batch)
    """
    linted = snapshot(lint_snippet("DL302", code))
    assert (
        "    loader = DataLoader(range(8 * (epoch + 1)))\n    loader = accelerator.prepare(loader)\n    for batch"
        in linted.fixed_source
    )


def test_discarded_prepare_result_is_still_unsharded(snapshot):
    code = """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    loader = DataLoader(range(8))
    accelerator.prepare(loader)
    for batch in loader:
        accelerator.backward(batch)
    """
    snapshot(lint_snippet("DL302", code))


def test_batches_drawn_with_next_are_judged_where_the_iterator_was_taken():
    # the loader as it was at `iter(...)`: before `prepare` rebinds the name, it is unprepared
    def lines(code: str) -> list[tuple[int, str]]:
        found = lint_snippet("DL302", code).findings
        return [(f.line, f.message.split(":")[0]) for f in found]

    head = (
        "import torch.distributed as dist\nfrom accelerate import Accelerator\n"
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "accelerator = Accelerator()\nloader = DataLoader(range(8), shuffle=True)\n"
    )
    train = "for step in range(9):\n    accelerator.backward(next(it))\n"
    before = head + "it = iter(loader)\nloader = accelerator.prepare(loader)\n" + train
    assert lines(before) == [(6, "`iter(loader)` is taken before `loader` is prepared")]
    after = head + "loader = accelerator.prepare(loader)\nit = iter(loader)\n" + train
    assert lines(after) == []
    # a peek at a prepared loader, and next() outside any training loop, are not reported
    fresh = train.replace("next(it)", "next(iter(loader))")  # a new iterator every step
    peek = head + "loader = accelerator.prepare(loader)\n" + fresh
    assert lines(peek) == []
    assert lines(head + "it = iter(loader)\nfirst = next(it)\n") == []
    # one loader, one finding: iterated by `for` and drawn with next() in the same function
    both = head + "for batch in loader:\n    accelerator.backward(batch)\n" + fresh
    assert [line for line, _ in lines(both)] == [6]
    # under DDP: a DistributedSampler shards it, a plain shuffling loader does not
    ddp = (
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "dist.init_process_group('gloo')\n"
    )
    loop = "it = iter(loader)\nwhile True:\n    next(it).sum().backward()\n"
    plain = ddp + "loader = DataLoader(range(8), shuffle=True)\n" + loop
    assert lines(plain) == [
        (5, "the training loop draws from `iter(loader)` without a `DistributedSampler`")
    ]
    sampled = ddp + "loader = DataLoader(range(8), sampler=DistributedSampler(range(8)))\n" + loop
    assert lines(sampled) == []


def test_an_iterable_dataset_of_the_script_decides_what_each_process_reads():
    # a sampler cannot split an IterableDataset: whether ranks see the same stream is up to its
    # own __iter__ (this one generates synthetic episodes on every rank); a map-style dataset
    # of the script is still judged by its loader
    def codes(base: str) -> list[str]:
        code = (
            "import torch.distributed as dist\nfrom torch.utils import data\n\n"
            f"class Episodes(data.{base}):\n    def __iter__(self):\n        yield 1\n\n"
            "class MoreEpisodes(Episodes):\n    pass\n\n"
            "dist.init_process_group('gloo')\nstream = MoreEpisodes()\n"
            "loader = data.DataLoader(stream, batch_size=4)\n"
            "for batch in loader:\n    batch.sum().backward()\n"
        )
        return [f.code for f in lint_snippet("DL302", code).findings]

    assert codes("IterableDataset") == []
    assert codes("Dataset") == ["DL302"]


def test_custom_sampler_or_unknown_loader_is_not_reported(snapshot):
    code = """
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from mylib import RankAwareSampler, get_loader
    dist.init_process_group("gloo")
    a = DataLoader(range(8), sampler=RankAwareSampler())
    b = get_loader()
    for x in a:
        x.backward()
    for x in b:
        x.backward()
    """
    snapshot(lint_snippet("DL302", code))


def test_ddp_finding_has_no_fix_and_names_the_sampler(snapshot):
    code = """
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    dist.init_process_group("gloo")
    loader = DataLoader(range(8), shuffle=True)
    for x in loader:
        x.backward()
    """
    (finding,) = snapshot(lint_snippet("DL302", code)).findings
    assert finding.fix is None and "DistributedSampler" in finding.message


# ------------------------------------------------------------------------------------------ DL303


def test_existing_import_from_top_level_accelerate_is_reused(snapshot):
    code = """
    from accelerate import Accelerator, DataLoaderConfiguration
    acc = Accelerator(split_batches=True)
    """
    linted = snapshot(lint_snippet("DL303", code))
    assert linted.fixed_source == textwrap.dedent(
        """
        from accelerate import Accelerator, DataLoaderConfiguration
        acc = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))
        """
    )


@pytest.mark.parametrize(
    "code,applicability",
    [
        pytest.param(
            """
            from accelerate import Accelerator
            Accelerator(split_batches=True)
            """,
            Applicability.UNSAFE,
            id="moved-unsafe",
        ),
        pytest.param(
            """
            from accelerate import Accelerator
            from accelerate.utils import DataLoaderConfiguration as C
            Accelerator(split_batches=True, dataloader_config=C(split_batches=True))
            """,
            Applicability.SAFE,
            id="dropped-safe",
        ),
    ],
)
def test_fix_safety_levels(code, applicability, snapshot):
    linted = snapshot(lint_snippet("DL303", code))
    assert linted.findings[0].fix.applicability is applicability


def test_non_literal_value_is_not_moved_into_a_distant_configuration(snapshot):
    code = """
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    config = DataLoaderConfiguration(even_batches=False)

    def build(args):
        return Accelerator(dataloader_config=config, split_batches=args.split)
    """
    linted = snapshot(lint_snippet("DL303", code))
    assert len(linted.findings) == 1 and linted.findings[0].fix is None
