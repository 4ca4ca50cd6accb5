"""Reading the files distlint did not write, safely: the one check every open goes through.

Linted files, ``.gitignore`` files, configuration files, followed modules and the data files
they read, cache entries: each is refused from its ``stat`` unless it is a regular file (a
FIFO would block the run for good, a link to ``/dev/zero`` would be read without end), opened
non-blocking, and read up to a limit. A refusal is a :class:`~distlint.model.FileError`: one
line naming the file. Nothing here imports more than the standard library and the records.
"""

from __future__ import annotations

import os
import stat
import time
from typing import BinaryIO

from distlint.model import FileError

# A regular file bigger than this is not read at all (a file without trigger words is read and
# skipped whatever its size up to here; one that is parsed must also fit `max-file-size`).
READ_LIMIT = 64 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def read_source(path: str, limit: int | None = READ_LIMIT) -> bytes | FileError:
    """The bytes of the regular file ``path`` (at most ``limit``), or the error to report."""
    data = read_stable(path, limit)
    return data if isinstance(data, FileError) else data[0]


class Unreadable(OSError):
    """:func:`read_regular`'s refusal; ``strerror`` is the one-line reason."""


def read_regular(path: str, limit: int | None = READ_LIMIT) -> bytes:
    """:func:`read_source` for callers that handle ``OSError``: raises :class:`Unreadable`."""
    data = read_source(path, limit)
    if isinstance(data, FileError):
        raise Unreadable(0, data.message, path)
    return data


def read_stable(
    path: str, limit: int | None = READ_LIMIT, tries: int = 3
) -> tuple[bytes, os.stat_result] | FileError:
    """The bytes of the regular file ``path`` (at most ``limit``) and the file's state when they
    were read, or the error to report.

    Never blocks and never reads without end: anything but a regular file (a FIFO, a device
    such as a link to /dev/zero, a socket) is refused from its ``stat`` before it is opened,
    the open is non-blocking, and a file over ``limit`` bytes is refused unread. The bytes are
    taken only while the file's size and mtime hold still (a writer pausing mid-write would
    otherwise be fixed from half a file).
    """
    for attempt in range(tries):
        read = _read_once(path, limit)
        if isinstance(read, FileError):
            return read
        data, before, after = read
        if before.st_size == after.st_size == len(data) and before.st_mtime_ns == after.st_mtime_ns:
            return data, after
        time.sleep(0.05 * (attempt + 1))
    return FileError(path, "the file kept changing while it was read; not linted")


def _read_once(
    path: str, limit: int | None
) -> tuple[bytes, os.stat_result, os.stat_result] | FileError:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return not_regular(path, st.st_mode)
        fd = os.open(path, _OPEN_FLAGS)
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
        return _read_open(fd, path, limit)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)


def _read_open(
    fd: int, path: str, limit: int | None
) -> tuple[bytes, os.stat_result, os.stat_result] | FileError:
    """The bytes of the open file ``fd`` (at ``path``) and its state before and after reading
    them; an error when it is not a regular file or is (or grows while read) over ``limit``."""
    st = os.fstat(fd)  # what was opened, which may differ from what was stat'ed
    if not stat.S_ISREG(st.st_mode):
        return not_regular(path, st.st_mode)
    if limit and st.st_size > limit:
        return too_big(path, st.st_size, limit)
    chunks = []
    size = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if limit and size > limit:  # it grew while being read
            return too_big(path, None, limit)
        chunks.append(chunk)
    return b"".join(chunks), st, os.fstat(fd)


def file_like(path: str) -> bool:
    """``path`` names something that is not a directory (a regular file, or a FIFO or a device
    that :func:`read_source` refuses with a reason): what an import or a load would open."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def not_regular(path: str, mode: int) -> FileError:
    if stat.S_ISDIR(mode):
        return FileError(path, "is a directory, not a Python file")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
    return FileError(path, f"is {kind}{link}, not a regular file: not read")


def too_big(path: str, size: int | None, limit: int) -> FileError:
    what = human_size(size) if size is not None else "growing"
    return FileError(path, f"file is {what}, over the {human_size(limit)} read limit: not read")


def human_size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n} bytes"


def read_stream(stream: BinaryIO | None, name: str, limit: int = READ_LIMIT) -> bytes | FileError:
    """All of ``stream`` (stdin), read in chunks and refused past ``limit`` bytes, so a
    endless or huge pipe costs at most ``limit`` of memory; a closed stream is an error."""
    if stream is None:
        return FileError(name, "standard input is closed: nothing to lint")
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                return FileError(
                    name, f"standard input is over the {human_size(limit)} read limit: not read"
                )
            chunks.append(chunk)
    except (OSError, ValueError) as exc:  # ValueError: the stream was closed under us
        return FileError(
            name, f"cannot read standard input: {getattr(exc, 'strerror', exc) or exc}"
        )
