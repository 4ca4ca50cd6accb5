"""Lint many files on every core: a fork-based process pool that streams results in input order.

LibCST's tree work runs in Python under the GIL, so threads do not help; processes do. Forking
lets the workers start with distlint, LibCST and the rules already imported and the
configuration already loaded, so a worker costs a few milliseconds, not a fresh interpreter.
A handful of files is linted in-process: a pool would cost more than it saves. Results are the
plain frozen dataclasses of :mod:`distlint.model`, which pickle as they are.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Callable, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Below this many files the pool's start-up costs more than the second core saves.
MIN_FILES_FOR_POOL = 8


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours taskset / container CPU sets
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    import multiprocessing  # only when a pool is possible: ~7 ms of every cold start otherwise

    return "fork" in multiprocessing.get_all_start_methods()


def worker_count(n_items: int, jobs: int | None = None) -> int:
    """How many processes to use for ``n_items`` files: 1 means lint in this process."""
    wanted = available_cpus() if jobs is None or jobs <= 0 else jobs
    if wanted <= 1 or n_items < MIN_FILES_FOR_POOL or not can_fork():
        return 1
    return min(wanted, n_items)


def ordered_map(func: Callable[[T], R], items: Iterable[T], jobs: int | None = None) -> Iterator[R]:
    """``map(func, items)`` on a pool of forked processes, yielding results in input order as
    soon as each is ready. ``func`` must be picklable (a module-level function or a partial)."""
    todo: list[T] = list(items)
    workers = worker_count(len(todo), jobs)
    if workers == 1:
        for item in todo:
            yield func(item)
        return
    # Small chunks keep both cores busy when one file is much bigger than the rest.
    chunksize = max(1, min(8, len(todo) // (workers * 8)))
    import multiprocessing

    pool = multiprocessing.get_context("fork").Pool(workers)
    try:
        yield from pool.imap(func, todo, chunksize)
        pool.close()
    finally:
        pool.terminate()  # also on an early stop or Ctrl-C: no worker outlives the run
        pool.join()
