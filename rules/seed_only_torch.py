"""DL101 seed-only-torch."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index
from distlint.analysis import knowledge as K
from distlint.analysis.facts import Facts, Seeds
from distlint.fixes import FixPlan, import_name
from distlint.model import Applicability
from distlint.rule import Invalid, Option, Rule, RuleContext, Valid, factor_expression

SEED_FUNCTIONS = K.SEED_FUNCTION_CHOICES
KINDS = {Seeds.TORCH: "torch", Seeds.PYTHON: "python", Seeds.NUMPY: "numpy", Seeds.XLA: "xla"}


class SeedOnlyTorch(Rule):
    """
    ## What it does
    Flags scripts that seed torch by hand (`torch.manual_seed`, `torch.cuda.manual_seed_all`, ...)
    but leave unseeded another random generator the run draws from: python's `random` or numpy's
    global generator (directly, or through augmentation libraries built on them, or a `datasets`
    shuffle without its own seed), and the XLA generator when a torch_xla script uses dropout or
    samples on the device. A script that draws from torch only (a mock model's
    `torch.manual_seed(0)`) is fine.

    ## Why is this bad?
    Data shuffling, augmentation and sampling code often draws from `random` or `numpy.random`.
    Seeding only torch leaves those generators in a different state on every run and on every
    process, so a 1-GPU run and an N-GPU run (or two runs of the same setup) see different data
    and cannot be compared. `accelerate.utils.set_seed(seed)` seeds all five generators that
    matter: `random`, `numpy`, torch, every device (CUDA/XPU/NPU/MLU) and torch_xla.

    A complete hand-written seeding (random + numpy + torch, also in a helper function of the
    same file) is fine, as are per-rank seeds such as `seed + rank`. A per-rank torch seed
    (`seed + accelerator.process_index`, `fabric.global_rank`, `xm.get_ordinal()`) is deliberate:
    it is reported only when the script also draws from an unseeded generator, and with no fix
    (a same-seed `set_seed` would undo it). Seeding that runs on one
    process only (under `if accelerator.is_main_process:`, `if rank == 0:`: typically
    `generator = torch.manual_seed(0)` to sample images) does not seed the run and is not counted.

    ## Fix safety
    The fix replaces the hand-written seeding calls that share one seed expression by a single
    `set_seed(<seed>)` call and imports it. `set_seed` seeds every device itself, so the call goes
    where the first unguarded seeding call was, and seeding under `if torch.cuda.is_available():`
    is removed with it (the whole `if` when it does nothing else; no fix when the seeding only
    exists under such a check together with other statements). It is safe when the script already
    uses accelerate.
    Otherwise it is unsafe: it adds a dependency on accelerate. When the calls use different seed
    expressions (for example `seed + rank` for one generator), no fix is offered.

    ## References
    - Accelerate, "Comparing performance across distributed setups": setting the right seeds.
    - `accelerate.utils.set_seed`.
    """

    CODE = "DL101"
    NAME = "seed-only-torch"
    MESSAGE = "torch is seeded by hand but other generators are not: use `accelerate.utils.set_seed(seed)`"
    FIX_TITLE = "Replace the hand-written seeding with `set_seed(...)`"
    FIX_SAFETY = Applicability.SAFE
    TRIGGERS = ("manual_seed",)
    OPTIONS = {
        "seed-function": Option(
            "accelerate.utils.set_seed",
            "the function the fix calls, and that counts as complete seeding",
            choices=SEED_FUNCTIONS,
        )
    }

    VALID = (
        Valid(
            "import random\nimport numpy as np\nimport torch\n\n"
            "def seed_all(seed):\n    random.seed(seed)\n    np.random.seed(seed)\n    torch.manual_seed(seed)\n\n"
            "seed_all(42)\nidx = np.random.permutation(10)\n"
        ),
        Valid(
            "from accelerate import Accelerator\nfrom accelerate.utils import set_seed\n\nset_seed(0)\naccelerator = Accelerator()\n"
        ),
        Valid("import torch\n\ntorch.manual_seed(0)\nx = torch.randn(3)\n"),
        Valid(
            "import random\nimport numpy as np\nimport torch\n\nrank = 0\n"
            "torch.manual_seed(1234 + rank)\nnp.random.seed(1234 + rank)\nrandom.seed(1234 + rank)\nrandom.shuffle([1, 2])\n"
        ),
        Valid(
            "import torch\nimport lightning as L\n\nL.seed_everything(7)\ntorch.manual_seed(7)\n"
        ),
        Valid(
            "import numpy as np\nimport torch\n\ntorch.manual_seed(3)\nrng = np.random.default_rng(3)\nrng.permutation(5)\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "if accelerator.is_main_process:\n    images = torch.randn(4, generator=torch.manual_seed(0))\n"
        ),
        Valid(
            "import torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "torch.manual_seed(0)\nmodel = torch.nn.Linear(2, 2)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n\n"
            "torch.manual_seed(xm.get_ordinal())\nmodel = torch.nn.Linear(2, 2).to(xm.xla_device())\n"
        ),
    )
    INVALID = (
        Invalid(
            "import numpy as np\nimport torch\nfrom accelerate import Accelerator\n\n"
            "accelerator = Accelerator()\ntorch.manual_seed(42)\norder = np.random.permutation(100)\n",
            fixed=(
                "import numpy as np\nimport torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import set_seed\n\n"
                "accelerator = Accelerator()\nset_seed(42)\norder = np.random.permutation(100)\n"
            ),
            range="6:1-6:22",
        ),
        Invalid(
            "import random\nimport torch as T\n\nT.manual_seed(0)\nT.cuda.manual_seed_all(0)\nrandom.shuffle([1, 2, 3])\n",
            fixed=(
                "import random\nimport torch as T\nfrom accelerate.utils import set_seed\n\nset_seed(0)\nrandom.shuffle([1, 2, 3])\n"
            ),
            range="4:1-4:17",
        ),
        Invalid(
            "from torch import manual_seed\nimport accelerate\nimport numpy as np\n\nacc = accelerate.Accelerator()\nmanual_seed(1)\nnp.random.shuffle([1, 2])\n",
            fixed=(
                "from torch import manual_seed\nimport accelerate\nfrom accelerate.utils import set_seed\nimport numpy as np\n\n"
                "acc = accelerate.Accelerator()\nset_seed(1)\nnp.random.shuffle([1, 2])\n"
            ),
            range="6:1-6:15",
        ),
        Invalid(
            "import random\nimport torch\n\nrank = 1\ntorch.manual_seed(5 + rank)\nrandom.seed(5)\nrandom.random()\n"
            "import numpy as np\nnp.random.rand(2)\n",
            range="5:1-5:28",
        ),
        Invalid(
            "import torch\nimport torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\ntorch.manual_seed(0)\n"
            "model = torch.nn.Dropout(0.1).to(device)\n",
            fixed=(
                "import torch\nimport torch_xla.core.xla_model as xm\nfrom accelerate.utils import set_seed\n\n"
                "device = xm.xla_device()\nset_seed(0)\nmodel = torch.nn.Dropout(0.1).to(device)\n"
            ),
            range="5:1-5:21",
        ),
        Invalid(
            "import random\nimport torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
            "torch.manual_seed(0)\nif torch.cuda.is_available():\n    torch.cuda.manual_seed_all(0)\nrandom.seed(0)\n"
            "import numpy as np\nnp.random.rand(2)\n",
            fixed=(
                "import random\nimport torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import set_seed\n\n"
                "accelerator = Accelerator()\nset_seed(0)\nimport numpy as np\nnp.random.rand(2)\n"
            ),
            range="6:1-6:21",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        seed_fn = self.options["seed-function"]
        seeding = facts.seeding
        if not _may_miss(facts):
            return  # nothing drawn that a seed could leave out: no helper need be followed
        # The cheapest answers first: the script's own calls, then the project helpers only
        # as far as a question needs them (each answer below ends the check without a report)
        if seeding.seeds(Seeds.ALL, helpers=False):
            return  # a library helper seeds everything
        if any(index.qualname(c.func) == seed_fn for c in index.calls):
            return
        missing = _unseeded_draws(facts)
        if not missing or seeding.seeds(Seeds.ALL) or not seeding.seeds(Seeds.TORCH):
            return  # (a project helper calling a library helper seeds everything)
        by_kind = {KINDS[k]: calls for k, calls in seeding.by_kind.items()}
        first = min(by_kind["torch"], key=index.order)
        what = (
            " and ".join(missing)
            if len(missing) <= 2
            else ", ".join(missing[:-1]) + " and " + missing[-1]
        )
        verb = "is" if len(missing) == 1 else "are"
        short = seed_fn.rsplit(".", 1)[1]
        per_rank = next((c for c in by_kind["torch"] if seeding.per_rank(c)), None)
        if per_rank is not None:
            # a deliberate per-rank seed: a same-seed `set_seed` would undo it, so no fix
            value = _seed_text(index, per_rank)
            message = f"torch is seeded per rank (`{value}`) but {what} {verb} not: seed {'it' if len(missing) == 1 else 'them'} too"
            ctx.report(first, message, None)
            return
        message = f"torch is seeded by hand but {what} {verb} not: use `{seed_fn}(seed)`"
        ctx.report(first, message, self._fix(facts, first, by_kind, seed_fn, short))

    def _fix(
        self,
        facts: Facts,
        first: cst.Call,
        by_kind: dict[str, list[cst.Call]],
        seed_fn: str,
        short: str,
    ) -> FixPlan | None:
        index = facts.index
        seeders = sorted(
            (c for kind in ("torch", "python", "numpy", "xla") for c in by_kind[kind]),
            key=index.order,
        )
        seed_texts = {_seed_text(index, c) for c in seeders}
        if len(seed_texts) != 1 or None in seed_texts:
            return None  # different seeds per generator (e.g. seed + rank): a human decision
        statements = [
            s for s in (_plain_call_statement(index, c) for c in seeders) if s is not None
        ]
        anchor = _anchor(index, statements)
        if anchor is None:
            return None
        fix = FixPlan()
        _remove_other_seeding(index, fix, anchor, statements)
        anchor_call = first if anchor is _plain_call_statement(index, first) else None
        if anchor_call is None:
            anchor_call = next(c for c in seeders if index.is_inside(c, anchor))
        _seed_at(index, fix, anchor, anchor_call, seed_fn)
        if not facts.imports_module("accelerate") and seed_fn.startswith("accelerate"):
            fix.applicability = Applicability.UNSAFE
        fix.title = f"Replace the hand-written seeding with `{short}(...)`"
        return fix


def _anchor(index: Index, statements: list[cst.SimpleStatementLine]) -> cst.CSTNode | None:
    """Where the seed function's call goes. `set_seed` seeds every device itself, so it belongs
    outside `if torch.cuda.is_available():`: where the first unguarded seeding call was; when
    all seeding sits under device checks, in place of the whole check if it does nothing else."""
    unguarded = [s for s in statements if _device_guard(index, s) is None]
    if unguarded:
        return unguarded[0]
    guard = _device_guard(index, statements[0]) if statements else None
    if guard is None or not _only_seeding(guard, statements):
        return None
    return guard


def _remove_other_seeding(
    index: Index, fix: FixPlan, anchor: cst.CSTNode, statements: list[cst.SimpleStatementLine]
) -> None:
    """Remove the seeding statements the one call replaces, in the anchor's block (with their
    device check when it holds nothing else)."""
    block = index.parent(anchor)
    removable = [s for s in statements if s is not anchor and not index.is_inside(s, anchor)]
    for stmt in removable:
        parent = index.parent(stmt)
        if parent is block:
            fix.replace[stmt] = cst.RemovalSentinel.REMOVE
            continue
        guard = _device_guard(index, stmt)
        if guard is None or index.parent(guard) is not block:
            continue  # seeding elsewhere (another function, another branch): left alone, harmless
        if _only_seeding(guard, statements):
            fix.replace[guard] = cst.RemovalSentinel.REMOVE  # never leave an empty `if` behind
        elif any(not _is_seeding_stmt(s, statements) for s in getattr(parent, "body", ())):
            fix.replace[stmt] = cst.RemovalSentinel.REMOVE


def _seed_at(
    index: Index, fix: FixPlan, anchor: cst.CSTNode, anchor_call: cst.Call, seed_fn: str
) -> None:
    """Replace the seeding call at the anchor (or the device check there) with one call of the
    seed function, given the same seed, imported if need be."""
    arg = Index.argument(anchor_call, keyword="seed", position=0) or Index.argument(
        anchor_call, keyword="new_state", position=0
    )
    seed_arg = arg.value if arg is not None else cst.Name("seed")
    name, spec = import_name(index, seed_fn, anchor)
    new_call = cst.Call(func=factor_expression(name), args=[cst.Arg(seed_arg)])
    if isinstance(anchor, cst.SimpleStatementLine):
        fix.replace[anchor_call] = new_call
    else:
        fix.replace[anchor] = cst.SimpleStatementLine(
            body=[cst.Expr(new_call)], leading_lines=getattr(anchor, "leading_lines", ())
        )
    if spec is not None:
        fix.imports.append(spec)


def _device_guard(index: Index, stmt: cst.CSTNode) -> cst.If | None:
    """The `if torch.cuda.is_available():` (or `args.use_gpu`, ...) statement whose branch holds ``stmt``."""
    block = index.parent(stmt)
    owner = index.parent(block) if block is not None else None
    if isinstance(owner, cst.Else):
        owner = index.parent(owner)
    if isinstance(owner, cst.If) and isinstance(block, cst.IndentedBlock):
        test = index.module.code_for_node(owner.test).lower()
        if any(word in test for word in K.DEVICE_GUARD_WORDS):
            return owner
    return None


def _is_seeding_stmt(stmt: cst.CSTNode, statements: list[cst.SimpleStatementLine]) -> bool:
    return any(stmt is s for s in statements)


def _only_seeding(guard: cst.If, statements: list[cst.SimpleStatementLine]) -> bool:
    """Every branch of ``guard`` holds only the seeding calls being replaced (no `elif`)."""
    blocks = [guard.body]
    if guard.orelse is not None:
        if not isinstance(guard.orelse, cst.Else):
            return False
        blocks.append(guard.orelse.body)
    return all(
        isinstance(b, cst.IndentedBlock) and all(_is_seeding_stmt(s, statements) for s in b.body)
        for b in blocks
    )


def _seed_text(index: Index, call: cst.Call) -> str | None:
    arg = Index.argument(call, keyword="seed", position=0) or Index.argument(
        call, keyword="new_state", position=0
    )
    if arg is None:
        return None
    return index.module.code_for_node(arg.value).strip()


def _plain_call_statement(index: Index, call: cst.Call) -> cst.SimpleStatementLine | None:
    """The statement line when ``call`` is the whole of a one-statement line, else None."""
    expr = index.parent(call)
    if not isinstance(expr, cst.Expr) or expr.value is not call:
        return None
    line = index.parent(expr)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return None


def _may_miss(facts: Facts) -> bool:
    """Some generator other than torch's may be drawn from (``may_draw`` bounds ``draws``
    without following the project helpers the module calls)."""
    wanted = Seeds.PYTHON | Seeds.NUMPY | (Seeds.XLA if facts.uses_xla else Seeds.NONE)
    return bool(facts.seeding.may_draw & wanted)


def _unseeded_draws(facts: Facts) -> list[str]:
    """The generators the run draws from (directly or through known libraries) that nothing
    seeds: a mock model's `torch.manual_seed(0)` in a script that never touches `random` is
    fine, a numpy augmentation after it is not."""
    seeding = facts.seeding
    missing: list[str] = []
    if Seeds.PYTHON in seeding.draws and not seeding.seeds(Seeds.PYTHON):
        missing.append("python `random`")
    if Seeds.NUMPY in seeding.draws and not seeding.seeds(Seeds.NUMPY):
        missing.append("numpy")
    if facts.uses_xla and Seeds.XLA in seeding.draws and not seeding.seeds(Seeds.XLA):
        missing.append("torch_xla")
    return missing
