import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class TrainLoop:
    def __init__(self, *, model, data, batch_size, lr):
        self.model = model
        self.ddp_model = DDP(model)
        self.data = data
        self.batch_size = batch_size
        self.lr = lr
        self.opt = torch.optim.RAdam(self.model.parameters(), lr=self.lr)

    def run_loop(self):
        for (x,) in self.data:
            loss = self.ddp_model(x).pow(2).mean()
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
