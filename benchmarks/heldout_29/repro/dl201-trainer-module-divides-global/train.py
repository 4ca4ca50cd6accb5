# why: false DL201, found while building a fixture for torchprime's shape: a Trainer class of
# another module builds its loader with `global_batch_size // xr.world_size()` in a method and its
# optimizer in `__init__`; with the class in the entry file distlint is silent, across the module
# boundary the entry's `Trainer(...)` call is reported ("the learning rate set inside `Trainer()`").
# The factory summary carries the LR but not that the global batch is held constant. Expected: silent.
"""Entry: every TPU core runs the trainer (torch_xla.launch)."""

import torch
import torch_xla
from trainer import Trainer


def _mp_fn(index):
    torch.manual_seed(0)
    dataset = torch.utils.data.TensorDataset(torch.randn(4096, 8))
    Trainer(torch.nn.Linear(8, 8), dataset, global_batch_size=256, max_steps=10_000).train_loop()


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
