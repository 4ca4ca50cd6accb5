"""DL301 per-device-batch-as-global (rules/per_device_batch_as_global.py):
its snippets, fixtures/DL301/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL301/; the cases that must stay
silent are valid snippets (``VALID``).
The roles of names and messages (what says 'global batch') are tested here too.
"""

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

from distlint.rules.per_device_batch_as_global import GLOBAL, SAMPLES, message_role, name_role


class TestDL301(SnippetTests, FixtureTests):
    CODE = "DL301"
    # a per-device batch that is not used as the global one: silent
    VALID = {
        "global-step-label-is-not-a-global-batch": """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    bs = 8
    loader = DataLoader(range(8), batch_size=bs)
    print(f"global step {3}, batch size {bs}")
    """,
        # steps = samples / per-device batch: the per-device value is right there (per-process steps)
        "divisor-use-is-not-a-global-batch": """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    bs = 8
    loader = DataLoader(range(64), batch_size=bs)
    total_batch_steps = 64 // bs
    """,
        "unrelated-name-with-the-same-text-in-another-function": """
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    def make(batch_size):
        return DataLoader(range(64), batch_size=batch_size)

    def report(batch_size):
        print(f"Total batch size: {batch_size}")

    accelerator = Accelerator()
    loader = make(8)
    report(8 * accelerator.num_processes)
    """,
    }


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
