"""What distlint borrows from LibCST beyond its public API, in one place.

Positions of a few nodes (:mod:`distlint.positions`), fix edits (:mod:`distlint.fixes`) and the
incremental re-parse (:mod:`distlint.incremental`) run LibCST's code generation on one node with
a state of their own: ``CodegenState`` (``libcst._nodes.internal``) and ``CSTNode._codegen``.
LibCST has no public way to generate one node's code with a given indentation, or to observe
where each node's tokens start and end, without computing the positions of every node of the
module (``PositionProvider``, about twice the cost of the parse).

Nothing else may import LibCST's private modules. ``tests/test_libcst_compat.py`` pins what is
borrowed here (names, constructor keywords, the attributes and hooks used), so a LibCST release
that changes them fails there, by name, instead of somewhere in a fix. Position records
(``CodeRange``, ``CodePosition``) are public: ``libcst.metadata``.
"""

from __future__ import annotations

from libcst._nodes.internal import CodegenState

# The members of CodegenState that distlint reads, calls or overrides (pinned by the tests).
CODEGEN_STATE_MEMBERS = (
    "tokens",
    "indent_tokens",
    "default_indent",
    "default_newline",
    "before_codegen",
    "after_codegen",
    "pop_trailing_newline",
    "record_syntactic_position",
)

__all__ = ["CODEGEN_STATE_MEMBERS", "CodegenState"]
