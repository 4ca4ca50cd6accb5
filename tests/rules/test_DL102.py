"""DL102 seed-after-model-init (rules/seed_after_model_init.py): its snippets, fixtures/DL102/
and its own cases on the idioms of real training scripts.

The reported cases are snapshotted in tests/rules/snapshots/test_DL102/; the cases that must stay
silent are valid snippets (``VALID``). tests/rules/test_DL101.py checks that both seeding rules
agree on seeding that runs on one process only.
"""

import textwrap

import pytest
from helpers import lint_snippet
from rule_tests import FixtureTests, SnippetTests

PER_STEP_RESEED = """
    import torch

    model = torch.nn.Linear(4, 2)
    for step in range(3):
        torch.manual_seed(1337 + step)  # reshuffle the data differently each step, on purpose
        x = torch.randn(8, 4)
    """


class TestDL102(SnippetTests, FixtureTests):
    CODE = "DL102"
    # seeded before anything random is built, or what is built draws nothing
    VALID = {
        "seeded-first": """
        import torch
        from accelerate.utils import set_seed

        def main():
            set_seed(0)
            model = torch.nn.Linear(4, 2)
        """,
        "reseed-per-rank-after-first-seed": """
        import torch
        from accelerate import Accelerator
        from accelerate.utils import set_seed

        def main():
            accelerator = Accelerator()
            set_seed(0)
            model = torch.nn.Linear(4, 2)
            set_seed(0 + accelerator.process_index)
        """,
        "main-seeds-then-calls-builder": """
        import torch
        from torch import nn

        def build_model():
            torch.manual_seed(5)
            return nn.Linear(4, 2)

        def main():
            torch.manual_seed(1)
            model = build_model()

        main()
        """,
        "trainer-seeded-in-main-before-construction": """
        import torch
        from accelerate.utils import set_seed

        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(4, 2)

            def fit(self):
                set_seed(1)
                return self.model

        def main():
            set_seed(0)
            trainer = Trainer()
            trainer.fit()

        main()
        """,
        "trainer-init-seeds-first": """
        import torch
        from accelerate.utils import set_seed

        class Trainer:
            def __init__(self, seed):
                set_seed(seed)
                self.model = torch.nn.Linear(4, 2)

            def fit(self):
                set_seed(1)
        """,
        "dataloader-before-seed-is-fine": """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(list(range(8)), batch_size=4, shuffle=True)
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        """,
        "dataloader-with-own-generator": """
        import torch
        from torch.utils.data import DataLoader

        g = torch.Generator()
        g.manual_seed(0)
        loader = DataLoader(list(range(8)), shuffle=True, generator=g)
        torch.manual_seed(0)
        """,
        "random_split-with-generator": """
        import torch
        from torch.utils.data import random_split

        train, val = random_split(list(range(10)), [8, 2], generator=torch.Generator().manual_seed(0))
        torch.manual_seed(0)
        """,
        "transformers-full-checkpoint-from_pretrained": """
        from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

        tok = AutoTokenizer.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        set_seed(0)
        """,
        "norm-and-activation-layers-draw-nothing": """
        import torch
        act = torch.nn.ReLU()
        norm = torch.nn.LayerNorm(4)
        torch.manual_seed(0)
        """,
        "fabric-seed-before-setup": """
        import torch
        import lightning as L

        fabric = L.Fabric()
        fabric.seed_everything(0)
        model = torch.nn.Linear(4, 2)
        model = fabric.setup(model)
        """,
        "model-class-seeding-itself-first": """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, seed):
                super().__init__()
                torch.manual_seed(seed)
                self.fc = nn.Linear(4, 2)

        model = Net(0)
        torch.manual_seed(1)
        """,
        "inference-script-loads-fine-tuned-head": """
        from transformers import AutoModelForSequenceClassification, set_seed

        model = AutoModelForSequenceClassification.from_pretrained("./finetuned")
        set_seed(0)
        print(model(input_ids=None))
        """,
        "seed-varies-per-step-silent": PER_STEP_RESEED,
    }


