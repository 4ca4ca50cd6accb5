# why: missed DL401 (microsoft/Samba pretrain.py:141-144, 279-311): the validation loader is set up
# by Fabric only in the `else` of `if val_dataloader is None`; the earlier, un-set-up binding still
# reaches `fit(...)` on the path where it is None, so the loader is not "sharded on every path" and
# the rank-0 validation loss of one shard is not reported. Expected: DL401 at `losses.mean()` (a None
# path carries no loader).
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

eval_iters = 100


def create_dataloaders(batch_size, with_val):
    train = DataLoader(
        TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=batch_size
    )
    val = DataLoader(
        TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=batch_size
    )
    return train, (val if with_val else None)


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


def fit(fabric, model, optimizer, train_dataloader, val_dataloader):
    for x, y in train_dataloader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    if val_dataloader is not None:
        val_loss = validate(fabric, model, val_dataloader)
        fabric.print(f"val loss {val_loss:.4f}")


def main():
    fabric = L.Fabric(devices=2, strategy="ddp")
    fabric.launch()
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 * fabric.world_size)
    model, optimizer = fabric.setup(model, optimizer)
    train_dataloader, val_dataloader = create_dataloaders(8, with_val=True)
    if val_dataloader is None:
        train_dataloader = fabric.setup_dataloaders(train_dataloader)
    else:
        train_dataloader, val_dataloader = fabric.setup_dataloaders(
            train_dataloader, val_dataloader
        )
    fit(fabric, model, optimizer, train_dataloader, val_dataloader)


if __name__ == "__main__":
    main()
