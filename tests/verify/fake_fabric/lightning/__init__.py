"""A stand-in for Lightning (not a dependency of distlint): only what verify's probe reads of
`lightning.fabric.Fabric`, shaped as Lightning 2.5 has it (see test_mixed_precision.py)."""
