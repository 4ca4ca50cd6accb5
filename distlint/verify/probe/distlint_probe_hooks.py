"""Wiring: which functions of random / numpy / torch / accelerate the probe wraps, and when.

Nothing is imported here beyond the standard library. An import hook patches a module right
after it finished loading; modules already loaded are patched at activation. Every patch goes
through the Patcher (guarded, recorded in the `patches` record, restorable).
"""

import os
import sys

from distlint_probe_confirm import PATCHES as CONFIRM_PATCHES
from distlint_probe_confirm import Confirm, framework_backward
from distlint_probe_interventions import Interventions
from distlint_probe_patching import Patcher
from distlint_probe_recorder import Recorder, record_stem
from distlint_probe_schema import ENV_LAUNCHER, ENV_PARENT
from distlint_probe_scratch import CopyOnWrite


class Hooks:
    def __init__(self, recorder, interventions, patcher):
        self.rec = recorder
        self.exact = interventions
        self.p = patcher
        self.prepared_optimizers = 0
        self.fault_file = None
        self.cow = None  # CopyOnWrite (the scratch folder), set at activation
        self.confirm = None  # Confirm (records of the DL2xx-DL4xx confirmations), at activation

    def patch(self, name, module):
        """Everything that patches module `name` once it is loaded."""
        for owner, table in ((self, PATCHES), (self.confirm, CONFIRM_PATCHES)):
            if owner is not None and name in table:
                getattr(owner, table[name])(module)

    def enable_faulthandler(self, out_dir):
        """A rank killed by SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL leaves its signal in <pid>.fault."""
        try:
            import faulthandler

            self.fault_file = open(os.path.join(out_dir, record_stem() + ".fault"), "w")
            faulthandler.enable(file=self.fault_file, all_threads=False)
        except Exception:
            pass

    # -- seeding ---------------------------------------------------------------------------

    def seed(self, owner, attr, name):
        rec = self

        def replace(original):
            def seeding(*args, **kwargs):
                top = rec.rec.seed_depth == 0
                rec.rec.seed_depth += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    rec.rec.seed_depth -= 1
                    if top and rec.rec.enabled:
                        rec.p.guard(name, rec.rec.seeded, name, args, kwargs)

            return seeding

        self.p.wrap(owner, attr, name, replace=replace)

    def patch_random(self, module):
        self.seed(module, "seed", "random.seed")
        self.rec.rng("import:python")

    def patch_numpy_random(self, module):
        self.seed(module, "seed", "numpy.random.seed")
        self.rec.rng("import:numpy")

    def patch_accelerate_random(self, module):
        self.seed(module, "set_seed", "accelerate.utils.set_seed")

    def patch_xla(self, module):
        self.seed(module, "set_rng_state", "xm.set_rng_state")

    # -- torch -----------------------------------------------------------------------------

    def patch_torch(self, torch):
        rec, p = self.rec, self.p
        if self.cow is not None:
            self.cow.wrap_saver(torch, "save", "torch.save (copy on write)", 1, "f")
        self.seed(torch, "manual_seed", "torch.manual_seed")
        self.seed(torch.random, "manual_seed", "torch.random.manual_seed")
        self.seed(torch, "seed", "torch.seed")
        try:
            self.seed(torch.cuda, "manual_seed_all", "torch.cuda.manual_seed_all")
            self.seed(torch.cuda, "manual_seed", "torch.cuda.manual_seed")
        except Exception:
            pass

        # Optimizer updates: torch's own global step hooks (no patch needed).
        try:
            from torch.optim.optimizer import (
                register_optimizer_step_post_hook,
                register_optimizer_step_pre_hook,
            )

            register_optimizer_step_pre_hook(
                lambda opt, a, k: p.guard("optimizer pre-hook", rec.before_step, opt)
            )
            register_optimizer_step_post_hook(
                lambda opt, a, k: p.guard("optimizer post-hook", rec.after_step, opt)
            )
            p.applied.append("optimizer step hooks")
        except Exception as exc:
            p.skipped["optimizer step hooks"] = repr(exc)

        # Forwards: torch's global module hooks; only top-level calls are looked at.
        try:
            from torch.nn.modules import module as nn_module

            def pre(module, args):
                if rec.module_depth == 0:
                    rec.inner_autocast, rec.inner_calls = None, 0
                elif rec.inner_autocast is None:
                    rec.inner_calls += 1
                    # autocast entered inside the top-level forward (Fabric's and Accelerate's
                    # wrappers enter it there, and convert the outputs back to fp32)
                    rec.inner_autocast = rec.autocast_now()
                rec.module_depth += 1

            def post(module, args, kwargs, output):
                rec.module_depth = max(0, rec.module_depth - 1)
                if rec.module_depth == 0 and rec.enabled:
                    p.guard("forward hook", rec.on_forward, module, args, kwargs, output)

            nn_module.register_module_forward_pre_hook(pre)
            nn_module.register_module_forward_hook(post, with_kwargs=True, always_call=True)
            p.applied.append("module forward hooks")
        except Exception as exc:
            p.skipped["module forward hooks"] = repr(exc)

        # The tensor a plain-torch script hands to backward (Accelerate's backward is wrapped
        # below and records the user's own loss; this one then stays quiet). The guard: the
        # original Tensor.backward is called with exactly its arguments; only a scalar that
        # requires grad is recorded, and only at the top level.
        def tensor_backward(original):
            def backward(tensor, *args, **kwargs):
                if rec.backward_depth == 0 and rec.enabled:
                    p.guard("Tensor.backward", _maybe_loss, tensor)
                rec.backward_depth += 1
                try:
                    return original(tensor, *args, **kwargs)
                finally:
                    rec.backward_depth -= 1

            return backward

        def _maybe_loss(tensor):
            if tensor.numel() == 1 and tensor.requires_grad:
                rec.record_loss(tensor, "Tensor.backward")

        if getattr(torch.Tensor.backward, "__module__", "") == "torch._tensor":
            p.wrap(torch.Tensor, "backward", "Tensor.backward", replace=tensor_backward)
        else:
            p.skipped["Tensor.backward"] = "replaced by someone else already"

        # Mixed precision: a GradScaler scaling the loss (torch.cuda.amp's is a subclass).
        amp = getattr(torch, "amp", None)
        scaler_cls = getattr(amp, "GradScaler", None) if amp is not None else None
        if scaler_cls is not None:

            def scaled(result, args, kwargs):
                if args and getattr(args[0], "is_enabled", lambda: True)():
                    rec.scaled_since_step += 1

            p.wrap(scaler_cls, "scale", "GradScaler.scale", after=scaled)

        # DataLoaders: where each is built, and the batches each hands to the script.
        from torch.utils.data import dataloader as dl_module

        p.wrap(
            dl_module.DataLoader,
            "__init__",
            "DataLoader.__init__",
            after=lambda result, args, kwargs: (
                rec.loader_built(args[0]) if type(args[0]) is dl_module.DataLoader else None
            ),
        )
        base = dl_module._BaseDataLoaderIter

        def it_init(result, args, kwargs):
            args[0]._distlint_loader = rec.loader_id(args[1])

        p.wrap(base, "__init__", "DataLoader iterator", after=it_init)

        def it_next(original):
            def __next__(it):
                if rec.loader_depth or not rec.enabled:
                    return original(it)
                p.guard("DataLoader batches", rec.before_first_batch)
                batch = original(it)
                p.guard(
                    "DataLoader batches",
                    rec.on_batch,
                    getattr(it, "_distlint_loader", None),
                    batch,
                )
                return batch

            return __next__

        p.wrap(base, "__next__", "DataLoader batches", replace=it_next)

        # Plain torch DDP: the process group is the config record.
        dist = torch.distributed
        if dist.is_available():
            p.wrap(
                dist,
                "init_process_group",
                "init_process_group",
                after=lambda result, args, kwargs: rec.record_process_group(dist),
            )
        rec.rng("import:torch")

    # -- Accelerate ------------------------------------------------------------------------

    def patch_accelerator(self, module):
        rec, p, exact = self.rec, self.p, self.exact
        cls = module.Accelerator
        p.wrap(
            cls,
            "__init__",
            "Accelerator.__init__",
            after=lambda result, args, kwargs: rec.record_accelerator(args[0]),
        )

        def prepare(original):
            def wrapper(acc, *args, **kwargs):
                args = list(args)
                info = p.guard("Accelerator.prepare", self.before_prepare, args) or ([], [])
                result = original(acc, *args, **kwargs)
                p.guard("Accelerator.prepare", self.after_prepare, acc, info, result)
                return result

            return wrapper

        p.wrap(cls, "prepare", "Accelerator.prepare", replace=prepare)

        p.wrap(
            cls,
            "backward",
            "Accelerator.backward",
            replace=framework_backward(rec, p, "Accelerator.backward", "accelerator.backward"),
        )
        del exact

    def before_prepare(self, args):
        """Record the loaders and optimizers handed to prepare; --exact may swap them (in args)."""
        torch = sys.modules["torch"]
        DataLoader = torch.utils.data.DataLoader
        Optimizer = torch.optim.Optimizer
        loaders = []
        for i, obj in enumerate(args):
            if isinstance(obj, DataLoader):
                origin, native, note = self.rec.loader_id(obj), obj.batch_size, None
                args[i], note = self.exact.rebuild_loader(obj)
                loaders.append((i, origin, native, note))
        schedulers = tuple(
            t
            for t in (
                getattr(torch.optim.lr_scheduler, n, None) for n in ("LRScheduler", "_LRScheduler")
            )
            if t
        )
        for obj in args:
            if schedulers and isinstance(obj, schedulers):
                self.rec.emit(
                    "note", become_rank=True, message=f"scheduler prepared: {type(obj).__name__}"
                )
        for obj in args:
            if isinstance(obj, Optimizer):
                native = [float(g.get("lr", float("nan"))) for g in obj.param_groups]
                bases = [g.get("initial_lr") for g in obj.param_groups]
                index = self.prepared_optimizers
                self.prepared_optimizers += 1
                applied = self.exact.override_lrs(obj, index, args)
                self.rec.emit(
                    "optimizer",
                    become_rank=True,
                    index=index,
                    native_lrs=native,
                    lrs=applied,
                    # a scheduler built before prepare: its base LRs (the peak of a warmup)
                    native_base=[float(b) if isinstance(b, (int, float)) else None for b in bases],
                )
        return loaders, []

    def after_prepare(self, acc, info, result):
        loaders, _ = info
        objects = result if isinstance(result, tuple) else (result,)
        for i, origin, native, note in loaders:
            if i >= len(objects):
                continue
            dl = objects[i]
            try:
                length = len(dl)
            except Exception:
                length = None
            total = getattr(dl, "total_batch_size", None)
            per_device = getattr(dl, "batch_size", None)
            if total and not per_device:
                per_device = total // max(1, int(getattr(acc, "num_processes", 1) or 1))
            self.rec.emit(
                "dataloader",
                become_rank=True,
                loader=self.rec.loader_id(dl),
                origin=origin,
                batch_size=per_device,
                total_batch_size=total,
                native_batch_size=native,
                length=length,
                note=note,
            )
        if any(note is None for _, _, _, note in loaders):
            for obj in objects:
                self.exact.step_scheduler_as_on_n(obj, self.rec.note)
        self.rec.rng("prepare")

    # -- Lightning Fabric --------------------------------------------------------------------

    def patch_fabric(self, module):
        """`Fabric.setup` / `setup_module` / `setup_optimizers`: the Fabric that trains (its
        precision and world size are recorded as the run's config, once per Fabric)."""
        rec, p = self.rec, self.p
        cls = getattr(module, "Fabric", None)
        if cls is None:
            return
        for name in ("setup", "setup_module", "setup_optimizers"):
            p.wrap(
                cls,
                name,
                f"Fabric.{name}",
                after=lambda result, args, kwargs: rec.record_fabric(args[0]),
            )

    def patch_safetensors(self, module):
        if self.cow is not None:
            self.cow.wrap_saver(
                module, "save_file", "safetensors save_file (copy on write)", 1, "filename"
            )

    def patch_data_loader(self, module):
        """Accelerate's prepared loaders iterate the wrapped loader themselves: record at their level."""
        rec, p = self.rec, self.p
        for name in ("DataLoaderShard", "DataLoaderDispatcher", "SkipDataLoader"):
            cls = getattr(module, name, None)
            if cls is None or "__iter__" not in vars(cls):
                continue

            def make(original):
                def __iter__(loader):
                    if not rec.enabled:
                        yield from original(loader)
                        return
                    p.guard("prepared DataLoader", rec.before_first_batch)
                    iterator = original(loader)
                    key = rec.loader_id(loader)
                    while True:
                        rec.loader_depth += 1
                        try:
                            batch = next(iterator)
                        except StopIteration:
                            return
                        finally:
                            rec.loader_depth -= 1
                        p.guard("prepared DataLoader", rec.on_batch, key, batch)
                        yield batch

                return __iter__

            p.wrap(cls, "__iter__", f"{name}.__iter__", replace=make)


