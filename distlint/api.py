"""The one entry point shared by the CLI, the language server, pre-commit and the tests.

- :func:`lint_source` lints (and optionally fixes) a source text as if it were a given path.
- :func:`lint_file` does the same for a file on disk, and can write the fixes back atomically.
- :func:`lint_paths` walks files and directories and yields one :class:`FileResult` per file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial

from distlint.config import Config, ConfigError, resolve_config
from distlint.discovery import iter_source_files
from distlint.model import Applicability, FileError, FileResult, Finding


def _lint_source(*args, **kwargs) -> FileResult:
    # The engine (LibCST, the rules) loads on first use: a run answered from the cache never needs it.
    from distlint.runner import lint_source

    return lint_source(*args, **kwargs)


__all__ = [
    "LintOptions",
    "lint_source",
    "fix_source",
    "config_for",
    "lint_file",
    "lint_paths",
    "Finding",
    "FileResult",
    "Config",
    "ConfigError",
]


@dataclass(frozen=True)
class LintOptions:
    """Command-line level choices that override the configuration file."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    unsafe_fixes: bool | None = None
    fix: bool = False
    write: bool = True  # with fix: write fixed files back (False for --diff / stdin)
    ignore_noqa: bool = False
    config_path: str | None = None
    isolated: bool = False
    debug: bool = False
    cache: bool = False  # reuse results from .distlint_cache (the CLI's default; --no-cache)
    jobs: int | None = None  # processes for many files; None: one per available core

    def apply_to(self, config: Config) -> Config:
        changes = {}
        if self.select is not None:
            changes["select"] = tuple(self.select)
        if self.ignore is not None:
            changes["ignore"] = tuple(config.ignore) + tuple(self.ignore)
        if self.extend_select is not None:
            changes["extend_select"] = tuple(config.extend_select) + tuple(self.extend_select)
        if self.unsafe_fixes is not None:
            changes["unsafe_fixes"] = self.unsafe_fixes
        return replace(config, **changes) if changes else config


def config_for(path: str, options: LintOptions = LintOptions()) -> Config:
    base = resolve_config(path, options.config_path, options.isolated)
    return options.apply_to(base)


def lint_source(
    source: str | bytes,
    path: str = "<stdin>",
    config: Config | None = None,
    *,
    fix: bool = False,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
    debug: bool = False,
) -> FileResult:
    """Lint ``source`` as the file ``path``; see :func:`distlint.runner.lint_source`."""
    if path.endswith(".ipynb"):
        from distlint import notebook

        return notebook.lint_notebook_source(
            source,
            path,
            config or Config(),
            fix=fix,
            unsafe_fixes=unsafe_fixes,
            ignore_noqa=ignore_noqa,
            debug=debug,
        )
    return _lint_source(
        source,
        path,
        config,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        ignore_noqa=ignore_noqa,
        debug=debug,
    )


def fix_source(
    source: str,
    path: str = "<stdin>",
    config: Config | None = None,
    *,
    fix_ids: Collection[int] | None = None,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
) -> str:
    """The text ``source`` with fixes applied, through the same fix rounds as ``distlint fix``.

    With ``fix_ids``: only the fixes of those findings (their :attr:`Finding.fix_id` from a
    lint of this same text and configuration), safe or unsafe, one round: a quick fix.
    Without: every safe fix (unsafe ones too with ``unsafe_fixes``, default the config's
    ``unsafe-fixes``), exactly as ``distlint fix`` computes them. Returns ``source`` unchanged
    when nothing applies or the text does not parse.
    """
    if path.endswith(".ipynb"):
        raise ValueError("fix_source works on Python source; notebooks go through lint_source")
    result = _lint_source(
        source,
        path,
        config,
        fix=True,
        unsafe_fixes=unsafe_fixes,
        ignore_noqa=ignore_noqa,
        fix_ids=frozenset(fix_ids) if fix_ids is not None else None,
    )
    return result.fixed_source if result.fixed_source is not None else source


# A regular file bigger than this is not read at all (a file without trigger words is read and
# skipped whatever its size up to here; one that is parsed must also fit `max-file-size`).
READ_LIMIT = 64 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_source(path: str, limit: int | None = READ_LIMIT) -> bytes | FileError:
    """The bytes of the regular file ``path`` (at most ``limit``), or the error to report.

    Never blocks and never reads without end: anything but a regular file (a FIFO, a device
    such as a link to /dev/zero, a socket) is refused from its ``stat`` before it is opened,
    the open is non-blocking, and a file over ``limit`` bytes is refused unread.
    """
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return _not_regular(path, st.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        return FileError(path, "is a directory, not a Python file")
    except FileNotFoundError:
        if os.path.islink(path):
            return FileError(path, "broken symbolic link")
        return FileError(path, "no such file")
    except PermissionError:
        return FileError(path, "permission denied")
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)  # what was opened, which may differ from what was stat'ed
        if not stat.S_ISREG(st.st_mode):
            return _not_regular(path, st.st_mode)
        if limit and st.st_size > limit:
            return _too_big(path, st.st_size, limit)
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if limit and size > limit:  # it grew while being read
                return _too_big(path, None, limit)
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)


def _not_regular(path: str, mode: int) -> FileError:
    if stat.S_ISDIR(mode):
        return FileError(path, "is a directory, not a Python file")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
    return FileError(path, f"is {kind}{link}, not a regular file: not read")


def _too_big(path: str, size: int | None, limit: int) -> FileError:
    from distlint.guard import human_size  # the guard's tokenizer loads only to lint

    what = human_size(size) if size is not None else "growing"
    return FileError(path, f"file is {what}, over the {human_size(limit)} read limit: not read")


