"""distlint verify: run a training script on 1 and on N processes and compare what really happened.

Only `distlint check --verify` / `distlint verify` import this package; the lint path never does.
Importing it does not import torch or accelerate either: the runs do, in their own processes.
See docs/verify.md.
"""