# (id, source): the rule reports each
DL102_CASES = [
    (
        "same-function-source-order",
        """
        import torch
        from accelerate.utils import set_seed

        def main():
            model = torch.nn.Linear(4, 2)
            set_seed(0)
        """,
    ),
    (
        "main-calls-helpers",
        """
        import torch
        from torch import nn

        def build_model():
            return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

        def seed_everything(seed):
            torch.manual_seed(seed)

        def main():
            model = build_model()
            seed_everything(1)

        if __name__ == "__main__":
            main()
        """,
    ),
    (
        "helper-seeds-after-building",
        """
        import torch
        from torch import nn

        def setup():
            model = nn.Linear(4, 2)
            torch.manual_seed(0)
            return model

        def main():
            setup()

        main()
        """,
    ),
    (
        "model-class-of-the-script",
        """
        import torch
        from torch import nn
        import lightning as L

        class Base(nn.Module):
            pass

        class Net(Base):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

        class Lit(L.LightningModule):
            pass

        net = Net()
        L.seed_everything(0)
        """,
    ),
    (
        "trainer-init-builds-then-method-seeds",
        """
        import torch
        from accelerate.utils import set_seed

        class Trainer:
            def __init__(self, seed):
                self.seed = seed
                self.model = torch.nn.Linear(4, 2)

            def fit(self):
                set_seed(self.seed)
                return self.model
        """,
    ),
    (
        "trainer-constructed-before-seeding-in-main",
        """
        import torch
        from accelerate.utils import set_seed

        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(4, 2)

            def fit(self):
                return self.model

        def main():
            trainer = Trainer()
            set_seed(0)
            trainer.fit()

        main()
        """,
    ),
    (
        "random_split-before-seed",
        """
        import torch
        from torch.utils.data import random_split

        train, val = random_split(list(range(10)), [8, 2])
        torch.manual_seed(0)
        """,
    ),
    (
        "transformers-head-from_pretrained",
        """
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed

        tok = AutoTokenizer.from_pretrained("bert-base-cased")
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
        set_seed(0)
        model(**tok("hi", return_tensors="pt")).loss.backward()
        """,
    ),
    (
        "transformers-from_config",
        """
        from transformers import AutoConfig, AutoModelForCausalLM, set_seed

        config = AutoConfig.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_config(config)
        set_seed(0)
        """,
    ),
    (
        "mp-spawn-worker",
        """
        import torch
        import torch.multiprocessing as mp

        def worker(rank):
            model = torch.nn.Linear(4, 2)
            torch.manual_seed(rank)

        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
        """,
    ),
    (
        "fabric-seed-after-model",
        """
        import torch
        import lightning as L

        fabric = L.Fabric()
        model = torch.nn.Linear(4, 2)
        fabric.seed_everything(0)
        """,
    ),
    (
        "training-script-with-fresh-head",
        """
        import torch
        from transformers import AutoModelForSequenceClassification, set_seed

        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", num_labels=3)
        set_seed(0)
        optimizer = torch.optim.AdamW(model.parameters())
        optimizer.step()
        """,
    ),
]


@pytest.mark.parametrize("source", [c[1] for c in DL102_CASES], ids=[c[0] for c in DL102_CASES])
def test_dl102_idioms(source, snapshot):
    snapshot(lint_snippet("DL102", source))


def test_dataloader_built_before_seeding_shuffles_reproducibly(tmp_path):
    """The fact DL102 relies on to stay silent about DataLoaders: the order is drawn at iteration."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    script = tmp_path / "order.py"
    script.write_text(
        textwrap.dedent("""
        import sys, torch
        from torch.utils.data import DataLoader
        torch.manual_seed(int(sys.argv[1]))  # a different generator state when the loader is built
        loader = DataLoader(list(range(16)), batch_size=16, shuffle=True)
        torch.manual_seed(0)
        print(next(iter(loader)).tolist())
        """)
    )
    orders = {
        subprocess.run(
            [sys.executable, str(script), s], capture_output=True, text=True, check=True
        ).stdout
        for s in ("1", "2")
    }
    assert len(orders) == 1


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(PER_STEP_RESEED.replace("1337 + step", "1337"), id="same-seed-reported"),
    ],
)
def test_dl102_per_step_reseed_in_a_loop_is_not_the_run_seed(source, snapshot):
    snapshot(lint_snippet("DL102", source))
