# why: DL201 reported at the wrong place (IDEA-Research/DINO main.py:163 vs 186): the optimizer's
# `lr=args.lr` is what the default run trains with (StepLR; `onecyclelr = False` in the config), but
# the finding and its fix go to `OneCycleLR(max_lr=args.lr)` in an optional branch, so the fixed
# script still trains the default path at the unscaled LR. Expected: report (and fix) the optimizer's
# LR, and the peak LR too where OneCycleLR may run.
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch_size", type=int, default=2)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--lr_drop", type=int, default=11)
    p.add_argument("--onecyclelr", action="store_true")
    args = p.parse_args()
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(8, 8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    data = TensorDataset(torch.randn(512, 8))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_sampler=BatchSampler(sampler, args.batch_size, drop_last=True))
    if args.onecyclelr:
        lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=args.lr, steps_per_epoch=len(loader), epochs=args.epochs
        )
    else:
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for (x,) in loader:
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.onecyclelr:
                lr_scheduler.step()
        if not args.onecyclelr:
            lr_scheduler.step()


if __name__ == "__main__":
    main()
