"""The comparisons on records built by hand: each check's verdict and numbers, no process started."""

import pytest
from records_by_hand import make_run, summarize, ups, write_rank

from distlint.verify import checks
from distlint.verify.core import VerifyResult
from distlint.verify.report import render_text


def pair(tmp_path, one_updates, many_per_rank, **kw):
    one = make_run(tmp_path, "one", 1, [one_updates], **kw.pop("one_kw", {}))
    many = make_run(tmp_path, "many", len(many_per_rank), many_per_rank, **kw)
    return one, many


def test_data_order_same_and_different(tmp_path):
    cs = [[1.0, 1.0], [2.0, 4.0], [3.0, 9.0], [4.0, 16.0]]
    one, many = pair(
        tmp_path,
        ups([1.0] * 4, checksums=cs),
        [ups([1.0] * 2, checksums=[cs[0], cs[2]]), ups([1.0] * 2, checksums=[cs[1], cs[3]])],
    )
    assert checks.check_data_order(one, many, exact=False).status == "pass"
    other = make_run(
        tmp_path,
        "other",
        2,
        [
            ups([1.0] * 2, checksums=[cs[0], cs[2]], loaders=[1]),
            ups([1.0] * 2, checksums=[cs[1], [5.0, 25.0]], loaders=[1]),
        ],
    )
    warn = checks.check_data_order(one, other, exact=False)
    assert warn.status == "warn" and warn.data["first_difference_at"] == 32
    fail = checks.check_data_order(one, other, exact=True)
    assert fail.status == "fail" and "use_seedable_sampler=True" in fail.detail


@pytest.mark.parametrize(
    "lr, scaling, status",
    [(0.4, "linear", "pass"), (0.2, "sqrt", "pass"), (0.1, "none", "fail"), (0.3, "other", "warn")],
)
def test_lr_scaling_kinds(tmp_path, lr, scaling, status):
    one, many = pair(tmp_path, ups([1.0, 0.9], lr=0.1), [ups([1.0], lr=lr) for _ in range(4)])
    check = checks.check_lr(one, many, exact=False)
    assert check.data["batch_ratio"] == 4
    assert (check.data["scaling"], check.status) == (scaling, status)
    assert check.confirms is (scaling == "none")


def test_same_global_batch_keeps_the_lr(tmp_path):
    """Accumulation divided by the world size: the global batch is constant, the LR must be too."""
    one, many = pair(
        tmp_path,
        ups([2.0, 1.5], samples=16, forwards=4, factor=0.25),
        [ups([2.0, 1.5], samples=8, forwards=2, factor=0.5) for _ in range(2)],
    )
    assert (one.global_batch, many.global_batch) == (16, 16)
    assert (one.accumulation, many.accumulation) == (4, 2)
    lr = checks.check_lr(one, many, exact=False)
    assert lr.status == "pass" and lr.data["batch_ratio"] == 1 and lr.confirms is False
    # the losses were divided by 4 and by 2 before backward: both read as the undivided loss
    assert [p.loss for p in one.curve] == pytest.approx([2.0, 1.5])
    assert [p.loss for p in many.curve] == pytest.approx([2.0, 1.5])


def _noisy(base, n, amp=0.05, trend=0.0):
    return [base - trend * i + (amp if i % 2 else -amp) for i in range(n)]


