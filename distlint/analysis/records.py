"""The records the training facts answer with: modes, seeds, origins, optimizers, summaries.

Plain enums and records (no analysis): :mod:`distlint.analysis.facts` and its providers build
them, rules read them.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, Optional, Protocol

import libcst as cst


class Mode(enum.Enum):
    """How the script trains data-parallel."""

    ACCELERATE = "accelerate"
    FABRIC = "fabric"
    DDP = "ddp"
    XLA_MULTIPROCESS = "xla"
    XLA_SPMD = "xla-spmd"
    NONE = "none"

    @property
    def per_process_batches(self) -> bool:
        """Each process draws its own batch (the observed batch grows with the processes)."""
        return self not in (Mode.NONE, Mode.XLA_SPMD)

    @property
    def process_count_text(self) -> str:
        """How the script's framework spells its number of processes, for static advice."""
        return _PROCESS_COUNT_TEXT.get(self.value, "the number of processes")


_PROCESS_COUNT_TEXT = {
    "accelerate": "`accelerator.num_processes`",
    "ddp": "`torch.distributed.get_world_size()`",
    "xla": "`xr.world_size()`",
    "fabric": "`fabric.world_size`",
}


class Seeds(enum.Flag):
    NONE = 0
    TORCH = enum.auto()
    PYTHON = enum.auto()
    NUMPY = enum.auto()
    XLA = enum.auto()
    ALL = TORCH | PYTHON | NUMPY | XLA


class Made(enum.Enum):
    """What a function's return value (or a class's instance) is."""

    ACCELERATOR = "accelerator"  # accelerate.Accelerator / PartialState / Fabric
    PROCESS_COUNT = "process-count"  # the process count, or a value scaled by it
    OPTIMIZER = "optimizer"
    DATALOADER = "dataloader"
    SHARDED = "sharded"  # a dataset or loader split by process
    WRAPPED_MODEL = "wrapped-model"  # DDP / FSDP
    CONFIGURED = "configured"  # built from what a config node's `_target_` / `_component_` names
    PROCESS_GROUP = "process-group"  # (a call of it) starts the torch.distributed process group


class Origin(enum.Enum):
    """How a DataLoader that is iterated was made, as far as the analysis can see."""

    SHARDED = "sharded"  # prepared, a DistributedSampler, a prepare helper
    UNSHARDED = "unsharded"  # every process iterates the whole dataset
    UNKNOWN = "unknown"  # a custom sampler, a dataset split by rank, an unseen origin


class How(enum.Enum):
    """How an optimizer was recognised."""

    LIBRARY_CLASS = "library class"
    PROJECT_CLASS = "subclass of torch.optim.Optimizer"
    FACTORY = "optimizer factory"
    PICKED = "class picked from candidates"
    PARAMETERS_AND_LR = "receives the parameters and an lr"
    CONFIG_COMPONENT = "instantiated from a config node naming an optimizer class"
    # built where nothing says what it is (a registry, a config chosen at run time), given the
    # model's parameters, then used as optimizers are: stepped and zeroed, scheduled
    BY_USE = "receives the parameters and is used as an optimizer"


class Optimizer:
    __slots__ = (
        "call",
        "how",
        "lr",
        "params",
        "lr_inside",
        "lr_scaled",
        "where",
        "lr_key",
        "lr_config",
    )

    def __init__(
        self,
        call: cst.Call,
        how: How,
        lr: cst.BaseExpression | None,  # where its learning rate is given at this call
        params: cst.BaseExpression | None,
        lr_inside: bool = False,  # a project factory sets the lr itself (scaled or not: lr_scaled)
        lr_scaled: bool = False,
        where: str | None = None,  # where a factory of another module builds it
        lr_key: str | None = None,  # the lr is `<lr>.<path>` (`args.lr` read inside a factory)
        # the lr is written in a configuration file: `configs/x.yaml:14: optimizer.lr = 2e-5`
        lr_config: str | None = None,
    ) -> None:
        self.call = call
        self.how = how
        self.lr = lr
        self.params = params
        self.lr_inside = lr_inside
        self.lr_scaled = lr_scaled
        self.where = where
        self.lr_key = lr_key
        self.lr_config = lr_config

    def __repr__(self) -> str:
        return f"Optimizer({self.how.name}, lr_key={self.lr_key!r}, where={self.where!r})"


