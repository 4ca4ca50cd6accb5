"""What the runtime confirmation of DL204, DL205, DL304, DL401 and DL402 needs, recorded.

Standard library only at import (torch, accelerate and Lightning Fabric are handed in once
loaded). It observes only; every patch goes through the Patcher. Records (schema in
distlint_probe_schema):

- ``pass``: a DataLoader began an iteration (an epoch of training data, an evaluation pass): the
  loader (a prepared loader's own id when Accelerate iterates it), the dataset's length, the
  batches per rank, whether grad was on, the updates made so far;
- ``order``: the first indices a shuffling sampler (RandomSampler, DistributedSampler) handed out
  in one of its passes, with its ``epoch`` attribute at the pass's start;
- ``collective``: a gather or reduce across processes (Accelerate's gather, gather_for_metrics,
  reduce; torch.distributed's all_gather / all_reduce / ...; Fabric's all_gather / all_reduce),
  the outermost call only, with the samples it returned and, under Accelerate, the loader
  being iterated;
- ``clip``: a gradient clipping call, through the framework or torch directly;
- ``accumulate``: one entry into ``accelerator.accumulate(...)``;
- ``amp``: a model was prepared; whether the Accelerator holds a GradScaler.

Fabric's ``backward`` is wrapped like Accelerate's, so its losses say ``fabric.backward``. With
``DISTLINT_VERIFY_EPOCHS=E`` the run ends at the first update made on the E-th pass of the loader
that fed it (instead of after --max-steps updates), counting the passes updates were made on.
"""

import os
import sys

from distlint_probe_recorder import user_frame
from distlint_probe_schema import ENV_EPOCHS

# module -> the Confirm method that patches it once loaded (beside distlint_probe_hooks' own)
PATCHES = {
    "torch": "patch_torch",
    "accelerate.accelerator": "patch_accelerator",
    "lightning.fabric.fabric": "patch_fabric",
    "lightning_fabric.fabric": "patch_fabric",
}

PREFIX = 32  # indices kept of each sampler pass (a prefix tells two permutations apart)
_EMIT_AT = (
    4,
    8,
    16,
    PREFIX,
)  # an order record when this many indices were handed out, and at the end

TORCH_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce",
    "gather",
    "gather_object",
    "reduce_scatter",
)


def call_site():
    """(file:line, bytecode offset) of the user's call: two gathers on one line (`gather(preds)
    == gather(labels)`) are two call sites."""
    where = user_frame(2)
    frame = sys._getframe(1)
    while frame is not None and f"{frame.f_code.co_filename}:{frame.f_lineno}" != where:
        frame = frame.f_back
    return where, frame.f_lasti if frame is not None else None


def first_dim(obj, depth=0):
    """Samples in `obj`: the first dimension of its first tensor (a list of tensors, as
    torch.distributed.all_gather fills, counts all of them); None when there is none."""
    torch = sys.modules.get("torch")
    if torch is None or depth > 3:
        return None
    if isinstance(obj, torch.Tensor):
        return int(obj.shape[0]) if obj.dim() > 0 else 1
    if isinstance(obj, (list, tuple)) and obj:
        if all(isinstance(t, torch.Tensor) for t in obj) and depth > 0:
            return sum(first_dim(t, depth + 1) or 0 for t in obj)
        return first_dim(obj[0], depth + 1)
    if isinstance(obj, dict) and obj:
        return first_dim(next(iter(obj.values())), depth + 1)
    return None


def framework_backward(rec, p, label, source):
    """A wrapper of a framework's `backward(loss)` (Accelerator, Fabric): the loss is recorded
    with `source`, and the Tensor.backward the framework makes inside is not recorded again."""

    def replace(original):
        def wrapper(owner, loss, *args, **kwargs):
            if rec.backward_depth == 0 and rec.enabled:
                p.guard(label, rec.record_loss, loss, source)
            rec.backward_depth += 1
            try:
                return original(owner, loss, *args, **kwargs)
            finally:
                rec.backward_depth -= 1

        return wrapper

    return replace


