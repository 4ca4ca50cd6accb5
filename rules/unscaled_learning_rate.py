"""DL201 unscaled-learning-rate."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index, string_value
from distlint.analysis.facts import Facts, How, Mode, Optimizer
from distlint.analysis.prepared import parameters_prepared
from distlint.fixes import FixPlan, import_name
from distlint.model import Applicability
from distlint.rule import (
    Invalid,
    Option,
    Rule,
    RuleContext,
    Valid,
    can_scale_name_in_place,
    fix_statement,
    scaled_expression,
)


class UnscaledLearningRate(Rule):
    """
    ## What it does
    Flags an optimizer whose learning rate does not depend on the number of processes, in a
    script that trains data-parallel: one that creates an Accelerate `Accelerator`, a Lightning
    `Fabric`, wraps its model in `DistributedDataParallel` / FSDP, or spawns torch_xla processes.
    Optimizers are every `torch.optim` class (any import form), `transformers.AdamW` and
    `bitsandbytes.optim.*`. When a `OneCycleLR`/`CyclicLR` scheduler sets the peak learning rate,
    its `max_lr` is checked instead of the optimizer's `lr`.

    "Depends" is dataflow, not a text search: the `lr` value is followed back through
    assignments, augmented assignments (`lr *= ...`), module constants, `self.` attributes,
    `args.x` reassigned anywhere in the file, both branches of an `if`, config dicts,
    dataclasses, YAML configs and helper function parameters. It is scaled when something that
    reaches it reads the process count: `accelerator.num_processes`,
    `PartialState().num_processes`, `torch.distributed.get_world_size()`, `xr.world_size()`,
    `WORLD_SIZE` from the environment, `fabric.world_size`, or a value named like one
    (`world_size`, `num_processes`, `ngpus_per_node`, `dp_size`, ...). A scaled value that is
    computed but never passed to the optimizer does not count.

    Not reported: when the observed batch does not grow with the processes, i.e. under
    `Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))` (the legacy
    `Accelerator(split_batches=True)` keyword is ignored by Accelerate 1.x and does not count),
    or when the script holds the global batch constant by dividing the per-device batch or the
    gradient accumulation steps by the world size (then the LR must *not* be scaled); torch_xla
    SPMD scripts, which run as one process with a global batch; in an Accelerate script, an
    optimizer of a side model that never goes through `accelerator.prepare` (neither the
    optimizer nor the model it optimizes), which each process trains on its own batch.

    ## Why is this bad?
    Each process draws its own per-device batch and the gradients are averaged across processes,
    so on N processes every optimizer step sees N times the samples of a single-device step. With
    the single-device learning rate the run takes N times fewer steps at the same step size and
    does not match the single-device run. The linear scaling rule (Goyal et al., 2017) multiplies
    the learning rate by the number of processes; Accelerate leaves this to the user.

    In tensor- or context-parallel scripts the batch grows with the *data-parallel* size
    (processes / (tp * cp)), not with the process count: the message says so and no fix is offered.

    ## Fix safety
    The fix is unsafe: it changes the numerics of every run on more than one process, and linear
    scaling is debated for Adam-family optimizers (square-root scaling is an option). When the
    learning rate is a plain local name, `<name> *= <accelerator>.num_processes` is inserted just
    before the optimizer statement; otherwise the argument is multiplied in place. DDP and torch_xla
    scripts use `torch.distributed.get_world_size()` / `torch_xla.runtime.world_size()`, Fabric
    scripts `fabric.world_size`. No fix when
    no accelerator is visible at the optimizer, when the optimizer is given no `lr` at all (its
    default depends on the class and the torch version), and in model-parallel scripts. No fix
    either when the per-device batch is the share of a global batch by a constant count
    (`batch_size = global_batch_size // num_of_devices` with `num_of_devices = 8`): the global
    batch is the intended one on that many processes only, the message says so, and the cure is
    to divide by the process count there (scaling the LR would be wrong on 8 processes).

    ## Options
    `lr-scaling = "sqrt"` makes the fix multiply by `num_processes ** 0.5`.

    ## References
    - Accelerate, "Comparing performance across distributed setups": learning rates.
    - Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", 2017.
    """

    CODE = "DL201"
    NAME = "unscaled-learning-rate"
    MESSAGE = "learning rate is not scaled by the number of processes: multiply it by `accelerator.num_processes`"
    FIX_TITLE = "Scale the learning rate by the number of processes"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("optim", "AdamW")
    OPTIONS = {
        "lr-scaling": Option(
            "linear",
            "how the fix scales the learning rate with the process count",
            choices=("linear", "sqrt"),
        )
    }

    VALID = (
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
            "lr = 1e-3\nlr *= accelerator.num_processes\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        ),
        # the global batch is held constant: the per-device batch is divided by the world size
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n\n"
            "GLOBAL_BATCH = 64\naccelerator = Accelerator()\n"
            "loader = DataLoader(range(128), batch_size=GLOBAL_BATCH // accelerator.num_processes)\n"
            "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
            "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))\n"
            "optimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=3e-4)\n"
        ),
        # --scale_lr opt-in branch (diffusers style): one branch of the `if` scales it
        Valid(
            "import argparse\nimport torch\nfrom accelerate import Accelerator\n\n"
            "args = argparse.ArgumentParser().parse_args()\naccelerator = Accelerator()\n"
            "if args.scale_lr:\n    args.learning_rate = args.learning_rate * accelerator.num_processes\n"
            "optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=args.learning_rate)\n"
        ),
        Valid(
            "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "def run(rank, world_size):\n    model = DDP(torch.nn.Linear(2, 2))\n"
            "    return torch.optim.SGD(model.parameters(), lr=0.1 * world_size)\n"
        ),
        # a side model that each process trains on its own: never prepared, never synchronised
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "model, student = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * accelerator.num_processes)\n"
            "model, optimizer = accelerator.prepare(model, optimizer)\n"
            "student_opt = torch.optim.SGD(student.parameters(), lr=0.1)\n"
        ),
        # a single-process script: nothing to scale
        Valid(
            "import torch\n\noptimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\nclass Trainer:\n"
            "    def __init__(self, lr):\n        self.accelerator = Accelerator()\n"
            "        self.lr = lr * self.accelerator.num_processes\n"
            "    def configure(self, model):\n        return torch.optim.AdamW(model.parameters(), lr=self.lr)\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
            "lr = 1e-3\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
                "lr = 1e-3\nlr *= accelerator.num_processes\noptimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
            ),
            range="7:54-7:56",
        ),
        # the scaled value is computed but the optimizer gets the unscaled one
        Invalid(
            "from torch.optim import SGD as Opt\nimport accelerate\n\nBASE_LR = 0.1\n\ndef main(model):\n"
            "    acc = accelerate.Accelerator()\n    scaled = BASE_LR * acc.num_processes\n"
            "    return Opt(model.parameters(), BASE_LR + 0.0)\n",
            fixed=(
                "from torch.optim import SGD as Opt\nimport accelerate\n\nBASE_LR = 0.1\n\ndef main(model):\n"
                "    acc = accelerate.Accelerator()\n    scaled = BASE_LR * acc.num_processes\n"
                "    return Opt(model.parameters(), (BASE_LR + 0.0) * acc.num_processes)\n"
            ),
            range="9:36-9:49",
        ),
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.01)\n"
            "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.4, total_steps=100)\n",
            fixed=(
                "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
                "optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.01)\n"
                "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.4 * accelerator.num_processes ** 0.5, total_steps=100)\n"
            ),
            options={"lr-scaling": "sqrt"},
            range="6:67-6:70",
        ),
        # legacy split_batches keyword is ignored by Accelerate 1.x: the batch still grows
        Invalid(
            "import bitsandbytes as bnb\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator(split_batches=True)\nconfig = {'lr': 2e-5}\n"
            "optimizer = bnb.optim.AdamW8bit([], lr=config['lr'])\n",
            fixed=(
                "import bitsandbytes as bnb\nfrom accelerate import Accelerator\n\n"
                "accelerator = Accelerator(split_batches=True)\nconfig = {'lr': 2e-5}\n"
                "optimizer = bnb.optim.AdamW8bit([], lr=config['lr'] * accelerator.num_processes)\n"
            ),
            range="6:40-6:52",
        ),
        # no lr at all: the class default is unscaled; reported without a fix
        Invalid(
            "import torch as T\nfrom accelerate import Accelerator\n\nacc = Accelerator()\nopt = T.optim.Adam(T.nn.Linear(2, 2).parameters())\n",
            range="5:7-5:51",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.facts
        mode = facts.mode
        if not _batch_grows(facts):
            return
        optimizers = facts.optimizers
        if not optimizers:
            return
        schedulers = [s for s in facts.schedulers if s.peak_lr is not None]
        exempt = _driven_by_peak_lr_scheduler(facts, optimizers, schedulers)
        unscaled_reads: dict[cst.Call, list[Optimizer]] = {}
        for opt in optimizers:
            if opt.call in exempt or _callers_decide(facts, opt):
                continue
            if (
                mode is Mode.ACCELERATE
                and facts.prepare_calls
                and not parameters_prepared(facts, opt)
            ):
                continue
            self._check_optimizer(ctx, opt, unscaled_reads)
        for call, opts in unscaled_reads.items():
            self._report_reads(ctx, call, opts)
        for sched in schedulers:
            assert sched.peak_lr is not None
            self._check_value(ctx, sched.call, sched.peak_lr, "peak learning rate (`max_lr`)")

    # ------------------------------------------------------------------ helpers
    def _check_optimizer(
        self, ctx: RuleContext, opt: Optimizer, unscaled_reads: dict[cst.Call, list[Optimizer]]
    ) -> None:
        """Report one optimizer's unscaled LR, or keep a factory's read of it in
        ``unscaled_reads`` (reported together per call)."""
        facts = ctx.facts
        if opt.lr_inside:
            if not opt.lr_scaled:
                what = (
                    f"the learning rate set inside {opt.where}"
                    if opt.where
                    else "the factory's learning rate"
                )
                ctx.report(opt.call, self._message(None, what, facts))
            return
        if opt.lr_config is not None:
            # the lr is written in a config file: scaled in code before the call?
            if opt.lr_key is None or not facts.key_reads_process_count(opt.lr_key):
                what = f"the learning rate ({opt.lr_config})"
                ctx.report(opt.call, self._message(None, what, facts))
            return
        if opt.how is How.BY_USE and opt.lr is None:
            # built from a config nothing here can read: the LR is unknown, the hazard is not
            if not facts.optimization.scaled_on_the_way(opt):
                what = "the learning rate (from configuration distlint could not read)"
                ctx.report(opt.call, self._message(None, what, facts))
            return
        if opt.lr is None:
            self._report_missing_lr(ctx, opt)
            return
        if opt.lr_key is not None:
            # a factory of another module reads `<arg>.lr`: scaled where it is assigned?
            if not facts.key_reads_process_count(opt.lr_key):
                unscaled_reads.setdefault(opt.call, []).append(opt)
            return
        self._check_value(ctx, opt.call, opt.lr, "learning rate")

    def _report_missing_lr(self, ctx: RuleContext, opt: Optimizer) -> None:
        """No lr given: the parameter groups' LRs or the class default go unscaled."""
        facts = ctx.facts
        if any(arg.star for arg in opt.call.args) or _param_groups_scaled(facts, opt):
            return
        groups = _param_groups_have_lr(facts, opt)
        what = (
            "the LRs of the parameter groups" if groups else "the optimizer's default learning rate"
        )
        message = self._message(None, what, facts, plural=groups)
        ctx.report(opt.call, message)

    def _check_value(
        self, ctx: RuleContext, call: cst.Call, value: cst.BaseExpression, what: str
    ) -> None:
        facts = ctx.facts
        if facts.reads_process_count(value):
            return
        text = ctx.index.module.code_for_node(value).strip()
        fix = self._fix(facts, call, value) if self._fixable(facts) else None
        message = self._message(text, what, facts)
        origin = facts.config_origin(value)
        if origin is not None:
            message += f" (from {origin})"
        ctx.report(value, message, fix)

    @staticmethod
    def _message(text: str | None, what: str, facts: Facts, plural: bool = False) -> str:
        if text is None:
            subject = what
        else:  # a long expression is shown by its place, not copied
            subject = f"{what} `{text}`" if len(text) <= 40 else f"the {what} given here"
        verb, it = ("are", "them") if plural else ("is", "it")
        head = f"{subject} {verb} not scaled by the number of processes"
        if facts.model_parallel:
            return f"{head}: multiply {it} by the data-parallel size (processes / (tp * cp))"
        count = facts.mode.process_count_text
        share = facts.processes.constant_share
        if share is not None:
            # the author holds the global batch, but by a constant: on any other number of
            # processes the batch changes and the LR does not; scaling the LR as well would
            # be wrong on exactly that many processes
            shown = f"`{share.place} = {share.value}`" if len(share.value) <= 60 else share.place
            return (
                f"{head}, and the global batch holds only on {share.processes} processes:"
                f" {shown} divides by the constant `{share.divisor}` ({share.processes}), not by"
                f" {count}; divide by {count} there"
            )
        return f"{head}: multiply {it} by {count}"

    @staticmethod
    def _fixable(facts: Facts) -> bool:
        """The LR may be scaled here: not under model parallelism (the factor is the
        data-parallel size), nor where the batch is a share by a constant count (the fix
        belongs in the share)."""
        return not facts.model_parallel and facts.processes.constant_share is None

    def _report_reads(self, ctx: RuleContext, call: cst.Call, opts: list[Optimizer]) -> None:
        """A factory reads one or more LRs from its arguments (`args.lr`): one finding at the
        call naming them all, whose fix scales each just before it."""
        facts = ctx.facts
        reads = list(dict.fromkeys(opt.lr_key.split("@")[0] for opt in opts if opt.lr_key))
        wheres = list(dict.fromkeys(opt.where for opt in opts if opt.where))
        names = " and ".join(f"`{r}`" for r in reads)
        what = f"learning rate{'s' if len(reads) > 1 else ''} {names}"
        if wheres:
            what += f" (read by {' and '.join(wheres)})"
        fix = self._fix_reads(facts, call, reads) if self._fixable(facts) else None
        assert opts[0].lr is not None
        message = self._message(None, what, facts, len(reads) > 1)
        ctx.report(opts[0].lr, message, fix)

    def _fix_reads(self, facts: Facts, call: cst.Call, reads: list[str]) -> FixPlan | None:
        """A factory of another module reads ``reads`` (``args.lr``): scale them here, in the
        linted file, just before the call (``args.lr *= accelerator.num_processes``)."""
        stmt = facts.index.statement(call)
        started = self._scaling(facts, call)
        if started is None or stmt is None or not all(_is_attribute_path(r) for r in reads):
            return None
        fix, factor = started
        fix.insert_before[stmt] = [fix_statement(f"{r} *= {factor}\n") for r in reads]
        return fix

    def _scaling(self, facts: Facts, call: cst.Call) -> tuple[FixPlan, str] | None:
        """A fix holding the import the factor needs, and the factor (the process count at
        ``call``, or its square root with ``lr-scaling = "sqrt"``); None when there is none."""
        found = facts.process_count_at(call)
        if found is None:
            return None
        fix = FixPlan()
        if found.function is not None:
            name, spec = import_name(facts.index, found.function, call)
            factor = f"{name}()"
            if spec is not None:
                fix.imports.append(spec)
        else:
            assert found.expression is not None
            factor = found.expression
        if self.options["lr-scaling"] == "sqrt":
            factor = f"{factor} ** 0.5"
        return fix, factor

    def _fix(self, facts: Facts, call: cst.Call, value: cst.BaseExpression) -> FixPlan | None:
        started = self._scaling(facts, call)
        if started is None:
            return None
        fix, factor = started
        index = facts.index
        stmt = index.statement(call)
        if isinstance(value, cst.Name) and can_scale_name_in_place(index, value, stmt):
            assert stmt is not None
            at = _first_read_statement(index, value, stmt, call)
            if at is None:
                return None  # read earlier in another block: no one place scales every use
            fix.insert_before[at] = [fix_statement(f"{value.value} *= {factor}\n")]
        else:
            fix.replace[value] = scaled_expression(value, factor)
        return fix


