"""The record schema shared by the probe (which writes it) and distlint.verify.records (which reads it).

Standard library only, no imports at all: the probe loads this module inside the user's process,
and the reader imports it as ``distlint.verify.probe.distlint_probe_schema``.

Each rank writes ``<pid>.jsonl`` (``node<G>-<pid>.jsonl`` on torchrun node G > 0, since ranks of
different machines may share a pid): one JSON object per line, flushed as written. The first line is
the ``header``; its ``schema`` field is SCHEMA_VERSION. A reader refuses files of another version.
Every record carries ``kind`` and ``t`` (time.time()). The fields each kind must carry are listed
in KINDS; a record may carry more.

Bump SCHEMA_VERSION whenever a field changes meaning or a required field is added.
"""

SCHEMA_VERSION = 2

# Environment of the runs (set by distlint.verify.launch, read by the probe).
ENV_OUT = "DISTLINT_VERIFY_OUT"  # folder for the records; activates the probe
ENV_SCRIPT = "DISTLINT_VERIFY_SCRIPT"  # absolute path of the user's script
ENV_TAG = "DISTLINT_VERIFY_TAG"  # token carried by every process of one run
ENV_PARENT = "DISTLINT_VERIFY_PARENT"  # pid of the verify process
ENV_LAUNCHER = "DISTLINT_VERIFY_LAUNCHER"  # pid of the launcher (set by the probe in the launcher)
ENV_MAX_STEPS = "DISTLINT_VERIFY_MAX_STEPS"  # stop after this many updates (0: never)
ENV_MAX_SAMPLES = "DISTLINT_VERIFY_MAX_SAMPLES"  # stop once this many samples were trained on
ENV_BATCH_SCALE = "DISTLINT_VERIFY_BATCH_SCALE"  # --exact: multiply prepared loaders' batch size
ENV_LRS = "DISTLINT_VERIFY_LRS"  # --exact: JSON list of the N-process run's LRs per optimizer
ENV_NO_PATCH = "DISTLINT_VERIFY_NO_PATCH"  # comma-separated patch labels to leave out
ENV_SCRATCH = "DISTLINT_VERIFY_SCRATCH"  # the run's scratch working folder (copy on write)
ENV_EPOCHS = "DISTLINT_VERIFY_EPOCHS"  # --epochs: stop at the first update of this training pass
ENV_USER_DIR = "DISTLINT_VERIFY_USER_DIR"  # the user's working folder (writes there are noted)
WRITES_SUFFIX = ".writes"  # <pid>.writes: JSON lines, paths of the user's folder opened to write

KINDS = {
    # pid, parent pid, argv, the launcher's RANK/LOCAL_RANK/WORLD_SIZE/..., working directory
    "header": ("schema", "pid", "ppid", "argv", "env"),
    # which patches were installed, and which were left out and why (label -> reason)
    "patches": ("applied", "skipped"),
    # num_processes, process_index, ... from an Accelerator or init_process_group
    "config": ("source", "num_processes", "process_index"),
    # a top-level seeding call: its name, args (repr), the ints among them, caller, fingerprints
    "seed": ("name", "args", "ints", "where", "fp"),
    # generator fingerprints at a named point (import:*, prepare, ready, first_step, end)
    "rng": ("point", "fp"),
    # a DataLoader was built: its id, where in the user's code, batch size, sampler type
    "loader": ("loader", "where", "batch_size", "sampler"),
    # a DataLoader went through Accelerator.prepare: per-device batch, the loader it came from
    "dataloader": ("loader", "origin", "batch_size"),
    # an optimizer went through Accelerator.prepare: its LRs (native_lrs) and what --exact set
    "optimizer": ("index", "native_lrs"),
    # a batch a DataLoader handed to the script: loader id, first dimension, checksum
    "batch": ("loader", "size", "checksum"),
    # the tensor handed to backward: its value, the constant factors at its top (1/accumulation,
    # a gradient scaler), and who called backward
    "loss": ("value", "factor", "source"),
    # one real optimizer update. samples/numel/checksum: inputs forwarded with grad through the
    # trained model since the previous update whose outputs a backward reached (None: unknown);
    # forwards: how many; untrained: grad-enabled forwards no backward reached (not counted);
    # loaders: ids of the DataLoaders that yielded batches since the previous update.
    # Optional: base_lrs (each group's scheduler base LR: initial_lr / max_lr, the peak of a
    # warmup), precision (first optimizer: {"autocast": dtypes over the trained forwards or
    # "off", "outputs": their output dtypes, "param"/"grad": dtypes stepped, "scaler": GradScaler
    # scale calls since the previous update}), params (first optimizer: a fingerprint of the
    # parameters it steps, after the update: {"sum", "sq", "sample", "numel", "counted",
    # "stride", "tensors", "shapes", "sharded"}; equal on ranks that hold equal parameters),
    # params_before (the same, before the first update; first update only)
    "step": ("n", "opt", "lrs", "samples", "numel", "checksum", "forwards", "untrained", "loaders"),
    # the rank reached --max-steps / the sample target and leaves cleanly
    "stop": ("updates", "reason"),
    # for DL204/DL205/DL304/DL401/DL402 (distlint_probe_confirm): a DataLoader pass began; the
    # first indices of a shuffling sampler's pass; a gather/reduce across processes; a gradient
    # clipping call (`offset`: the call's bytecode offset, telling apart two calls on one
    # line); an entry into accelerator.accumulate; a prepared model and whether the
    # Accelerator scales the loss (an fp16 GradScaler)
    "pass": ("loader", "n", "dataset", "batches", "grad", "updates"),
    "order": ("sampler", "cls", "n", "shuffle", "epoch", "prefix"),
    "collective": ("api", "given", "out", "where", "updates"),
    "clip": ("api", "where"),
    "accumulate": ("updates",),
    "amp": ("scaler",),
    "exception": ("type", "message", "traceback", "updates"),
    "exit": ("updates",),
    "note": ("message",),
}


def missing_fields(record):
    """The required fields `record` lacks (an unknown kind lacks everything)."""
    kind = record.get("kind")
    if kind not in KINDS:
        return ["kind"]
    return [f for f in KINDS[kind] if f not in record]
