"""The one declared knowledge base of third-party training APIs.

distlint never imports or parses accelerate, transformers, timm, bitsandbytes, apex, DeepSpeed,
schedulefree, torchtune, Lightning Fabric, torch_xla or torch itself: what it knows about them is
written down here, as canonical qualified names (see :func:`distlint.analysis.index.canonical`).
The analysis reads this module; rules ask the analysis (a rule may take the choices of one of
its options from here, never a list of its own).
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------ accelerators and launchers
ACCELERATOR = "accelerate.Accelerator"
STATE_CLASSES = frozenset(
    {"accelerate.PartialState", "accelerate.AcceleratorState", "accelerate.state.GradientState"}
)
FABRIC = "lightning.Fabric"
DATALOADER_CONFIGURATION = "accelerate.utils.DataLoaderConfiguration"

# One process per device through torch.distributed: DDP / FSDP under torchrun or mp.spawn.
DDP_CALLS = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.utils.data.DistributedSampler",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "torch.multiprocessing.spawn",
        "deepspeed.initialize",
    }
)
# Calls that start the process group of a multi-process torch.distributed run.
PROCESS_GROUP_STARTS = frozenset(
    {"torch.distributed.init_process_group", "deepspeed.init_distributed"}
)
DDP_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }
)
# torch_xla multiprocessing: one process per core, each DataLoader yields a per-core batch.
# Only a launcher starts several processes: `MpDeviceLoader` / `ParallelLoader` also run on one.
XLA_MULTIPROCESS = frozenset(
    {
        "torch_xla.distributed.xla_multiprocessing.spawn",
        "torch_xla.launch",
    }
)
# torch_xla SPMD: one process drives every device; the DataLoader batch is the global batch.
XLA_SPMD_CALLS = frozenset({"torch_xla.runtime.use_spmd"})
XLA_SPMD_MODULE = "torch_xla.distributed.spmd"
XLA_MODULE = "torch_xla"

# Tensor / context parallelism: the ranks of one model replica share a batch.
MODEL_PARALLEL_CALLS = frozenset(
    {
        "accelerate.ParallelismConfig",
        "accelerate.parallelism_config.ParallelismConfig",
        "accelerate.utils.ParallelismConfig",
        "accelerate.utils.TorchTensorParallelPlugin",
        "accelerate.utils.MegatronLMPlugin",
        "torch.distributed.device_mesh.init_device_mesh",
        "torch.distributed.tensor.parallel.parallelize_module",
        "torch.distributed.tensor.experimental.context_parallel",
    }
)
MODEL_PARALLEL_PREFIXES = ("torch.distributed.tensor.parallel.",)
MODEL_PARALLEL_KEYWORDS = frozenset({"parallelism_config", "torch_tp_plugin", "megatron_lm_plugin"})
# The model-parallel sizes such a call is given by keyword (each 1 unless given)...
PARALLEL_SIZES = frozenset(
    {"tp_size", "cp_size", "sp_size", "tp_degree", "tensor_parallel_size", "context_parallel_size"}
)
# ... and the configurations that are data-parallel only when every such size is left at 1.
PARALLEL_SIZE_CONFIGS = frozenset(
    {
        "accelerate.ParallelismConfig",
        "accelerate.parallelism_config.ParallelismConfig",
        "accelerate.utils.ParallelismConfig",
        "accelerate.utils.TorchTensorParallelPlugin",
    }
)

# Words a module that sets up data-parallel training on its own spells out (an Accelerator, a
# Fabric, a DDP/FSDP wrapper, DeepSpeed, torch_xla): a followed module without any of them is
# not parsed to ask (see distlint.api: the findings of imported trainer modules).
TRAINING_SETUP_WORDS = (
    b"Accelerator",
    b"Fabric",
    b"DistributedDataParallel",
    b"FullyShardedDataParallel",
    b"fully_shard",
    b"deepspeed",
    b"torch_xla",
)

# ------------------------------------------------------------------ the number of processes
# Values (qualified names, calls end in `()`) that ARE the number of data-parallel processes.
PROCESS_COUNT = frozenset(
    {
        "accelerate.Accelerator().num_processes",
        "accelerate.PartialState().num_processes",
        "accelerate.AcceleratorState().num_processes",
        "accelerate.Accelerator().state.num_processes",
        "torch.distributed.get_world_size()",
        "torch.distributed.distributed_c10d.get_world_size()",
        "torch_xla.runtime.world_size()",
        "torch_xla.runtime.global_runtime_device_count()",
        "torch_xla.core.xla_model.xrt_world_size()",
        "torch_xla.core.xla_model.get_world_size()",
        "lightning.Fabric().world_size",
        "os.environ[WORLD_SIZE]",
        "horovod.torch.size()",
        "deepspeed.comm.get_world_size()",
        "torch.distributed.GroupMember.WORLD.size()",
    }
)
# Device counts: the number of processes a single-node launcher starts (mp.spawn nprocs=...).
DEVICE_COUNTS = frozenset(
    {
        "torch.cuda.device_count()",
        "torch.xpu.device_count()",
        "torch_xla.runtime.addressable_device_count()",
    }
)
# A DeviceMesh (or one of its dimensions, `mesh["dp"]`): its `.size()` counts processes.
DEVICE_MESH = "torch.distributed.device_mesh.init_device_mesh()"
# Attributes holding the process count on an Accelerator / state / Fabric instance.
PROCESS_COUNT_ATTRIBUTES = frozenset({"num_processes", "world_size"})
# Arguments that say how many processes a launcher starts: what is given there IS the count.
PROCESS_COUNT_ARGUMENTS = {
    "lightning.Fabric": ("devices", None),
    "torch.multiprocessing.spawn": ("nprocs", 2),
    "torch.multiprocessing.start_processes": ("nprocs", 2),
    "torch_xla.distributed.xla_multiprocessing.spawn": ("nprocs", 2),
}
ENV_WORLD_SIZE = "WORLD_SIZE"
# What a torch.distributed launcher (torchrun, torch.distributed.launch) sets for each process.
LAUNCHER_ENV = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE"})
ENV_READERS = frozenset({"os.environ.get()", "os.getenv()"})
# Rank readers: a dataset split with one of these is split by process.
RANK_VALUES = frozenset(
    {
        "accelerate.Accelerator().process_index",
        "accelerate.PartialState().process_index",
        "accelerate.Accelerator().local_process_index",
        "torch.distributed.get_rank()",
        "torch_xla.runtime.global_ordinal()",
        "torch_xla.core.xla_model.get_ordinal()",
        "lightning.Fabric().global_rank",
        "os.environ[RANK]",
        "os.environ[LOCAL_RANK]",
    }
)

# Identifiers that by near-universal convention hold the number of data-parallel processes.
# ONLY consulted for a value the analysis cannot trace (a parameter no call of the project passes,
# `args.world_size` set by a launcher, a tuple unpacked from an unknown call): there the name is
# all the evidence there is. A traced value is judged by what it is, never by its name.
PROCESS_COUNT_NAMES = frozenset(
    {
        "world_size",
        "worldsize",
        "world",
        "num_processes",
        "num_procs",
        "n_procs",
        "nprocs",
        "num_replicas",
        "n_gpu",
        "n_gpus",
        "ngpus",
        "ngpu",
        "num_gpus",
        "ngpus_per_node",
        "num_devices",
        "n_devices",
        "num_cores",
        "dp_size",
        "dp_world_size",
        "data_parallel_size",
        "data_parallel_world_size",
        "num_data_parallel",
        "dp_degree",
        "num_workers_dp",
    }
)
# Top-level packages this knowledge base describes: a call into them is judged by the tables
# above, never by its name.
KNOWN_LIBRARIES = frozenset(
    {
        "accelerate", "apex", "bitsandbytes", "deepspeed", "horovod", "lightning", "math",
        "numpy", "os", "pytorch_lightning", "random", "schedulefree", "timm", "torch",
        "torch_xla", "torchtune", "transformers",
    }
)  # fmt: skip
# Methods whose use says what an object is, when nothing resolves its construction:
# `x.prepare(...)` and `x.backward(loss)` together are Accelerate's API; `model.no_sync()` (no
# argument) is DistributedDataParallel's / FSDP's (DataParallel has none).
ROLE_METHODS = frozenset({"prepare", "backward", "no_sync"})
# Where DistributedDataParallel (and DataParallel, which runs one process) keep the wrapped model.
WRAPPED_MODEL_ATTRIBUTE = "module"
# Same policy as PROCESS_COUNT_NAMES for the gradient accumulation steps (a helper's untraced
# `grad_accum` parameter).
ACCUMULATION_WORD = "accum"
RANK_NAMES = frozenset({"rank", "global_rank", "local_rank", "process_index", "ordinal"})
ITERABLE_DATASETS = frozenset(
    {"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"}
)
# Tests that hold on one process only (the main one): what runs under them is not what the run
# does on every process (`generator = torch.manual_seed(0)` to sample images on the main process).
MAIN_PROCESS_FLAGS = frozenset(
    {
        "accelerate.Accelerator().is_main_process",
        "accelerate.Accelerator().is_local_main_process",
        "accelerate.PartialState().is_main_process",
        "accelerate.PartialState().is_local_main_process",
        "lightning.Fabric().is_global_zero",
        "torch_xla.core.xla_model.is_master_ordinal()",
    }
)
# Their attribute names: ONLY consulted where the receiver cannot be traced (`self.accelerator`
# given to a Trainer), as RANK_NAMES are.
MAIN_PROCESS_ATTRIBUTES = frozenset(
    {"is_main_process", "is_local_main_process", "is_global_zero", "is_master_ordinal"}
)

# ------------------------------------------------------------------ optimizers
OPTIMIZER_BASES = frozenset({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"})
# Packages whose capitalised members are optimizer classes, minus what is not one.
OPTIMIZER_PACKAGES = (
    "torch.optim.",
    "bitsandbytes.optim.",
    "apex.optimizers.",
    "deepspeed.ops.adam.",
    "deepspeed.ops.lamb.",
    "schedulefree.",
    "timm.optim.",
    "torchao.prototype.low_bit_optim.",
    "transformers.optimization.",
)
NOT_OPTIMIZER_SUBPACKAGES = frozenset({"lr_scheduler", "swa_utils"})
NOT_OPTIMIZERS = frozenset(
    {
        "Optimizer",
        "GlobalOptimManager",
        "Optimizer8bit",
        "Optimizer1State",
        "Optimizer2State",
        "AdafactorSchedule",
        "SchedulerType",
        "OptimizerNames",
        # Adafactor sizes its steps relative to the parameters (relative_step / scale_parameter):
        # the linear scaling rule does not apply to it
        "Adafactor",
    }
)
OPTIMIZER_CLASSES = frozenset({"transformers.AdamW"})
# Library factories that build an optimizer: callee -> (lr keyword, lr position or None).
OPTIMIZER_FACTORIES: dict[str, tuple[str, int | None]] = {
    "timm.optim.create_optimizer_v2": ("lr", 2),
    "torchtune.training.create_optim_in_bwd_wrapper": ("lr", None),
    "transformers.optimization.create_optimizer": ("init_lr", 0),
    "transformers.create_optimizer": ("init_lr", 0),
}
# Factories that read the LR from an attribute of an argument (timm's legacy
# `create_optimizer(args, model)` uses `args.lr`): name -> (parameter, position, attribute).
OPTIMIZER_FACTORIES_READING: dict[str, tuple[str, int, str]] = {
    "timm.optim.create_optimizer": ("args", 0, ".lr"),
    "timm.optim.optim_factory.create_optimizer": ("args", 0, ".lr"),
}

# Calls that build an object from a config node naming its class (`_target_` / `_component_`).
# A config node names the class to build under one of these keys (hydra, torchtune)...
COMPONENT_KEYS = frozenset({"_target_", "_component_"})
# ... and a project's own `instantiate()` imports it by that name.
IMPORT_BY_NAME = frozenset({"importlib.import_module", "pydoc.locate", "hydra.utils.get_class"})
CONFIG_INSTANTIATE = frozenset(
    {
        "hydra.utils.instantiate",
        "hydra.utils.call",
        "torchtune.config.instantiate",
        "torchtune.config._instantiate.instantiate",
    }
)

# ------------------------------------------------------------------ schedulers
_TORCH = "torch.optim.lr_scheduler."
# LR schedulers by where they live: what is handed to one (its first argument) is an optimizer.
SCHEDULER_MODULES = (
    _TORCH, "transformers.get_", "transformers.optimization.get_", "diffusers.optimization.",
    "timm.scheduler.", "torchtune.training.lr_schedulers.",
)  # fmt: skip
# Schedulers whose `max_lr` is the learning rate the run actually peaks at.
PEAK_LR_SCHEDULERS = frozenset({_TORCH + "OneCycleLR", _TORCH + "CyclicLR"})
_HF_WARMUP = ((1, "num_warmup_steps", "warmup"), (2, "num_training_steps", "total"))
# scheduler -> arguments that count steps: (position, keyword, role); role "lambda" = lr_lambda.
SCHEDULER_LENGTHS: dict[str, tuple[tuple[int, str, str], ...]] = {
    _TORCH + "OneCycleLR": ((2, "total_steps", "total"), (4, "steps_per_epoch", "total")),
    _TORCH + "CosineAnnealingLR": ((1, "T_max", "total"),),
    _TORCH + "LinearLR": ((3, "total_iters", "total"),),
    _TORCH + "ConstantLR": ((2, "total_iters", "total"),),
    _TORCH + "PolynomialLR": ((1, "total_iters", "total"),),
    _TORCH + "StepLR": ((1, "step_size", "total"),),
    _TORCH + "MultiStepLR": ((1, "milestones", "total"),),
    _TORCH + "CosineAnnealingWarmRestarts": ((1, "T_0", "total"),),
    _TORCH + "SequentialLR": ((2, "milestones", "warmup"),),
    _TORCH + "CyclicLR": ((3, "step_size_up", "total"), (4, "step_size_down", "total")),
    _TORCH + "LambdaLR": ((1, "lr_lambda", "lambda"),),
    _TORCH + "MultiplicativeLR": ((1, "lr_lambda", "lambda"),),
    "transformers.get_scheduler": (
        (2, "num_warmup_steps", "warmup"),
        (3, "num_training_steps", "total"),
    ),
    "diffusers.optimization.get_scheduler": (
        (3, "num_warmup_steps", "warmup"),
        (4, "num_training_steps", "total"),
    ),
}
for _name in (
    "get_linear_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup",
    "get_polynomial_decay_schedule_with_warmup",
    "get_constant_schedule_with_warmup",
    "get_inverse_sqrt_schedule",
    "get_wsd_schedule",
):
    SCHEDULER_LENGTHS["transformers." + _name] = _HF_WARMUP
    SCHEDULER_LENGTHS["diffusers.optimization." + _name] = _HF_WARMUP

# ------------------------------------------------------------------ wrapping ("prepare")
PREPARE_METHODS = frozenset({"prepare", "prepare_data_loader", "prepare_scheduler"})
FABRIC_SETUP_METHODS = frozenset({"setup", "setup_dataloaders", "setup_module", "setup_optimizers"})
PREPARE_FUNCTIONS = frozenset(
    {"accelerate.data_loader.prepare_data_loader", "accelerate.utils.prepare_data_loader"}
)
# Accelerator options that hold the gradient accumulation steps: plugin -> (keyword, field).
ACCUMULATION_PLUGINS = {
    "accelerate.utils.GradientAccumulationPlugin": ("gradient_accumulation_plugin", "num_steps"),
    "accelerate.utils.dataclasses.GradientAccumulationPlugin": (
        "gradient_accumulation_plugin",
        "num_steps",
    ),
    "accelerate.utils.DeepSpeedPlugin": ("deepspeed_plugin", "gradient_accumulation_steps"),
    "accelerate.utils.dataclasses.DeepSpeedPlugin": (
        "deepspeed_plugin",
        "gradient_accumulation_steps",
    ),
}

# ------------------------------------------------------------------ data loading
DATALOADERS = frozenset(
    {"torch.utils.data.DataLoader", "torchdata.stateful_dataloader.StatefulDataLoader"}
)
DEVICE_LOADERS = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
    }
)
DISTRIBUTED_SAMPLER_WORD = "Distributed"
WHOLE_DATASET_SAMPLERS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.SequentialSampler",
        "torch.utils.data.WeightedRandomSampler",
        "torch.utils.data.SubsetRandomSampler",
        "torch.utils.data.sampler.RandomSampler",
        "torch.utils.data.sampler.SequentialSampler",
        "torch.utils.data.sampler.WeightedRandomSampler",
        "torch.utils.data.sampler.SubsetRandomSampler",
    }
)
# Iteration helpers that yield the loader's batches unchanged.
PASS_THROUGH = frozenset(
    {"enumerate", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm"}
)
# Calls that split a dataset by process (the result is sharded).
DATASET_SHARDERS = frozenset(
    {
        "datasets.distributed.split_dataset_by_node",
        "torch.utils.data.datapipes.iter.sharding.ShardingFilterIterDataPipe",
    }
)
# Methods that shard a dataset when given a process count / rank (`ds.shard(num_shards, index)`).
SHARD_METHODS = frozenset({"shard", "split_by_node", "shard_by_node"})
BATCH_SIZE_KEYWORDS = frozenset({"batch_size", "gradient_accumulation_steps", "num_steps"})

# ------------------------------------------------------------------ loops, accumulation, metrics
# (read by analysis/loops.py, analysis/accumulation.py, analysis/metrics.py)
# Methods whose call runs a backward pass: a loop calling one trains.
BACKWARD_METHODS = frozenset({"backward", "optimizer_step"})
# The backward pass itself: `loss.backward()`, `accelerator.backward(loss)`, and the gradient
# scaler's wrapping of the loss (`scaler.scale(loss).backward()`).
BACKWARD_METHOD = "backward"
SCALE_METHOD = "scale"
STEP_METHODS = frozenset({"step", "optimizer_step"})
# Context managers that gate gradient synchronisation (accumulation entered, or done by hand).
ACCUMULATION_CONTEXTS = frozenset({"accumulate", "no_sync"})
# Attributes that say whether this micro-batch synchronises (accumulation by hand).
SYNC_FLAGS = frozenset({"sync_gradients", "require_backward_grad_sync", "gradient_state"})
# Gradient clipping by hand, and the framework call that replaces it: torch name -> method.
CLIP_FUNCTIONS = {
    "torch.nn.utils.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_": "clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_value_": "clip_grad_value_",
}
# Keywords of torch's clipping that the framework methods do not take.
CLIP_TORCH_ONLY_KEYWORDS = frozenset({"error_if_nonfinite", "foreach"})
# Calls that unscale gradients first: clipping by hand after them sees true gradients.
UNSCALE_METHODS = frozenset({"unscale_gradients", "unscale_"})
# Distributed samplers that shuffle with a seed plus the epoch: sampler -> position of `shuffle`.
EPOCH_SEEDED_SAMPLERS = {
    "torch.utils.data.DistributedSampler": 3,
    "torch.utils.data.distributed.DistributedSampler": 3,
    "timm.data.distributed_sampler.RepeatAugSampler": 3,
    "timm.data.RepeatAugSampler": 3,
}
SET_EPOCH = "set_epoch"
# Cross-process collectives: a value passed through one is every process's.
GATHER_METHODS = frozenset({"gather", "gather_for_metrics", "reduce", "all_gather", "all_reduce"})
GATHER_FUNCTIONS = frozenset(
    {
        "torch.distributed.all_reduce",
        "torch.distributed.all_gather",
        "torch.distributed.all_gather_into_tensor",
        "torch.distributed.all_gather_object",
        "torch.distributed.reduce",
        "torch.distributed.gather",
        "torch.distributed.gather_object",
        "accelerate.utils.gather",
        "accelerate.utils.gather_object",
        "accelerate.utils.reduce",
        "torch_xla.core.xla_model.all_reduce",
        "torch_xla.core.xla_model.mesh_reduce",
        "torch_xla.core.xla_model.all_gather",
    }
)
# Accelerator gather that keeps the padding duplicates of the last batch, and its replacement.
GATHER_WITH_DUPLICATES = frozenset(
    {"accelerate.utils.gather", "accelerate.utils.operations.gather"}
)
GATHER_METHOD = "gather"
GATHER_FOR_METRICS = "gather_for_metrics"
# Same policy as PROCESS_COUNT_NAMES: ONLY for a callee the analysis cannot follow (a helper of
# another package, `utils.reduce_tensor(acc)`, `metric_logger.synchronize_between_processes()`),
# words in its name that say it combines values across processes.
GATHER_NAME_WORDS = ("gather", "reduce", "synchron", "sync_", "all_")
# Metric sinks: objects that accumulate predictions and references, and metric functions.
METRIC_LOADERS = frozenset({"evaluate.load", "datasets.load_metric", "evaluate.combine"})
METRIC_ADD_METHODS = frozenset({"add_batch", "add"})
METRIC_FUNCTION_PREFIXES = ("sklearn.metrics.",)
# Averages of the values an evaluation loop collected (`np.mean(losses)` after the loop), and
# the list methods that collect them.
MEAN_FUNCTIONS = frozenset(
    {
        "numpy.mean",
        "numpy.nanmean",
        "numpy.average",
        "numpy.median",
        "statistics.mean",
        "statistics.fmean",
        "statistics.median",
        "torch.mean",
    }
)
MEAN_METHOD = "mean"
COLLECT_METHODS = frozenset({"append", "extend"})
# Methods that fold a value into their receiver (`losses.append(loss.item())`,
# `loss_meter.update(loss.item(), n)`, `running_loss.add_(loss)`): the receiver then carries it.
ACCUMULATE_INTO_METHODS = COLLECT_METHODS | frozenset({"update", "add_", "add", "insert"})
# Calls that write out only on the main process, whatever the test around them: Accelerate's
# `print` (local main process) and `log` (`@on_main_process`), Fabric's `print` / `log` /
# `log_dict` (rank zero), torch_xla's `master_print`.
MAIN_PROCESS_OUTPUT = frozenset(
    {
        "accelerate.Accelerator().print",
        "accelerate.Accelerator().log",
        "accelerate.PartialState().print",
        "lightning.Fabric().print",
        "lightning.Fabric().log",
        "lightning.Fabric().log_dict",
        "torch_xla.core.xla_model.master_print",
    }
)
# Same policy as RANK_NAMES: ONLY for a receiver the analysis cannot trace (an Accelerator made
# by a project helper, a Fabric handed in), their methods that write on the main process only.
MAIN_PROCESS_OUTPUT_METHODS = frozenset({"print", "log", "log_dict"})
MAIN_PROCESS_RECEIVER_NAMES = frozenset({"accelerator", "fabric"})
# Accelerate's logger logs on the main process only unless told `main_process_only=False`.
MAIN_PROCESS_LOGGER = "accelerate.logging.get_logger()."
MAIN_PROCESS_ONLY_KEYWORD = "main_process_only"
# Packages whose calls named in OUTPUT_METHODS write to the console, a log file or a tracker
# (`torch.log` is a tensor function: torch is not one of them).
OUTPUT_PACKAGES = frozenset(
    {
        "logging", "wandb", "mlflow", "tensorboardX", "torch.utils.tensorboard", "tqdm", "loguru",
        "comet_ml", "clearml", "neptune", "aim", "swanlab", "accelerate", "lightning",
        "transformers.utils.logging", "absl.logging",
    }
)  # fmt: skip
# Method names that write a value out (logger, tracker, summary writer); for a receiver the
# analysis cannot trace (`self.writer`, a logger handed in), the name alone decides.
OUTPUT_METHODS = frozenset(
    {
        "log", "info", "debug", "warning", "print", "write", "add_scalar", "add_scalars",
        "log_metric", "log_metrics", "log_dict", "master_print",
    }
)  # fmt: skip
# Backends whose loss is already averaged over the data-parallel group when the script sees it
# (Accelerate's Megatron-LM integration: "the losses are already averaged across the data
# parallel group"): naming them anywhere in a module says the script runs on one.
LOSS_REDUCING_BACKENDS = frozenset(
    {
        "accelerate.DistributedType.MEGATRON_LM",
        "accelerate.utils.DistributedType.MEGATRON_LM",
        "accelerate.utils.MegatronLMPlugin",
    }
)
# Accelerate options that stop the padding of the last batch (no duplicates to drop).
EVEN_BATCHES = "even_batches"

# ------------------------------------------------------------------ seeding
# Calls that seed torch's CPU generator and/or device generators by hand.
TORCH_SEEDERS = frozenset(
    {
        "torch.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.xpu.manual_seed",
        "torch.xpu.manual_seed_all",
        "torch.mps.manual_seed",
        "torch.npu.manual_seed",
        "torch.npu.manual_seed_all",
        "torch.mlu.manual_seed",
        "torch.mlu.manual_seed_all",
    }
)
PYTHON_SEEDERS = frozenset({"random.seed"})
NUMPY_SEEDERS = frozenset({"numpy.random.seed"})
XLA_SEEDERS = frozenset(
    {
        "torch_xla.core.xla_model.set_rng_state",
        "torch_xla.manual_seed",
        "torch_xla.core.xla_model.manual_seed",
    }
)
# Library helpers that seed python, numpy, torch and every device in one call.
FULL_SEEDERS = frozenset(
    {
        "accelerate.utils.set_seed",
        "transformers.set_seed",
        "transformers.enable_full_determinism",
        "lightning.seed_everything",
        "lightning.pytorch.utilities.seed.seed_everything",
        "lightning.pytorch.seed_everything",
        "lightning.fabric.utilities.seed_everything",
        "lightning.Fabric().seed_everything",
        "lightning.fabric.Fabric().seed_everything",
        "pytorch_lightning.utilities.seed.seed_everything",
        "mmengine.runner.set_random_seed",
        "mmcv.runner.set_random_seed",
        "detectron2.utils.env.seed_all_rng",
        "diffusers.training_utils.set_seed",
        "timm.utils.random_seed",
        "pytorch_lightning.seed_everything",
        "torchtune.training.set_seed",
    }
)
# Functions of `random` / `numpy.random` that do not draw from the module-level generator.
PYTHON_NON_DRAWING = frozenset({"seed", "Random", "SystemRandom", "getstate", "setstate"})
NUMPY_NON_DRAWING = frozenset(
    {
        "seed",
        "default_rng",
        "RandomState",
        "Generator",
        "SeedSequence",
        "PCG64",
        "PCG64DXSM",
        "MT19937",
        "Philox",
        "SFC64",
        "BitGenerator",
        "get_state",
        "set_state",
    }
)
# Library callables (a module prefix, or a full name) that draw from python's `random` ("python")
# or numpy's global generator ("numpy") when they run: augmentation libraries built on them,
# timm's Mixup (np.random), transformers' whole-word masking (random.shuffle).
LIBRARY_DRAWS: dict[str, frozenset[str]] = {
    "albumentations": frozenset({"python", "numpy"}),
    "imgaug": frozenset({"numpy"}),
    "audiomentations": frozenset({"numpy"}),
    "nlpaug": frozenset({"python", "numpy"}),
    "timm.data.Mixup": frozenset({"numpy"}),
    "timm.data.mixup.Mixup": frozenset({"numpy"}),
    "transformers.DataCollatorForWholeWordMask": frozenset({"python"}),
}
# Methods of a `datasets` dataset that draw from numpy's global generator when given no
# `seed=` / `generator=`.
DATASETS_NUMPY_DRAWS = frozenset({"shuffle", "train_test_split"})
# What draws from the XLA device generator: dropout, and torch's random factories on a device.
XLA_DRAW_LAYERS = re.compile(r"torch\.nn\.(functional\.)?(Feature)?(Alpha)?(Dropout|dropout)\w*$")
TORCH_RANDOM_FACTORIES = frozenset(
    {"rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "normal"}
)
TORCH_RANDOM_LIKE = frozenset({"rand_like", "randn_like", "randint_like"})
# Library model loaders: the models they return hold dropout layers.
PRETRAINED_LIBRARIES = ("transformers.", "diffusers.", "timm.")

# ------------------------------------------------------------------ models (what draws weights)
TORCH_LAYER = re.compile(
    r"torch\.nn\.(Lazy)?(Linear|Bilinear|Conv(Transpose)?[123]d|Embedding(Bag)?|RNN|LSTM|GRU|RNNCell|"
    r"LSTMCell|GRUCell|Transformer\w*|MultiheadAttention)$"
)
MODEL_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "pytorch_lightning.LightningModule",
        "transformers.PreTrainedModel",
        "diffusers.ModelMixin",
    }
)
HF_MODEL_CLASS = re.compile(r"(Model|For[A-Z]\w*)$")
PRETRAINED_WITHOUT_HEAD = re.compile(
    r"For(SequenceClassification|TokenClassification|QuestionAnswering|MultipleChoice|"
    r"ImageClassification|AudioClassification|AudioFrameClassification|ObjectDetection|"
    r"SemanticSegmentation|Classification|Regression)"
)
MODEL_FACTORIES = frozenset(
    {"timm.create_model", "peft.get_peft_model", "peft.inject_adapter_in_model", "torch.hub.load"}
)
RANDOM_SPLITS = frozenset(
    {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
)


def is_optimizer_class(qualname: str | None) -> bool:
    """A library optimizer class (`torch.optim.AdamW`, `bnb.optim.AdamW8bit`, `schedulefree.*`)."""
    if not qualname or "(" in qualname:  # `torch.optim.SGD()` is an instance, not the class
        return False
    if qualname in OPTIMIZER_CLASSES:
        return True
    for package in OPTIMIZER_PACKAGES:
        if qualname.startswith(package):
            rest = qualname[len(package) :].split(".")
            if rest[0] in NOT_OPTIMIZER_SUBPACKAGES:
                return False
            name = rest[-1]
            return name[:1].isupper() and name not in NOT_OPTIMIZERS and "Scheduler" not in name
    return False


# ------------------------------------------------------------------ batch sizes in names and messages
# Words of an identifier (split at `_` and case changes) or a logged message that say which batch
# it is: the global one (every process together), a per-device one, or a count of samples.
BATCH_GLOBAL_WORDS = frozenset({"total", "global", "effective", "observed", "overall"})
BATCH_WORDS = frozenset({"batch", "bs", "bsz", "batchsize"})
BATCH_SAMPLE_WORDS = frozenset(
    {
        "sample", "samples", "example", "examples", "image", "images", "img", "imgs", "token",
        "tokens", "tok", "toks", "sequence", "sequences", "seq", "seqs", "throughput",
    }
)  # fmt: skip
BATCH_LOCAL_WORDS = frozenset(
    {
        "local", "micro", "rank", "device", "gpu", "replica", "core", "proc", "process",
        "worker", "instantaneous",
    }
)  # fmt: skip
# Calls that keep a number's value as a count (`int(bs * 2)`, `math.ceil(n / world)`).
NUMERIC_WRAPPERS = frozenset({"int", "float", "round"})
ROUNDING_FUNCTIONS = frozenset({"math.ceil", "math.floor"})
# builtins that cap a value by others (`batch_size = min(batch_size, len(dataset))`): the
# result is the value itself wherever the cap does not bite
CAPPING_BUILTINS = frozenset({"min", "max"})

# ------------------------------------------------------------------ seeding
# What DL101's fix may call to seed everything (the `seed-function` option), the default first.
SEED_FUNCTION_CHOICES = (
    "accelerate.utils.set_seed",
    "transformers.set_seed",
    "lightning.seed_everything",
)
# Words of a test that guards device-specific seeding (`if torch.cuda.is_available():`,
# `if args.use_gpu:`): seeding under it is replaced together with its guard.
DEVICE_GUARD_WORDS = ("cuda", "gpu", "mps", "xpu", "npu", "mlu", "device")