def lint_file(
    path: str, config: Config | None = None, options: LintOptions = LintOptions()
) -> FileResult:
    """Lint one file; with ``options.fix`` and ``options.write``, write the fixed file back.

    Never raises: an unexpected problem becomes one error line naming the file (the traceback
    with ``--debug``), and the other files go on.
    """
    try:
        return _lint_file(path, config, options, cache=options.cache)
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "source is too deeply nested to analyse"),))
    except Exception as exc:
        import traceback

        detail = traceback.format_exc() if options.debug else f"{type(exc).__name__}: {exc}"
        return FileResult(
            path,
            errors=(FileError(path, f"internal error: {detail} (--debug shows the traceback)"),),
        )


def _lint_file(
    path: str, config: Config | None, options: LintOptions, cache: bool = False
) -> FileResult:
    if config is None:
        try:
            config = config_for(path, options)
        except ConfigError as exc:
            return FileResult(path, errors=(FileError(path, str(exc)),))
    data = read_source(path, _read_limit(config))
    if isinstance(data, FileError):
        return FileResult(path, errors=(data,))
    result = _lint_data(path, data, config, options)
    # A fix run's result equals the check result only when no fix was wanted: nothing changed
    # (a `--diff` run must not cache the post-fix findings under the unfixed file's key).
    if cache and (
        not options.fix
        or (result.fixed_source is None and not _fix_wanted(result, config, options))
    ):
        store, key = _cache_entry(path, data, config, options)
        store.put(key, result)
    return result


def _lint_data(path: str, data: bytes, config: Config, options: LintOptions) -> FileResult:
    result = lint_source(
        data,
        path,
        config,
        fix=options.fix,
        unsafe_fixes=options.unsafe_fixes,
        ignore_noqa=options.ignore_noqa,
        debug=options.debug,
    )
    if options.fix and options.write and result.fixed_bytes is not None:
        try:
            with open(path, "rb") as handle:
                if handle.read() != data:
                    raise _Changed()
            from distlint.fixes import write_atomic

            write_atomic(path, result.fixed_bytes)
        except _Changed:
            return replace(
                result,
                fixed_source=None,
                fixed_bytes=None,
                fixes_applied=0,
                errors=result.errors
                + (FileError(path, "file changed on disk while it was being fixed; not written"),),
            )
        except FileNotFoundError:
            return replace(
                result,
                errors=result.errors
                + (FileError(path, "file vanished before the fix was written"),),
            )
        except PermissionError:
            return replace(
                result,
                fixed_source=None,
                fixed_bytes=None,
                fixes_applied=0,
                errors=result.errors + (FileError(path, "permission denied: fixes not written"),),
            )
        except OSError as exc:
            return replace(
                result,
                fixed_source=None,
                fixed_bytes=None,
                fixes_applied=0,
                errors=result.errors
                + (FileError(path, f"cannot write fixes: {exc.strerror or exc}"),),
            )
    return result


class _Changed(Exception):
    pass


def _read_limit(config: Config) -> int | None:
    return max(READ_LIMIT, config.max_file_size) if config.max_file_size else None


def lint_paths(paths: Sequence[str], options: LintOptions = LintOptions()) -> Iterator[FileResult]:
    """Lint every Python file under ``paths``, one result per file, in a stable order.

    With ``options.cache``, files whose results are cached are answered from the cache; the
    others are linted on a process pool when there are many of them (``options.jobs``).
    """
    from distlint.parallel import ordered_map

    slots: list[FileResult | str] = []  # a ready result, or a path still to lint
    for item in iter_source_files(paths, lambda p: config_for(p, options)):
        if isinstance(item, FileError):
            slots.append(FileResult(item.path, errors=(item,)))
        else:
            hit = _cached_result(item, options) if options.cache else None
            slots.append(hit if hit is not None else item)
    todo = [slot for slot in slots if isinstance(slot, str)]
    if todo:
        # Load LibCST and the rules here, once: forked pool workers inherit them instead of
        # each importing them again.
        from distlint.registry import all_rules
        from distlint.runner import lint_source  # noqa: F401

        all_rules()
    linted = ordered_map(
        partial(lint_file, config=None, options=options), todo, options.jobs, _worker_died
    )
    for slot in slots:
        yield next(linted) if isinstance(slot, str) else slot


def _worker_died(path: str, reason: str) -> FileResult:
    """The result of a file whose worker process died twice (alone the second time)."""
    hint = " (out of memory?)" if "SIGKILL" in reason else ""
    message = f"the process linting this file died: {reason}{hint}; not linted"
    return FileResult(path, errors=(FileError(path, message),))


def _cache_entry(path: str, data: bytes, config: Config, options: LintOptions):
    from distlint.cache import cache_for, cache_key

    key = cache_key(data, path, config, ignore_noqa=options.ignore_noqa, debug=options.debug)
    return cache_for(config), key


def _fix_wanted(result: FileResult, config: Config, options: LintOptions) -> bool:
    unsafe = options.unsafe_fixes if options.unsafe_fixes is not None else config.unsafe_fixes
    return any(
        f.fix is not None and (f.fix.applicability is Applicability.SAFE or unsafe)
        for f in result.findings
    )


def _cached_result(path: str, options: LintOptions) -> FileResult | None:
    try:
        config = config_for(path, options)
    except ConfigError:
        return None
    data = read_source(path, _read_limit(config))
    if isinstance(data, FileError):
        return None
    cache, key = _cache_entry(path, data, config, options)
    result = cache.get(key, path)
    if result is None or (options.fix and _fix_wanted(result, config, options)):
        return None  # a fix run can reuse a result only when there is nothing to fix
    return result