def _first_read_statement(
    index: Index, name: cst.Name, stmt: cst.CSTNode, call: cst.Call
) -> cst.CSTNode | None:
    """Where `lr *= n` goes so that every read of the value the optimizer gets sees it: before
    ``stmt``, or before an earlier statement, of its block or of a block around it, that copies
    the same value into a name the optimizer's ``call`` is given (k-diffusion: `groups =
    model.param_groups(lr)` puts it in the groups first). None when such a statement sits in a
    branch ``stmt`` is not in."""
    bindings = index.bindings_of(name)
    given = {n.value for a in call.args for n in _names_in(a.value)}
    first = stmt
    for node in index.nodes_of(cst.Name):
        if node is name or index.order(node) >= index.order(first):
            continue
        if not _reads_same_value(index, node, name.value, bindings):
            continue
        read = index.statement(node)
        if read is None or read is stmt or index.is_inside(stmt, read):
            continue
        if not _assigns_one_of(read, given):
            continue  # logged, or kept for something else: not what the optimizer gets
        block = index.parent(read)
        if block is None or not index.is_inside(stmt, block):
            return None  # in a branch the optimizer's statement is not in
        if not can_scale_name_in_place(index, name, read):
            return None
        first = read
    return first


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    return [n for child in node.children for n in _names_in(child)]


