# why: false DL201 (openai/consistency_models scripts/cm_train.py:59-66 -> cm/train_util.py:82, 431):
# the entry holds the global batch (`global_batch_size // world_size`) and hands it to a training
# loop of another module; that module wraps the model in DDP itself, so it is judged on its own and
# reports its `lr` as unscaled. (The --batch_size override branch of the real script is not needed.)
# Expected: silent: the loader and the batch both come from the entry, which divides by the world size.
import argparse

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from train_util import TrainLoop


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--global_batch_size", type=int, default=2048)
    p.add_argument("--batch_size", type=int, default=-1)
    args = p.parse_args()
    dist.init_process_group("nccl")
    batch_size = args.global_batch_size // dist.get_world_size()
    data = TensorDataset(torch.randn(4096, 8))
    loader = DataLoader(
        data, batch_size=batch_size, sampler=DistributedSampler(data, shuffle=False)
    )
    model = torch.nn.Linear(8, 8)
    TrainLoop(model=model, data=loader, batch_size=batch_size, lr=args.lr).run_loop()


if __name__ == "__main__":
    main()
