# why: missed DL201 (lyuwenyu/RT-DETR rtdetr_pytorch: src/core/yaml_config.py:63-67,
# configs/rtdetr/include/optimizer.yml:27, dataloader.yml:22): the optimizer is made by a
# decorator registry from YAML (`type: AdamW`, `lr: 0.0001`) inside a property, and used as
# `self.optimizer` (zero_grad / step) by the solver, for a per-GPU `batch_size: 4` behind a
# DistributedSampler. Expected: DL201 (the LR from config.yml, or "from configuration distlint
# could not read") at the optimizer.
import torch
import torch.distributed as dist
from src.core import YAMLConfig
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class DetSolver:
    def __init__(self, cfg):
        self.cfg = cfg

    def fit(self):
        dist.init_process_group("nccl")
        model = DDP(self.cfg.model)
        optimizer = self.cfg.optimizer
        data = TensorDataset(torch.randn(512, 8))
        sampler = DistributedSampler(data)
        bs = self.cfg.yaml_cfg["train_dataloader"]["batch_size"]
        loader = DataLoader(data, bs, sampler=sampler)
        for epoch in range(self.cfg.yaml_cfg["epoches"]):
            sampler.set_epoch(epoch)
            for (x,) in loader:
                loss = model(x).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


if __name__ == "__main__":
    DetSolver(YAMLConfig("config.yml")).fit()
