"""The recorder: what one process of the run did, as JSON lines (schema in distlint_probe_schema).

It only observes. The one thing it does to the run is to end it: after --max-steps updates (or
once the sample target is reached) every rank leaves at the same point (barrier, destroy the
process group, ``os._exit(0)``). The --exact interventions live in distlint_probe_interventions.

What an *update* is: one real optimizer step (a global optimizer step hook). Its *samples*: the
first dimension of the inputs forwarded, with grad enabled, through a module holding trainable
parameters (a prepared / DDP-wrapped model, or the bare model), called at the top level (not from
inside another module), whose output a backward pass then reached (a hook on that output), since
the previous update. A forward no backward reached (evaluation with grad on, a sanity check) is
counted apart as `untrained`; DataLoader batches are recorded beside, to cross-check.
"""

import os
import sys

from distlint_probe_schema import (
    ENV_BATCH_SCALE,
    ENV_MAX_SAMPLES,
    ENV_MAX_STEPS,
    ENV_SCRIPT,
    SCHEMA_VERSION,
)

# The parameter fingerprint: values sampled per update, elements reduced per update at most
FP_SAMPLES = 16
FP_CAP = 1 << 24

_INTERNAL = (os.sep + "torch" + os.sep, os.sep + "accelerate" + os.sep, os.sep + "distlint_probe")


def user_frame(depth=2):
    """file:line of the nearest caller outside torch, accelerate and the probe."""
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    while frame is not None:
        name = frame.f_code.co_filename
        if not any(part in name for part in _INTERNAL) and "importlib" not in name:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def autocast_dtype(torch, device_type):
    """The autocast dtype in force for `device_type` ("bfloat16"), or None when autocast is off."""
    try:
        if not torch.is_autocast_enabled(device_type):
            return None
        return str(torch.get_autocast_dtype(device_type)).replace("torch.", "")
    except TypeError:  # torch < 2.4: per-device functions
        if device_type == "cpu":
            on, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
        else:
            on, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        return str(dtype).replace("torch.", "") if on else None
    except Exception:
        return None


def frameworks_loaded():
    """The training frameworks the process has imported (what formed its group, and in whose
    words the report's advice is phrased)."""
    names = ("accelerate", "lightning.fabric", "lightning_fabric", "torch_xla")
    return [n for n in names if n in sys.modules]