def _curve(updates, batch, lag=0.0, noise=0.02, seed=0):
    """A falling loss against samples seen, times (1 + lag), with Gaussian noise per update."""
    import math
    import random

    rng = random.Random(seed)
    return [
        (2.0 * math.exp(-(i + 1) * batch / 300) + 0.5) * (1 + lag) + rng.gauss(0, noise)
        for i in range(updates)
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_curves_at_equal_samples_pass(tmp_path, seed):
    one, many = pair(
        tmp_path,
        ups(_curve(40, 8, seed=seed), samples=8),
        [ups(_curve(20, 16, seed=seed + 10), samples=8) for _ in range(2)],
    )
    check = checks.check_loss(one, many, exact=False)
    assert check.status == "pass", check.detail
    assert check.data["window"] == [0, 320] and len(check.data["windows"]) >= 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_constant_two_percent_lag_is_not_a_pass(tmp_path, seed):
    """minGPT's shape: the 2-process curve sits 2% above over all samples; a tolerance that
    grows with the loss (0.02 x the loss + 3 noise) passed it."""
    one, many = pair(
        tmp_path,
        ups(_curve(40, 8, seed=seed), samples=8),
        [ups(_curve(20, 16, lag=0.02, seed=seed + 10), samples=8) for _ in range(2)],
    )
    check = checks.check_loss(one, many, exact=False)
    assert check.status in ("warn", "fail"), check.detail
    assert check.data["same_sign"] >= 0.75 and check.data["rel_diff"] == pytest.approx(
        0.02, abs=0.01
    )
    assert "learns slower per sample (a lag)" in check.detail


def test_a_large_lag_fails(tmp_path):
    one, many = pair(
        tmp_path,
        ups(_curve(40, 8), samples=8),
        [ups(_curve(20, 16, lag=0.15, seed=5), samples=8) for _ in range(2)],
    )
    check = checks.check_loss(one, many, exact=False)
    assert check.status == "fail" and "a consistent offset, not noise" in check.detail


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_constant_loss_is_a_skip_with_its_reason(tmp_path, value):
    one, many = pair(tmp_path, ups([value] * 8), [ups([value] * 4) for _ in range(2)])
    check = checks.check_loss(one, many, exact=False)
    assert check.status == "skip" and "constant" in check.detail and check.data["constant"] == value


def test_exact_loss_tolerance_and_differing_inputs(tmp_path):
    cs = [[3.0, 9.0], [7.0, 49.0], [9.0, 81.0]]
    base = [1.0, 0.5, 0.25]
    one = make_run(tmp_path, "one", 1, [ups(base, samples=16, checksums=cs)])

    def many(name, losses, sums):
        half = [[a / 2, b / 2] for a, b in sums]
        return make_run(
            tmp_path, name, 2, [ups(losses, checksums=half), ups(losses, checksums=half)]
        )

    close = checks.check_loss(one, many("close", [1.0, 0.5 * (1 + 5e-6), 0.25], cs), exact=True)
    assert close.status == "pass" and close.data["worst_update"] == 2
    far = checks.check_loss(one, many("far", [1.0, 0.5 * (1 + 5e-5), 0.25], cs), exact=True)
    assert far.status == "fail"
    shuffled = checks.check_loss(one, many("shuf", base, [cs[0], [8.0, 64.0], cs[2]]), exact=True)
    assert shuffled.status == "fail" and shuffled.data["inputs_differ_at"] == 2


def test_schedule_counted_per_process_runs_ahead(tmp_path):
    """DL202: on 2 processes the linear decay reaches 0 after half the samples."""
    lr1 = [0.1 * (1 - i / 40) for i in range(40)]
    lrn = [0.2 * max(0.0, 1 - i / 10) for i in range(20)]
    one, many = pair(tmp_path, ups([1.0] * 40, lr=lr1), [ups([1.0] * 20, lr=lrn) for _ in range(2)])
    check = checks.check_schedule(one, many)
    assert check.status == "fail" and check.confirms and check.rule == "DL202"
    assert "the decay runs ×2 as fast per sample" in check.detail and check.data[
        "speed_ratio"
    ] == pytest.approx(2, rel=0.1)
    good_n = [0.2 * (1 - i / 20) for i in range(20)]
    many_ok = make_run(tmp_path, "ok", 2, [ups([1.0] * 20, lr=good_n) for _ in range(2)])
    assert checks.check_schedule(one, many_ok).status == "pass"


def test_identical_inputs_across_ranks_are_a_dl302_fail_naming_the_loader(tmp_path):
    loader = {"kind": "loader", "t": 1, "loader": 1, "where": "train.py:14", "batch_size": 8}
    loader.update(sampler="RandomSampler")
    same = ups([1.0, 0.8, 0.7], loaders=[1])
    many = make_run(
        tmp_path, "many", 2, [same, same], rank_kw={0: {"extra": [loader]}, 1: {"extra": [loader]}}
    )
    one = make_run(tmp_path, "one", 1, [ups([1.0] * 6)])
    result = checks.run_all(one, many, exact=False)
    by_id = {c.id: c for c in result}
    sharding = by_id["sharding"]
    assert sharding.status == "fail" and sharding.confirms and sharding.rule == "DL302"
    assert "train.py:14" in sharding.detail and sharding.data["identical_updates"] == 3
    # only a real group with distinct shards can confirm DL201 / DL301
    assert by_id["lr"].status == "skip" and by_id["batch"].status == "skip"


def test_per_rank_seed_offsets_are_information_not_a_failure(tmp_path):
    def seeded(rank):
        fp = {"torch": f"t{rank}", "python": "p", "numpy": "n"}
        seed = {"name": "torch.manual_seed", "ints": [1337 + rank], "fp": fp}
        return {"seeds": [seed], "rng": {"ready": fp, "end": {**fp, "torch": f"x{rank}"}}}

    one = make_run(tmp_path, "one", 1, [ups([1.0] * 4)], rank_kw={0: seeded(0)})
    many = make_run(tmp_path, "many", 2, [ups([1.0] * 2)] * 2, rank_kw={0: seeded(0), 1: seeded(1)})
    check = checks.check_seeding(one, many)
    assert check.status == "info" and check.data["per_rank"] == {
        "torch": "torch.manual_seed(seed + rank)"
    }
    assert "on purpose" in check.detail and "set_seed" not in check.detail


def test_unknown_samples_are_shown_as_unknown_never_0(tmp_path):
    one, many = pair(
        tmp_path, ups([1.0, 0.9], samples=None), [ups([1.0], samples=None) for _ in range(2)]
    )
    assert one.samples_seen is None and not one.samples_known
    result = VerifyResult("train.py", [], 2, 20, False, one=one, many=many)
    result.checks = checks.run_all(one, many, exact=False)
    by_id = {c.id: c for c in result.checks}
    assert by_id["batch"].status == "skip" and "unknown" in by_id["batch"].detail
    assert by_id["loss"].status == "skip"
    # the LR SKIP gives the reason the table shows: LRs known, the global batch unknown
    assert by_id["lr"].status == "skip" and "global batch of an update is unknown" in (
        by_id["lr"].detail
    )
    text = render_text(result)
    assert "samples seen           unknown" in text and "the samples seen are unknown" in text
    assert "global batch / update  unknown" in text and "LR (first update)      0.1" in text


def test_lone_processes_under_torchrun_are_refused(tmp_path):
    folder = tmp_path / "lone"
    folder.mkdir()
    for rank in range(2):
        write_rank(folder, 10 + rank, rank, 1, ups([1.0] * 3), config=False, env_rank=rank)
    run = summarize(folder, 2)
    assert not run.ok and "each trained alone" in run.problems[0]
    assert "init_process_group" in run.problems[0]


def test_the_rank_that_died_of_a_signal_is_named_first(tmp_path):
    folder = tmp_path / "segv"
    folder.mkdir()
    crash = {
        "kind": "exception",
        "t": 1000.05,
        "type": "RuntimeError",
        "message": "gloo: Connection reset by peer",
        "traceback": "",
        "updates": 3,
    }
    write_rank(folder, 10, 0, 2, ups([1.0] * 3), finished=False, extra=[crash])
    write_rank(folder, 11, 1, 2, ups([1.0] * 3), finished=False)
    (folder / "11.fault").write_text("Fatal Python error: Segmentation fault\n\nCurrent thread...")
    run = summarize(folder, 2)
    assert [f.rank for f in run.failures] == [1, 0]
    assert "SIGSEGV" in run.failures[0].reason and "rank 1 failed" in run.problems[0]
    # the launcher's own summary names the signal too (no faulthandler file needed)
    folder2 = tmp_path / "kill"
    folder2.mkdir()
    write_rank(folder2, 20, 0, 2, ups([1.0] * 3), finished=False, extra=[crash])
    write_rank(folder2, 21, 1, 2, ups([1.0] * 3), finished=False)
    run2 = summarize(folder2, 2, output="[1]:\n  rank: 1\n  exitcode: -9 (pid: 21)\n")
    assert run2.failures[0].rank == 1 and "SIGKILL" in run2.failures[0].reason


def test_a_run_still_progressing_at_the_timeout_is_not_stuck(tmp_path):
    folder = tmp_path / "slow"
    folder.mkdir()
    for rank in range(2):
        write_rank(folder, 10 + rank, rank, 2, ups([1.0] * 5), finished=False)
    slow = summarize(folder, 2, timed_out=True)
    slow.outcome.end_t = 1000.6  # the last records were written just before the kill
    from distlint.verify import compare

    again = compare.summarize_run(slow.outcome, slow.records, 2, 20)
    assert "still training when the timeout hit" in again.failures[0].reason
    again.outcome.end_t = 5000.0  # nothing written for an hour: stuck
    stuck = compare.summarize_run(again.outcome, again.records, 2, 20)
    assert stuck.failures[0].reason.startswith("all ranks stuck at update 5")


def test_a_script_that_spawns_its_own_group_is_explained(tmp_path):
    """pytorch/examples multigpu.py style (mp.spawn): under a launcher nothing becomes a rank."""
    folder = tmp_path / "spawn"
    folder.mkdir()
    run = summarize(folder, 2, timed_out=True)
    assert "before any rank started training" in run.problems[0] and len(run.problems) == 1
    run.outcome.at_timeout = [
        "python -m torch.distributed.run --nproc_per_node 2 spawn_ddp.py",
        "python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
    ]
    from distlint.verify import compare

    again = compare.summarize_run(run.outcome, run.records, 2, 20)
    assert "is its own launcher" in again.problems[1] and again.problems[1].startswith("1 process")


def test_exact_with_nothing_to_scale_says_so_and_labels_nothing_x_n(tmp_path):
    """--exact on hand-built batches (nanoGPT style, global batch held constant): the probe was
    asked to scale by 2 but no prepared DataLoader existed, so nothing may be labelled "x N"
    and the LR check must use the batch the 1-process run really had."""
    one = make_run(
        tmp_path,
        "one",
        1,
        [ups([2.0, 1.5, 1.2], samples=16, forwards=4, factor=0.25)],
        rank_kw={0: {"header": {"batch_scale": 2}}},
    )
    per_rank = [
        ups([2.0, 1.5, 1.2], samples=8, forwards=2, factor=0.5, checksums=[[r, 1.0]] * 3)
        for r in (1.0, 2.0)
    ]
    many = make_run(tmp_path, "many", 2, per_rank)
    assert one.rank0.native_per_device_batch == one.per_device_batch == 4
    result = VerifyResult("train.py", [], 2, 3, True, one=one, many=many)
    result.checks = checks.run_all(one, many, exact=True)
    by_id = {c.id: c for c in result.checks}
    assert "--exact" not in by_id["batch"].detail and by_id["batch"].status == "pass"
    assert by_id["lr"].data["batch_ratio"] == 1 and by_id["lr"].status == "pass"
    text = render_text(result)
    assert "x N" not in text and "--exact changed nothing" in text


@pytest.mark.parametrize("loaders, per_rank", [([], True), ([1], False)])
def test_unseeded_generator_advice_never_makes_ranks_draw_the_same_batches(
    tmp_path, loaders, per_rank
):
    """torch is never seeded, so it differs across ranks. With hand-built batches (no DataLoader
    fed the model) one seed on every rank would make every rank draw the same batches: the
    advice is a per-rank seed. With a DataLoader (sharded by prepare) set_seed is right."""

    def unseeded(rank):
        start = {"torch": f"t{rank}", "python": "p", "numpy": "n"}
        return {"rng": {"ready": start, "end": {**start, "torch": f"x{rank}"}}}

    one = make_run(tmp_path, "one", 1, [ups([1.0] * 4, loaders=loaders)], rank_kw={0: unseeded(9)})
    many = make_run(
        tmp_path,
        "many",
        2,
        [ups([1.0] * 2, loaders=loaders)] * 2,
        rank_kw={0: unseeded(0), 1: unseeded(1)},
    )
    check = checks.check_seeding(one, many)
    assert check.status == "fail" and check.data["unseeded_used"] == ["torch"]
    assert ("set_seed(seed + accelerator.process_index)" in check.detail) is per_rank
    assert ("seed them the same in both runs: accelerate.utils.set_seed(seed)" in check.detail) is (
        not per_rank
    )
    assert "never drawn from" not in check.detail  # no advice beside a generator it calls unused


def _framework_pair(tmp_path, source, modules, launcher="torchrun", identical=False, lr=0.1):
    """An N-process run formed by `source` (accelerate / torch.distributed) with `modules`
    loaded, whose LR is not scaled and whose ranks train the same inputs when `identical`."""
    tmp_path.mkdir()
    sums = [[1.0, 1.0], [2.0, 4.0]]
    loader = {"kind": "loader", "t": 1, "loader": 1, "where": "train.py:14", "batch_size": 8}
    loader.update(sampler="RandomSampler")
    per_rank = [
        ups(
            [1.0, 0.9],
            lr=lr,
            checksums=sums if identical else [[r + 1.0, 1.0], [r + 2.0, 4.0]],
            loaders=[1],
        )
        for r in range(2)
    ]
    one = make_run(tmp_path, "one", 1, [ups([1.0, 0.9, 0.8, 0.7], lr=lr)])
    kw = {"source": source, "modules": modules, "extra": [loader]}
    many = make_run(
        tmp_path, "many", 2, per_rank, launcher=launcher, rank_kw={r: kw for r in range(2)}
    )
    return one, many


@pytest.mark.parametrize(
    "source, modules, launcher, lr_fix, shard_fix",
    [
        ("accelerate", ["accelerate"], "torchrun", "lr * accelerator.num_processes",
         "accelerator.prepare"),
        ("torch.distributed", [], "torchrun", "lr * dist.get_world_size()",
         "DistributedSampler(dataset) (and call sampler.set_epoch(epoch)"),
        ("torch.distributed", ["lightning.fabric"], "fabric", "lr * fabric.world_size",
         "fabric.setup_dataloaders"),
        ("torch.distributed", ["torch_xla"], "torchrun", "lr * xr.world_size()",
         "num_replicas=xr.world_size(), rank=xr.global_ordinal()"),
    ],
)  # fmt: skip
def test_advice_is_in_the_scripts_own_framework(
    tmp_path, source, modules, launcher, lr_fix, shard_fix
):
    one, many = _framework_pair(tmp_path / "lr", source, modules, launcher)
    lr = checks.check_lr(one, many, exact=False)
    assert lr.status == "fail" and f"`{lr_fix}`" in lr.detail
    others = {"lr * accelerator.num_processes", "lr * dist.get_world_size()",
              "lr * fabric.world_size", "lr * xr.world_size()"} - {lr_fix}  # fmt: skip
    assert not any(o in lr.detail for o in others)
    one, many = _framework_pair(tmp_path / "dup", source, modules, launcher, identical=True)
    sharding = checks.check_sharding(many)
    assert sharding.status == "fail" and shard_fix in sharding.detail
    if source != "accelerate":
        assert "accelerator" not in sharding.detail and "accelerator" not in lr.detail


@pytest.mark.parametrize(
    "source, advice",
    [("accelerate", "use_seedable_sampler=True"), ("torch.distributed", "DistributedSampler")],
)
def test_data_order_advice_speaks_the_scripts_setup(tmp_path, source, advice):
    """Different from the very first update: said so (not 'agree for the first 0 samples'), and
    the advice for a plain DDP script does not name an Accelerator it does not have."""
    one = make_run(tmp_path, "one", 1, [ups([1.0] * 4, samples=16)])
    many = make_run(
        tmp_path,
        "many",
        2,
        [
            ups([1.0] * 4, checksums=[[9.0, 9.0]] * 4, loaders=[1]),
            ups([1.0] * 4, checksums=[[8.0, 8.0]] * 4, loaders=[1]),
        ],
        rank_kw={0: {"source": source}, 1: {"source": source}},
    )
    check = checks.check_data_order(one, many, exact=False)
    assert check.status == "warn" and "differ from the first update on (sample 16)" in check.detail
    assert advice in check.detail and "first 0 samples" not in check.detail
    assert ("Accelerator(" in check.detail) is (source == "accelerate")


def _loader(sampler):
    return {"kind": "loader", "t": 1, "loader": 1, "where": "train.py:9", "batch_size": 8,
            "sampler": sampler}  # fmt: skip


@pytest.mark.parametrize(
    "fed, cause", [(True, "sampler"), (False, "no DataLoader"), (True, "iterable")]
)
def test_data_order_names_the_observed_cause(tmp_path, fed, cause):
    """A RandomSampler on 1 process against a DistributedSampler on N (the imagenet example);
    batches the script draws itself. Never the default sentence when a cause was seen."""
    loaders = [1] if fed else []
    one = make_run(
        tmp_path, "one", 1, [ups([1.0] * 4, samples=16, loaders=loaders)],
        rank_kw={0: {"source": "torch.distributed", "extra": [_loader("RandomSampler")]}},
    )  # fmt: skip
    many = make_run(
        tmp_path,
        "many",
        2,
        [
            ups([1.0] * 4, checksums=[[9.0, 9.0]] * 4, loaders=loaders),
            ups([1.0] * 4, checksums=[[8.0, 8.0]] * 4, loaders=loaders),
        ],
        rank_kw={
            r: {
                "source": "torch.distributed",
                "extra": [
                    _loader(
                        "_InfiniteConstantSampler" if cause == "iterable" else "DistributedSampler"
                    )
                ],
            }
            for r in range(2)
        },
    )
    check = checks.check_data_order(one, many, exact=False)
    if cause == "iterable":  # llama2.c: a stream shuffled per rank by its own seeded rng
        assert check.status == "info" and "IterableDataset" in check.detail
        assert "DistributedSampler" not in check.detail
    elif fed:
        assert (
            "the 1-process run samples with a RandomSampler, the 2 processes run with a "
            "DistributedSampler" in check.detail
        )
    else:
        assert "builds its batches itself (no DataLoader fed the model)" in check.detail
        assert "DistributedSampler" not in check.detail


def test_files_copied_on_write_are_listed_once_per_run(tmp_path):
    folder = tmp_path / "cow"
    folder.mkdir()
    for rank in range(2):
        note = {
            "kind": "note",
            "t": 1000.0,
            "message": "copy on write: out/ckpt.pt (your file is untouched)",
        }
        write_rank(folder, 10 + rank, rank, 2, ups([1.0] * 2), extra=[note])
    run = summarize(folder, 2)
    [line] = [n for n in run.notes if "copy on write" in n]
    assert "wrote to 1 file(s)" in line and line.endswith("untouched: out/ckpt.pt")


def test_the_sharding_fail_lists_only_the_loader_that_fed_the_model(tmp_path):
    """Five loaders built, one yields before every update (training), one now and then (eval)."""
    built = [
        {"kind": "loader", "t": 1, "loader": i, "where": f"train.py:{10 + i}", "batch_size": 8,
         "sampler": "SequentialSampler"}
        for i in range(1, 6)
    ]  # fmt: skip
    same = [[1.0, 1.0], [2.0, 4.0], [3.0, 9.0]]
    updates = ups([1.0, 0.9, 0.8], checksums=same, loaders=[2])
    updates[1]["loaders"] = [2, 4]  # an evaluation loader drawn from once
    many = make_run(
        tmp_path, "many", 2, [updates, updates], rank_kw={r: {"extra": built} for r in range(2)}
    )
    check = checks.check_sharding(many)
    assert check.status == "fail" and check.data["loaders"] == ["train.py:12"]
    assert "train.py:14" not in check.detail


def test_precision_is_the_one_that_ran_and_the_accelerator_that_trained(tmp_path):
    """A later Accelerator(mixed_precision="fp16") made after training began is not the run's;
    the precision per update (autocast, dtypes, GradScaler) is what the report shows."""
    later = {"kind": "config", "t": 2000.0, "source": "accelerate", "num_processes": 1,
             "process_index": 0, "mixed_precision": "fp16"}  # fmt: skip
    ran = {"autocast": ["float16"], "outputs": ["float16"], "param": "float32",
           "grad": "float32", "scaler": 1}  # fmt: skip
    folder = tmp_path / "one"
    folder.mkdir()
    write_rank(folder, 100, 0, 1, ups([1.0, 0.9], precision=ran))
    with open(folder / "100.jsonl", "a", encoding="utf-8") as f:
        import json

        f.write(json.dumps(later) + "\n")
    run = summarize(folder, 1)
    assert run.config("mixed_precision") == "no"  # the Accelerator that trained
    assert run.rank0.later_configs and run.precision["kind"] == "fp16"
    assert run.precision_text() == (
        "float16 autocast in 2/2 updates; params float32, grads float32; GradScaler in 2/2 updates"
    )


def test_gpu_notes_are_given_once_when_the_runs_also_changed_files(tmp_path):
    """Comparing the runs and reporting a file the script wrote in the user's tree both
    happen; the notes on which run used the GPU are still given once per run."""
    from distlint.verify.core import _conclude

    one, many = pair(tmp_path, ups([1.0, 0.9, 0.8, 0.7]), [ups([1.0, 0.9])] * 2)
    one.outcome.plan.device = "cuda:0"
    result = VerifyResult("train.py", [], 2, 2, False, one=one, many=many)
    _conclude(result, ["out/ckpt.pt"], str(tmp_path), None)
    assert result.check("files") is not None and result.check("files").status == "fail"
    assert result.checks[0].id != "files"  # the runs were compared too
    gpu = [n for n in result.notes if "ran on the GPU" in n]
    assert gpu == ["the 1 process run ran on the GPU (cuda:0)"]
