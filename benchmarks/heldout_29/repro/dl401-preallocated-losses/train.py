# why: a validation loss filled into a preallocated tensor by index over a sharded loader, then
# averaged and logged by rank 0, with no reduce (Samba pretrain.py:294-311; the litgpt/lit-llama shape)
import lightning as L
import torch
from torch.utils.data import DataLoader

eval_iters = 100


def validate(fabric, model, val_dataloader):
    model.eval()
    losses = torch.zeros(eval_iters, device=fabric.device)
    for k, (x, y) in enumerate(val_dataloader):
        if k >= eval_iters:
            break
        losses[k] = torch.nn.functional.cross_entropy(model(x), y).item()
    out = losses.mean()
    model.train()
    return out


def main():
    fabric = L.Fabric(devices=2, strategy="ddp")
    fabric.launch()
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 * fabric.world_size)
    model, optimizer = fabric.setup(model, optimizer)
    train = DataLoader(
        torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8
    )
    val = DataLoader(
        torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8
    )
    train, val = fabric.setup_dataloaders(train, val)
    for x, y in train:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    val_loss = validate(fabric, model, val)
    fabric.print(f"val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