def _assigns_one_of(stmt: cst.CSTNode, names: set[str]) -> bool:
    """``stmt`` is an assignment to one of ``names`` (`groups = ...`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        targets = (
            [t.target for t in small.targets]
            if isinstance(small, cst.Assign)
            else [small.target]
            if isinstance(small, (cst.AnnAssign, cst.AugAssign))
            else []
        )
        if any(n.value in names for t in targets for n in _names_in(t)):
            return True
    return False


def _reads_same_value(index: Index, node: cst.CSTNode, name: str, bindings: list) -> bool:
    """``node`` reads ``name`` where it holds the value of ``bindings`` (not a target, an
    attribute's or a keyword's name)."""
    if not isinstance(node, cst.Name) or node.value != name:
        return False
    parent = index.parent(node)
    if any(getattr(parent, part, None) is node for part in ("target", "attr", "keyword")):
        return False
    if isinstance(parent, cst.AssignTarget):
        return False
    return index.bindings_of(node) == bindings


def _batch_grows(facts: Facts) -> bool:
    """Each process draws its own batch and the script does not hold the global batch
    constant: the optimizer sees N times the samples on N processes."""
    mode = facts.mode
    if not mode.per_process_batches or (mode is Mode.ACCELERATE and facts.split_batches):
        return False
    return not facts.global_batch_held_constant


def _callers_decide(facts: Facts, opt: Optimizer) -> bool:
    """The optimizer is built in a function of a library module that the run's other files
    call (a `smart_optimizer(model, lr)` helper next to a `smart_DDP`): each of those files
    holds its global batch constant, or does not train data-parallel, or passes a learning
    rate scaled by the process count. Then the helper's own finding would contradict them."""
    fn = facts.index.enclosing_function(opt.call)
    callers = facts.reach.run_callers(fn) if fn is not None else None
    if callers is None:
        return False  # no caller of the run decides
    lr = opt.lr
    bindings = facts.index.bindings_of(lr) if isinstance(lr, cst.Name) else []
    param = bindings[0].node if len(bindings) == 1 and bindings[0].op == "param" else None
    for caller, call in callers:
        if facts.mode.per_process_batches and not caller.mode.per_process_batches:
            return False  # the helper trains data-parallel itself: such a caller says nothing
        if not _batch_grows(caller):
            continue
        if not isinstance(param, cst.Param) or fn is None or param.star:
            return False
        given = caller.index.argument_for_param(call, fn, param.name.value)
        if given is None or not caller.reads_process_count(given.value):
            return False
    return True


