"""Run a training script on 1 and N processes and compare (never imported by check/fix/lsp)."""
