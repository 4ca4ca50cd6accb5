"""Content-hash cache of lint results, so a second run over an unchanged tree costs almost nothing.

An entry is keyed by everything that decides a file's result: its bytes, the distlint version
plus a fingerprint of the engine and rule sources (so an edited or added rule in a development
install invalidates old entries), the effective configuration, the file's absolute path and the
options that change findings (``--ignore-noqa``, ``--debug``). The rule codes enabled for a file
are a function of the configuration, the path and the rule set, all three in the key; computing
them would import every rule (and LibCST), which is most of what a warm run would cost.

Entries live in ``.distlint_cache/entries/<2 hex>/<file>.json`` at the project root (the
directory of the configuration file, else the current directory): one entry per file and
settings, for the content it holds (the latest; an edit replaces it), all of them under
MAX_CACHE_BYTES (the oldest go first). An entry names its dependencies (path, digest) by short ids; their text is in shared
tables (``tables/<2 hex>/<name>.json``, named by the digest of their content, written once): the
files of a tree depend on mostly the same modules and import look-ups, which each entry held in
full before (~45 KB an entry on diffusers, 72 MB for its tree). The cache is best effort: an entry is written to a temporary file and renamed into
place, so concurrent runs never see half an entry; an unreadable, corrupt or non-regular entry
is a miss; a read-only disk or a cache folder that is a symbolic link just means nothing is
cached. Entries are JSON, never pickle: a cache directory checked into a repository must not be
able to run code.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from distlint import __version__
from distlint.config import Config
from distlint.files import read_source
from distlint.model import Applicability, Edit, FileError, FileResult, Finding, Fix, Range, Severity

CACHE_DIR = ".distlint_cache"
# (distlint.analysis.project.LISTING, not imported: a warm run never loads the analysis)
_LISTING = os.sep + "<names in the folder>"
_GROUP = os.sep + "<exists "
_DIGESTS_FILE = "digests.json"
# bump when the entry layout changes (2: edits; 3: deps; 4: reached; 5: per file; 6: folder
# listings; 7: dependencies by id, in shared tables)
_FORMAT = 7
_TABLES = "tables"
# One entry is kept per file and settings (the latest); all of them together stay under this.
MAX_CACHE_BYTES = 128 << 20
MAX_ENTRY_BYTES = 16 << 20
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
    """``<file>/<content>``: the first part names the file under its settings (the file's
    absolute path, the configuration, the options), the second everything else that decides
    its result (the engine and the bytes). One entry is kept per first part: the latest."""
    if config.unsafe_fixes:
        # findings and their edits do not depend on it: `check` warms the cache for `fix
        # --unsafe-fixes`
        config = config._replace(unsafe_fixes=False)
    file = hashlib.sha256()
    for part in (repr(config), os.path.abspath(path), f"noqa={ignore_noqa};debug={debug}"):
        file.update(part.encode("utf-8", "surrogateescape"))
        file.update(b"\0")
    content = hashlib.sha256(engine_fingerprint().encode())
    content.update(b"\0")
    content.update(data)
    return f"{file.hexdigest()[:32]}/{content.hexdigest()}"


class Cache:
    """The entries of one project root."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.directory = os.path.join(root, CACHE_DIR)
        self.entries = os.path.join(self.directory, "entries")
        self._ready = False
        # path -> [mtime_ns, size, sha256] of the files entries depend on (digests.json), so a
        # warm run stats the modules a result reached instead of reading and hashing them
        self._digests: dict[str, list[Any]] | None = None
        self._digests_changed = False
        # paths imports looked at (grouped by folder) -> what exists there, once per process
        self._seen: dict[str, str] = {}
        # the dependency tables (see `put`) read or written by this process: (path, digest) ->
        # its id, id -> the table holding it, table name -> whether it is readable and what
        # its name says (content-addressed: never changes), id -> pair, of every such table
        self._ids: dict[tuple[str, str], str] = {}
        self._table_of: dict[str, str] = {}
        self._tables: dict[str, bool] = {}
        self._pairs: dict[str, tuple[str, str]] = {}
        self._pending: dict[tuple[str, str], None] = {}  # pairs waiting for a table
        self._touched: set[str] = set()
        self._made: set[str] = set()  # entry folders made (or found) by this process

    def get(
        self,
        key: str,
        path: str,
        digest_of: Callable[[str], str | None] | None = None,
        checked: dict[tuple[str, str], bool] | None = None,
    ) -> FileResult | None:
        """The cached result for ``key`` shown under ``path``, or None (missing or corrupt).
        ``digest_of``: the digest now of a dependency that is not a file (None: a file).
        ``checked``: (path, digest) -> whether it holds now, shared by the look-ups of one
        moment (a run's, before it lints anything): the files of a tree depend on the same
        modules, each checked once then."""
        if not self._usable():
            return None
        _, target, content = self._entry_path(key)
        raw = read_source(target, MAX_ENTRY_BYTES)
        if isinstance(raw, FileError):  # missing, or not a regular file: a miss, never a hang
            return None
        try:
            data = json.loads(raw)
            if data.get("content") != content:
                return None  # the entry of the file as it was before an edit
            deps = self._dependencies(data)
            if deps is None:
                return None  # an older layout, or a table gone: lint the file again
            result = _decode(data, path, deps)
        except Exception:  # corrupt, truncated or foreign entry: lint the file again
            return None
        # The modules and config files it reached are part of the key: any changed, a miss.
        for pair in result.dependencies:
            valid = checked.get(pair) if checked is not None else None
            if valid is None:
                dep, digest = pair
                now = digest_of(dep) if digest_of is not None else None
                valid = (now if now is not None else self.digest_now(dep)) == digest
                if checked is not None:
                    checked[pair] = valid
            if not valid:
                return None
        return result

    def _dependencies(self, data: dict[str, Any]) -> tuple[tuple[str, str], ...] | None:
        """The (path, digest) pairs entry ``data`` names, from its tables, and those it holds
        itself; None when it is not of this layout or a table is missing or corrupt."""
        if data.get("format") != _FORMAT:
            return None
        for name in data["tables"]:
            if not self._table(name):
                return None
        pairs = self._pairs  # (an id is the digest of its pair: the same in every table)
        out = [pairs[dep] for dep in data["deps"]]  # (an id no table holds: KeyError, a miss)
        for path, digest in data["own"]:
            out.append(_shared(_text(path), _text(digest)))
        return tuple(out)

    def _table(self, name: Any) -> bool:
        """Table ``name``'s pairs read into ``_pairs`` (once per process); False when it is
        missing, corrupt, or not what its name says."""
        if name in self._tables:
            return self._tables[name]
        found = False
        if type(name) is str and len(name) == 64 and all(c in _HEX for c in name):
            raw = read_source(self._table_path(name), MAX_ENTRY_BYTES)
            if not isinstance(raw, FileError) and hashlib.sha256(raw).hexdigest() == name:
                table = {
                    dep: _shared(_text(path), _text(digest))
                    for dep, (path, digest) in json.loads(raw).items()
                }
                for dep, pair in table.items():
                    self._pairs[dep] = pair
                    self._ids.setdefault(pair, dep)  # (a later entry names it, not a new one)
                    self._table_of.setdefault(dep, name)
                found = True
        self._tables[name] = found
        return found

    def _table_path(self, name: str) -> str:
        return os.path.join(self.directory, _TABLES, name[:2], name + ".json")

    def _name_dependencies(
        self, deps: Iterable[tuple[str, str]]
    ) -> tuple[list[str], list[str], list[list[str]]]:
        """(the ids of ``deps`` in tables, the tables, the pairs the entry holds itself): the
        pairs no table of this process holds yet wait (``_pending``) until there are enough
        of them for a table of their own, written now (before the entry that names it); the
        entry holds the few it brought meanwhile (a table for every entry would be a file
        more for each, most of them naming a handful of pairs)."""
        ids, own, tables = [], [], set()
        known, table_of, pending = self._ids, self._table_of, self._pending
        fresh = []
        for pair in deps:
            dep = known.get(pair)
            if dep is None:
                fresh.append(pair)
                pending.setdefault(pair, None)
            else:
                tables.add(table_of[dep])
                ids.append(dep)
        if len(pending) >= _TABLE_PAIRS:
            name = self._write_table(list(pending))
            pending.clear()
            ids += [known[pair] for pair in fresh]
            tables.add(name)
        else:
            own = [list(pair) for pair in fresh]
        for name in tables - self._touched:  # (used again: the last to be trimmed)
            self._touched.add(name)
            os.utime(self._table_path(name))
        return ids, sorted(tables), own

    def _write_table(self, pairs: list[tuple[str, str]]) -> str:
        """A new table of ``pairs`` (named by the digest of its content); its name."""
        content = {_pair_id(pair): list(pair) for pair in pairs}
        payload = json.dumps(content, separators=(",", ":")).encode("utf-8", "surrogateescape")
        name = hashlib.sha256(payload).hexdigest()
        target = self._table_path(name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(os.path.dirname(target)):
            raise OSError("a link: never written through")
        _write_atomic(target, payload)
        self._touched.add(name)
        # (not read into `_pairs`: a run rarely reads an entry it wrote, and then reads the
        # table from disk; its pairs held twice stayed to the end of a whole tree's first run)
        for dep, pair in zip(content, pairs):
            self._ids[pair] = dep
            self._table_of[dep] = name
        return name

    def _entry_path(self, key: str) -> tuple[str, str, str]:
        """(its folder, the entry's path, the content part of ``key``): the entry of a file
        under its settings is one file, which the entry of its next content replaces."""
        file, _, content = key.rpartition("/")
        directory = os.path.join(self.entries, file[:2])
        return directory, os.path.join(directory, file + ".json"), content

    def put(self, key: str, result: FileResult) -> None:
        directory, target, content = self._entry_path(key)
        try:
            self._prepare()
            deps, tables, own = self._name_dependencies(result.dependencies)
            encoded = _encode(result, deps, tables, own)
            encoded["content"] = content
            payload = json.dumps(encoded, separators=(",", ":")).encode("utf-8", "surrogateescape")
            if len(payload) > MAX_ENTRY_BYTES:
                return
            if directory not in self._made:
                os.makedirs(directory, exist_ok=True)
                if os.path.islink(directory):
                    return  # never written through a link
                self._made.add(directory)
            _write_atomic(target, payload)
        except OSError:
            pass  # read-only or full disk: run without caching rather than fail the lint

    def get_flag(self, key: str) -> bool | None:
        """A yes/no answer about one module (does it set up training?) stored by ``put_flag``,
        while the files it depended on are unchanged; None when unknown."""
        if not self._usable():
            return None
        raw = read_source(self._flag_path(key), MAX_ENTRY_BYTES)
        if isinstance(raw, FileError):
            return None
        try:
            data = json.loads(raw)
            flag, deps = data["flag"], data["deps"]
            if not isinstance(flag, bool) or any(self.digest_now(p) != d for p, d in deps):
                return None
            return flag
        except (ValueError, TypeError, KeyError):
            return None

    def put_flag(self, key: str, flag: bool, deps: Iterable[tuple[str, str]]) -> None:
        try:
            self._prepare()
            payload = json.dumps({"flag": flag, "deps": [list(d) for d in deps]}).encode("utf-8")
            target = self._flag_path(key)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _write_atomic(target, payload)
        except OSError:
            pass

    def _flag_path(self, key: str) -> str:
        return os.path.join(self.directory, "flags", key.replace("/", "-") + ".json")

    def digest_now(self, path: str) -> str:
        """sha256 of a file's bytes now (``missing`` when unreadable): from digests.json when
        the file's mtime and size are those recorded with it, else read and hashed."""
        if path.endswith(">") and _GROUP in path:  # what exists at paths imports looked at
            from distlint.analysis.project import group_digest

            found = self._seen.get(path)
            if found is None:
                found = self._seen[path] = group_digest(path) or "missing"
            return found
        if path.endswith(_LISTING):  # the names in a folder taken for a namespace package
            from distlint.analysis.project import listing_digest

            return listing_digest(path[: -len(_LISTING)])
        memo = self._load_digests()
        try:
            st = os.stat(path)
        except OSError:
            return "missing"
        known = memo.get(path)
        if known is not None and known[0] == st.st_mtime_ns and known[1] == st.st_size:
            return str(known[2])
        digest = _digest_now(path)
        # a file modified less than 2 s ago may change again within the same mtime tick on a
        # coarse clock: not recorded (git's "racily clean" rule)
        if digest != "missing" and st.st_mtime_ns < time.time_ns() - 2_000_000_000:
            memo[path] = [st.st_mtime_ns, st.st_size, digest]
            if not self._digests_changed:
                self._digests_changed = True
                atexit.register(self.save_digests)
        return digest

    def _load_digests(self) -> dict[str, list[Any]]:
        if self._digests is None:
            self._digests = {}
            raw = read_source(os.path.join(self.directory, _DIGESTS_FILE), MAX_ENTRY_BYTES)
            try:
                if self._usable() and not isinstance(raw, FileError):
                    data = json.loads(raw)
                    if data.get("format") == _FORMAT:
                        for path, item in data["digests"].items():
                            m, size, digest = item
                            if isinstance(digest, str) and type(m) is int and type(size) is int:
                                self._digests[str(path)] = [m, size, digest]
            except (ValueError, TypeError, AttributeError, KeyError):
                pass  # corrupt: hash the files, as without it
        return self._digests

    def save_digests(self) -> None:
        """Write digests.json (atomically; best effort, like every entry)."""
        if not self._digests_changed or self._digests is None:
            return
        self._digests_changed = False
        if not os.path.isdir(self.entries) or not self._usable():
            return  # nothing cached (or the cache was cleaned meanwhile): nothing to speed up
        try:
            payload = json.dumps({"format": _FORMAT, "digests": self._digests}).encode("utf-8")
            if len(payload) <= MAX_ENTRY_BYTES:
                _write_atomic(os.path.join(self.directory, _DIGESTS_FILE), payload)
        except OSError:
            pass

    def _usable(self) -> bool:
        """False when the cache folder (or its entries folder) is a symbolic link: a link
        checked into a repository must not make distlint read or write elsewhere."""
        return not (os.path.islink(self.directory) or os.path.islink(self.entries))

    def _prepare(self) -> None:
        if self._ready:
            return
        if not self._usable():
            raise OSError("the cache folder is a symbolic link: not used")
        os.makedirs(self.entries, exist_ok=True)
        # keep the cache out of version control and backups, as ruff and pytest do
        for name, text in ((".gitignore", "# created by distlint\n*\n"), ("CACHEDIR.TAG", _TAG)):
            target = os.path.join(self.directory, name)
            if not os.path.lexists(target):
                try:
                    with open(target, "x", encoding="utf-8") as handle:
                        handle.write(text)
                except FileExistsError:
                    pass  # another run created it first
        self._ready = True
        self.trim()

    def trim(self, budget: int | None = None) -> None:
        """Keep the entries and their tables under ``budget`` bytes (MAX_CACHE_BYTES), the
        least recently written (or used, for a table) removed first; entries of older cache
        layouts go too."""
        budget = MAX_CACHE_BYTES if budget is None else budget
        try:
            folders = list(os.scandir(self.entries))
        except OSError:
            return
        for older in [f for f in folders if len(f.name) != 2 and f.is_dir(follow_symlinks=False)]:
            shutil.rmtree(older.path, ignore_errors=True)  # (an entry per content: format 6)
            folders.remove(older)
        try:
            folders += list(os.scandir(os.path.join(self.directory, _TABLES)))
        except OSError:
            pass
        # (a file there: an entry of format 3 or older, a link)
        if _keep_under(folders, budget):
            # a table removed: this process names none it has not checked again
            for known in (self._ids, self._table_of, self._tables, self._pairs, self._touched):
                known.clear()


def _keep_under(folders: list[os.DirEntry[str]], budget: int) -> bool:
    """Remove the files in ``folders`` least recently written first until they hold at most
    ``budget`` bytes; anything there that is not a folder goes. True when a file went."""
    found: list[tuple[int, int, str]] = []  # (mtime, size, path)
    for folder in folders:
        if not folder.is_dir(follow_symlinks=False):
            _remove(folder.path)
            continue
        try:
            for entry in os.scandir(folder.path):
                st = entry.stat(follow_symlinks=False)
                found.append((st.st_mtime_ns, st.st_size, entry.path))
        except OSError:
            continue
    total = sum(size for _, size, _ in found)
    removed = False
    for _, size, path in sorted(found):
        if total <= budget:
            break
        _remove(path)
        removed = True
        total -= size
    return removed


def _write_atomic(target: str, payload: bytes) -> None:
    """``payload`` into ``target`` by a temporary file renamed into place: a concurrent run
    never reads half of it."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


_CACHES: dict[str, Cache] = {}


def cache_for(config: Config) -> Cache:
    root = os.path.abspath(config.root or os.getcwd())
    cache = _CACHES.get(root)
    if cache is None:
        cache = _CACHES[root] = Cache(root)
    return cache


def clean(root: str) -> str | None:
    """Remove the cache under ``root``; what was removed, or None when there was nothing. A
    cache folder that is a symbolic link is unlinked: its target is not distlint's to empty."""
    directory = os.path.join(os.path.abspath(root), CACHE_DIR)
    _CACHES.pop(os.path.abspath(root), None)
    if os.path.islink(directory):
        os.unlink(directory)
        return f"{directory} (a symbolic link; its target was left alone)"
    if not os.path.isdir(directory):
        return None
    shutil.rmtree(directory, ignore_errors=True)
    return directory


# ---------------------------------------------------------------------------------- encoding
# Paths are not stored: the same file may be named `a.py` or `./a.py`; the caller's path is used.


def _encode(
    result: FileResult, deps: list[str], tables: list[str], own: list[list[str]]
) -> dict[str, Any]:
    """The entry of ``result``: its dependencies named by their ids ``deps`` in ``tables``,
    and those it holds itself (``own``)."""
    return {
        "format": _FORMAT,
        "findings": [_finding_out(f) for f in result.findings],
        "suppressed": [_finding_out(f) for f in result.suppressed],
        "errors": [[e.message, e.line, e.column] for e in result.errors],
        "deps": deps,
        "tables": tables,
        "own": own,
        "reached": list(result.reached),
    }


_HEX = frozenset("0123456789abcdef")
# the pairs no table holds that wait for one of their own (see `Cache._name_dependencies`)
_TABLE_PAIRS = 64


def _pair_id(pair: tuple[str, str]) -> str:
    """A dependency's id in the tables: 96 bits of the digest of its path and digest."""
    text = f"{pair[0]}\0{pair[1]}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(text).hexdigest()[:24]


def _digest_now(path: str) -> str:
    """sha256 of a file's bytes now (``missing`` when unreadable), memoised by stat."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    key = (path, st.st_mtime_ns, st.st_size)
    found = _DIGESTS.get(key)
    if found is None:
        data = read_source(path)  # a module replaced by a FIFO since: "missing", no hang
        if isinstance(data, FileError):
            return "missing"
        found = _DIGESTS[key] = hashlib.sha256(data).hexdigest()
    return found


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


def _decode(data: dict[str, Any], path: str, deps: tuple[tuple[str, str], ...]) -> FileResult:
    return FileResult(
        path,
        findings=tuple(_finding_in(item, path) for item in data["findings"]),
        errors=tuple(_error_in(item, path) for item in data["errors"]),
        suppressed=tuple(_finding_in(item, path) for item in data["suppressed"]),
        dependencies=deps,
        reached=tuple(_shared(str(p), "")[0] for p in data.get("reached", ())),
    )


# (path, digest) pairs of the entries read: every file of a tree depends on the same modules,
# so a warm run over it holds each pair once, not once per file (hundreds a file)
_PAIRS: dict[tuple[str, str], tuple[str, str]] = {}


def _shared(path: str, digest: str) -> tuple[str, str]:
    pair = (path, digest)
    return _PAIRS.setdefault(pair, pair)


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


# ------------------------------------------------------------------------------ answer store
# Answers about project modules (a helper function's summary, a class's methods, whether a
# class derives from a DataLoader...), computed once per content of what they consulted and
# kept on disk, so a run that lints an edited script, a `-j2` worker and the language server
# read its helpers' answers instead of parsing them. An entry holds the answer as plain JSON
# (never pickle), the files it consulted with their digests (folder listings and the run's
# importers too: see distlint.analysis.project) and the modules parsed for it; it is used
# only while every one of them is unchanged. Entries live in `answers/<2 hex>/<key>.json`
# under the cache folder, keyed by the question, the engine, the project (root, import
# search folders), the working directory (messages name paths relative to it) and the
# configuration that can change an answer; all of them stay under MAX_ANSWER_BYTES.

_ANSWERS = "answers"
_ANSWER_FORMAT = 1
MAX_ANSWER_BYTES = 64 << 20
MAX_ANSWER_DEPS = 5000  # an answer that consulted more is not worth checking file by file


class AnswerStore:
    """The answers of one project under one configuration (see above)."""

    def __init__(self, cache: Cache, scope: str) -> None:
        self.cache = cache
        self.scope = scope
        self.directory = os.path.join(cache.directory, _ANSWERS)
        self._trimmed = False
        self._made: set[str] = set()  # folders made (or found, not links) by this process

    def _where(self, key: tuple[Any, ...]) -> tuple[str, str]:
        text = json.dumps(list(key), separators=(",", ":"))
        name = hashlib.sha256(f"{self.scope}\0{text}".encode("utf-8", "surrogateescape"))
        digest = name.hexdigest()
        return os.path.join(self.directory, digest[:2], digest + ".json"), text

    def get(
        self,
        key: tuple[Any, ...],
        dependency_now: Callable[[str], str | None],
        checked: dict[str, bool] | None = None,
    ) -> tuple[Any, list[tuple[str, str]], list[str]] | None:
        """(answer, the (path, digest) it consulted, the modules parsed for it) while every path it
        consulted has the digest it had then (``dependency_now``: the asking project's view
        of a path, None for a file it has not read, checked on disk); None otherwise, and for
        a missing, corrupt, truncated or foreign entry. ``checked``: dependency sets already
        checked (the asking project's, for this run), shared by answers that consulted the
        same files."""
        if not self.cache._usable() or os.path.islink(self.directory):
            return None
        target, text = self._where(key)
        raw = read_source(target, MAX_ENTRY_BYTES)
        if isinstance(raw, FileError):
            return None
        try:
            data = json.loads(raw)
            if (data["format"], data["scope"], data["key"]) != (_ANSWER_FORMAT, self.scope, text):
                return None  # another question (or engine) under the same name: not ours
            name = data["deps"]
            if not isinstance(name, str):
                return None
            deps = self._deps(name)
            if deps is None:
                return None
            valid = checked.get(name) if checked is not None else None
            if valid is None:
                valid = all(
                    (
                        now
                        if (now := dependency_now(path)) is not None
                        else self.cache.digest_now(path)
                    )
                    == digest
                    for path, digest in deps
                )
                if checked is not None:
                    checked[name] = valid
            if not valid:
                return None
            loaded = [p for p in data["loaded"] if isinstance(p, str)]
            value = _answer_in(key[0], data["value"])
        except Exception:  # corrupt, truncated or foreign: computed again
            return None
        return value, deps, loaded

    def _deps(self, name: str) -> list[tuple[str, str]] | None:
        """The dependency set ``name`` (the sha256 of its text), None when missing or not
        what its name says."""
        if len(name) != 64 or not all(c in "0123456789abcdef" for c in name):
            return None
        raw = read_source(self._deps_path(name), MAX_ENTRY_BYTES)
        if isinstance(raw, FileError) or hashlib.sha256(raw).hexdigest() != name:
            return None
        deps = []
        for path, digest in json.loads(raw):
            if not isinstance(path, str) or not isinstance(digest, str):
                return None
            deps.append((path, digest))
        return deps

    def _deps_path(self, name: str) -> str:
        return os.path.join(self.directory, "deps", name[:2], name + ".json")

    def put(
        self,
        key: tuple[Any, ...],
        value: Any,
        deps: list[tuple[str, str]],
        loaded: list[str],
    ) -> bool:
        """Store ``value`` with the (path, digest now) ``deps`` it consulted; False when it
        is not plain data this store knows, too big, or the disk refuses (never an error).
        A set of dependencies is written once, named by its digest: the answers about one
        module's functions mostly consulted the same files."""
        if len(deps) > MAX_ANSWER_DEPS:
            return False
        try:
            encoded = _answer_out(key[0], value)
            if _answer_out(key[0], _answer_in(key[0], encoded)) != encoded:
                return False  # does not come back the same: never stored
        except (_NotPlain, TypeError, ValueError, KeyError, AttributeError):
            return False
        target, text = self._where(key)
        try:
            blob = json.dumps([list(d) for d in deps], separators=(",", ":"))
            payload_deps = blob.encode("utf-8", "surrogateescape")
            name = hashlib.sha256(payload_deps).hexdigest()
            entry = {
                "format": _ANSWER_FORMAT,
                "scope": self.scope,
                "key": text,
                "value": encoded,
                "deps": name,
                "loaded": loaded,
            }
            payload = json.dumps(entry, separators=(",", ":")).encode("utf-8", "surrogateescape")
        except (TypeError, ValueError):
            return False
        if len(payload) > MAX_ENTRY_BYTES or len(payload_deps) > MAX_ENTRY_BYTES:
            return False
        try:
            self.cache._prepare()
            if os.path.islink(self.directory):
                return False  # never written through a link
            if not self._trimmed:
                self._trimmed = True
                self.trim()
            shared = self._deps_path(name)
            for path, data in ((shared, payload_deps), (target, payload)):
                if not self._folder_ready(os.path.dirname(path)):
                    return False
                if path is shared and os.path.isfile(shared):
                    os.utime(shared)  # (recently used: trimmed last)
                    continue
                _write_atomic(path, data)
        except OSError:
            return False  # a read-only or full disk: answered without the store
        return True

    def _folder_ready(self, folder: str) -> bool:
        """``folder`` made (once per process); False when it or its parent is a link (never
        written through)."""
        if folder not in self._made:
            os.makedirs(folder, exist_ok=True)
            if os.path.islink(folder) or os.path.islink(os.path.dirname(folder)):
                return False
            self._made.add(folder)
        return True

    def trim(self, budget: int | None = None) -> None:
        """Keep the answers under ``budget`` bytes (MAX_ANSWER_BYTES), the least recently
        written removed first."""
        budget = MAX_ANSWER_BYTES if budget is None else budget
        try:
            folders = list(os.scandir(self.directory))
        except OSError:
            return
        if any(f.name == "deps" for f in folders):
            try:
                folders += list(os.scandir(os.path.join(self.directory, "deps")))
            except OSError:
                pass
        deps = os.path.join(self.directory, "deps")
        _keep_under([f for f in folders if f.path != deps], budget)


_STORES: dict[tuple[str, str], AnswerStore] = {}


def answer_store(config: Config, root: str, search_roots: Iterable[str]) -> AnswerStore:
    """The answer store of the project at ``root`` (import search folders ``search_roots``)
    under ``config``, in the cache folder of that configuration."""
    # what decides findings but no answer about a module is left out: `check` and `check
    # --select ALL` share the answers of the same helpers
    settings = config._replace(
        select=(),
        ignore=(),
        extend_select=(),
        per_file_ignores=(),
        unsafe_fixes=False,
        extend_safe_fixes=(),
        extend_unsafe_fixes=(),
    )
    scope = hashlib.sha256()
    for part in (engine_fingerprint(), repr(settings), root, *search_roots, "", os.getcwd()):
        scope.update(part.encode("utf-8", "surrogateescape"))
        scope.update(b"\0")
    cache = cache_for(config)
    key = (cache.root, scope.hexdigest())
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = AnswerStore(cache, key[1])
    return store


class _NotPlain(Exception):
    """An answer this store does not know how to write."""


def _answer_out(kind: str, value: Any) -> Any:
    from distlint.analysis.processes import ConstantShare

    if kind in ("summary", "method"):
        return _summary_out(value)
    if kind in ("derives-loader", "holds-share"):
        if type(value) is not bool:
            raise _NotPlain(kind)
        return value
    if kind == "constant-share":
        if value is None:
            return None
        if type(value) is not ConstantShare or type(value.processes) is not int:
            raise _NotPlain(kind)
        return [_text(value.place), _text(value.value), _text(value.divisor), value.processes]
    raise _NotPlain(kind)


def _answer_in(kind: str, data: Any) -> Any:
    from distlint.analysis.processes import ConstantShare

    if kind in ("summary", "method"):
        return _summary_in(data)
    if kind in ("derives-loader", "holds-share"):
        if type(data) is not bool:
            raise TypeError(kind)
        return data
    if kind == "constant-share":
        if data is None:
            return None
        place, value, divisor, processes = data
        if type(processes) is not int:
            raise TypeError(kind)
        return ConstantShare(_text(place), _text(value), _text(divisor), processes)
    raise TypeError(kind)


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("text")
    return value


def _optional_int(value: Any) -> int | None:
    if value is not None and type(value) is not int:
        raise TypeError("int")
    return value


def _params_out(params: Any) -> list[Any]:
    return [[_text(name), _optional_int(position)] for name, position in params]


def _params_in(data: Any) -> tuple[tuple[str, int | None], ...]:
    return tuple((_text(name), _optional_int(position)) for name, position in data)


def _summary_out(summary: Any) -> Any:
    from distlint.analysis.records import BatchUse, FactoryLR, MethodsOf, Summary

    if summary is None:
        return None
    if type(summary) is not Summary or type(summary.batch) is not BatchUse:
        raise _NotPlain("summary")
    lrs = []
    for lr in summary.lrs:
        if type(lr) is not FactoryLR or type(lr.scaled) is not bool:
            raise _NotPlain("lr")
        param = None
        if lr.param is not None:
            param = [_text(lr.param[0]), _optional_int(lr.param[1]), _text(lr.param[2])]
        lrs.append([param, lr.scaled, _text(lr.where)])
    loaders = []
    for position, origins in summary.loaders.items():
        loaders.append([_optional_int(position), [o.value for o in origins]])
    method = summary.method
    if method is not None and type(method) is not MethodsOf:
        raise _NotPlain("method")
    batch = summary.batch
    if type(batch.divides) is not bool or type(summary.trained_there) is not bool:
        raise _NotPlain("flags")
    return {
        "makes": sorted(m.value for m in summary.makes),
        "seeds": int(summary.seeds.value),
        "lrs": lrs,
        "loaders": loaders,
        "trained_there": summary.trained_there,
        "trains": summary.trains.value if summary.trains is not None else None,
        "method": [_text(method.path), _text(method.name)] if method is not None else None,
        "batch": [
            _params_out(batch.loader_params),
            batch.divides,
            _params_out(batch.slices_items_of),
            _params_out(batch.slices),
            [
                [_text(attr), bool(by_count), [_text(p) for p in paths]]
                for attr, by_count, paths in batch.shares
            ],
        ],
    }


def _summary_in(data: Any) -> Any:
    from distlint.analysis.records import (
        BatchUse,
        FactoryLR,
        Made,
        MethodsOf,
        Mode,
        Origin,
        Seeds,
        Summary,
    )

    if data is None:
        return None
    summary = Summary()
    summary.makes = {Made(_text(m)) for m in data["makes"]}
    seeds = data["seeds"]
    if type(seeds) is not int:
        raise TypeError("seeds")
    summary.seeds = Seeds(seeds)
    for param, scaled, where in data["lrs"]:
        if type(scaled) is not bool:
            raise TypeError("scaled")
        if param is not None:
            name, position, attribute = param
            param = (_text(name), _optional_int(position), _text(attribute))
        summary.lrs.append(FactoryLR(param, scaled, _text(where)))
    for position, origins in data["loaders"]:
        summary.loaders[_optional_int(position)] = [Origin(_text(o)) for o in origins]
    if type(data["trained_there"]) is not bool:
        raise TypeError("trained_there")
    summary.trained_there = data["trained_there"]
    trains = data["trains"]
    summary.trains = Mode(_text(trains)) if trains is not None else None
    method = data["method"]
    summary.method = MethodsOf(_text(method[0]), _text(method[1])) if method is not None else None
    loader_params, divides, slices_items_of, slices, shares = data["batch"]
    if type(divides) is not bool:
        raise TypeError("divides")
    summary.batch = BatchUse(
        _params_in(loader_params),
        divides,
        _params_in(slices_items_of),
        _params_in(slices),
        tuple(
            (_text(attr), bool(by_count), tuple(_text(p) for p in paths))
            for attr, by_count, paths in shares
        ),
    )
    return summary