class Scheduler(NamedTuple):
    call: cst.Call
    kind: str
    peak_lr: cst.BaseExpression | None  # OneCycleLR / CyclicLR `max_lr`


Param = tuple[str, Optional[int]]  # a parameter as its callers give it: name, position


class BatchUse(NamedTuple):
    """What a function or class does with a batch size or with a loader's batches, for its
    callers. Plain data: parameters by (name, caller position), attribute names."""

    # parameters that become the `batch_size` of a DataLoader it builds: the per-device batch
    loader_params: tuple[Param, ...] = ()
    # the DataLoaders it builds (itself or through its callees) get a world-size share of a
    # batch (`total_batch_size // world_size`): the batch it is given is the global one
    divides: bool = False
    # parameters whose items (a loader's batches) it yields as per-rank slices
    slices_items_of: tuple[Param, ...] = ()
    # parameters it returns a per-rank slice of (`slice(batch, rank, world_size)`)
    slices: tuple[Param, ...] = ()
    # attributes of the object it returns that it sets to a share of another value
    # (`args.batch_size = args.global_batch_size // (args.devices * args.num_nodes)`): the
    # attribute, whether the divisor is the process count, and the divisor's attribute paths
    # relative to that object (".devices"), which a caller may give its launcher
    shares: tuple[tuple[str, bool, tuple[str, ...]], ...] = ()


class MethodsOf(NamedTuple):
    """The methods of class ``name``, defined at the top level of module ``path`` (its last
    definition there): a class's summary names them instead of holding its module's tree."""

    path: str
    name: str


class Summary:
    """A function's or class's training facts, composed through the calls it makes."""

    __slots__ = ("makes", "seeds", "lrs", "loaders", "trained_there", "trains", "method", "batch")

    def __init__(self) -> None:
        self.makes: set[Made] = set()
        self.seeds = Seeds.NONE
        # for an optimizer factory: one entry per optimizer it returns; for a class, per
        # optimizer its instances build from what the constructor is given (a Trainer class)
        self.lrs: list[FactoryLR] = []
        # for a function returning DataLoaders: how each is made, by position in a returned
        # tuple (None: the return value itself)
        self.loaders: dict[int | None, list[Origin]] = {}
        # the defining module trains data-parallel itself (prepares, wraps with DDP): hazards
        # of the optimizers built there are reported in that module, not at its callers
        self.trained_there = False
        # the function or class itself trains data-parallel (creates an Accelerator / Fabric
        # and prepares, or wraps with DDP): the mode it trains in
        self.trains: Mode | None = None
        # for a module-level class: where its methods' summaries are asked (by name, when asked)
        self.method: MethodsOf | None = None
        # what it does with batch sizes and with loaders' batches (see BatchUse)
        self.batch = BatchUse()


class ProcessCount(NamedTuple):
    """How to spell the process count at a node: an ``expression`` of names bound there
    (``accelerator.num_processes``), or the qualified name of a ``function`` to call
    (``torch.distributed.get_world_size``), which a fix imports or reuses."""

    expression: str | None = None
    function: str | None = None


class FactoryLR(NamedTuple):
    """Where the LR of an optimizer a factory returns comes from: its parameter ``param``
    (name, position, attribute path read from it such as ".lr" for `args.lr`), or set inside
    (``param`` None; ``scaled`` says whether by the process count). ``where``: for messages."""

    param: tuple[str, int | None, str] | None
    scaled: bool
    where: str


class ProjectLike(Protocol):  # the part of distlint.analysis.project.Project facts use
    memo: dict[Any, Any]

    def resolve_import(self, importer: str, module: str, level: int = 0) -> str | None: ...
    def resolve_from_import(
        self, importer: str, module: str, name: str, level: int = 0
    ) -> str | None: ...
    def module(self, path: str) -> Any: ...
