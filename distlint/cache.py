"""Content-hash cache of lint results, so a second run over an unchanged tree costs almost nothing.

An entry is keyed by everything that decides a file's result: its bytes, the distlint version
plus a fingerprint of the engine and rule sources (so an edited or added rule in a development
install invalidates old entries), the effective configuration, the file's absolute path and the
options that change findings (``--ignore-noqa``, ``--debug``). The rule codes enabled for a file
are a function of the configuration, the path and the rule set, all three in the key; computing
them would import every rule (and LibCST), which is most of what a warm run would cost.

Entries live in ``.distlint_cache/`` at the project root (the directory of the configuration
file, else the current directory). The cache is best effort: an entry is written to a temporary
file and renamed into place, so concurrent runs never see half an entry; an unreadable or
corrupt entry is a miss; a read-only disk just means nothing is cached. Entries are JSON, never
pickle: a cache directory checked into a repository must not be able to run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from distlint import __version__
from distlint.config import Config
from distlint.model import Applicability, Edit, FileError, FileResult, Finding, Fix, Range, Severity

CACHE_DIR = ".distlint_cache"
_FORMAT = 4  # bump when the entry layout changes (2: edits; 3: dependency digests; 4: reached)
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# distlint cache; see https://bford.info/cachedir/\n"


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """Version plus size/mtime of the engine and rule modules: a rule edited in a development
    install must not be answered from entries computed by its older self."""
    import distlint
    import distlint.rules

    parts = [__version__, str(_FORMAT)]
    for package in (distlint, distlint.rules):
        for top in package.__path__:
            # subpackages too (distlint.analysis, distlint.reporting): any engine edit counts
            for directory, dirs, files in sorted(os.walk(top)):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(n for n in files if n.endswith(".py")):
                    try:
                        st = os.stat(os.path.join(directory, name))
                    except OSError:
                        continue
                    rel = os.path.relpath(os.path.join(directory, name), top)
                    parts.append(f"{rel}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cache_key(
    data: bytes,
    path: str,
    config: Config,
    ignore_noqa: bool = False,
    debug: bool = False,
) -> str:
    h = hashlib.sha256()
    if config.unsafe_fixes:
        # findings and their edits do not depend on it: `check` warms the cache for `fix
        # --unsafe-fixes`
        config = config._replace(unsafe_fixes=False)
    for part in (
        engine_fingerprint(),
        repr(config),
        os.path.abspath(path),
        f"noqa={ignore_noqa};debug={debug}",
    ):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    h.update(data)
    return h.hexdigest()


class Cache:
    """The entries of one project root."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.directory = os.path.join(root, CACHE_DIR)
        self.entries = os.path.join(self.directory, "entries")
        self._ready = False

    def get(self, key: str, path: str) -> FileResult | None:
        """The cached result for ``key`` shown under ``path``, or None (missing or corrupt)."""
        try:
            with open(os.path.join(self.entries, key + ".json"), "rb") as handle:
                raw = handle.read()
        except OSError:
            return None
        try:
            result = _decode(json.loads(raw), path)
        except Exception:  # corrupt, truncated or foreign entry: lint the file again
            return None
        # The modules and config files it reached are part of the key: any changed, a miss.
        if any(_digest_now(dep) != digest for dep, digest in result.dependencies):
            return None
        return result

    def put(self, key: str, result: FileResult) -> None:
        try:
            self._prepare()
            payload = json.dumps(_encode(result), separators=(",", ":")).encode("utf-8")
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.entries)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(payload)
                os.replace(tmp, os.path.join(self.entries, key + ".json"))
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            pass  # read-only or full disk: run without caching rather than fail the lint

    def _prepare(self) -> None:
        if self._ready:
            return
        os.makedirs(self.entries, exist_ok=True)
        # keep the cache out of version control and backups, as ruff and pytest do
        for name, text in ((".gitignore", "# created by distlint\n*\n"), ("CACHEDIR.TAG", _TAG)):
            target = os.path.join(self.directory, name)
            if not os.path.exists(target):
                try:
                    with open(target, "x", encoding="utf-8") as handle:
                        handle.write(text)
                except FileExistsError:
                    pass  # another run created it first
        self._ready = True


