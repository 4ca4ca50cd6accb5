"""An Accelerate training script that seeds torch by hand and shuffles with numpy."""
import argparse

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch_size", type=int, default=16)
    return parser.parse_args()


def main():
    args = parse_args()
    accelerator = Accelerator()
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)

    features = torch.randn(256, 8)
    order = np.random.permutation(len(features))
    dataset = TensorDataset(features[order], torch.randn(256, 1))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.print(f"Total train batch size = {args.batch_size}")
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
