"""DL102 seed-after-model-init."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import libcst as cst

from distlint.analysis import Index, iter_names
from distlint.analysis.facts import Facts, Seeds
from distlint.rule import Invalid, Rule, RuleContext, Valid


class _Event(NamedTuple):
    kind: str  # "seed" or "model"
    site: cst.Call  # the call in the function being analysed through which it happens
    origin: cst.Call  # the seeding call (or seeding helper call) / the constructor itself


class SeedAfterModelInit(Rule):
    """
    ## What it does
    Flags seeding (`set_seed`, `seed_everything`, `torch.manual_seed`, a seeding helper of the
    same file) that runs only after the script has built its model: a `torch.nn` layer, a model
    class of the script, a transformers/diffusers/timm/peft model that gets fresh random weights,
    or a `random_split` of the dataset without its own generator. "After" follows the script's
    execution: source order in one function, helpers and trainer-class constructors called from
    it, and methods of a trainer class whose `__init__` built the model. A second seeding later in
    the run (for example `set_seed(seed + rank)` for the data) is fine when the model was built
    after a first one, and so is seeding that runs on one process only (under `if
    accelerator.is_main_process:`, `if rank == 0:`), such as a generator made to sample images.

    Building a `DataLoader` before seeding is not flagged: a shuffling loader without its own
    generator draws its order from torch's generator when it is iterated, not when it is built,
    so seeding between the two still makes the first epoch reproducible.

    ## Why is this bad?
    Initial weights are drawn from torch's global generator when the model is constructed. Seeded
    afterwards, every run (and on some setups every process) starts from different weights, so a
    1-GPU run and an N-GPU run cannot be compared, and a bad result cannot be reproduced. A
    randomly split dataset drawn before seeding differs per process: ranks then train and evaluate
    on different, overlapping splits.

    ## Fix safety
    No automatic fix. Moving the seeding call earlier changes every random draw in between (data
    generation, augmentation, dropout), and the seed value is often computed from objects built in
    between (`args`, `accelerator.process_index`): move it to the start of the run by hand.

    ## References
    - Accelerate, "Comparing performance across distributed setups": set the seed first.
    - PyTorch, "Reproducibility" notes; `torch.utils.data.RandomSampler` draws its seed per epoch.
    """

    CODE = "DL102"
    NAME = "seed-after-model-init"
    MESSAGE = "seeding runs after the model was built: its initial weights are not reproducible"
    TRIGGERS = ("seed", "random_split")

    VALID = (
        Valid(
            "import torch\nfrom accelerate.utils import set_seed\n\n"
            "set_seed(0)\nmodel = torch.nn.Linear(4, 2)\n"
        ),
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\n\n"
            "loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)\ntorch.manual_seed(0)\n"
            "model = torch.nn.Linear(4, 2)\n"
        ),
        Valid(
            "import torch\nfrom accelerate.utils import set_seed\n\n"
            "set_seed(0)\nmodel = torch.nn.Linear(4, 2)\nrank = 1\nset_seed(rank)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "model = torch.nn.Linear(4, 2)\nif accelerator.is_main_process:\n"
            "    images = torch.randn(4, generator=torch.manual_seed(0))\n"
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom accelerate.utils import set_seed\n\n"
            "model = torch.nn.Linear(4, 2)\nset_seed(0)\n"
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
            "def seed_all(seed):\n    torch.manual_seed(seed)\n\n"
            "def main():\n    model = Net()\n    seed_all(0)\n"
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import random_split\n\n"
            "train, val = random_split(list(range(10)), [8, 2])\ntorch.manual_seed(0)\n"
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        analysis = _Analysis(ctx.facts)
        reported: set[cst.Call] = set()
        for root, prefix in analysis.roots():
            events = prefix + analysis.events(root)
            if not events or events[0].kind != "model":
                continue  # seeded before anything was built (or never seeded: DL101's business)
            seed = next((e for e in events if e.kind == "seed"), None)
            if seed is None or seed.origin in reported:
                continue
            reported.add(seed.origin)
            built = _short(ctx.index, events[0].origin)  # the constructor, not the call to it
            what = (
                "the dataset was split"
                if ctx.facts.is_random_split(events[0].origin)
                else "the model was built"
            )
            ctx.report(
                seed.origin,
                f"seeding runs after {what} (`{built}`): seed before building anything random",
            )


class _Analysis:
    """What runs before what, following calls to functions, classes and methods of the file."""

    def __init__(self, facts: Facts) -> None:
        index = facts.index
        self.facts = facts
        self.index = index
        self._memo: dict[cst.CSTNode, list[_Event]] = {}
        self._targets: dict[cst.Call, list[cst.CSTNode]] = {}
        # by id of a list of bindings (held, so the id stays its own): what it holds
        self._instances: dict[int, tuple[list, cst.ClassDef | None]] = {}
        self._classes: dict[int, tuple[list, tuple[cst.CSTNode, ...]]] = {}
        # Calls owned by each function (or the module), in source order; nested defs excluded.
        self.calls_of: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in index.calls:
            owner = self._owner(call)
            if owner is not None:
                self.calls_of.setdefault(owner, []).append(call)

    def _owner(self, node: cst.CSTNode) -> cst.CSTNode | None:
        scope = self.index.scope(node)
        while scope.kind == "comprehension":
            scope = scope.parent  # type: ignore[assignment]
        if scope.kind in ("function", "module"):
            return scope.node
        return None  # lambda bodies and class bodies do not run in order with the rest

    # ---------------------------------------------------------------- entry points
    def roots(self) -> list[tuple[cst.CSTNode, list[_Event]]]:
        """The module, plus every function no call of the file reaches (mp.spawn workers, methods
        called from outside); a method runs after its class's ``__init__``."""
        called: set[cst.CSTNode] = set()
        for call in self.index.calls:
            called.update(self.targets(call))
        out: list[tuple[cst.CSTNode, list[_Event]]] = [(self.index.module, [])]
        for defs in self.index.functions.values():
            for fn in defs:
                if fn in called:
                    continue
                prefix: list[_Event] = []
                init = self._init_of_class_of(fn)
                if init is not None and init is not fn:
                    prefix = self.events(init)
                out.append((fn, prefix))
        return out

    def _init_of_class_of(self, fn: cst.FunctionDef) -> cst.FunctionDef | None:
        scope = self.index.scope(fn)  # the scope the `def` statement sits in
        cls = scope if scope.kind == "class" else None
        if cls is None:
            return None
        inits = self.index.functions.get(f"{cls.name}.__init__")
        return inits[-1] if inits else None

    # ---------------------------------------------------------------- events
    def events(self, fn: cst.CSTNode) -> list[_Event]:
        memo = self._memo
        if fn in memo:
            return memo[fn]
        memo[fn] = []  # recursion guard
        out: list[_Event] = []
        for call in self.calls_of.get(fn, ()):
            q = self.index.qualname(call.func)
            if self.facts.seeding.kind_of(call, q) in (Seeds.TORCH, Seeds.ALL):
                if not self._per_iteration(call, fn) and not self.facts.on_one_process(call):
                    out.append(_Event("seed", call, call))
                continue
            if self.facts.builds_model(call, q) or self.facts.is_random_split(call):
                out.append(_Event("model", call, call))
                continue
            for target in self.targets(call):
                model_class = False
                if isinstance(target, cst.ClassDef):
                    model_class = self.facts.is_model_class(target)
                    init = self.index.functions.get(f"{target.name.value}.__init__")
                    if not init:
                        if model_class:
                            out.append(_Event("model", call, call))
                        continue
                    target = init[-1]
                inner = self.events(target)
                if model_class and not (inner and inner[0].kind == "seed"):
                    out.append(_Event("model", call, call))  # layers may be built by a base class
                    break
                if inner and inner[0].kind == "seed":
                    out.append(
                        _Event("seed", call, call)
                    )  # a seeding helper: the call is the seeding
                else:
                    out.extend(_Event(e.kind, call, e.origin) for e in inner)
                break
        memo[fn] = out
        return out

    def _per_iteration(self, call: cst.Call, fn: cst.CSTNode) -> bool:
        """`torch.manual_seed(base + step)` inside `for step in ...`: a deliberate per-step reseed
        of the data stream, not the run's seed."""
        used = {n.value for arg in call.args for n in iter_names(arg.value)}
        for anc in self.index.ancestors(call):
            if anc is fn:
                break
            if isinstance(anc, cst.For) and used & {n.value for n in iter_names(anc.target)}:
                return True
        return False

    def targets(self, call: cst.Call) -> list[cst.CSTNode]:
        """Functions, methods or classes of this file that ``call`` runs."""
        found = self._targets.get(call)
        if found is None:
            found = self._targets[call] = self._find_targets(call)
        return found

    def _find_targets(self, call: cst.Call) -> list[cst.CSTNode]:
        index = self.index
        func = call.func
        fn = index.local_function(func)
        if fn is not None:
            return [fn]
        if isinstance(func, cst.Name):
            return list(self._classes_bound(index.bindings_of(func)))
        if isinstance(func, cst.Attribute):
            cls = self._instance_class(func.value)
            if cls is not None:
                return list(index.functions.get(f"{cls.name.value}.{func.attr.value}", ())[-1:])
        return []

    def _instance_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of this file that ``trainer`` (``trainer = Trainer(...)``) is an instance of."""
        if isinstance(expr, cst.Name):
            bindings = self.index.bindings_of(expr)
            # the uses of a module-level name inside functions share one list of bindings
            known = self._instances.get(id(bindings))
            if known is None or known[0] is not bindings:
                made = self._class_made([b.value for b in bindings if b.op == "="])
                known = self._instances[id(bindings)] = (bindings, made)
            return known[1]
        values: list[cst.CSTNode | None] = [expr] if isinstance(expr, cst.Call) else []
        if isinstance(expr, cst.Attribute):  # `self.trainer = Trainer(...)`
            values = [a.value for a in self.index.attribute_assignments(expr) if a.op == "="]
        return self._class_made(values)

    def _class_made(self, values: Sequence[cst.CSTNode | None]) -> cst.ClassDef | None:
        """The one class of this file whose instances ``values`` are (`Trainer(...)`)."""
        classes: set[cst.CSTNode] = set()
        for value in values:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                classes.update(self._classes_bound(self.index.bindings_of(value.func)))
        found = classes.pop() if len(classes) == 1 else None
        return found if isinstance(found, cst.ClassDef) else None

    def _classes_bound(self, bindings: list) -> tuple[cst.CSTNode, ...]:
        """The class statements among ``bindings`` (judged once per list: see above)."""
        known = self._classes.get(id(bindings))
        if known is None or known[0] is not bindings:
            found = tuple(b.node for b in bindings if b.op == "class")
            known = self._classes[id(bindings)] = (bindings, found)
        return known[1]


def _short(index: Index, call: cst.Call) -> str:
    text = " ".join(index.module.code_for_node(call).split())
    return text if len(text) <= 60 else text[:57] + "..."
