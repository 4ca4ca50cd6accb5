"""DL302 dataloader-not-sharded (rules/dataloader_not_sharded.py):
its snippets, fixtures/DL302/ and its own cases.

The reported cases are snapshotted in tests/rules/snapshots/test_DL302/; the cases that must stay
silent are valid snippets (``VALID``).
"""

from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests


class TestDL302(SnippetTests, FixtureTests):
    CODE = "DL302"
    # a loader this rule cannot judge: silent
    VALID = {
        "custom-sampler-or-unknown-loader": """
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
    """,
    }


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
