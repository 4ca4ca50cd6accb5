"""Finding the files to lint: directories recursively, minus excludes and .gitignore'd paths.

Files named explicitly are always linted (as ruff does). Inside directories we skip VCS and
virtualenv folders, build output, the configured ``exclude`` / ``extend-exclude`` patterns and
whatever the ``.gitignore`` files on the way ignore. Symlinked directories are not followed (no
loops); symlinked files are linted through their target.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Callable

from distlint.config import Config, ConfigError
from distlint.escape import printable
from distlint.files import read_source
from distlint.model import FileError

SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


# A .gitignore bigger than this is not a list of patterns anyone wrote: reported, not read.
MAX_GITIGNORE_BYTES = 1 << 20


class GitIgnore:
    """The patterns of one ``.gitignore``, compiled: asking whether a path is ignored costs a
    few regular-expression matches, whatever the number of patterns (git's rules: the last
    matching pattern decides; ``!`` re-includes; a trailing ``/`` matches directories only; a
    pattern with a slash before its end is anchored at the file's directory, one without
    matches at any depth; ``*``, ``?``, ``[...]``, ``**``)."""

    def __init__(self, base: str, lines: Sequence[str]) -> None:
        self.base = base.rstrip(os.sep) + os.sep
        parsed = [p for p in map(_parse_line, lines) if p is not None]
        # Consecutive patterns of one polarity form a run, compiled into one expression; the
        # last run that matches decides (git's "last matching pattern wins").
        self._runs = {
            is_dir: _runs([p for p in parsed if is_dir or not p[2]]) for is_dir in (False, True)
        }

    def decides(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` pattern; None: no pattern matches
        (``path`` is absolute)."""
        if not path.startswith(self.base):
            return None
        rel = path[len(self.base) :].replace(os.sep, "/")
        for negate, regex in reversed(self._runs[is_dir]):
            if regex.match(rel):
                return not negate
        return None


def _parse_line(raw: str) -> tuple[str, bool, bool] | None:
    """(regular expression, negated, directories only) of one .gitignore line, or None."""
    line = raw.rstrip("\n\r")
    # trailing spaces are dropped unless escaped with a backslash
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    line = stripped
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    # unanchored: the name matches at any depth (`(?:.*/)?` in front)
    regex = body if anchored else "(?:.*/)?" + body
    return regex, negate, dir_only


def _translate(pattern: str) -> str:
    """A gitignore glob as a regular expression over '/'-separated relative paths."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            piece, i = _stars(pattern, i)
        elif c == "?":
            piece, i = "[^/]", i + 1
        elif c == "[":
            piece, i = _bracket(pattern, i)
        elif c == "\\" and i + 1 < n:
            piece, i = re.escape(pattern[i + 1]), i + 2
        else:
            piece, i = re.escape(c), i + 1
        out.append(piece)
    return "".join(out)


def _stars(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the run of ``*`` at ``pattern[i]``, and where the pattern goes on."""
    n = len(pattern)
    j = i
    while j < n and pattern[j] == "*":
        j += 1
    double = j - i >= 2
    at_start = i == 0 or pattern[i - 1] == "/"
    at_end = j == n or pattern[j] == "/"
    if double and at_start and at_end:
        if j == n:
            return ".*", j  # `dir/**`: everything inside
        return "(?:.*/)?", j + 1  # `**/x`, `a/**/b`: zero or more folders
    return "[^/]*", j


