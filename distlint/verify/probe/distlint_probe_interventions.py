"""The --exact interventions: the only places where the probe changes what the script does.

Active only in the 1-process run of `verify --exact`, and only through Accelerator.prepare:
- DISTLINT_VERIFY_BATCH_SCALE=N: each plain DataLoader with a batch_size is rebuilt with
  batch_size * N (the N-process run's global batch, as one batch);
- DISTLINT_VERIFY_LRS=[[lr, ...], ...]: each prepared optimizer (in order) gets the N-process
  run's LRs, and the schedulers prepared with it are rescaled by the same factors;
- with the batch scaled, a prepared scheduler steps N times per update, as on N processes.
Without those variables this module does nothing.
"""

import json
import os
import sys

from distlint_probe_schema import ENV_BATCH_SCALE, ENV_LRS


class Interventions:
    def __init__(self):
        self.batch_scale = int(os.environ.get(ENV_BATCH_SCALE, "1") or 1)
        lrs = os.environ.get(ENV_LRS)
        self.target_lrs = json.loads(lrs) if lrs else None

    @property
    def active(self):
        return self.batch_scale > 1 or bool(self.target_lrs)

    def rebuild_loader(self, loader):
        """The same DataLoader with batch_size * scale; (loader, note)."""
        torch = sys.modules["torch"]
        DataLoader = torch.utils.data.DataLoader
        IterableDataset = torch.utils.data.IterableDataset
        if self.batch_scale <= 1:
            return loader, None
        if type(loader) is not DataLoader or loader.batch_size is None:
            return loader, "not a plain DataLoader with batch_size: left as is"
        kwargs = dict(
            batch_size=loader.batch_size * self.batch_scale,
            num_workers=loader.num_workers,
            collate_fn=loader.collate_fn,
            pin_memory=loader.pin_memory,
            drop_last=loader.drop_last,
            timeout=loader.timeout,
            worker_init_fn=loader.worker_init_fn,
            multiprocessing_context=loader.multiprocessing_context,
            generator=loader.generator,
            persistent_workers=loader.persistent_workers,
        )
        if loader.num_workers:
            kwargs["prefetch_factor"] = loader.prefetch_factor
        if not isinstance(loader.dataset, IterableDataset):
            kwargs["sampler"] = loader.sampler
        return DataLoader(loader.dataset, **kwargs), None

    def step_scheduler_as_on_n(self, obj, note):
        """A prepared scheduler steps once per process for each update: N times on N processes,
        once here. With the batch × N, it must step N times per update too, or the schedule
        would advance N times slower per sample than in the N-process run."""
        if self.batch_scale <= 1 or type(obj).__name__ != "AcceleratedScheduler":
            return
        if getattr(obj, "split_batches", False) or not getattr(obj, "step_with_optimizer", True):
            return
        step = obj.step
        scale = self.batch_scale

        def step_n_times(*args, **kwargs):
            for _ in range(scale):
                step(*args, **kwargs)

        obj.step = step_n_times
        note(
            f"--exact: the prepared scheduler steps {scale} times per update, as on {scale} processes"
        )

    def override_lrs(self, optimizer, index, prepare_args):
        """Give optimizer `index` the N-process run's LRs; returns the LRs applied (or None)."""
        if not self.target_lrs or index >= len(self.target_lrs):
            return None
        targets = self.target_lrs[index]
        factors = []
        for group, target in zip(optimizer.param_groups, targets):
            current = float(group.get("lr", 0.0))
            base = group.get("initial_lr")
            if current:
                factor = target / current
            elif base:  # a warmup from 0: the target is the N-process run's base (peak) LR
                factor = target / float(base)
            else:
                factor = 1.0
            factors.append(factor)
            group["lr"] = current * factor
            if "initial_lr" in group:
                group["initial_lr"] = group["initial_lr"] * factor
        torch = sys.modules["torch"]
        scheduler_types = tuple(
            t
            for t in (
                getattr(torch.optim.lr_scheduler, n, None) for n in ("LRScheduler", "_LRScheduler")
            )
            if t
        )
        for obj in prepare_args:
            if isinstance(obj, scheduler_types) and getattr(obj, "optimizer", None) is optimizer:
                obj.base_lrs = [b * f for b, f in zip(obj.base_lrs, factors)]
        return [float(g["lr"]) for g in optimizer.param_groups]
