"""DL102 seed-after-model-init."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import Index
from distlint.analysis.ordering import Happens, Ordering
from distlint.rule import Invalid, Rule, RuleContext, Valid


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
            "model = torch.nn.Linear(4, 2)\nset_seed(0)\n",
            range="5:1-5:12",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
            "def seed_all(seed):\n    torch.manual_seed(seed)\n\n"
            "def main():\n    model = Net()\n    seed_all(0)\n",
            range="14:5-14:16",
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import random_split\n\n"
            "train, val = random_split(list(range(10)), [8, 2])\ntorch.manual_seed(0)\n",
            range="5:1-5:21",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        if not ctx.facts.may_build_model:
            return  # nothing built or split at random: no seed can come after it
        if not ctx.facts.seeding.seeds_torch:
            return  # no seeding to come too late (the order of the rest need not be known)
        analysis = Ordering(ctx.facts)
        reported: set[cst.Call] = set()
        for root, prefix in analysis.roots(may_build_first=True):
            if not prefix and analysis.seeded_first(root):
                continue  # seeded before anything could be built: nothing else need be asked
            events = prefix + analysis.events(root)
            if not events or events[0].kind is not Happens.MODEL:
                continue  # seeded before anything was built (or never seeded: DL101's business)
            seed = next((e for e in events if e.kind is Happens.SEED), None)
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


def _short(index: Index, call: cst.Call) -> str:
    text = " ".join(index.module.code_for_node(call).split())
    return text if len(text) <= 60 else text[:57] + "..."
