# why: DL201 is right, but its fix is not (k-diffusion train.py:153-170): `lr *= num_processes` is
# inserted after `model.param_groups(lr)` has already copied `lr` into every parameter group, and a
# group's own "lr" overrides the optimizer's default, so the fixed script trains at the same LR.
# Expected: scale where `lr` is assigned (before its first use), or say the groups hold the LR.
import argparse

import torch
from accelerate import Accelerator


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(8, 8)
        self.mapping = torch.nn.Linear(8, 8)

    def param_groups(self, base_lr):
        return [
            {"params": list(self.body.parameters()), "lr": base_lr},
            {"params": list(self.mapping.parameters()), "lr": base_lr / 3},
        ]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
    accelerator = Accelerator()
    model = Net()
    lr = args.lr
    groups = model.param_groups(lr)
    opt = torch.optim.AdamW(groups, lr=lr)
    data = torch.utils.data.TensorDataset(torch.randn(256, 8))
    loader = torch.utils.data.DataLoader(data, args.batch_size, shuffle=True, drop_last=True)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for (x,) in loader:
        loss = model.body(x).pow(2).mean() + model.mapping(x).pow(2).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
