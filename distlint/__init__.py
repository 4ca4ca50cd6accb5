"""distlint: lint and verify distributed PyTorch / Accelerate training scripts."""

__version__ = "0.1.0"
