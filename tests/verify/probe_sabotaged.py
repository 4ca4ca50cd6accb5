"""Run by test_units.py: a tiny training (plain torch, then Accelerate) before and after the
real probe is activated with every recorder method broken; prints whether the script's numbers
stayed the same, what was patched, and how Tensor.backward is wrapped.

    python probe_sabotaged.py PROBE_DIR OUT_DIR
"""

import json
import sys

probe_dir, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, probe_dir)

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


def train(use_accelerate):
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32))
    loader = DataLoader(data, batch_size=4, shuffle=True)
    acc = None
    if use_accelerate:
        acc = Accelerator(cpu=True)
        model, opt, loader = acc.prepare(model, opt, loader)
    numbers = []
    for x, y in loader:
        loss = ((model(x).squeeze(-1) - y) ** 2).mean() / 2
        if acc is not None:
            acc.backward(loss)
        else:
            loss.backward()
        opt.step()
        opt.zero_grad()
        numbers.append(loss.item())
        if acc is not None:
            numbers.append(acc.gather(loss.detach()).sum().item())
    return numbers + [p.detach().sum().item() for p in model.parameters()]


plain = [train(False), train(True)]

import distlint_probe_confirm as confirm_mod  # noqa: E402
import distlint_probe_hooks as hooks_mod  # noqa: E402
import distlint_probe_recorder as recorder_mod  # noqa: E402


def broken(*args, **kwargs):
    raise RuntimeError("probe bug")


for name in (
    "record_loss",
    "on_forward",
    "on_batch",
    "seeded",
    "loader_built",
    "record_accelerator",
    "before_first_batch",
    "before_step",
    "summarize",
):
    setattr(recorder_mod.Recorder, name, broken)
for name in ("before_prepare", "after_prepare"):
    setattr(hooks_mod.Hooks, name, broken)
for name in ("loader_pass", "sampler_info", "collective"):
    setattr(confirm_mod.Confirm, name, broken)

hooks = hooks_mod.activate(out)  # patches the modules already loaded, as at start-up
probed = [train(False), train(True)]
backward = torch.Tensor.backward
print(
    json.dumps(
        {
            "same": plain == probed,
            "applied": hooks.p.applied,
            "skipped": hooks.p.skipped,
            "backward_wrapped": getattr(backward, "_distlint", False),
            "backward_original": getattr(backward, "__wrapped__", backward).__module__,
        }
    )
)
