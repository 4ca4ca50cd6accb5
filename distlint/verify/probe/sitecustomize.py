"""distlint verify probe: records what each rank of a training script really did.

`distlint verify` puts this folder first on PYTHONPATH, so Python imports this module at start-up
in every process of the run. It does nothing unless DISTLINT_VERIFY_OUT is set, and it imports
nothing beyond the standard library: torch, numpy and accelerate are patched only when the script
imports them (an import hook wraps the modules right after they load). Any other sitecustomize
further down sys.path still runs.

A process becomes a *rank* (and writes `<pid>.jsonl` into DISTLINT_VERIFY_OUT) the first time it
creates an Accelerator, initialises a process group, calls backward or steps an optimizer. Each
line is one JSON record, flushed when written:

  header      pid, ppid, argv, the launcher's RANK/LOCAL_RANK/WORLD_SIZE
  config      num_processes, process_index, distributed_type, backend, mixed_precision,
              gradient_accumulation_steps, split_batches, device (Accelerator or init_process_group)
  seed        a seeding call the script made (top-level calls only), with its caller
  rng         fingerprints of python/numpy/torch/cuda/xla generators at a named point
  dataloader  a prepared DataLoader: per-device batch size, length
  batch       one batch handed to the script: size and an order-independent checksum
  loss        the loss passed to accelerator.backward (or loss.backward in plain torch)
  step        one real optimizer update: its number and the LR of every param group before it
  stop        DISTLINT_VERIFY_MAX_STEPS updates reached: the rank leaves cleanly
  exception   an uncaught exception, with the tail of its traceback
  exit        the interpreter is exiting normally (sys.exit or end of script)

Environment (set by distlint.verify.launch):
  DISTLINT_VERIFY_OUT          folder for the records (activates the probe)
  DISTLINT_VERIFY_SCRIPT       absolute path of the user's script
  DISTLINT_VERIFY_MAX_STEPS    stop after this many optimizer updates (0: never)
  DISTLINT_VERIFY_BATCH_SCALE  (--exact, 1-process run) multiply each prepared DataLoader's batch size
  DISTLINT_VERIFY_LRS          (--exact, 1-process run) JSON list of the N-process run's LRs
"""

import os
import sys


