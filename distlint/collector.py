"""When Python's cyclic garbage collector runs in distlint, and when its C allocator gives
freed memory back.

distlint breaks the reference cycles of its own analysis (``Index.release``), so what it
allocates dies by reference counting; a collection finds next to nothing and costs a walk of
everything alive. Two places pay that walk for nothing:

- the lint of a file, which holds the whole tree: :func:`paused` around it;
- a ``distlint`` command-line process, whose start-up (click, LibCST, the rules: some 300,000
  objects, all alive until exit) triggers collections while it grows, and whose interpreter
  walks all of it once more at exit. :func:`pause_startup` (the process's entry point) stops
  the collector until :func:`startup_over` (the lint engine is loaded, or the command is not a
  lint), which freezes what start-up created (``gc.freeze``: never walked again, and not
  copied by forked pool workers that touch it) and resumes the collector; :func:`exiting`
  freezes the rest before the interpreter shuts down.

Only the command-line entry point pauses start-up: a program that imports distlint as a
library keeps its collector as it was (``startup_over`` does nothing unless
``pause_startup`` paused it).

The same holds for the C allocator (glibc's), which a command-line run about to lint many files
tunes (:func:`many_files`): by default glibc raises its thresholds each time a large block is
freed (a module's bytes, a big file's token list), after which large blocks come from the heap
and freed memory stays with the process. Over diffusers' tree that kept about 20 MiB more
resident at the peak than the analysis held. A run of a few files is left as it is: mapping
each large block on its own costs it about 1% of its time, for memory it never lacked.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_startup_paused = False
_command_line = False  # a distlint command-line process (see `pause_startup`)


def pause_startup() -> None:
    """Stop the collector while a command-line process starts (see the module's docstring)."""
    global _startup_paused, _command_line
    _command_line = True
    if gc.isenabled():
        gc.disable()
        _startup_paused = True


def startup_over() -> None:
    """Start-up is over: freeze what it created and resume the collector (only if
    :func:`pause_startup` stopped it; otherwise nothing happens)."""
    global _startup_paused
    if _startup_paused:
        _startup_paused = False
        gc.freeze()
        gc.enable()


# A run of at least this many files to lint tunes the allocator (see `many_files`).
MANY_FILES = 256
# glibc's mallopt parameters (malloc.h) and the values a large run keeps: blocks of 128 KiB
# and more are mapped on their own (returned when freed), and a free heap top of more than
# 128 KiB is given back (glibc's defaults, kept fixed instead of growing with each large free).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_THRESHOLD_BYTES = 128 << 10


def many_files(count: int) -> None:
    """A run is about to lint ``count`` files: in a command-line process, a large run fixes
    the allocator's thresholds (see the module's docstring); a library's caller keeps its
    allocator as it was."""
    if _command_line and count >= MANY_FILES:
        _return_freed_memory()


def _return_freed_memory() -> None:
    """Fix glibc's trim and mapping thresholds (see the module's docstring); nothing where
    the C library has no ``mallopt`` (macOS, Windows), or where the user set either threshold
    in the environment (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``)."""
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError, TypeError):
        return
    mallopt(_M_TRIM_THRESHOLD, _THRESHOLD_BYTES)
    mallopt(_M_MMAP_THRESHOLD, _THRESHOLD_BYTES)


def exiting() -> None:
    """The process is about to exit: spare the interpreter's last collection the walk of
    objects that die with the process anyway."""
    gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """No collection inside the block (the collector's state is restored after it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# What lints left to free (analyses whose `release` breaks their cycles), in a process that
# frees them later (see `free_later`); None: freed at once.
_deferred: list[Any] | None = None


def free(*held: Any) -> None:
    """``release()`` each of ``held`` (a lint's analysis, done with): now, or in a process that
    called :func:`free_later`, at its next :func:`free_pending`."""
    if _deferred is None:
        for item in held:
            item.release()
    else:
        _deferred.extend(held)


def free_later() -> None:
    """From now on, :func:`free` waits for :func:`free_pending` (the language server's worker:
    its reply is sent before it frees what the lint behind it left)."""
    global _deferred
    if _deferred is None:
        _deferred = []


def free_pending() -> None:
    """Free what :func:`free` left waiting."""
    while _deferred:
        _deferred.pop().release()


def pending() -> list[Any]:
    """What waits to be freed (a copy)."""
    return list(_deferred or ())
