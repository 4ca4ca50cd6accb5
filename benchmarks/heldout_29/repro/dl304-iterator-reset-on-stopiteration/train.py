# why: missed DL304 (weirayao/torchprime torch_xla_models/train.py:252-256, 427-435): a shuffling
# DistributedSampler's loader is drawn with `next(...)` for `max_steps` steps, and on StopIteration the
# loop starts a new epoch with `iter(train_loader)` and no `set_epoch`, so every epoch after the
# first repeats the first one's order. Expected: DL304 at the sampler (the epoch is the reset).
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

max_steps = 10_000


def main():
    dist.init_process_group("nccl")
    data = TensorDataset(torch.randn(4096, 8))
    global_batch_size = 256
    sampler = DistributedSampler(data, num_replicas=dist.get_world_size(), rank=dist.get_rank())
    loader = DataLoader(
        data, batch_size=global_batch_size // dist.get_world_size(), sampler=sampler
    )
    model = DDP(torch.nn.Linear(8, 8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    train_iterator = iter(loader)
    epoch = 0
    for step in range(max_steps):
        try:
            (x,) = next(train_iterator)
        except StopIteration:
            epoch += 1
            train_iterator = iter(loader)
            (x,) = next(train_iterator)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