PATCHES = {
    "random": "patch_random",
    "numpy.random": "patch_numpy_random",
    "torch": "patch_torch",
    "accelerate.utils.random": "patch_accelerate_random",
    "accelerate.accelerator": "patch_accelerator",
    "accelerate.data_loader": "patch_data_loader",
    "torch_xla.core.xla_model": "patch_xla",
    "safetensors.torch": "patch_safetensors",
    "lightning.fabric.fabric": "patch_fabric",
    "lightning_fabric.fabric": "patch_fabric",
}


class _PatchingLoader:
    """Wraps a module's loader: runs the module, then patches it. Everything else is delegated."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception as exc:
            sys.stderr.write(f"distlint verify: could not instrument {module.__name__}: {exc!r}\n")

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder:
    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES and name not in CONFIRM_PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, lambda module: self.hooks.patch(name, module))
        return spec


def _parent_death_signal():
    """Die with the parent: the launcher dies with verify, a rank with its launcher (Linux).

    Only for processes whose parent is verify or the launcher: a helper the script daemonizes
    keeps its normal life (verify finds it through the process tree and its tag).
    """
    parent = os.environ.get(ENV_PARENT)
    ppid = os.getppid()
    if parent and str(ppid) == parent:
        os.environ[ENV_LAUNCHER] = str(os.getpid())  # our children see who their launcher is
    elif os.environ.get(ENV_LAUNCHER) != str(ppid):
        return
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != ppid:  # the parent died before prctl took effect
            os._exit(1)
    except Exception:
        pass


def activate(out_dir):
    import atexit

    _parent_death_signal()
    recorder = Recorder(out_dir)
    patcher = Patcher(recorder.note)
    recorder.patches = patcher
    hooks = Hooks(recorder, Interventions(), patcher)
    hooks.enable_faulthandler(out_dir)
    hooks.cow = CopyOnWrite(patcher, recorder.note)
    hooks.cow.install()
    hooks.confirm = Confirm(recorder, patcher)
    for name in {**PATCHES, **CONFIRM_PATCHES}:
        module = sys.modules.get(name)
        if module is not None:
            hooks.patch(name, module)
    sys.meta_path.insert(0, _Finder(hooks))
    sys.excepthook = recorder.excepthook(sys.excepthook)
    atexit.register(recorder.at_exit)
    os.register_at_fork(after_in_child=recorder.disable_in_child)
    return hooks