class _Tap:
    """Iterates a sampler's iterator and records the first indices it hands out."""

    def __init__(self, confirm, inner, info):
        self.confirm = confirm
        self.inner = inner
        self.info = info
        self.prefix = []
        self.count = 0
        self.emitted = 0

    def __iter__(self):
        return self

    def __next__(self):
        try:
            index = next(self.inner)
        except StopIteration:
            self.confirm.p.guard("sampler order", self.emit, True)
            raise
        self.count += 1
        if len(self.prefix) < PREFIX:
            self.prefix.append(index)
            if self.count in _EMIT_AT:
                self.confirm.p.guard("sampler order", self.emit, False)
        return index

    def emit(self, finished):
        if self.emitted == len(self.prefix) or not self.confirm.rec.enabled:
            return
        self.emitted = len(self.prefix)
        prefix = [int(i) if isinstance(i, int) else repr(i)[:20] for i in self.prefix]
        self.confirm.rec.emit("order", prefix=prefix, finished=finished, **self.info)


class Confirm:
    def __init__(self, recorder, patcher):
        self.rec = recorder
        self.p = patcher
        self.depth = 0  # inside a collective or a framework call that we record
        self.sampler_ids = {}  # id(sampler) -> small int
        self.sampler_passes = {}  # id(sampler) -> passes begun
        self.loader_passes = {}  # loader id -> passes begun
        self.trained_passes = {}  # loader id -> the passes of it an update was made on
        self.epochs = int(os.environ.get(ENV_EPOCHS, "0") or 0)
        if self.epochs:
            recorder.epoch_bound = self.reached_epoch

    def reached_epoch(self, loaders):
        """The update just made was on the E-th pass of a loader that fed it, counting only the
        passes updates were made on (a `next(iter(loader))` peek is a pass of its own)."""
        reached = False
        for lid in loaders or ():
            passes = self.trained_passes.setdefault(lid, set())
            passes.add(self.loader_passes.get(lid, 0))
            reached = reached or len(passes) >= self.epochs
        return reached

    # -- torch -----------------------------------------------------------------------------

    def patch_torch(self, torch):
        from torch.utils.data import dataloader as dl_module
        from torch.utils.data import sampler as sampler_module

        self.p.wrap(
            dl_module.DataLoader, "__iter__", "DataLoader passes", replace=self._loader_iter
        )
        self.p.wrap(
            sampler_module.RandomSampler,
            "__iter__",
            "RandomSampler order",
            replace=self._sampler_iter,
        )
        try:
            from torch.utils.data import distributed

            self.p.wrap(
                distributed.DistributedSampler,
                "__iter__",
                "DistributedSampler order",
                replace=self._sampler_iter,
            )
        except Exception as exc:
            self.p.skipped["DistributedSampler order"] = repr(exc)
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available():
            for name in TORCH_COLLECTIVES:
                self.p.wrap(dist, name, f"dist.{name}", replace=self._collective(f"dist.{name}"))
        utils = torch.nn.utils
        for name in ("clip_grad_norm_", "clip_grad_value_"):
            self.p.wrap(utils, name, f"torch {name}", replace=self._clip(f"torch.nn.utils.{name}"))

    def _loader_iter(self, original):
        confirm = self

        def __iter__(loader):
            if confirm.rec.enabled and not confirm.rec.stopping:
                confirm.p.guard("DataLoader passes", confirm.loader_pass, loader)
            return original(loader)

        return __iter__

    def loader_pass(self, loader):
        torch = sys.modules["torch"]
        outer = loader
        # Accelerate's prepared loader iterates the DataLoader it wraps: count its pass (its
        # batches are recorded under its own id).
        frame = sys._getframe(3)
        for _ in range(3):
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            if owner is not None and getattr(owner, "base_dataloader", None) is loader:
                outer = owner
                break
            frame = frame.f_back
        key = self.rec.loader_id(outer)
        self.loader_passes[key] = self.loader_passes.get(key, 0) + 1
        try:
            dataset = len(loader.dataset)
        except Exception:
            dataset = None
        try:
            batches = len(outer)
        except Exception:
            batches = None
        sampler = getattr(loader, "sampler", None)
        self.rec.emit(
            "pass",
            loader=key,
            n=self.loader_passes[key],
            dataset=dataset,
            batches=batches,
            sampler=type(sampler).__name__ if sampler is not None else None,
            grad=bool(torch.is_grad_enabled()),
            updates=self.rec.updates,
        )

    def _sampler_iter(self, original):
        confirm = self

        def __iter__(sampler):
            inner = iter(original(sampler))
            if not confirm.rec.enabled or confirm.rec.stopping:
                return inner
            info = confirm.p.guard("sampler order", confirm.sampler_info, sampler)
            return inner if info is None else _Tap(confirm, inner, info)

        return __iter__

    def sampler_info(self, sampler):
        key = id(sampler)
        if key not in self.sampler_ids:
            self.sampler_ids[key] = len(self.sampler_ids) + 1
        self.sampler_passes[key] = self.sampler_passes.get(key, 0) + 1
        shuffle = getattr(sampler, "shuffle", True)  # a RandomSampler always shuffles
        epoch = getattr(sampler, "epoch", None)
        try:
            length = len(sampler)
        except Exception:
            length = None
        return {
            "sampler": self.sampler_ids[key],
            "cls": type(sampler).__name__,
            "n": self.sampler_passes[key],
            "shuffle": bool(shuffle),
            "epoch": epoch if isinstance(epoch, int) else None,
            "length": length,
            "updates": self.rec.updates,
        }

    def _collective(self, api, accelerator=False):
        confirm = self

        def replace(original):
            def wrapper(*args, **kwargs):
                top = confirm.depth == 0 and confirm.rec.enabled and not confirm.rec.stopping
                confirm.depth += 1
                try:
                    result = original(*args, **kwargs)
                finally:
                    confirm.depth -= 1
                if top:
                    confirm.p.guard(api, confirm.collective, api, args, kwargs, result, accelerator)
                return result

            return wrapper

        return replace

    def collective(self, api, args, kwargs, result, accelerator):
        data = args[1:] if accelerator else args
        if api.startswith("dist.all_gather") and api != "dist.all_gather_object":
            out = first_dim(data[0], 1) if data else None  # the output list / tensor
            given = first_dim(data[1]) if len(data) > 1 else None
        else:
            out = first_dim(result) if result is not None else None
            given = first_dim(data[0]) if data else None
            if out is None:  # in place (all_reduce, reduce)
                out = given
        where, offset = call_site()
        record = {"api": api, "given": given, "out": out, "where": where, "offset": offset}
        if accelerator:
            state = getattr(args[0], "gradient_state", None)
            active = getattr(state, "active_dataloader", None)
            if active is not None:
                record["loader"] = self.rec.loader_id(active)
                try:
                    record["dataset"] = len(active.dataset)
                except Exception:
                    pass
        self.rec.emit("collective", updates=self.rec.updates, **record)

    def _clip(self, api):
        confirm = self

        def replace(original):
            def wrapper(*args, **kwargs):
                top = confirm.depth == 0 and confirm.rec.enabled
                if top:
                    confirm.p.guard(api, confirm.rec.emit, "clip", api=api, where=user_frame(1))
                confirm.depth += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    confirm.depth -= 1

            return wrapper

        return replace

    # -- Accelerate ------------------------------------------------------------------------

    def patch_accelerator(self, module):
        cls = module.Accelerator
        for name in ("gather", "gather_for_metrics", "reduce"):
            self.p.wrap(
                cls,
                name,
                f"Accelerator.{name}",
                replace=self._collective(f"accelerator.{name}", accelerator=True),
            )
        for name in ("clip_grad_norm_", "clip_grad_value_"):
            self.p.wrap(cls, name, f"Accelerator.{name}", replace=self._clip(f"accelerator.{name}"))

        def entered(args, kwargs):
            if self.rec.enabled:
                self.rec.emit("accumulate", updates=self.rec.updates)

        self.p.wrap(cls, "accumulate", "Accelerator.accumulate", before=entered)

        def prepared_model(result, args, kwargs):
            # whether accelerator.backward scales the loss (an fp16 GradScaler: not on CPU)
            self.rec.emit("amp", scaler=getattr(args[0], "scaler", None) is not None)

        self.p.wrap(cls, "prepare_model", "Accelerator.prepare_model", after=prepared_model)

    # -- Lightning Fabric ------------------------------------------------------------------

    def patch_fabric(self, module):
        cls = getattr(module, "Fabric", None)
        if cls is None:
            return
        rec, p = self.rec, self.p

        p.wrap(
            cls,
            "backward",
            "Fabric.backward",
            replace=framework_backward(rec, p, "Fabric.backward", "fabric.backward"),
        )
        for name in ("all_gather", "all_reduce"):
            p.wrap(cls, name, f"Fabric.{name}", replace=self._collective(f"fabric.{name}", True))
        p.wrap(
            cls,
            "clip_gradients",
            "Fabric.clip_gradients",
            replace=self._clip("fabric.clip_gradients"),
        )