def _is_attribute_path(text: str) -> bool:
    """``args.lr``, ``cfg.optim.lr``: names joined by dots, safe to assign to."""
    parts = text.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _driven_by_peak_lr_scheduler(facts: Facts, optimizers: list[Optimizer], schedulers) -> set:
    """Optimizers whose learning rate a OneCycle-style scheduler overrides (one closure over
    every scheduler's optimizer argument, not a search per pair)."""
    if not schedulers:
        return set()
    roots = [
        arg.value for s in schedulers if (arg := Index.argument(s.call, "optimizer", 0)) is not None
    ]
    linked = facts.flow.closure(roots, depth=4)
    exempt = {o.call for o in optimizers if o.call in linked}
    if not exempt and len(optimizers) == 1:
        exempt.add(optimizers[0].call)
    return exempt


def _param_groups_have_lr(facts: Facts, opt: Optimizer) -> bool:
    """The parameters given are groups that carry their own `lr` (`[{"params": ..., "lr": x}]`)."""
    if opt.params is None:
        return False

    def group_lr(node: cst.CSTNode, _q: str | None) -> bool:
        return isinstance(node, cst.DictElement) and string_value(node.key) == "lr"

    return facts.flow.reaches(opt.params, group_lr, key="group-lr", depth=4)


def _param_groups_scaled(facts: Facts, opt: Optimizer) -> bool:
    """Per-group learning rates (`[{"params": ..., "lr": base * world}]`) that are scaled."""
    if opt.params is None:
        return False

    def scaled_group_lr(node: cst.CSTNode, _q: str | None) -> bool:
        return (
            isinstance(node, cst.DictElement)
            and string_value(node.key) == "lr"
            and facts.reads_process_count(node.value)
        )

    return facts.flow.reaches(opt.params, scaled_group_lr, key="scaled-group-lr", depth=4)
