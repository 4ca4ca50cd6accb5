"""DL101 seed-only-torch (rules/seed_only_torch.py): its snippets, fixtures/DL101/ and its own
cases on the idioms of real training scripts.

The reported cases are snapshotted in tests/rules/snapshots/test_DL101/ (where the rule reports,
its message, what its fix does; `pytest --update-snapshots` writes them); the cases that must
stay silent are valid snippets (``VALID``).
"""

import textwrap

import pytest
from helpers import lint_snippet, undefined_names
from rule_tests import FixtureTests, SnippetTests


class TestDL101(SnippetTests, FixtureTests):
    CODE = "DL101"
    # correct seeding (or nothing unseeded drawn) in the idioms of real scripts
    VALID = {
        "numpy.random-alias-seeded-is-complete": """
        import numpy.random as npr
        import torch
        torch.manual_seed(0)
        npr.seed(0)
        npr.permutation(10)
        """,
        "from-random-import-seed-is-complete": """
        from random import seed, shuffle
        import torch
        torch.manual_seed(0)
        seed(0)
        shuffle([1, 2, 3])
        """,
        "transformers.set_seed": """
        import numpy as np
        import torch
        import transformers
        transformers.set_seed(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "from-transformers-import-set_seed": """
        import numpy as np
        import torch
        from transformers import set_seed
        set_seed(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "lightning-seed_everything": """
        import numpy as np
        import torch
        from lightning import seed_everything
        seed_everything(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "pytorch_lightning-seed_everything": """
        import numpy as np
        import torch
        import pytorch_lightning as pl
        pl.seed_everything(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "lightning_fabric-seed_everything": """
        import numpy as np
        import torch
        from lightning_fabric.utilities.seed import seed_everything
        seed_everything(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "fabric-instance-seed_everything": """
        import numpy as np
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cpu")
        fabric.seed_everything(1)
        torch.manual_seed(1)
        np.random.rand(2)
        """,
        "fabric-self-attribute-seed_everything": """
        import numpy as np
        import torch
        import lightning as L

        class Trainer:
            def __init__(self):
                self.fabric = L.Fabric()
                self.fabric.seed_everything(3)
                torch.manual_seed(3)
                np.random.rand(2)
        """,
        "local-helper-complete": """
        import random
        import numpy as np
        import torch

        def seed_all(seed):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)

        seed_all(0)
        np.random.rand(2)
        """,
        "local-helper-named-set_seed": """
        import random
        import numpy as np
        import torch

        def set_seed(seed):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            torch.cuda.manual_seed_all(seed)

        set_seed(0)
        random.shuffle([1, 2])
        """,
        "method-seed_all-complete": """
        import random
        import numpy as np
        import torch

        class Trainer:
            def __init__(self, seed):
                self.seed_all(seed)

            def seed_all(self, seed):
                random.seed(seed)
                np.random.seed(seed)
                torch.manual_seed(seed)

            def data(self):
                return np.random.permutation(10)
        """,
        "seed-plus-rank-all-generators": """
        import random
        import numpy as np
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        random.seed(1234 + rank)
        np.random.seed(1234 + rank)
        torch.manual_seed(1234 + rank)
        np.random.rand(2)
        """,
        "cuda-available-block-complete": """
        import random
        import numpy as np
        import torch
        seed = 0
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        np.random.rand(2)
        """,
        "worker_init_fn-seeds-numpy-from-initial_seed": """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        def worker_init_fn(worker_id):
            np.random.seed(torch.initial_seed() % 2**32)

        torch.manual_seed(0)
        loader = DataLoader(range(10), num_workers=2, worker_init_fn=worker_init_fn)
        def augment(x):
            return x + np.random.rand()
        """,
        "numpy-default_rng-local-generator": """
        import numpy as np
        import torch
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        rng.permutation(10)
        np.random.default_rng().integers(5)
        """,
        "random-Random-instance": """
        import random
        import torch
        torch.manual_seed(0)
        r = random.Random(0)
        r.shuffle([1, 2])
        """,
        "xla-nothing-draws-from-the-device-generator": """
        import torch
        import torch_xla.core.xla_model as xm
        torch.manual_seed(0)
        device = xm.xla_device()
        model = torch.nn.Linear(2, 2).to(device)
        """,
        "per-rank-torch-seed-nothing-else-drawn": """
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        torch.manual_seed(accelerator.process_index)
        """,
        "fabric-global-rank-seed-nothing-else-drawn": """
        import torch
        import lightning as L
        fabric = L.Fabric(devices=2)
        torch.manual_seed(1337 + fabric.global_rank)
        """,
        "mock-model-seed-in-an-accelerate-script": """
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        torch.manual_seed(0)
        model = accelerator.prepare(torch.nn.Linear(2, 2))
        """,
        "datasets-shuffle-with-its-own-seed": """
        import torch
        from datasets import load_dataset
        torch.manual_seed(0)
        ds = load_dataset("imdb")["train"].shuffle(seed=0)
        """,
        "xla-set_rng_state-present": """
        import torch
        import torch_xla.core.xla_model as xm
        torch.manual_seed(0)
        xm.set_rng_state(0)
        device = xm.xla_device()
        """,
        "mp.spawn-worker-seeds-inside": """
        import numpy as np
        import torch
        import torch.multiprocessing as mp

        def worker(rank, seed):
            torch.manual_seed(seed + rank)
            np.random.seed(seed + rank)
            np.random.shuffle(list(range(4)))

        if __name__ == "__main__":
            mp.spawn(worker, args=(0,), nprocs=2)
        """,
        "trainer-__init__-complete": """
        import random
        import numpy as np
        import torch

        class Trainer:
            def __init__(self, seed):
                random.seed(seed)
                np.random.seed(seed)
                torch.manual_seed(seed)

            def batches(self, items):
                random.shuffle(items)
                return np.random.permutation(items)
        """,
        "torch-only-no-other-draws": """
        import torch
        torch.manual_seed(0)
        x = torch.randn(3)
        """,
        "torch.Generator-manual_seed-is-not-global": """
        import numpy as np
        import torch
        g = torch.Generator()
        g.manual_seed(0)
        np.random.rand(2)
        """,
    }


# (id, source): the rule reports each
DL101_CASES = [
    (
        "alias-torch-as-T",
        """
        import random
        import torch as T
        T.manual_seed(0)
        random.shuffle([1, 2])
        """,
    ),
    (
        "from-torch-import-manual_seed",
        """
        from torch import manual_seed
        import numpy as np
        manual_seed(0)
        np.random.rand(3)
        """,
    ),
    (
        "from-torch.random-import-manual_seed",
        """
        from torch.random import manual_seed
        import numpy as np
        manual_seed(0)
        np.random.rand(3)
        """,
    ),
    (
        "import-numpy.random-as-npr",
        """
        import numpy.random as npr
        import torch
        torch.manual_seed(0)
        npr.permutation(10)
        """,
    ),
    (
        "from-numpy-import-random-as-npr",
        """
        from numpy import random as npr
        import torch
        torch.manual_seed(0)
        npr.randint(0, 5)
        """,
    ),
    (
        "from-random-import-shuffle",
        """
        from random import shuffle
        import torch
        torch.manual_seed(0)
        shuffle([1, 2, 3])
        """,
    ),
    (
        "local-helper-incomplete-is-reported",
        """
        import numpy as np
        import torch

        def set_seed(seed):
            torch.manual_seed(seed)
            torch.cuda.manual_seed_all(seed)

        set_seed(0)
        np.random.rand(2)
        """,
    ),
    (
        "seed-plus-rank-numpy-missing",
        """
        import numpy as np
        import torch
        import torch.distributed as dist
        rank = dist.get_rank()
        torch.manual_seed(1234 + rank)
        np.random.rand(2)
        """,
    ),
    (
        "cuda-available-block-incomplete",
        """
        import numpy as np
        import torch
        seed = 0
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        torch.manual_seed(seed)
        np.random.rand(2)
        """,
    ),
    (
        "xla-needs-set_rng_state",
        """
        import torch
        import torch_xla.core.xla_model as xm
        torch.manual_seed(0)
        device = xm.xla_device()
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)).to(device)
        """,
    ),
    (
        "augmentation-library-draws-from-random-and-numpy",
        """
        import albumentations as A
        import torch
        torch.manual_seed(0)
        transform = A.Compose([A.HorizontalFlip(p=0.5)])
        """,
    ),
    (
        "datasets-shuffle-without-seed-draws-from-numpy",
        """
        import torch
        from datasets import load_dataset
        torch.manual_seed(0)
        ds = load_dataset("imdb")["train"].shuffle()
        """,
    ),
    (
        "mp.spawn-worker-numpy-missing",
        """
        import numpy as np
        import torch
        import torch.multiprocessing as mp

        def worker(rank, seed):
            torch.manual_seed(seed + rank)
            np.random.shuffle(list(range(4)))

        if __name__ == "__main__":
            mp.spawn(worker, args=(0,), nprocs=2)
        """,
    ),
    (
        "trainer-__init__-seeds-torch-only",
        """
        import random
        import torch

        class Trainer:
            def __init__(self, seed):
                torch.manual_seed(seed)

            def batches(self, items):
                random.shuffle(items)
                return items
        """,
    ),
]


@pytest.mark.parametrize("source", [c[1] for c in DL101_CASES], ids=[c[0] for c in DL101_CASES])
def test_dl101_idioms(source, snapshot):
    snapshot(lint_snippet("DL101", source))


# (id, source): the snapshot holds the exact fix, or `fix: none` where none is offered
DL101_FIXES = [
    (
        "cuda-block-with-only-seeding-is-removed",
        """
        import numpy as np
        import torch
        from accelerate import Accelerator

        def main(seed):
            accelerator = Accelerator()
            torch.manual_seed(seed)
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
            np.random.rand(2)
        """,
    ),
    (
        "cuda-block-keeps-its-other-statements-and-set_seed-stays-unguarded",
        """
        import numpy as np
        import torch
        from accelerate import Accelerator

        def main(seed):
            accelerator = Accelerator()
            if torch.cuda.is_available():
                torch.cuda.manual_seed(seed)
                torch.cuda.manual_seed_all(seed)
                torch.backends.cudnn.deterministic = True
            torch.manual_seed(seed)
            np.random.rand(2)
        """,
    ),
    (
        "if-else-device-seeding-becomes-one-call",
        """
        import numpy as np
        import torch
        from accelerate import Accelerator

        def main(seed):
            accelerator = Accelerator()
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
            else:
                torch.manual_seed(seed)
            np.random.rand(2)
        """,
    ),
    (
        "guarded-seeding-mixed-with-other-work-is-not-fixed",
        """
        import numpy as np
        import torch
        from accelerate import Accelerator

        def main(seed):
            accelerator = Accelerator()
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
                torch.backends.cudnn.benchmark = False
            np.random.rand(2)
        """,
    ),
    (
        "seed-only-when-given",
        """
        import random
        import numpy as np
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        seed = None
        if seed is not None:
            random.seed(seed)
            torch.manual_seed(seed)
        np.random.rand(2)
        """,
    ),
    (
        "existing-set_seed-binding-is-reused",
        """
        import random
        import torch
        import accelerate.utils
        from accelerate import Accelerator

        acc = Accelerator()
        torch.manual_seed(3)
        random.random()
        """,
    ),
    (
        "per-rank-seed-differs-no-fix",
        """
        import random
        import numpy as np
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        torch.manual_seed(1 + accelerator.process_index)
        np.random.seed(1)
        random.random()
        """,
    ),
]


@pytest.mark.parametrize("source", [c[1] for c in DL101_FIXES], ids=[c[0] for c in DL101_FIXES])
def test_dl101_fix(source, snapshot):
    linted = snapshot(lint_snippet("DL101", source))
    assert len(linted.findings) == 1
    if linted.fixed_source is not None:
        assert undefined_names(linted.fixed_source) == []
        assert linted.fix.findings == ()  # the fixed script is clean


# A seeding call under a test that holds on one process only is not the run's seeding: the
# diffusers examples make `generator = torch.manual_seed(0)` on the main process to sample images
# after an epoch. (id, the test, what the lines before it set up)
ONE_PROCESS_TESTS = [
    ("accelerator-is-main-process", "accelerator.is_main_process", ""),
    ("and-with-epoch-check", "accelerator.is_local_main_process and epoch % 5 == 0", "epoch = 3\n"),
    ("rank-from-env", "rank == 0", "import os\nrank = int(os.environ['RANK'])\n"),
    ("zero-on-the-left", "0 == dist.get_rank()", "import torch.distributed as dist\n"),
    ("legacy-local-rank", "args.local_rank in [-1, 0]", "args = parse()\n"),
    ("xla-master-ordinal", "xm.is_master_ordinal()", "import torch_xla.core.xla_model as xm\n"),
]

HEADER = (
    "import numpy as np\nimport torch\nfrom accelerate import Accelerator\n\naccelerator = Accelerator()\n"
    "model = accelerator.prepare(torch.nn.Linear(2, 2))\norder = np.random.permutation(4)\n"
)


@pytest.mark.parametrize(
    "test,setup", [c[1:] for c in ONE_PROCESS_TESTS], ids=[c[0] for c in ONE_PROCESS_TESTS]
)
@pytest.mark.parametrize("code", ["DL101", "DL102"])  # the same seeding facts: both must agree
def test_seeding_on_one_process_is_not_the_runs_seeding(code, test, setup):
    source = (
        HEADER
        + setup
        + f"if {test}:\n    generator = torch.manual_seed(0)\n    torch.randn(2, generator=generator)\n"
    )
    assert lint_snippet(code, source).findings == ()
    # the same call where every process runs it is the run's seeding, after the model
    everywhere = HEADER + setup + "generator = torch.manual_seed(0)\n"
    assert [f.code for f in lint_snippet(code, everywhere).findings] == [code]


def test_seeding_in_a_trainer_method_on_the_main_process():
    source = HEADER + textwrap.dedent(
        """
        class Trainer:
            def __init__(self, accelerator):
                self.accelerator = accelerator

            def sample(self):
                if self.accelerator.is_main_process:
                    return torch.randn(2, generator=torch.manual_seed(0))
        """
    )
    assert lint_snippet("DL101", source).findings == ()


@pytest.mark.parametrize(
    "block",
    [
        "if args.seed is not None:\n    torch.manual_seed(args.seed)\n",
        "if accelerator.is_main_process:\n    pass\nelse:\n    torch.manual_seed(0)\n",
        "if rank != 0:\n    torch.manual_seed(0)\n",
        "if accelerator.is_main_process or args.debug:\n    torch.manual_seed(0)\n",
    ],
    ids=["seed-given", "else-branch", "not-rank-zero", "or-test"],
)
def test_seeding_where_more_than_one_process_may_run_it_is_still_the_runs(block):
    source = "import os\nrank = int(os.environ['RANK'])\nargs = parse()\n" + HEADER + block
    assert [f.code for f in lint_snippet("DL101", source).findings] == ["DL101"]
