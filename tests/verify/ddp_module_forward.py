"""A plain DDP script whose training forward calls `model.module` (the wrapped model's inner
module): DDP's gradient all-reduce never runs, each rank steps on its own gradient, and the ranks'
parameters drift apart. With --correct it calls the DDP wrapper (the replicas stay equal).
For tests/verify/test_ranks_agree.py."""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--correct", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    trained = model if args.correct else model.module
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own inputs
    for _ in range(4):
        trained(torch.randn(8, 8, generator=data)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
