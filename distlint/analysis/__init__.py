"""What rules ask: name resolution and dataflow over one module, the project's modules and
configuration files, and the training facts derived once from them.

``distlint.analysis.index`` holds the per-module :class:`Index`; its public names are re-exported
here so ``from distlint.analysis import Index`` keeps working.
"""

from distlint.analysis.index import (
    Assignment,
    Index,
    call_keyword,
    canonical,
    dotted_name,
    iter_children,
    iter_names,
    string_value,
    target_key,
    walk,
)

__all__ = [
    "Assignment",
    "Index",
    "call_keyword",
    "canonical",
    "dotted_name",
    "iter_children",
    "iter_names",
    "string_value",
    "target_key",
    "walk",
]
