"""A step-based trainer (torchprime's Trainer, reduced): one loader, `max_steps` steps."""

import torch
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.runtime as xr
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, dataset, global_batch_size, max_steps):
        self.device = xm.xla_device()
        self.model = model.to(self.device)
        self.dataset = dataset
        self.global_batch_size = global_batch_size
        self.max_steps = max_steps
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4)

    def _get_train_dataloader(self):
        self.sampler = sampler = torch.utils.data.DistributedSampler(
            self.dataset, num_replicas=xr.world_size(), rank=xr.global_ordinal()
        )
        batch_size = self.global_batch_size // xr.world_size()
        loader = DataLoader(self.dataset, batch_size=batch_size, sampler=sampler, drop_last=True)
        return pl.MpDeviceLoader(loader, self.device)

    def train_loop(self):
        train_loader = self._get_train_dataloader()
        train_iterator = iter(train_loader)
        epoch = 0
        for step in range(self.max_steps):
            try:
                (x,) = next(train_iterator)
            except StopIteration:
                epoch += 1
                self.sampler.set_epoch(epoch)
                train_iterator = iter(train_loader)
                (x,) = next(train_iterator)
            loss = self.model(x).pow(2).mean()
            loss.backward()
            xm.optimizer_step(self.optimizer)
            self.optimizer.zero_grad()
