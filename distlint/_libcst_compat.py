"""What distlint borrows from LibCST beyond its public API, in one place.

Positions of a few nodes (:mod:`distlint.positions`), fix edits (:mod:`distlint.fixes`) and the
incremental re-parse (:mod:`distlint.incremental`) run LibCST's code generation on one node with
a state of their own: ``CodegenState`` (``libcst._nodes.internal``) and ``CSTNode._codegen``.
LibCST has no public way to generate one node's code with a given indentation, or to observe
where each node's tokens start and end, without computing the positions of every node of the
module (``PositionProvider``, about twice the cost of the parse).

LibCST's node classes are abstract base classes (``CSTNode`` derives from ``abc.ABC``), so every
``isinstance(node, cst.Name)`` that is not an exact match goes through ``ABCMeta``'s check (a
Python-level call that consults the class's registry of virtual subclasses): the analysis asks
such questions a hundred thousand times per lint. :func:`plain_type_checks` gives those classes
a metaclass whose checks are the interpreter's own: LibCST registers no virtual subclass and
defines no ``__subclasshook__``, so every answer stays the same (the tests compare them). Only
processes distlint owns call it (the language server's lint worker); a program that imports
distlint keeps LibCST as it was.

Nothing else may import LibCST's private modules. ``tests/test_libcst_compat.py`` pins what is
borrowed here (names, constructor keywords, the attributes and hooks used), so a LibCST release
that changes them fails there, by name, instead of somewhere in a fix. Position records
(``CodeRange``, ``CodePosition``) are public: ``libcst.metadata``.
"""

from __future__ import annotations

from abc import ABCMeta

import libcst as cst
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


class _PlainChecks(ABCMeta):
    """ABCMeta, less its isinstance / issubclass checks (see the module's docstring)."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def plain_type_checks() -> int:
    """Give LibCST's node classes :class:`_PlainChecks` as their metaclass (see the module's
    docstring); the number of classes changed. A class with a ``__subclasshook__`` of its own
    keeps ABCMeta's checks."""
    changed = 0
    seen: set[type] = set()
    todo: list[type] = [cst.CSTNode]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        hooked = any("__subclasshook__" in vars(c) for c in cls.__mro__ if c is not object)
        if type(cls) is ABCMeta and not hooked:
            cls.__class__ = _PlainChecks
            changed += 1
    return changed


__all__ = ["CODEGEN_STATE_MEMBERS", "CodegenState", "plain_type_checks"]
