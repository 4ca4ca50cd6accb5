# why: missed DL302 (lucidrains/PaLM-rlhf-pytorch train.py:78-86): `accelerator.prepare` is given
# `cycle(DataLoader(...))`, a generator; Accelerate returns objects it does not know unchanged, so the
# loader is never sharded, and the dataset's `torch.randint` offsets come from the default CPU
# generator, seeded alike on every process: every process trains on the same batches. distlint takes
# anything passed to `prepare` as prepared. Expected: DL302 at the loader (prepare the DataLoader,
# then cycle it). Its DL201 is moot while every process gets the same batches. Second layer: with
# the generator left out of `prepare`, DL302 is still silent: the training loop draws with
# `next(...)` from a project generator that loops over the DataLoader, not `for batch in loader`.
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset


def cycle(loader):
    while True:
        yield from loader


class TextSamplerDataset(Dataset):
    def __init__(self, data, seq_len):
        self.data, self.seq_len = data, seq_len

    def __getitem__(self, index):
        start = torch.randint(0, self.data.size(0) - self.seq_len, (1,))
        return self.data[start : start + self.seq_len + 1].long()

    def __len__(self):
        return self.data.size(0) // self.seq_len


accelerator = Accelerator()
model = torch.nn.Embedding(256, 256)
train_loader = cycle(
    DataLoader(TextSamplerDataset(torch.randint(0, 256, (100_000,)), 128), batch_size=4)
)
optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
model, optim, train_loader = accelerator.prepare(model, optim, train_loader)
for i in range(10_000):
    seq = next(train_loader)
    loss = torch.nn.functional.cross_entropy(model(seq[:, :-1]).transpose(1, 2), seq[:, 1:])
    accelerator.backward(loss)
    optim.step()
    optim.zero_grad()
