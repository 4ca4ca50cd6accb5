# why: missed DL403, opt-in (jaywalnut310/vits train.py:168-205): rank 0 logs (1) `loss_sum`, the very
# value given to backward under another name (`loss_all = loss_sum`), through a list comprehension,
# and (2) `loss_all` through a project helper that calls `writer.add_scalar` (vits' utils.summarize).
# Each alone is missed; logging `loss_all` with `logger.info` directly is reported. Expected: DL403
# at both calls.
import logging

import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler, autocast
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

logger = logging.getLogger(__name__)


def summarize(writer, scalars):
    for k, v in scalars.items():
        writer.add_scalar(k, v)


def run(rank, n_gpus, writer=None):
    dist.init_process_group("nccl", world_size=n_gpus, rank=rank)
    torch.manual_seed(1234)
    data = TensorDataset(torch.randn(512, 8))
    sampler = DistributedSampler(data, num_replicas=n_gpus, rank=rank)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    net = DDP(torch.nn.Linear(8, 8).cuda(rank), device_ids=[rank])
    optim = torch.optim.AdamW(net.parameters(), 2e-4 * n_gpus)
    scaler = GradScaler()
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for step, (x,) in enumerate(loader):
            with autocast():
                loss_a = net(x.cuda(rank)).pow(2).mean()
                loss_b = net(x.cuda(rank)).abs().mean()
                loss_sum = loss_a + loss_b
                loss_all = loss_sum
            optim.zero_grad()
            scaler.scale(loss_all).backward()
            scaler.step(optim)
            scaler.update()
            if rank == 0:
                losses = [loss_sum, loss_a, loss_b]
                logger.info([x.item() for x in losses] + [step])
                summarize(writer, scalars={"loss/total": loss_all})