def _bracket(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the character class at ``pattern[i]`` (a ``[``), and where the pattern
    goes on; a literal ``[`` when no bracket closes it."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] in "!^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 1
    if j >= n:  # no closing bracket: a literal `[`
        return "\\[", i + 1
    inner = pattern[i + 1 : j]
    negated = inner[:1] in ("!", "^")
    if negated:
        inner = inner[1:]
    inner = inner.replace("\\", "\\\\").replace("[", "\\[")
    return f"[{'^/' if negated else ''}{inner}]", j + 1


def _runs(patterns: Sequence[tuple[str, bool, bool]]) -> list[tuple[bool, re.Pattern[str]]]:
    runs: list[tuple[bool, list[str]]] = []
    for regex, negate, _ in patterns:
        if runs and runs[-1][0] == negate:
            runs[-1][1].append(regex)
        else:
            runs.append((negate, [regex]))
    out = []
    for negate, regexes in runs:
        # one alternation per run, the unanchored ones sharing their `(?:.*/)?` prefix
        anchored = [r for r in regexes if not r.startswith("(?:.*/)?")]
        loose = [r[len("(?:.*/)?") :] for r in regexes if r.startswith("(?:.*/)?")]
        parts = []
        if anchored:
            parts.append(f"(?:{'|'.join(anchored)})\\Z")
        if loose:
            parts.append(f"(?:.*/)?(?:{'|'.join(loose)})\\Z")
        try:
            out.append((negate, re.compile("|".join(parts), re.S)))
        except re.error:  # a bad range (`[z-a]`) in one pattern: git ignores that pattern
            good = [r for r in regexes if _compiles(r)]
            if good:
                out += _runs([(r, negate, False) for r in good])
    return out


def _compiles(regex: str) -> bool:
    try:
        re.compile(regex)
        return True
    except re.error:
        return False


def _read_gitignore(directory: str) -> list[GitIgnore]:
    """The compiled ``.gitignore`` of ``directory`` (a list of one), or none. A .gitignore that
    is not a regular file (a FIFO, a link to a device) or is huge is not read: reported once
    on stderr, and the walk goes on without it."""
    path = os.path.join(directory, ".gitignore")
    if not os.path.lexists(path) or os.path.isdir(path):
        return []
    data = read_source(path, MAX_GITIGNORE_BYTES)
    if isinstance(data, FileError):
        if data.message not in ("no such file", "broken symbolic link"):
            _warn_once(data)
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [GitIgnore(directory, lines)] if lines else []


_WARNED: set[tuple[str, str]] = set()


def _warn_once(error: FileError) -> None:
    key = (error.path, error.message)
    if key not in _WARNED:
        _WARNED.add(key)
        print(printable(f"{error.path}: warning: {error.message}"), file=sys.stderr)


def _git_root(start: str) -> str | None:
    current = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _ignored(path: str, is_dir: bool, ignores: Sequence[GitIgnore]) -> bool:
    for ignore in reversed(ignores):  # a deeper .gitignore overrides the ones above it
        decided = ignore.decides(path, is_dir)
        if decided is not None:
            return decided
    return False


def iter_source_files(
    paths: Sequence[str], config_for: Callable[[str], Config]
) -> Iterator[str | FileError]:
    """Yield each Python file to lint (or a FileError for a named path that is unusable)."""
    seen = set()
    for given in paths or ["."]:
        if not os.path.lexists(given):
            yield FileError(given, "no such file or directory")
            continue
        if os.path.isfile(given) or not os.path.isdir(given):
            if given not in seen:
                seen.add(given)
                yield given
            continue
        try:
            config = config_for(given)
        except ConfigError as exc:
            yield FileError(given, str(exc))
            continue
        # .gitignore files from the repository root down to the starting directory
        start = os.path.abspath(given)
        root = _git_root(start)
        inherited: list[GitIgnore] = []
        if root is not None:
            chain = []
            current = start
            while True:
                chain.append(current)
                if current == root:
                    break
                current = os.path.dirname(current)
            for directory in reversed(chain[1:]):
                inherited += _read_gitignore(directory)
        yield from _walk(given, inherited, config, seen)


def _kind(
    entry: os.DirEntry[str], full: str, config: Config, patterns: list[GitIgnore]
) -> str | None:
    """ "folder" (to walk), "source" (to lint) or None (excluded, ignored, not a source file,
    or a symlink to a folder) for the directory ``entry`` at path ``full``."""
    abs_full = os.path.abspath(full)
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    if is_dir:
        if config.is_excluded(full) or _ignored(abs_full, True, patterns):
            return None
        return "folder"
    if not entry.name.endswith(SOURCE_SUFFIXES):
        return None
    if entry.is_symlink() and os.path.isdir(full):
        return None  # a symlink to a directory named x.py: not followed
    if config.is_excluded(full) or _ignored(abs_full, False, patterns):
        return None
    return "source"


def _walk(
    top: str, inherited: list[GitIgnore], config: Config, seen: set
) -> Iterator[str | FileError]:
    stack: list[tuple[str, list[GitIgnore]]] = [(top, inherited)]
    while stack:
        directory, patterns = stack.pop()
        patterns = patterns + _read_gitignore(os.path.abspath(directory))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            yield FileError(directory, f"cannot list directory: {exc.strerror or exc}")
            continue
        subdirs = []
        for entry in entries:
            full = os.path.normpath(entry.path)  # `./x.py` -> `x.py`, as ruff prints it
            kind = _kind(entry, full, config, patterns)
            if kind == "folder":
                subdirs.append(full)
            elif kind == "source" and full not in seen:
                seen.add(full)
                yield full
        for sub in reversed(subdirs):
            stack.append((sub, patterns))