def children_of(pid=None):
    """Pids of the live children of `pid` (this process by default), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            if int(data[data.rindex(b")") + 2 :].split()[1]) == pid:
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def record_stem(pid=None):
    """The name of this process's record files: `<pid>`, or `node<G>-<pid>` on torchrun node
    G > 0 (ranks of different machines may share a pid, in containers often do, and several
    nodes write into one shared folder under srun)."""
    node = os.environ.get("GROUP_RANK") or ""
    pid = os.getpid() if pid is None else pid
    return f"{pid}" if node in ("", "0") else f"node{node}-{pid}"


class Recorder:
    def __init__(self, out_dir):
        import json
        import time

        self.json = json
        self.time = time
        self.out_dir = out_dir
        self.script = os.environ.get(ENV_SCRIPT, "")
        self.max_steps = int(os.environ.get(ENV_MAX_STEPS, "0") or 0)
        self.max_samples = int(os.environ.get(ENV_MAX_SAMPLES, "0") or 0)
        self.enabled = True
        self.file = None
        self.pending = []  # records made before this process turned out to be a rank
        self.updates = 0
        self.step_counts = {}  # id(optimizer) -> updates
        self.optimizer_index = {}  # id(optimizer) -> order of first appearance
        self.pending_lrs = {}
        self.pending_base = {}
        self.scaled_since_step = 0  # GradScaler.scale calls since the last update
        self.seed_depth = 0
        self.backward_depth = 0
        self.loader_depth = 0
        self.module_depth = 0
        self.seen_first_batch = False
        self.stopping = False
        self.samples_total = 0
        self.samples_known = True
        # forwards of the current update
        self.forwards = []  # per grad-enabled top-level forward: {"size","numel","checksum","trained"}
        self.loaders_since_step = []
        self.trainable = {}  # id(module) -> bool
        self.inner_autocast = None  # autocast seen inside the current top-level forward
        self.inner_calls = 0  # modules called inside it before autocast was seen
        self.fabrics = set()  # id() of each Fabric recorded (its setup calls record it once)
        self.loader_ids = {}  # id(DataLoader) -> small int
        self.patches = None  # the Patcher (set by the hooks)
        self.epoch_bound = None  # --epochs: loaders of an update -> whether to stop there
        self.params_before = None  # fingerprint of the first optimizer's parameters, first update

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

    def note(self, message):
        self.emit("note", message=message)

    def _open(self):
        path = os.path.join(self.out_dir, record_stem() + ".jsonl")
        self.file = open(path, "a", encoding="utf-8")
        keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK")
        self._write(
            {
                "kind": "header",
                "t": self.time.time(),
                "schema": SCHEMA_VERSION,
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "argv": list(getattr(sys, "argv", [])),
                "env": {k: os.environ.get(k) for k in keys},
                "cwd": os.getcwd(),
                "max_steps": self.max_steps,
                "max_samples": self.max_samples,
                "batch_scale": int(os.environ.get(ENV_BATCH_SCALE, "1") or 1),
            }
        )
        if self.patches is not None:
            self._write(
                {
                    "kind": "patches",
                    "t": self.time.time(),
                    "applied": list(self.patches.applied),
                    "skipped": dict(self.patches.skipped),
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

    def seeded(self, name, args, kwargs):
        ints = [a for a in list(args) + list(kwargs.values()) if isinstance(a, int)]
        self.emit(
            "seed",
            name=name,
            args=[repr(a)[:40] for a in args],
            kwargs={k: repr(v)[:40] for k, v in kwargs.items()},
            ints=[int(i) for i in ints if not isinstance(i, bool)],
            where=user_frame(3),
            fp=self.fingerprints(),
        )

    # -- tensors ---------------------------------------------------------------------------

    def tensors_in(self, obj, out, depth=0):
        torch = sys.modules["torch"]
        if depth > 4 or len(out) > 64:
            return out
        if isinstance(obj, torch.Tensor):
            out.append(obj)
        elif isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__")):
            try:
                for key in list(obj.keys()):
                    self.tensors_in(obj[key], out, depth + 1)
            except Exception:
                pass
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                self.tensors_in(item, out, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.nn.Module)):
            # an output object (SimpleNamespace, a dataclass): its attributes
            try:
                for value in list(vars(obj).values()):
                    self.tensors_in(value, out, depth + 1)
            except Exception:
                pass
        return out

    def summarize(self, obj):
        """(first dimension, numel of that tensor, order-independent checksum) of the tensors in obj."""
        torch = sys.modules["torch"]
        tensors = self.tensors_in(obj, [])
        size = numel = None
        parts = []
        with torch.no_grad():
            for t in tensors:
                if t.dim() > 0 and size is None:
                    size, numel = int(t.shape[0]), int(t.numel())
                if t.is_complex() or t.is_meta:
                    continue
                d = t.detach().to(torch.float64)
                parts.append(torch.stack([d.sum(), (d * d).sum()]).cpu())
            checksum = torch.stack(parts).sum(0).tolist() if parts else None
        return size, numel, checksum

    # -- DataLoaders -----------------------------------------------------------------------

    def loader_id(self, loader):
        key = id(loader)
        if key not in self.loader_ids:
            self.loader_ids[key] = len(self.loader_ids) + 1
        return self.loader_ids[key]

    def loader_built(self, loader):
        sampler = getattr(loader, "sampler", None)
        batch_sampler = getattr(loader, "batch_sampler", None)
        inner = getattr(batch_sampler, "sampler", None)
        self.emit(
            "loader",
            loader=self.loader_id(loader),
            where=user_frame(3),
            batch_size=getattr(loader, "batch_size", None),
            sampler=type(sampler).__name__ if sampler is not None else None,
            batch_sampler=type(batch_sampler).__name__ if batch_sampler is not None else None,
            inner_sampler=type(inner).__name__ if inner is not None else None,
            dataset=type(getattr(loader, "dataset", None)).__name__,
        )

    def before_first_batch(self):
        if not self.seen_first_batch:
            self.seen_first_batch = True
            self.rng("ready")

    def on_batch(self, loader_key, batch):
        size, _, checksum = self.summarize(batch)
        if loader_key is not None and loader_key not in self.loaders_since_step:
            self.loaders_since_step.append(loader_key)
        self.emit("batch", loader=loader_key, size=size, checksum=checksum)

    # -- forwards --------------------------------------------------------------------------

    def holds_trainable(self, module):
        key = id(module)
        known = self.trainable.get(key)
        if known is None:
            known = False
            try:
                for p in module.parameters():
                    if p.requires_grad:
                        known = True
                        break
            except Exception:
                pass
            if len(self.trainable) > 10000:
                self.trainable.clear()
            self.trainable[key] = known
        return known

    def on_forward(self, module, args, kwargs, output):
        """A top-level forward finished: keep it if grad is on and the module trains something."""
        torch = sys.modules["torch"]
        if not self.enabled or not torch.is_grad_enabled() or not self.holds_trainable(module):
            return
        outs = [t for t in self.tensors_in(output, []) if t.requires_grad]
        if not outs:
            return
        self.before_first_batch()
        size, numel, checksum = self.summarize((args, kwargs))
        entry = {"size": size, "numel": numel, "checksum": checksum, "trained": False}
        entry["autocast"] = autocast_dtype(torch, outs[0].device.type) or self.inner_autocast
        # no module ran inside it: an autocast entered within its own forward (a wrapper's
        # patched forward) cannot be seen
        entry["opaque"] = not entry["autocast"] and not self.inner_calls
        entry["out_dtype"] = str(outs[0].dtype).replace("torch.", "")
        self.forwards.append(entry)
        if len(self.forwards) > 4096:
            self.forwards = self.forwards[-4096:]

        def reached(grad, entry=entry):
            entry["trained"] = True  # a backward pass went through this forward's output

        outs[0].register_hook(reached)

    def autocast_now(self):
        """The autocast dtype in force now (CUDA first, then CPU), or None; never raises."""
        torch = sys.modules.get("torch")
        try:
            for device in ("cuda", "cpu"):
                dtype = autocast_dtype(torch, device)
                if dtype:
                    return dtype
        except Exception:
            pass
        return None

    def precision_of(self, optimizer, trained):
        """What precision this update really ran in: autocast over its trained forwards, the
        dtype of the parameters and gradients stepped, and whether a GradScaler scaled it."""
        casts = sorted({f.get("autocast") or "off" for f in trained})
        outs = sorted({f.get("out_dtype") or "?" for f in trained})
        param = grad = None
        for group in optimizer.param_groups:
            for prm in group.get("params", []):
                param = str(prm.dtype).replace("torch.", "")
                if prm.grad is not None:
                    grad = str(prm.grad.dtype).replace("torch.", "")
                    break
            if grad is not None:
                break
        scaled = self.scaled_since_step
        self.scaled_since_step = 0
        opaque = sum(1 for f in trained if f.get("opaque"))
        return {"autocast": casts, "outputs": outs, "param": param, "grad": grad,
                "scaler": scaled, "opaque": opaque}  # fmt: skip

    # -- parameters ------------------------------------------------------------------------

    def param_fingerprint(self, optimizer):
        """A cheap fingerprint of the parameters `optimizer` steps, equal on ranks holding equal
        parameters: sum and sum of squares (over every `stride`-th element, at most FP_CAP
        elements per update), FP_SAMPLES values at fixed positions, and the count and
        shape of what was fingerprinted. `sharded`: a parameter is a shard (FSDP's FlatParameter,
        a DTensor, a DeepSpeed ZeRO parameter), so ranks hold different values by design.
        One host sync per call; None when there is nothing to fingerprint; never raises."""
        torch = sys.modules.get("torch")
        try:
            params = [
                p
                for group in optimizer.param_groups
                for p in group.get("params", [])
                if isinstance(p, torch.Tensor) and p.device.type != "meta"
            ]
            total = sum(p.numel() for p in params)
            if not total:
                return None
            sharded = any(
                type(p).__name__ in ("FlatParameter", "DTensor") or hasattr(p, "ds_id")
                for p in params
            )
            stride = max(1, -(-total // FP_CAP))
            marks = sorted({(i * total) // FP_SAMPLES for i in range(FP_SAMPLES)})
            parts, picks, start, counted = [], [], 0, 0
            with torch.no_grad():
                for p in params:
                    flat = p.detach().reshape(-1)
                    offset = (-start) % stride  # a global stride across the parameters
                    part = flat[offset::stride] if stride > 1 else flat
                    if part.is_complex():
                        part = torch.view_as_real(part).reshape(-1)
                    counted += part.numel()
                    if part.dtype not in (torch.float32, torch.float64):
                        part = part.float()  # half/bf16: summed in fp32, like fp32 itself
                    # per tensor in its own precision (fast; equal inputs give equal bits),
                    # across tensors in float64
                    parts.append(part.sum().to(torch.float64))
                    parts.append(torch.dot(part, part).to(torch.float64))
                    end = start + flat.numel()
                    inside = [m - start for m in marks if start <= m < end]
                    if inside:
                        picked = flat[torch.tensor(inside, device=flat.device)]
                        picks.append(picked.abs() if picked.is_complex() else picked)
                    start = end
                values = torch.stack(parts).reshape(-1, 2).sum(0)
                sample = torch.cat([x.to(torch.float64) for x in picks]) if picks else values[:0]
                both = torch.cat([values, sample.to(values.device)]).cpu().tolist()
            return {
                "sum": both[0], "sq": both[1], "sample": both[2:], "numel": total,
                "counted": counted, "stride": stride, "tensors": len(params),
                "shapes": self.shapes_digest(params), "sharded": sharded,
            }  # fmt: skip
        except Exception:
            return None

    @staticmethod
    def shapes_digest(params):
        import zlib

        text = ";".join(",".join(map(str, p.shape)) for p in params)
        return zlib.crc32(text.encode()) & 0xFFFFFFFF

    # -- losses ----------------------------------------------------------------------------

    def loss_factor(self, loss):
        """The product of constant factors at the top of the loss (x / k, x * c, a grad scaler)."""
        factor = 1.0
        node = getattr(loss, "grad_fn", None)
        for _ in range(4):
            if node is None:
                break
            name = type(node).__name__
            if not (name.startswith("DivBackward") or name.startswith("MulBackward")):
                break
            const = None
            for attr in ("_saved_other", "_saved_self"):
                try:
                    value = getattr(node, attr)
                except Exception:
                    continue
                if hasattr(value, "numel") and value.numel() == 1 and not value.requires_grad:
                    const = float(value)
                    break
                if isinstance(value, (int, float)):
                    const = float(value)
                    break
            if const is None or const == 0:
                break
            factor *= (1.0 / const) if name.startswith("Div") else const
            nexts = [f for f, _ in node.next_functions if f is not None]
            node = nexts[0] if len(nexts) == 1 else None
        return factor

    def record_loss(self, loss, source):
        try:
            value = float(loss.detach().float().mean().item())
        except Exception:
            return
        self.emit(
            "loss", become_rank=True, value=value, factor=self.loss_factor(loss), source=source
        )

    # -- optimizer steps -------------------------------------------------------------------

    def before_step(self, optimizer):
        if not self.enabled:
            return
        key = id(optimizer)
        if key not in self.optimizer_index:
            self.optimizer_index[key] = len(self.optimizer_index)
        if self.updates == 0 and not self.step_counts:
            self.rng("first_step", become_rank=True)
            self.params_before = self.param_fingerprint(optimizer)
        groups = optimizer.param_groups
        self.pending_lrs[key] = [float(g.get("lr", float("nan"))) for g in groups]
        # A scheduler's base LR: `initial_lr` (LambdaLR, warmup schedules: the peak), `max_lr`
        # (OneCycleLR): the peak of a schedule that has not reached it within the run.
        bases = [g.get("max_lr", g.get("initial_lr")) for g in groups]
        self.pending_base[key] = [float(b) if isinstance(b, (int, float)) else None for b in bases]

    def after_step(self, optimizer):
        if not self.enabled:
            return
        key = id(optimizer)
        index = self.optimizer_index.get(key, 0)
        self.step_counts[key] = self.step_counts.get(key, 0) + 1
        self.updates = max(self.step_counts.values())
        data = {"samples": None, "numel": None, "checksum": None, "forwards": 0, "untrained": 0}
        if index == 0:
            trained = [f for f in self.forwards if f["trained"]]
            data["forwards"] = len(trained)
            data["untrained"] = len(self.forwards) - len(trained)
            if trained and all(f["size"] is not None for f in trained):
                data["samples"] = sum(f["size"] for f in trained)
                data["numel"] = sum(f["numel"] or 0 for f in trained)
                sums = [f["checksum"] for f in trained]
                if all(isinstance(s, list) and len(s) == 2 for s in sums):
                    data["checksum"] = [sum(s[0] for s in sums), sum(s[1] for s in sums)]
            data["precision"] = self.precision_of(optimizer, trained)
            data["params"] = self.param_fingerprint(optimizer)
            if self.params_before is not None:
                data["params_before"], self.params_before = self.params_before, None
            self.forwards = []
            data["loaders"] = self.loaders_since_step
            self.loaders_since_step = []
            if data["samples"] is None:
                self.samples_known = False
            else:
                self.samples_total += data["samples"]
        else:
            data["loaders"] = []
        self.emit(
            "step",
            become_rank=True,
            n=self.step_counts[key],
            opt=index,
            lrs=self.pending_lrs.pop(key, None),
            base_lrs=self.pending_base.pop(key, None),
            **data,
        )
        if self.stopping:
            return
        if self.max_steps and self.updates >= self.max_steps:
            self.stop("max_steps")
        elif self.max_samples and self.samples_known and self.samples_total >= self.max_samples:
            self.stop("max_samples")
        elif self.epoch_bound is not None and self.epoch_bound(data.get("loaders")):
            self.stop("epochs")

    def stop(self, reason):
        """Leave at the same point on every rank, without the script's teardown."""
        self.stopping = True
        self.rng("end")
        # The rank leaves with os._exit: its children (DataLoader workers) are left to verify,
        # which ends them; named here so that the report does not blame the script for them.
        self.emit(
            "stop", become_rank=True, updates=self.updates, reason=reason, children=children_of()
        )
        torch = sys.modules.get("torch")
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                if dist.get_world_size() > 1:
                    self.gather_remote(dist)
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

    def gather_remote(self, dist):
        """Several nodes: global rank 0 also writes the records of the ranks on other nodes."""
        local = int(os.environ.get("LOCAL_WORLD_SIZE") or 0)
        world = dist.get_world_size()
        if not local or local >= world:
            return
        try:
            self.file.flush()
            with open(self.file.name, encoding="utf-8") as f:
                mine = f.read()
        except Exception:
            mine = ""
        group_rank = os.environ.get("GROUP_RANK") or os.environ.get("NODE_RANK") or "0"
        gathered = [None] * world
        dist.all_gather_object(gathered, (group_rank, os.getpid(), mine))
        if dist.get_rank() != 0:
            return
        for node, pid, text in gathered:
            if str(node) == str(group_rank) or not text:
                continue
            name = os.path.join(self.out_dir, f"node{node}-{pid}.jsonl")
            if os.path.exists(name):
                continue  # a shared folder (srun): the rank wrote there itself
            with open(name, "w", encoding="utf-8") as f:
                f.write(text)

    def mark_done(self):
        """`<pid>.done`: this rank is finished; the launcher's own teardown need not be waited for."""
        try:
            open(os.path.join(self.out_dir, record_stem() + ".done"), "w").close()
        except OSError:
            pass

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
            modules=frameworks_loaded(),
        )

    # -- Lightning Fabric --------------------------------------------------------------------

    def record_fabric(self, fabric):
        """The Fabric that trained: recorded when it sets up a module or an optimizer (after its
        launch formed the group), once per Fabric. Its precision is the one its plugin applies
        (`"16-mixed"` asked on CPU becomes `"bf16-mixed"`), not the argument's text."""
        if id(fabric) in self.fabrics:
            return
        self.fabrics.add(id(fabric))

        def get(name, default=None):
            try:
                return getattr(fabric, name)
            except Exception:
                return default

        plugin = get("_precision")
        strategy = get("_strategy")
        backend = None
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                backend = str(dist.get_backend())
        except Exception:
            pass
        self.emit(
            "config",
            become_rank=True,
            source="fabric",
            num_processes=get("world_size"),
            process_index=get("global_rank"),
            local_process_index=get("local_rank"),
            distributed_type=type(strategy).__name__ if strategy is not None else None,
            backend=backend,
            mixed_precision=str(getattr(plugin, "precision", None)),
            precision_plugin=type(plugin).__name__ if plugin is not None else None,
            device=str(get("device")),
            modules=frameworks_loaded(),
        )

    def record_process_group(self, dist):
        self.emit(
            "config",
            become_rank=True,
            source="torch.distributed",
            num_processes=dist.get_world_size(),
            process_index=dist.get_rank(),
            distributed_type="torch.distributed",
            backend=str(dist.get_backend()),
            modules=frameworks_loaded(),
        )

    # -- exit paths ------------------------------------------------------------------------

    def excepthook(self, previous):
        recorder = self

        def hook(exc_type, exc, tb):
            try:
                import traceback

                lines = traceback.format_exception(exc_type, exc, tb)
                argv0 = getattr(sys, "argv", [""])[0] or ""
                is_script = os.path.abspath(argv0) == recorder.script
                recorder.emit(
                    "exception",
                    become_rank=recorder.file is not None or is_script,
                    type=exc_type.__name__,
                    message=str(exc)[:2000],
                    traceback="".join(lines)[-4000:],
                    updates=recorder.updates,
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
