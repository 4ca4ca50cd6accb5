"""Lightning 2.5's Fabric as verify's probe sees it: a precision plugin whose `precision` is the
setting it applies; `setup` returns a module whose forward enters autocast inside and converts
the outputs back to float32 (so autocast is never in force around the top-level call)."""

import torch


class MixedPrecision:
    def __init__(self, precision):
        self.precision = precision


class SingleDeviceStrategy:
    pass


class _FabricModule(torch.nn.Module):
    def __init__(self, module, precision):
        super().__init__()
        self._forward_module = module
        self._precision = precision

    def forward(self, *args, **kwargs):
        dtype = torch.bfloat16 if "bf16" in self._precision.precision else None
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = self._forward_module(*args, **kwargs)
        return out.float()


class Fabric:
    def __init__(self, precision="32-true"):
        self._precision = MixedPrecision(precision)
        self._strategy = SingleDeviceStrategy()
        self.world_size = 1
        self.global_rank = 0
        self.local_rank = 0
        self.device = torch.device("cpu")

    def setup(self, module, *optimizers):
        return (_FabricModule(module, self._precision), *optimizers)

    def backward(self, loss):
        loss.backward()
