"""Finding the files to lint: directories recursively, minus excludes and .gitignore'd paths.

Files named explicitly are always linted (as ruff does). Inside directories we skip VCS and
virtualenv folders, build output, the configured ``exclude`` / ``extend-exclude`` patterns and
whatever the ``.gitignore`` files on the way ignore. Symlinked directories are not followed (no
loops); symlinked files are linted through their target.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator, Sequence
from typing import Callable, NamedTuple

from distlint.config import Config, ConfigError
from distlint.model import FileError

SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


class _Pattern(NamedTuple):
    base: str  # directory of the .gitignore
    pattern: str
    negate: bool
    dir_only: bool
    anchored: bool

    def matches(self, path: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        if rel.startswith(".."):
            return False
        if self.anchored:
            return fnmatch.fnmatchcase(rel, self.pattern)
        return (
            fnmatch.fnmatchcase(os.path.basename(path), self.pattern)
            or fnmatch.fnmatchcase(rel, "*/" + self.pattern)
            or fnmatch.fnmatchcase(rel, self.pattern)
        )


def _read_gitignore(directory: str) -> list[_Pattern]:
    path = os.path.join(directory, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    out = []
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if line.startswith("**/"):
            line, anchored = line[3:], False
        out.append(_Pattern(directory, line, negate, dir_only, anchored))
    return out


def _git_root(start: str) -> str | None:
    current = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _ignored(path: str, is_dir: bool, patterns: Sequence[_Pattern]) -> bool:
    ignored = False
    for p in patterns:
        if p.matches(path, is_dir):
            ignored = not p.negate
    return ignored


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
        inherited: list[_Pattern] = []
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


def _walk(
    top: str, inherited: list[_Pattern], config: Config, seen: set
) -> Iterator[str | FileError]:
    stack: list[tuple[str, list[_Pattern]]] = [(top, inherited)]
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
            abs_full = os.path.abspath(full)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if config.is_excluded(full) or _ignored(abs_full, True, patterns):
                    continue
                subdirs.append(full)
                continue
            if not entry.name.endswith(SOURCE_SUFFIXES):
                continue
            if entry.is_symlink() and os.path.isdir(full):
                continue  # a symlink to a directory named x.py: not followed
            if config.is_excluded(full) or _ignored(abs_full, False, patterns):
                continue
            if full not in seen:
                seen.add(full)
                yield full
        for sub in reversed(subdirs):
            stack.append((sub, patterns))
