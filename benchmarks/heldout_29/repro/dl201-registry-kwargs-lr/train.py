# why: missed DL201 (trlx accelerate_base_trainer.py:173-181): the optimizer class comes from a
# registry function and its LR only through `**config.optimizer.kwargs`; with `lr=` spelled out it
# is reported. Expected: DL201 at the optimizer call, "from configuration distlint could not read".
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def get_optimizer_class(name):
    if name == "adamw":
        return torch.optim.AdamW
    if name == "sgd":
        return torch.optim.SGD
    raise ValueError(name)


class Trainer:
    def __init__(self, config):
        self.config = config
        self.accelerator = Accelerator()
        self.model = torch.nn.Linear(8, 2)
        self.opt = self.setup_optimizer()
        self.model, self.opt = self.accelerator.prepare(self.model, self.opt)

    def setup_optimizer(self):
        optimizer_class = get_optimizer_class(self.config["optimizer"]["name"])
        return optimizer_class(self.model.parameters(), **self.config["optimizer"]["kwargs"])

    def learn(self):
        data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
        loader = DataLoader(data, batch_size=self.config["batch_size"], shuffle=True)
        loader = self.accelerator.prepare(loader)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            self.accelerator.backward(loss)
            self.opt.step()
            self.opt.zero_grad()


if __name__ == "__main__":
    Trainer({"batch_size": 8, "optimizer": {"name": "adamw", "kwargs": {"lr": 3e-5}}}).learn()
