"""What rules ask: name resolution and dataflow over one module, the project's modules and
configuration files, and the training facts derived once from them.

- ``index``: the per-module :class:`Index` (scopes, bindings, import records, calls); its public
  names are re-exported here so ``from distlint.analysis import Index`` keeps working.
- ``flow``: memoised dataflow over an Index (what reaches a value; closures).
- ``knowledge``: the one declared knowledge base of third-party training APIs.
- ``facts``: the training facts of a module (``facts_for``), composed across the project's
  modules through function and class summaries; what every rule queries.
- ``batch``: where the per-device batch lives and what names / log messages call a value.
"""

from distlint.analysis.index import (
    Assignment,
    ImportRecord,
    Index,
    Op,
    ScopeKind,
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
    "ImportRecord",
    "Index",
    "Op",
    "ScopeKind",
    "call_keyword",
    "canonical",
    "dotted_name",
    "iter_children",
    "iter_names",
    "string_value",
    "target_key",
    "walk",
]
