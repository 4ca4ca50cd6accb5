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

The lint path's parse skips LibCST's checks of the nodes its parser builds
(``CSTNode.__post_init__`` calls ``_validate``) where they cannot refuse the text
(:func:`distlint.parse.parse`): :func:`checks_off`, for the LibCST versions whose checks were
read, per thread.

Nothing else may import LibCST's private modules. ``tests/test_libcst_compat.py`` pins what is
borrowed here (names, constructor keywords, the attributes and hooks used), so a LibCST release
that changes them fails there, by name, instead of somewhere in a fix. Position records
(``CodeRange``, ``CodePosition``) are public: ``libcst.metadata``.
"""

from __future__ import annotations

import threading
from abc import ABCMeta
from collections.abc import Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._version import __version__ as LIBCST_VERSION

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


# The LibCST versions whose checks (every ``_validate``) and native parser were read, for what
# the parser can build that a check refuses (see distlint.guard and benchmarks/libcst_checks.py);
# with any other, every node is checked.
CHECKS_READ_FOR = ("1.9.0",)


class _Unchecked(threading.local):
    """Per thread: is this thread inside :func:`checks_off`?"""

    on = False


_UNCHECKED = _Unchecked()


def _post_init(node: cst.CSTNode) -> None:
    """``CSTNode.__post_init__`` (which only calls ``_validate``), skipped inside this thread's
    :func:`checks_off`: a library caller building nodes in another thread meanwhile is checked
    as always."""
    if not _UNCHECKED.on:
        node._validate()


def _install() -> bool:
    """Put :func:`_post_init` in place of LibCST's where this LibCST is one whose checks were
    read and its ``__post_init__`` only calls ``_validate``; whether it is in place."""
    original = cst.CSTNode.__post_init__
    if original is _post_init:
        return True
    if LIBCST_VERSION not in CHECKS_READ_FOR or original.__code__.co_names != ("_validate",):
        return False
    cst.CSTNode.__post_init__ = _post_init  # type: ignore[method-assign, assignment]
    return True


UNCHECKED_PARSE = _install()


@contextmanager
def checks_off() -> Iterator[None]:
    """Nodes built in this thread meanwhile are not checked (only where
    :data:`UNCHECKED_PARSE`)."""
    _UNCHECKED.on = UNCHECKED_PARSE
    try:
        yield
    finally:
        _UNCHECKED.on = False


__all__ = [
    "CHECKS_READ_FOR",
    "CODEGEN_STATE_MEMBERS",
    "UNCHECKED_PARSE",
    "CodegenState",
    "checks_off",
    "plain_type_checks",
]
