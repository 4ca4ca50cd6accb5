"""A Fabric loop run by test_mixed_precision.py under verify's probe (plain python, one process)."""

import sys

import torch
from lightning.fabric import Fabric

fabric = Fabric(precision="bf16-mixed")
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
wrapped, opt = fabric.setup(model, opt)
net = model if "--bypass" in sys.argv else wrapped
torch.manual_seed(0)
for _ in range(3):
    loss = net(torch.randn(4, 4)).pow(2).mean()
    fabric.backward(loss)
    opt.step()
    opt.zero_grad()
Fabric(precision="16-mixed")  # made after training: not the run's
