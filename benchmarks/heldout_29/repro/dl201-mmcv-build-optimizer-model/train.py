# why: PixArt-alpha train_scripts/train.py:303 is silent for the right reason (its `auto_lr` sqrt rule
# scales by the world size), but with that scaling removed it stays silent: `build_optimizer(model,
# cfg)` (mmcv's builder, handed the model, not its parameters) is never taken for an optimizer,
# though its result is prepared, stepped, zeroed and given to a scheduler. Expected: an optimizer by
# use, DL201 "from configuration distlint could not read".
import torch
from accelerate import Accelerator
from mmcv.runner import build_optimizer
from torch.utils.data import DataLoader, TensorDataset

config = dict(optimizer=dict(type="AdamW", lr=2e-5, weight_decay=3e-2), train_batch_size=32)


def main():
    accelerator = Accelerator()
    model = torch.nn.Linear(8, 8)
    data = TensorDataset(torch.randn(512, 8))
    loader = DataLoader(data, batch_size=config["train_batch_size"], shuffle=True)
    optimizer = build_optimizer(model, config["optimizer"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    for (x,) in loader:
        loss = model(x).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
