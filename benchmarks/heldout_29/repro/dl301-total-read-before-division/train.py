# why: false DL301, new with main at dd46fc9 (WongKinYiu/yolov7 train.py:594 and train_aux.py:590):
# `opt.total_batch_size = opt.batch_size` reads the command-line TOTAL before the next lines make
# `opt.batch_size` per device (`opt.batch_size = opt.total_batch_size // opt.world_size`); distlint
# takes the read for the per-device value. Expected: silent (the read comes before the division).
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train(opt):
    data = TensorDataset(torch.randn(4096, 8))
    loader = DataLoader(data, batch_size=opt.batch_size, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(8, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * opt.total_batch_size / 64)
    for epoch in range(opt.epochs):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64, help="total batch size for all GPUs")
    parser.add_argument("--epochs", type=int, default=300)
    opt = parser.parse_args()
    opt.world_size = int(os.environ["WORLD_SIZE"]) if "WORLD_SIZE" in os.environ else 1
    opt.total_batch_size = opt.batch_size
    if opt.world_size > 1:
        dist.init_process_group(backend="nccl", init_method="env://")
        opt.batch_size = opt.total_batch_size // opt.world_size
    train(opt)
