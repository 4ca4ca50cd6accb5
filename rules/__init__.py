"""The distlint rule set: one module per rule (installed as ``distlint.rules``)."""