_CACHES: dict[str, Cache] = {}


def cache_for(config: Config) -> Cache:
    root = os.path.abspath(config.root or os.getcwd())
    cache = _CACHES.get(root)
    if cache is None:
        cache = _CACHES[root] = Cache(root)
    return cache


def clean(root: str) -> str | None:
    """Remove the cache under ``root``; the removed directory, or None when there was none."""
    directory = os.path.join(os.path.abspath(root), CACHE_DIR)
    if not os.path.isdir(directory) or os.path.islink(directory):
        return None
    shutil.rmtree(directory, ignore_errors=True)
    _CACHES.pop(os.path.abspath(root), None)
    return directory


# ---------------------------------------------------------------------------------- encoding
# Paths are not stored: the same file may be named `a.py` or `./a.py`; the caller's path is used.


def _encode(result: FileResult) -> dict[str, Any]:
    return {
        "findings": [_finding_out(f) for f in result.findings],
        "suppressed": [_finding_out(f) for f in result.suppressed],
        "errors": [[e.message, e.line, e.column] for e in result.errors],
        "deps": [list(d) for d in result.dependencies],
        "reached": list(result.reached),
    }


def _digest_now(path: str) -> str:
    """sha256 of a file's bytes now (``missing`` when unreadable), memoised by stat."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        found = _DIGESTS.get(key)
        if found is None:
            with open(path, "rb") as handle:
                found = _DIGESTS[key] = hashlib.sha256(handle.read()).hexdigest()
        return found
    except OSError:
        return "missing"


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _finding_out(f: Finding) -> list:
    fix = None
    if f.fix is not None:
        fix = [
            f.fix.applicability.value,
            f.fix.title,
            [_edit_out(e) for e in f.fix.edits],
            f.fix.isolation,
        ]
    return [
        list(_range_tuple(f.range)),
        f.code,
        f.name,
        f.message,
        fix,
        f.severity.value,
        f.cell,
        _edit_out(f.suppression) if f.suppression is not None else None,
    ]


def _edit_out(e: Edit) -> list:
    return [e.start, e.end, e.content, list(_range_tuple(e.range))]


def _edit_in(item: Iterable[Any]) -> Edit:
    start, end, content, rng = item
    if not isinstance(content, str):
        raise TypeError("edit content")
    return Edit(int(start), int(end), content, Range(*(int(v) for v in rng)))


def _range_tuple(r: Range) -> tuple[int, int, int, int]:
    return (r.line, r.column, r.end_line, r.end_column)


def _decode(data: dict[str, Any], path: str) -> FileResult:
    return FileResult(
        path,
        findings=tuple(_finding_in(item, path) for item in data["findings"]),
        errors=tuple(_error_in(item, path) for item in data["errors"]),
        suppressed=tuple(_finding_in(item, path) for item in data["suppressed"]),
        dependencies=tuple((str(p), str(d)) for p, d in data.get("deps", ())),
        reached=tuple(str(p) for p in data.get("reached", ())),
    )


def _finding_in(item: Iterable[Any], path: str) -> Finding:
    rng, code, name, message, fix, severity, cell, suppression = item
    line, column, end_line, end_column = (int(v) for v in rng)
    info = None
    if fix is not None:
        applicability, title, edits, isolation = fix
        info = Fix(
            str(title),
            Applicability(applicability),
            tuple(_edit_in(e) for e in edits),
            None if isolation is None else str(isolation),
        )
    return Finding(
        path,
        Range(line, column, end_line, end_column),
        str(code),
        str(name),
        str(message),
        info,
        Severity(severity),
        None if cell is None else int(cell),
        None if suppression is None else _edit_in(suppression),
    )


def _error_in(item: Iterable[Any], path: str) -> FileError:
    message, line, column = item
    return FileError(
        path,
        str(message),
        None if line is None else int(line),
        None if column is None else int(column),
    )