def _chain_next_sitecustomize():
    """Run the sitecustomize that this one shadows, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        if os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # another sitecustomize failing must not break the run
        sys.stderr.write(f"distlint verify: the chained sitecustomize failed: {exc!r}\n")


class _Probe:
    def __init__(self, out_dir):
        import json
        import time

        self.json = json
        self.time = time
        self.out_dir = out_dir
        self.script = os.environ.get("DISTLINT_VERIFY_SCRIPT", "")
        self.max_steps = int(os.environ.get("DISTLINT_VERIFY_MAX_STEPS", "0") or 0)
        self.batch_scale = int(os.environ.get("DISTLINT_VERIFY_BATCH_SCALE", "1") or 1)
        lrs = os.environ.get("DISTLINT_VERIFY_LRS")
        self.target_lrs = json.loads(lrs) if lrs else None
        self.enabled = True
        self.file = None
        self.pending = []  # records made before this process turned out to be a rank
        self.updates = 0
        self.step_counts = {}  # id(optimizer) -> updates
        self.optimizer_index = {}  # id(optimizer) -> order of first appearance
        self.pending_lrs = {}
        self.seed_depth = 0
        self.backward_depth = 0
        self.loader_depth = 0
        self.seen_first_batch = False
        self.prepared_optimizers = 0
        self.stopping = False

    # -- writing ---------------------------------------------------------------------------

    def emit(self, kind, become_rank=False, **data):
        if not self.enabled:
            return
        data["kind"] = kind
        data["t"] = self.time.time()
        if self.file is None:
            if not become_rank:
                if len(self.pending) < 1000:
                    self.pending.append(data)
                return
            self._open()
        self._write(data)

    def _open(self):
        path = os.path.join(self.out_dir, f"{os.getpid()}.jsonl")
        self.file = open(path, "a", encoding="utf-8")
        env = {
            k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
        }
        self._write(
            {
                "kind": "header",
                "t": self.time.time(),
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "argv": list(getattr(sys, "argv", [])),
                "env": env,
                "max_steps": self.max_steps,
                "batch_scale": self.batch_scale,
            }
        )
        for record in self.pending:
            self._write(record)
        self.pending = []

    def _write(self, data):
        try:
            self.file.write(self.json.dumps(data, default=repr) + "\n")
            self.file.flush()
        except Exception:
            pass

    def disable_in_child(self):
        """After os.fork(): the child is not a rank (DataLoader workers, the script's own forks)."""
        self.enabled = False
        self.file = None
        self.pending = []

    # -- RNG fingerprints ------------------------------------------------------------------

    def fingerprints(self):
        import hashlib

        def digest(data):
            return hashlib.sha1(data).hexdigest()[:16]

        out = {}
        rnd = sys.modules.get("random")
        if rnd is not None:
            out["python"] = digest(repr(rnd.getstate()).encode())
        np_random = sys.modules.get("numpy.random")
        if np_random is not None and hasattr(np_random, "get_state"):
            try:
                state = np_random.get_state()
                out["numpy"] = digest(state[1].tobytes() + repr(state[2:]).encode())
            except Exception:
                pass
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "random"):
            try:
                out["torch"] = digest(bytes(torch.random.get_rng_state().tolist()))
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    out["cuda"] = digest(bytes(torch.cuda.get_rng_state().tolist()))
            except Exception:
                pass
        xm = sys.modules.get("torch_xla.core.xla_model")
        if xm is not None:
            try:
                out["xla"] = digest(repr(xm.get_rng_state()).encode())
            except Exception:
                pass
        return out

    def rng(self, point, become_rank=False):
        self.emit("rng", become_rank=become_rank, point=point, fp=self.fingerprints())

    # -- seeding calls ---------------------------------------------------------------------

    def wrap_seed(self, name, func):
        probe = self

        def seeding(*args, **kwargs):
            top = probe.seed_depth == 0
            probe.seed_depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                probe.seed_depth -= 1
                if top and probe.enabled:
                    caller = sys._getframe(1)
                    probe.emit(
                        "seed",
                        name=name,
                        args=[repr(a)[:40] for a in args],
                        kwargs={k: repr(v)[:40] for k, v in kwargs.items()},
                        where=f"{caller.f_code.co_filename}:{caller.f_lineno}",
                        fp=probe.fingerprints(),
                    )

        seeding.__wrapped__ = func
        seeding.__name__ = getattr(func, "__name__", name)
        seeding.__doc__ = getattr(func, "__doc__", None)
        seeding._distlint = True
        return seeding

    def patch_seed(self, module, attr, name):
        func = getattr(module, attr, None)
        if func is not None and not getattr(func, "_distlint", False):
            setattr(module, attr, self.wrap_seed(name, func))

    # -- batches ---------------------------------------------------------------------------

    def summarize_batch(self, batch):
        """Size of the batch and an order-independent checksum (sum, sum of squares, count)."""
        torch = sys.modules["torch"]
        tensors = []

        def walk(obj, depth=0):
            if depth > 4:
                return
            if isinstance(obj, torch.Tensor):
                tensors.append(obj)
            elif isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__")):
                try:
                    for key in obj.keys():
                        walk(obj[key], depth + 1)
                except Exception:
                    pass
            elif isinstance(obj, (list, tuple)):
                for item in obj:
                    walk(item, depth + 1)

        walk(batch)
        size = None
        parts = []
        with torch.no_grad():
            for t in tensors:
                if t.dim() > 0 and size is None:
                    size = int(t.shape[0])
                if t.is_complex():
                    continue
                d = t.detach().to(torch.float64)
                parts.append(torch.stack([d.sum(), (d * d).sum()]).cpu())
            checksum = torch.stack(parts).sum(0).tolist() if parts else None
        return size, checksum

    def on_batch(self, batch):
        if not self.seen_first_batch:
            return
        try:
            size, checksum = self.summarize_batch(batch)
        except Exception as exc:
            size, checksum = None, repr(exc)
        self.emit("batch", size=size, checksum=checksum)

    def before_first_batch(self):
        if not self.seen_first_batch:
            self.seen_first_batch = True
            self.rng("ready")

    def wrap_loader_iter(self, original):
        """DataLoaderShard/Dispatcher.__iter__: record what is handed to the script."""
        probe = self

        def __iter__(loader):
            probe.before_first_batch()
            iterator = original(loader)
            while True:
                probe.loader_depth += 1
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                finally:
                    probe.loader_depth -= 1
                probe.on_batch(batch)
                yield batch

        __iter__._distlint = True
        return __iter__

    # -- optimizer hooks -------------------------------------------------------------------

    def optimizer_pre_hook(self, optimizer, args, kwargs):
        if not self.enabled:
            return None
        key = id(optimizer)
        if key not in self.optimizer_index:
            self.optimizer_index[key] = len(self.optimizer_index)
        if self.updates == 0 and not self.step_counts:
            self.rng("first_step", become_rank=True)
        self.pending_lrs[key] = [float(g.get("lr", float("nan"))) for g in optimizer.param_groups]
        return None

    def optimizer_post_hook(self, optimizer, args, kwargs):
        if not self.enabled:
            return
        key = id(optimizer)
        self.step_counts[key] = self.step_counts.get(key, 0) + 1
        self.updates = max(self.step_counts.values())
        self.emit(
            "step",
            become_rank=True,
            n=self.step_counts[key],
            opt=self.optimizer_index.get(key, 0),
            lrs=self.pending_lrs.pop(key, None),
        )
        if self.max_steps and self.updates >= self.max_steps and not self.stopping:
            self.stop()

    def stop(self):
        """K updates done: leave at the same point on every rank, without the script's teardown."""
        self.stopping = True
        self.rng("end")
        self.emit("stop", become_rank=True, updates=self.updates)
        torch = sys.modules.get("torch")
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                if dist.get_world_size() > 1:
                    dist.barrier()
                dist.destroy_process_group()
        except Exception as exc:
            self.emit("note", message=f"leaving the process group failed: {exc!r}")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        self.mark_done()
        os._exit(0)

    def mark_done(self):
        """`<pid>.done`: this rank is finished; the launcher's own teardown need not be waited for."""
        try:
            open(os.path.join(self.out_dir, f"{os.getpid()}.done"), "w").close()
        except OSError:
            pass

    # -- losses ----------------------------------------------------------------------------

    def record_loss(self, loss):
        try:
            value = float(loss.detach().float().mean().item())
        except Exception:
            return
        self.emit("loss", become_rank=True, value=value)

    # -- Accelerate ------------------------------------------------------------------------

    def record_accelerator(self, acc):
        def get(name, default=None):
            try:
                value = getattr(acc, name)
            except Exception:
                return default
            return getattr(value, "value", value)

        try:
            config = acc.dataloader_config
            split_batches = config.split_batches
            seedable = config.use_seedable_sampler
        except Exception:
            split_batches = get("split_batches")
            seedable = None
        try:
            backend = acc.state.backend
        except Exception:
            backend = None
        self.emit(
            "config",
            become_rank=True,
            source="accelerate",
            num_processes=get("num_processes"),
            process_index=get("process_index"),
            local_process_index=get("local_process_index"),
            distributed_type=str(get("distributed_type")),
            backend=backend,
            mixed_precision=str(get("mixed_precision")),
            gradient_accumulation_steps=get("gradient_accumulation_steps"),
            split_batches=split_batches,
            use_seedable_sampler=seedable,
            device=str(get("device")),
        )

    def rebuild_loader(self, loader, scale):
        """--exact, 1-process run: the same DataLoader with batch_size * scale (one global batch)."""
        torch = sys.modules["torch"]
        DataLoader = torch.utils.data.DataLoader
        IterableDataset = torch.utils.data.IterableDataset
        if type(loader) is not DataLoader or loader.batch_size is None:
            return loader, "not a plain DataLoader with batch_size: left as is"
        kwargs = dict(
            batch_size=loader.batch_size * scale,
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

    def wrap_prepare(self, original):
        probe = self

        def prepare(acc, *args, **kwargs):
            torch = sys.modules["torch"]
            DataLoader = torch.utils.data.DataLoader
            Optimizer = torch.optim.Optimizer
            args = list(args)
            loaders = []
            for i, obj in enumerate(args):
                if isinstance(obj, DataLoader):
                    native = obj.batch_size
                    note = None
                    if probe.batch_scale > 1:
                        args[i], note = probe.rebuild_loader(obj, probe.batch_scale)
                    loaders.append((i, native, note))
            optimizers = [(i, o) for i, o in enumerate(args) if isinstance(o, Optimizer)]
            for i, opt in optimizers:
                native = [float(g.get("lr", float("nan"))) for g in opt.param_groups]
                index = probe.prepared_optimizers
                probe.prepared_optimizers += 1
                applied = probe.override_lrs(opt, index, args)
                probe.emit(
                    "optimizer", become_rank=True, index=index, native_lrs=native, lrs=applied
                )
            result = original(acc, *args, **kwargs)
            objects = result if isinstance(result, tuple) else (result,)
            for i, native, note in loaders:
                if i < len(objects):
                    dl = objects[i]
                    try:
                        length = len(dl)
                    except Exception:
                        length = None
                    total = getattr(dl, "total_batch_size", None)
                    per_device = getattr(dl, "batch_size", None)
                    if total and not per_device:
                        per_device = total // max(1, int(getattr(acc, "num_processes", 1) or 1))
                    probe.emit(
                        "dataloader",
                        become_rank=True,
                        batch_size=per_device,
                        total_batch_size=total,
                        native_batch_size=native,
                        length=length,
                        note=note,
                    )
            probe.rng("prepare")
            return result

        prepare._distlint = True
        return prepare

    def override_lrs(self, optimizer, index, prepare_args):
        """--exact: give the 1-process run the N-process run's LRs (and scale its schedulers too)."""
        if not self.target_lrs or index >= len(self.target_lrs):
            return None
        targets = self.target_lrs[index]
        factors = []
        for group, target in zip(optimizer.param_groups, targets):
            current = float(group.get("lr", 0.0))
            factor = target / current if current else 1.0
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

    def wrap_backward(self, original):
        probe = self

        def backward(acc, loss, **kwargs):
            probe.record_loss(loss)
            probe.backward_depth += 1
            try:
                return original(acc, loss, **kwargs)
            finally:
                probe.backward_depth -= 1

        backward._distlint = True
        return backward

    def wrap_init(self, original):
        probe = self

        def __init__(acc, *args, **kwargs):
            original(acc, *args, **kwargs)
            try:
                probe.record_accelerator(acc)
            except Exception as exc:
                probe.emit(
                    "note", become_rank=True, message=f"could not read the Accelerator: {exc!r}"
                )

        __init__._distlint = True
        return __init__

    # -- module patches (run right after a module finishes loading) -------------------------

    def patch_random(self, module):
        self.patch_seed(module, "seed", "random.seed")
        self.rng("import:python")

    def patch_numpy_random(self, module):
        self.patch_seed(module, "seed", "numpy.random.seed")
        self.rng("import:numpy")

    def patch_torch(self, torch):
        probe = self
        self.patch_seed(torch, "manual_seed", "torch.manual_seed")
        self.patch_seed(torch.random, "manual_seed", "torch.manual_seed")
        self.patch_seed(torch, "seed", "torch.seed")
        try:
            self.patch_seed(torch.cuda, "manual_seed_all", "torch.cuda.manual_seed_all")
            self.patch_seed(torch.cuda, "manual_seed", "torch.cuda.manual_seed")
        except Exception:
            pass
        try:
            from torch.optim.optimizer import (
                register_optimizer_step_post_hook,
                register_optimizer_step_pre_hook,
            )

            register_optimizer_step_pre_hook(self.optimizer_pre_hook)
            register_optimizer_step_post_hook(self.optimizer_post_hook)
        except Exception as exc:
            self.emit("note", message=f"no optimizer hooks: {exc!r}")

        # Plain torch: the loss of loss.backward() (Accelerate's backward is recorded above).
        original_backward = torch.Tensor.backward

        def backward(tensor, *args, **kwargs):
            if probe.backward_depth == 0 and probe.enabled:
                try:
                    if tensor.numel() == 1:
                        probe.record_loss(tensor)
                except Exception:
                    pass
            return original_backward(tensor, *args, **kwargs)

        torch.Tensor.backward = backward

        # Plain torch DataLoader iteration (Accelerate's loaders are recorded at their own level).
        from torch.utils.data import dataloader as dl_module

        base = dl_module._BaseDataLoaderIter
        original_next = base.__next__

        def __next__(it):
            if probe.loader_depth:
                return original_next(it)
            probe.before_first_batch()
            batch = original_next(it)
            probe.on_batch(batch)
            return batch

        base.__next__ = __next__

        # Plain torch DDP: the process group is the config record.
        dist = torch.distributed
        if dist.is_available():
            original_init = dist.init_process_group

            def init_process_group(*args, **kwargs):
                result = original_init(*args, **kwargs)
                try:
                    probe.emit(
                        "config",
                        become_rank=True,
                        source="torch.distributed",
                        num_processes=dist.get_world_size(),
                        process_index=dist.get_rank(),
                        distributed_type="torch.distributed",
                        backend=str(dist.get_backend()),
                    )
                except Exception:
                    pass
                return result

            dist.init_process_group = init_process_group
        self.rng("import:torch")

    def patch_accelerate_random(self, module):
        self.patch_seed(module, "set_seed", "accelerate.utils.set_seed")

    def patch_accelerator(self, module):
        cls = module.Accelerator
        cls.__init__ = self.wrap_init(cls.__init__)
        cls.prepare = self.wrap_prepare(cls.prepare)
        cls.backward = self.wrap_backward(cls.backward)

    def patch_data_loader(self, module):
        for name in ("DataLoaderShard", "DataLoaderDispatcher", "SkipDataLoader"):
            cls = getattr(module, name, None)
            if cls is not None and "__iter__" in vars(cls):
                cls.__iter__ = self.wrap_loader_iter(vars(cls)["__iter__"])

    def patch_xla(self, module):
        self.patch_seed(module, "set_rng_state", "xm.set_rng_state")

    # -- exit paths ------------------------------------------------------------------------

    def excepthook(self, previous):
        probe = self

        def hook(exc_type, exc, tb):
            try:
                import traceback

                lines = traceback.format_exception(exc_type, exc, tb)
                is_script = os.path.abspath(getattr(sys, "argv", [""])[0] or "") == probe.script
                probe.emit(
                    "exception",
                    become_rank=probe.file is not None or is_script,
                    type=exc_type.__name__,
                    message=str(exc)[:2000],
                    traceback="".join(lines)[-4000:],
                    updates=probe.updates,
                )
            except Exception:
                pass
            previous(exc_type, exc, tb)

        return hook

    def at_exit(self):
        if self.file is None or not self.enabled:
            return
        self.rng("end")
        self.emit("exit", updates=self.updates)
        self.mark_done()


_PATCHES = {
    "random": "patch_random",
    "numpy.random": "patch_numpy_random",
    "torch": "patch_torch",
    "accelerate.utils.random": "patch_accelerate_random",
    "accelerate.accelerator": "patch_accelerator",
    "accelerate.data_loader": "patch_data_loader",
    "torch_xla.core.xla_model": "patch_xla",
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
    def __init__(self, probe):
        self.probe = probe

    def find_spec(self, name, path=None, target=None):
        method = _PATCHES.get(name)
        if method is None:
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
        spec.loader = _PatchingLoader(spec.loader, getattr(self.probe, method))
        return spec


def _activate(out_dir):
    import atexit

    probe = _Probe(out_dir)
    for name, method in _PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            getattr(probe, method)(module)
    sys.meta_path.insert(0, _Finder(probe))
    sys.excepthook = probe.excepthook(sys.excepthook)
    atexit.register(probe.at_exit)
    os.register_at_fork(after_in_child=probe.disable_in_child)
    return probe


_chain_next_sitecustomize()
if os.environ.get("DISTLINT_VERIFY_OUT"):
    _probe = _activate(os.environ["DISTLINT_VERIFY_OUT"])
