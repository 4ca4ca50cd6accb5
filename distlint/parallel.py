"""Lint many files on every core: a fork-based process pool that streams results in input order.

LibCST's tree work runs in Python under the GIL, so threads do not help; processes do. Forking
lets the workers start with distlint, LibCST and the rules already imported and the
configuration already loaded, so a worker costs a few milliseconds, not a fresh interpreter.
A handful of files is linted in-process: a pool would cost more than it saves. Results are the
plain NamedTuples of :mod:`distlint.model`, which pickle as they are.

A worker that dies (a segfault in a native parser, the kernel's OOM killer) must not take the
run with it or hang it: the pool notices the broken worker, every file that was not finished is
linted again (the ones that had started each alone in a fresh fork, which tells the culprit
from the innocent files that shared its pool), and a file whose own process dies becomes one
result from ``on_crash`` for that file; the rest of the run finishes.

A worker never imports from the folder being linted: forked, it starts no interpreter of its
own (no ``-m`` or script folder put on its path), and :func:`_isolate` takes the working
directory off the import path it inherits, in case the calling program had it there (``python
-c``, an interactive session); the ``distlint`` command itself has it off already
(``distlint/__main__.py``). Its working directory stays the caller's: the paths it lints are
relative to it.
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

if TYPE_CHECKING:
    import ctypes
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext

T = TypeVar("T")
R = TypeVar("R")

# Below this many files the pool's start-up costs more than the second core saves.
MIN_FILES_FOR_POOL = 8
# Tasks handed to the pool ahead of the results: keeps both cores busy, bounds memory.
_WINDOW_PER_WORKER = 8

# Set in the parent before the pool forks (workers inherit it): one flag per item, raised by
# the worker that starts it, so that after a crash the started-but-unfinished items are known.
_started = None


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


def describe_exit(exitcode: int | None) -> str:
    """``signal 11 (SIGSEGV)`` / ``exit status 3`` for a child's exit code."""
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        return f"signal {-exitcode} ({name})"
    return f"exit status {exitcode}"


def _isolate() -> None:
    """In a worker: no import path entry that means the working directory (``""``, the folder
    itself, a folder relative to it; a placeholder that names no folder, such as an editable
    install's path hook entry, stays)."""
    import sys

    cwd = os.getcwd()
    kept = []
    for entry in sys.path:
        try:
            if not entry or os.path.samefile(entry, cwd):
                continue
        except OSError:  # no such folder: nothing to import from it
            pass
        if os.path.isabs(entry) or not os.path.isdir(entry):
            kept.append(entry)
    sys.path[:] = kept


def _run_task(func: Callable[[T], R], index: int, item: T) -> R:
    if _started is not None:
        _started[index] = 1
    return func(item)


def ordered_map(
    func: Callable[[T], R],
    items: Iterable[T],
    jobs: int | None = None,
    on_crash: Callable[[T, str], R] | None = None,
) -> Iterator[R]:
    """``map(func, items)`` on a pool of forked processes, yielding results in input order as
    soon as each is ready. ``func`` must be picklable (a module-level function or a partial).

    An exception raised by ``func`` reaches the caller. A worker process that dies does not:
    the item it was working on is retried alone in a fresh process, and if that dies too the
    item's result is ``on_crash(item, "signal 11 (SIGSEGV)")`` (without ``on_crash``, a
    ``RuntimeError``); the other items are linted as usual.
    """
    todo: list[T] = list(items)
    workers = worker_count(len(todo), jobs)
    if workers == 1:
        for item in todo:
            yield func(item)
        return
    import multiprocessing

    context = multiprocessing.get_context("fork")
    started = context.RawArray("b", len(todo))
    out: _InOrder[R] = _InOrder()
    pending = deque(range(len(todo)))
    while out.next < len(todo):
        lost = yield from _pool_round(func, todo, workers, context, started, pending, out)
        # The pool broke: the items that had started are retried one by one, each in its own
        # fork; the others go back into the queue of a fresh pool (or, when none had even
        # started, so that the pool itself is what fails, each alone too: progress either way).
        suspects = [index for index in lost if started[index]]
        for index in sorted(lost):
            if started[index] or not suspects:
                out.results[index] = _run_alone(func, todo[index], on_crash)
            else:
                pending.append(index)
        pending = deque(sorted(pending))
        yield from out.ready()


class _InOrder(Generic[R]):
    """Results by the index of their item, handed out in input order as soon as the next is in."""

    def __init__(self) -> None:
        self.results: dict[int, R] = {}
        self.next = 0

    def ready(self) -> Iterator[R]:
        while self.next in self.results:
            yield self.results.pop(self.next)
            self.next += 1


def _pool_round(
    func: Callable[[T], R],
    todo: list[T],
    workers: int,
    context: BaseContext,
    started: ctypes.Array[ctypes.c_byte],
    pending: deque[int],
    out: _InOrder[R],
) -> Generator[R, None, list[int]]:
    """One pool's life: fork it, feed it ``pending`` (a window at a time), yield what is ready
    in order, and stop it, its workers with it on an early stop. Returns the items lost when a
    worker died and broke the pool (none when every item was done)."""
    from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    global _started
    _started = started
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_isolate)
    futures: dict = {}
    lost: list[int] = []
    clean = False
    try:
        while pending or futures:
            broken = False
            while pending and len(futures) < workers * _WINDOW_PER_WORKER:
                index = pending[0]
                try:
                    future = pool.submit(_run_task, func, index, todo[index])
                except BrokenProcessPool:  # a worker died since the last wait
                    broken = True
                    break
                pending.popleft()
                futures[future] = index
            # a broken pool fails every future it holds: wait for all of them then
            done, _ = wait(futures, return_when=ALL_COMPLETED if broken else FIRST_COMPLETED)
            for future in done:
                index = futures.pop(future)
                try:
                    out.results[index] = future.result()
                except BrokenProcessPool:
                    broken = True
                    lost.append(index)
            yield from out.ready()
            if broken:
                lost += futures.values()
                futures.clear()
                break
        clean = True
    finally:
        _started = None
        if not clean:  # an early stop, an exception, Ctrl-C: no worker outlives the run
            _terminate_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
    return lost


def _terminate_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's live workers, so that shutting it down waits for no task they run."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()


def _run_alone(func: Callable[[T], R], item: T, on_crash: Callable[[T, str], R] | None) -> R:
    """``func(item)`` in a forked child of its own; ``on_crash`` when that child dies."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(func, item, sender), daemon=True)
    child.start()
    sender.close()
    try:
        outcome = receiver.recv()
    except EOFError:  # the child died before it could answer
        outcome = None
    finally:
        receiver.close()
        child.join()
    if outcome is not None:
        ok, value = outcome
        if ok:
            return value
        raise value
    reason = describe_exit(child.exitcode)
    if on_crash is None:
        raise RuntimeError(f"worker process died ({reason}) on {item!r}")
    return on_crash(item, reason)


def _child(func, item, sender) -> None:
    try:
        _isolate()
        outcome = (True, func(item))
    except BaseException as exc:  # handed to the parent, raised there
        outcome = (False, exc)
    sender.send(outcome)
    sender.close()
