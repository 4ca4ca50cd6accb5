"""A static view of one training project: its modules and configuration files.

Training code is rarely one file: the accelerator comes from ``train_util.prepare_accelerator``,
the optimizer from ``utils/optim.py``, the learning rate from ``configs/train.yaml``. A
:class:`Project` resolves the imports of a linted file to files of the same project and parses
each of them once per content, so the analysis can follow calls and values across modules.

Nothing is ever imported or executed: resolution is a search of the file system (or of the
in-memory sources of :meth:`Project.from_sources`) following Python's own rules for the
importer's folder, the project root, ``src/`` layouts and the configured ``src = [...]``.
Third-party and standard-library modules are never found here (they are not project files), so
they are never parsed; what distlint knows about them lives in the analysis' knowledge base.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from distlint.analysis.outline import Outline, outline
from distlint.files import file_like, read_regular
from distlint.model import FileError

if TYPE_CHECKING:  # pragma: no cover
    import libcst

    from distlint.analysis.configfiles import ConfigDoc
    from distlint.analysis.index import Index

# Files over this size are refused: not read into the analysis, not parsed (generated code,
# vendored bundles). The linted file itself is governed by the runner's own limits.
MAX_MODULE_BYTES = 1_000_000
MAX_CONFIG_BYTES = 2_000_000
# Parsed modules (trees, indexes and their Facts) of other files are kept between lints while
# they were used recently, up to this much source text together; one asked for again after it
# was let go is parsed again. A whole-tree run then holds what the last lints used, not every
# module it ever followed (a LibCST tree with its index and facts costs ~65 bytes a character).
# Measured on diffusers' tree (1,329 files, -j1): 1.5M characters kept 312 MB at the peak with
# 117 modules parsed, 750k 255 MB with 141 (no CPU difference within the noise); with shared
# dependency records, 750k peaked at 242 MB and 300k at 223 MB, CPU within 1% (64.8 / 65.3 s).
KEEP_PARSED_CHARS = 300_000
# The bytes of module files read from disk are kept while used recently, up to this much
# together; beyond it the least recently used go (their digest stays) and are read again when
# asked (the same bytes, or the file changed: what was learnt of it is forgotten). A whole-tree
# run reads every file of the run for its import lines (37 MB for diffusers' tree).
KEEP_BYTES = 8_000_000

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


class ModuleInfo:
    __slots__ = ("path", "text", "module", "index", "digest")

    def __init__(
        self,
        path: str,  # absolute, normalised
        text: str,  # decoded source
        module: libcst.Module,
        index: Index,  # built once per content
        digest: str,  # sha256 of the bytes
    ) -> None:
        self.path = path
        self.text = text
        self.module = module
        self.index = index
        self.digest = digest


def normalise(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def _as_given(*parts: Any) -> tuple[Any, ...]:
    """A memo key of a resolution asked with an importer path as given: a relative one means
    something else in another working directory, which the key then names."""
    importer = parts[1] if parts[0] == "from" else parts[0]
    return parts if os.path.isabs(importer) else (os.getcwd(), *parts)


def find_root(path: str) -> str:
    """The nearest folder at or above ``path`` holding a pyproject.toml, setup.py, setup.cfg or
    .git. Without one: the working directory when the file lies below it (the folder a user
    runs `distlint check scripts/train.py` from, as ruff takes it), else the file's own folder."""
    start = normalise(path)
    here = start if os.path.isdir(start) else os.path.dirname(start)
    found = _marked_root(here)
    if found is not None:
        return found
    cwd = normalise(os.getcwd())
    return cwd if here == cwd or here.startswith(cwd.rstrip(os.sep) + os.sep) else here


@lru_cache(maxsize=1024)
def _marked_root(here: str) -> str | None:
    current = here
    while True:
        if any(os.path.exists(os.path.join(current, m)) for m in ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


_BUSY = object()  # an answer being computed (see `Project.answer`)


class _Record:
    """What a lint, an answer or a cache entry consulted, shared instead of copied: the paths
    it consulted itself (``atoms``: paths, stand-ins, (folder, name, "1" / "0") triples of
    imports) plus the records of what it used (``parts``: cache entries, answers, inner
    frames, Facts). Immutable, so records form a DAG whose flat set (`_flatten`) is computed
    only where one is needed: a lint's dependencies, the store's write, an editor's edit.
    A lint of a diffusers script consults ~5,000 paths; copying them into every cache entry
    and answer along the way held most of a whole-tree run's memory."""

    __slots__ = ("atoms", "parts", "held", "every")

    def __init__(self, atoms: Collection[Any], parts: tuple[_Record, ...]) -> None:
        # (a few paths as a tuple: most records are one import's checks, and a frozenset of
        # three costs 216 bytes, a tuple 80; asked whether it holds a path only on an edit)
        self.atoms = tuple(atoms) if len(atoms) <= _SMALL else frozenset(atoms)
        self.parts = parts
        # what it holds through its parts, once worked out where asked again and again (see
        # `_files`, `_looked`): the atoms below it, but not below a _Looks part of a _Record
        self.held: tuple[Any, ...] | None = None
        # everything it holds, look-ups too, kept once a second flat set asked for it (see
        # `_flatten`); _ONCE after the first
        self.every: tuple[Any, ...] | None = None


_SMALL = 8


class _Looks(_Record):
    """A record of import look-ups only: its atoms and its parts' (all _Looks) are
    (folder, name, found) triples, never a file's path. Most records are these (each import
    resolved, in each folder searched); a walk for the files a lint consulted (`_files`)
    skips them."""

    __slots__ = ()


def _record_of(paths: Collection[Any], parts: tuple[_Record, ...]) -> _Record:
    """A record of ``paths`` and ``parts``: a _Looks when it holds no file's path."""
    if all(type(p) is _Looks for p in parts) and all(type(p) is tuple for p in paths):
        return _Looks(paths, parts)
    return _Record(paths, parts)


# An accumulator (`_Gather`) kept beyond one frame (a module's Facts, the pool) holds up to
# this many records by reference; beyond it they are flattened into its own paths (one set,
# bounded by the distinct paths consulted, not by how many frames it saw).
_SQUASH_PARTS = 256


class _Gather:
    """A record being gathered: paths added one at a time (``paths``), records taken whole
    (``parts``, by id: a record used again is taken once)."""

    __slots__ = ("paths", "parts")

    def __init__(self, paths: set[Any] | None = None) -> None:
        self.paths: set[Any] = set() if paths is None else paths
        self.parts: dict[int, _Record] = {}

    def take(self, record: _Record | None) -> None:
        if record is not None:
            self.parts[id(record)] = record

    def freeze(self) -> _Record | None:
        """What was gathered so far, as a record (None: nothing). The gatherer then holds
        just that record: a later freeze adds only what came after (snapshots share)."""
        paths, parts = self.paths, self.parts
        if not paths:
            if not parts:
                return None
            if len(parts) == 1:
                return next(iter(parts.values()))
        record = _record_of(paths, tuple(parts.values()))
        self.paths = set()
        self.parts = {id(record): record}
        return record

    def keep(self, record: _Record | None) -> None:
        """`take` for an accumulator that outlives frames: flattened beyond _SQUASH_PARTS."""
        self.take(record)
        if len(self.parts) > _SQUASH_PARTS:
            self.paths = _flatten(self.parts.values(), self.paths)
            self.parts = {}


def _flatten(
    records: Iterable[_Record | None],
    into: set[Any] | None = None,
    looked: bool = False,
    keep: bool = True,
) -> set[Any]:
    """Every path the ``records`` hold, themselves and through their parts (each record
    visited once), added to ``into`` (a new set by default). ``looked``: the flat sets asked
    of every lint and every stored answer (not an accumulator's squash: a run keeping no
    cache keeps none of this): what a _Looks with parts holds is kept on it (`_looked`), and
    so is what a record joining several parts holds once a second flat set reaches it (the
    lints of a tree share their answers' records: each walked hundreds of them again; a record
    kept is walked without keeping more: ``keep`` False, never a recursion deeper than one)."""
    out: set[Any] = set() if into is None else into
    seen: set[int] = set()
    stack = [r for r in records if r is not None]
    pop, push, add, update = stack.pop, stack.extend, seen.add, out.update
    while stack:
        record = pop()
        key = id(record)
        if key not in seen:
            add(key)
            if looked and record.parts:
                if type(record) is _Looks:
                    update(_looked(record))
                    continue
                every = _kept(record, keep)
                if every is not None:
                    update(every)
                    continue
            update(record.atoms)
            if record.parts:
                push(record.parts)
    return out


def _kept(record: _Record, keep: bool) -> tuple[Any, ...] | None:
    """What ``record`` (with parts) keeps of what it holds, kept now when a second flat set
    reaches a join (``keep``, under the process's bound: see `_flatten`); None: walk it."""
    every = record.every
    if every is _ONCE:
        if keep and len(record.parts) > 1 and _KEPT[0] < _KEEP:
            every = record.every = tuple(_flatten(record.parts, set(record.atoms), True, False))
            _KEPT[0] += len(every)
            return every
        return None
    if every is None and keep:
        record.every = _ONCE
    return every


_ONCE: tuple[Any, ...] = tuple(["<walked once>"])  # (a record one flat set walked: `_flatten`)
# What the records of a process keep (`every`) holds at most this many paths in all (8 bytes
# each): the joins shared most are reached, and kept, first.
_KEEP = 1 << 20
_KEPT = [0]


def _looked(record: _Record) -> tuple[Any, ...]:
    """The look-ups a _Looks holds through its parts (an import's resolution: the folders
    searched), kept on it: every lint whose record reaches a module's imports walked them."""
    held = record.held
    if held is None:
        held = record.held = _walk(record, looks=True)
    return held


def _files(records: Iterable[_Record | None]) -> set[str]:
    """The paths of files (and stand-ins: every atom that is no import look-up) the
    ``records`` hold: `_flatten` without the triples, never entering a _Looks. What a
    record that joins several others holds is kept on it once worked out (``held``): the
    lints of a tree share their answers' records, and each walked them all again."""
    out: set[Any] = set()
    update = out.update
    for record in records:
        if record is not None and type(record) is not _Looks:
            update(record.atoms)
            for part in record.parts:
                if type(part) is not _Looks:
                    known = part.held
                    if known is None:
                        known = _walk(part)
                        if sum(type(p) is not _Looks for p in part.parts) > 1:
                            part.held = known
                    update(known)
    return {p for p in out if type(p) is str}


def _walk(record: _Record, looks: bool = False) -> tuple[Any, ...]:
    """What ``record`` holds through its parts (each visited once; what a part keeps,
    ``held``, taken as it is), without what is below a _Looks part unless ``looks``."""
    out: set[Any] = set()
    seen: set[int] = set()
    stack = [record]
    pop, add, update = stack.pop, seen.add, out.update
    while stack:
        r = pop()
        key = id(r)
        if key not in seen:
            add(key)
            known = r.held
            if known is not None:
                update(known)
            else:
                update(r.atoms)
                stack += r.parts if looks else [p for p in r.parts if type(p) is not _Looks]
    return tuple(out)


class _Holds:
    """Whether records hold path ``full`` (themselves or through their parts), each record
    looked at once however many records share it (an editor's edit asks every answer)."""

    __slots__ = ("full", "known")

    def __init__(self, full: str) -> None:
        self.full = full
        self.known: dict[int, bool] = {}

    def __call__(self, root: _Record | None) -> bool:
        if root is None:
            return False
        known, full = self.known, self.full
        stack: list[tuple[_Record, bool]] = [(root, False)]
        while stack:
            record, done = stack.pop()
            key = id(record)
            if done:  # (its parts are known now: a DAG has no cycle back to it)
                known[key] = any(known[id(p)] for p in record.parts)
            elif key not in known:
                if full in record.atoms:
                    known[key] = True
                else:
                    known[key] = False  # (until its parts are known)
                    stack.append((record, True))
                    stack += [(p, False) for p in record.parts if id(p) not in known]
        return known[id(root)]


class Answer:
    """A memoised answer and what its computation consulted (see `Project.answer`).
    ``clean``: it depends on nothing but those files (not on the order of questions, nor on
    what other answers hold), so it may be stored on disk."""

    __slots__ = ("value", "record", "clean")

    def __init__(self, value: Any, record: _Record | None, clean: bool) -> None:
        self.value = value
        self.record = record
        self.clean = clean


class _Frame(_Gather):
    """A lint or an answer being computed: what it consulted so far (``paths``, ``parts``),
    the modules parsed for it (``loaded``), the Facts handed to it (``used``, by id), and
    whether it may be stored (``clean``)."""

    __slots__ = ("key", "loaded", "used", "merged", "clean")

    def __init__(self, key: Any = None) -> None:
        super().__init__()
        self.key = key
        self.loaded: set[str] = set()
        self.used: dict[int, Any] = {}
        self.merged: dict[int, Answer] = {}
        self.clean = True


class Project:
    """Static view of one training project. Never imports or executes anything."""

    tracks_dependencies = True  # `module(path, touch=False)`: see `tracking`

    def __init__(
        self,
        root: str,
        src: Iterable[str] = (),
        *,
        sources: Mapping[str, str | bytes] | None = None,
        overlay: Mapping[str, str] | None = None,
        src_base: str | None = None,
    ) -> None:
        self.root = normalise(root)
        base = normalise(src_base) if src_base is not None else self.root
        # Search folders for absolute imports after the importer's own folder: the root, the
        # configured `src` entries (relative to the configuration's folder), then `root/src`.
        roots = [self.root]
        roots += [normalise(os.path.join(base, s)) for s in src]
        roots.append(os.path.join(self.root, "src"))
        self.search_roots: tuple[str, ...] = tuple(dict.fromkeys(roots))
        self.errors: list[FileError] = []
        self.memo: dict[Any, Any] = {}
        self._memory: dict[str, bytes] | None = None
        self._memory_dirs: set[str] = set()
        if sources is not None:
            self._keep_sources(sources)
        self._overlay: dict[str, bytes] = {}
        for p, text in (overlay or {}).items():
            self.set_overlay(p, text)
        self._data: dict[str, bytes | None] = {}  # path -> bytes read (None: unreadable)
        # module files read from disk whose bytes are in `_data`, least recently used first ->
        # their size; and those whose bytes were let go (see KEEP_BYTES)
        self._held: dict[str, int] = {}
        self._held_bytes = 0
        self._away: set[str] = set()
        self.reread_count = 0  # bytes read again after they were let go (benchmarks, tests)
        self._stats: dict[str, tuple[int, int]] = {}  # path -> (mtime_ns, size) when read
        self._modules: dict[str, ModuleInfo | None] = {}
        # paths of parsed modules in `_modules`, least recently used first -> their text's length
        self._kept: dict[str, int] = {}
        self._kept_chars = 0
        self._configs: dict[str, Any] = {}
        self._parsed: dict[str, tuple[Any, Any]] = {}  # digest -> (module, index)
        self._error_keys: set[tuple[str, str]] = set()
        self._isfile: dict[str, bool] = {}
        self._isdir: dict[str, bool] = {}
        self._found: dict[tuple[str, str], str | None] = {}  # (folder, module) -> `_find`
        # folder -> (the run it was listed in, `_entries`): listed again in a later run (a
        # long-lived process: a path first asked then sees a file created since)
        self._folder_entries: dict[str, tuple[int, dict[str, str] | None]] = {}
        # (importer, module, level) and ("from", importer, module, name, level) -> path, by the
        # importer as given (when absolute); ("in" / "from-in", its folder, ...) -> path
        self._resolved: dict[tuple[str, ...] | tuple[str, str, int], str | None] = {}
        # path -> the project modules its import lines resolve to (its text is in `_data`:
        # not kept twice); path -> (the words asked so far, those of them its text writes)
        # (see `words_reached`, `imported_words`)
        self._scans: dict[str, tuple[str, ...]] = {}
        self._words: dict[str, tuple[set[str], set[str]]] = {}
        self._init_tracking()
        # start path -> the search of the project modules its imports reach (line scan)
        self._closures: dict[str, _Search] = {}
        # path -> its text outline (None: not readable with confidence; see `name_may_write`)
        self._outlines: dict[str, Outline | None] = {}
        self._may_write: dict[tuple[Any, str, str], bool] = {}
        # (spellings, (path, name)) -> True (reaches a definition writing one by itself) or the
        # words of the spellings it reaches (a superset), from earlier searches
        self._reach: dict[tuple[Any, tuple[str, str]], Any] = {}
        # (path, name) -> (words its definition writes, the (path, name) pairs they may mean)
        self._uses: dict[tuple[str, str], tuple[frozenset[str], tuple[tuple[str, str], ...]]] = {}
        self.parse_count = 0  # modules parsed by this project (benchmarks, tests)
        # paths checked against the disk since the run began (see `_stale`, `begin_run`)
        self._fresh: set[str] = set()
        self._depth = 0  # `tracking` blocks open (a lint in progress)
        self.stat_count = 0  # `_stale` checks that stat'ed a file (benchmarks, tests)
        # modules whose parse an analysis asked for (`module`): what a lint *reached*, as
        # opposed to modules only line-scanned for words (see `tracking`, `reached`)
        self._loaded: set[str] = set()
        self.reached: tuple[str, ...] = ()  # of the last `tracking` block
        self._reported: set[tuple[str, str]] = set()
        self.run_number = 0  # counts begin_run: memos of run-dependent facts are per run
        # module path -> the files of this run importing it (see `run_importers`)
        self._importers: dict[str, list[str]] | None = None

    def _init_tracking(self) -> None:
        """The state of dependency tracking and of the answer store (see `tracking`, `answer`)."""
        # dependency tracking (see `tracking`, `answer`)
        self._digests: dict[str, str] = {}
        # the lints and answers being computed, innermost last: what each consults
        self._frames: list[_Frame] = []
        # every path a lint consulted (`dependencies`; a pair: a path an import looked at)
        self._consulted: set[str | tuple[str, str, str]] = set()
        # what every lint consulted since Facts were first handed to a caller that keeps them
        # (the run's importers, see `handed_out`): theirs, and their holders'
        self._pool: _Gather | None = None
        # what the resolution caches' entries consulted (folder listings), replayed on a hit
        # (records: an entry built from others shares theirs)
        self._found_deps: dict[tuple[str, str], _Record | None] = {}
        self._resolved_deps: dict[Any, _Record | None] = {}
        self._scan_deps: dict[str, _Record | None] = {}
        self._uses_deps: dict[tuple[str, str], _Record | None] = {}
        self._may_write_deps: dict[Any, _Record | None] = {}
        self._reach_deps: dict[Any, _Record | None] = {}
        # the keys of `_may_write` and `_reach` ("write" / "reach", key) learnt in an earlier
        # run whose modules this run has not checked against the disk yet (`_search_fresh`)
        self._searches_unchecked: set[tuple[str, Any]] = set()
        self._searched_files: dict[tuple[str, Any], frozenset[str]] = {}  # `_search_files`
        self._listings: dict[str, str] = {}  # folder -> `listing_digest`, once per run
        self._checked: dict[str, bool] = {}  # the store's dependency sets checked in this run
        # the answer store on disk (see distlint.cache.AnswerStore; None: memory only)
        self.answers: Any = None
        # answers asked: found in memory, read from the store, computed, written to the store
        self.answer_counts = {"memory": 0, "disk": 0, "computed": 0, "stored": 0}

    def _keep_sources(self, sources: Mapping[str, str | bytes]) -> None:
        """The files of an in-memory project, and the folders holding them."""
        self._memory = {}
        for rel, content in sources.items():
            full = normalise(os.path.join(self.root, rel))
            self._memory[full] = content.encode("utf-8") if isinstance(content, str) else content
            parent = os.path.dirname(full)
            while parent not in self._memory_dirs:
                self._memory_dirs.add(parent)
                up = os.path.dirname(parent)
                if up == parent:
                    break
                parent = up

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_sources(
        cls, root: str, files: Mapping[str, str | bytes], src: Iterable[str] = ()
    ) -> Project:
        """A project whose files live in memory (tests): ``{"relpath.py": "source", ...}``.
        Nothing on disk is consulted."""
        return cls(root, src, sources=files)

    @classmethod
    def for_path(cls, path: str, config: Any = None) -> Project:
        """The project of file ``path``: root found from the file, ``src`` from the config."""
        src = tuple(getattr(config, "src", ()) or ())
        return cls(find_root(path), src, src_base=getattr(config, "root", None))

    # ------------------------------------------------------------------ file access
    def set_overlay(self, path: str, text: str | bytes | None) -> None:
        """Use ``text`` instead of the file on disk (an editor's open buffer); None: the disk."""
        full = normalise(path)
        data = text.encode("utf-8") if isinstance(text, str) else text
        if self._overlay.get(full) == data:
            return  # unchanged: keep what was parsed and memoised
        shown = full in self._overlay  # (a buffer edited again names the same file)
        if data is None:
            self._overlay.pop(full, None)
        else:
            self._overlay[full] = data
        self.refresh(full, shown)

    def refresh(self, path: str, existed: bool = False) -> None:
        """Forget what was read of ``path`` (it changed on disk or in an editor), and what was
        learnt from it. A file that existed and still does resolves the same imports, so only
        what its text decided goes: an edit of a training script keeps the scans, outlines and
        analysis of the helper modules it follows (see :meth:`_forget_analysis`). ``existed``:
        the file is known to have existed (an open buffer's)."""
        full = normalise(path)
        existed = existed or self._isfile.get(full) is True or self._was_read(full)
        old = self._digest_of(full) if self._parsed else None
        if old is not None and sum(d == old for d in self._digests.values()) == 1:
            self._parsed.pop(old, None)  # an editor's every keystroke must not stay parsed
        self._drop_bytes(full)
        self._stats.pop(full, None)
        self._modules.pop(full, None)
        self._kept_chars -= self._kept.pop(full, 0)
        self._configs.pop(full, None)
        self._isfile.pop(full, None)
        self._digests.pop(full, None)
        if existed and self.is_file(full):
            self._forget_text(full)
            self._forget_searches(full)
        else:  # a file that appeared or went: an import may now resolve elsewhere
            self._forget_resolutions()
            self._forget_searches(None)
        self._importers = None
        self.run_number += 1  # what the run's files pass a helper's functions is asked again
        self._outlines.pop(full, None)
        self._checked.clear()
        self._error_keys = {k for k in self._error_keys if k[0] != full}
        self.errors = [e for e in self.errors if e.path != full]

    def _forget_text(self, full: str) -> None:
        """`refresh` of a file that existed and still does: what its text decided goes."""
        self._scans.pop(full, None)
        self._scan_deps.pop(full, None)
        self._words.pop(full, None)
        self._closures = {k: v for k, v in self._closures.items() if full not in v.seen}
        self._uses = {k: v for k, v in self._uses.items() if k[0] != full}
        self._uses_deps = {k: v for k, v in self._uses_deps.items() if k[0] != full}
        self._forget_analysis(full)

    def _forget_resolutions(self) -> None:
        """`refresh` of a file that appeared or went: every resolution and what followed it."""
        self._found.clear()
        self._resolved.clear()
        self._scans.clear()
        self._words.clear()
        self._closures.clear()
        self._uses.clear()
        self.memo.clear()
        for recorded in (self._found_deps, self._resolved_deps, self._scan_deps):
            recorded.clear()
        self._uses_deps.clear()
        self._listings.clear()

    def _forget_analysis(self, full: str) -> None:
        """Drop the memoised analysis (``memo``) that depends on module ``full``: the answers
        whose computation consulted it, the Facts of modules whose answers did (what they
        cached may hold it) with the answers keyed by their trees' nodes, and entries that
        record nothing of what they consulted."""
        memo = self.memo
        kept: set[int] = set()  # ids of the indexes whose Facts stay
        holds = _Holds(full)  # (records shared by answers and Facts are looked at once)
        for key in [k for k in memo if type(k) is tuple and k and k[0] == "facts"]:
            consulted = memo[key].__dict__.get("_consulted")
            if (
                consulted is None
                or full in consulted.paths
                or any(holds(r) for r in consulted.parts.values())
                or normalise(key[1]) == full
            ):
                del memo[key]
            else:
                kept.add(key[2])
        for key, owner in _memo_owners(memo).items():
            value = memo[key]
            if type(value) is Answer:
                if holds(value.record):
                    del memo[key]
            elif owner is None or owner not in kept:
                del memo[key]

    def is_file(self, path: str) -> bool:
        found = self._isfile.get(path)
        if found is None:
            if path in self._overlay:
                found = True
            elif self._memory is not None:
                found = path in self._memory
            else:
                found = file_like(path)  # a FIFO too: refused with its reason when read
            self._isfile[path] = found
        return found

    def is_dir(self, path: str) -> bool:
        found = self._isdir.get(path)
        if found is None:
            if self._memory is not None:
                found = path in self._memory_dirs
            else:
                found = os.path.isdir(path)
            self._isdir[path] = found
        return found

    def read_bytes(self, path: str, limit: int | None = None) -> bytes | None:
        """The bytes of a project file, read once (a module's read again when they were let
        go: see KEEP_BYTES); None (and one recorded error) when the file is unreadable or over
        ``limit`` bytes."""
        return self._read_full(normalise(path), limit)

    def _read_full(self, full: str, limit: int | None = None) -> bytes | None:
        """`read_bytes` of a path already normalised."""
        data: bytes | None
        if full in self._data:
            data = self._data[full]
            if full in self._held:  # used now: the last to be let go
                self._held[full] = self._held.pop(full)
            return data
        if full in self._away:
            return self._read_again(full)
        held = limit is None and full not in self._overlay and self._memory is None
        if limit is None:
            limit = MAX_MODULE_BYTES
        if full in self._overlay:
            data = self._overlay[full]
        elif self._memory is not None:
            data = self._memory.get(full)
            if data is None:
                self._error(full, "no such file")
        else:
            data = self._read_now(full, limit)
        if data is not None and len(data) > limit:
            self._error(full, f"{len(data)} bytes, over the {limit}-byte limit: not analysed")
            data = None
        self._data[full] = data  # its digest is computed when asked (_digest_of)
        if held and data:
            self._hold(full, data)
        return data

    def _was_read(self, full: str) -> bool:
        """Bytes of ``full`` were read (held now, or let go)."""
        return self._data.get(full) is not None or full in self._away

    def _drop_bytes(self, full: str) -> None:
        self._data.pop(full, None)
        self._held_bytes -= self._held.pop(full, 0)
        self._away.discard(full)

    def _read_now(self, full: str, limit: int) -> bytes | None:
        """The bytes of file ``full`` on disk now (its size and time recorded: see `_stale`);
        None, with the error recorded, when unreadable or over ``limit`` bytes."""
        try:
            st = os.stat(full)
            self._stats[full] = (st.st_mtime_ns, st.st_size)
            size = st.st_size
            if size > limit:
                self._error(full, f"{size} bytes, over the {limit}-byte limit: not analysed")
                return None
            return read_regular(full, limit)  # never a FIFO, a device: one line
        except OSError as exc:
            self._error(full, f"cannot read: {exc.strerror or exc}")
        return None

    def _hold(self, full: str, data: bytes) -> None:
        """Keep the bytes of module ``full`` (read from disk), letting the least recently used
        go beyond KEEP_BYTES: their digest is kept, the bytes read again when asked."""
        self._held[full] = len(data)
        self._held_bytes += len(data)
        while self._held_bytes > KEEP_BYTES and len(self._held) > 1:
            old = next(iter(self._held))
            self._digest_of(old)  # (what it was: checked when read again)
            self._held_bytes -= self._held.pop(old)
            del self._data[old]
            self._away.add(old)

    def _read_again(self, full: str) -> bytes | None:
        """The bytes of module ``full``, let go after they were read: read again, and when the
        file changed since (its digest differs), forgotten as `_stale` does first."""
        known = self._digests.get(full)
        self._away.discard(full)
        data = self._read_now(full, MAX_MODULE_BYTES)
        self.reread_count += 1
        if data is None or known is None or _digest(data) != known:
            stats = self._stats.get(full)
            self.refresh(full)
            if stats is not None:
                self._stats[full] = stats
        self._data[full] = data
        if data:
            self._hold(full, data)
        return data

    def spells(self, path: str, word: str) -> bool:
        """Module ``path``'s text writes ``word`` (as its text decodes), read without parsing
        it: a question that only text spelling ``word`` can answer need not parse the module.
        The text is a dependency of the lint asking, as a parse of it would be."""
        full = normalise(path)
        self._touch(full)
        if full in self._data or full in self._away:
            self._stale(full)  # changed on disk since it was read: read again
        return bool(_spelled(frozenset((word,)), self.read_bytes(full)))

    def _stale(self, full: str) -> bool:
        """The file changed on disk since it was read (a long-lived process: the language
        server, a test session): forget it, so it is read and parsed again."""
        if self._depth:  # within a lint: each file checked once per run (see `begin_run`)
            if full in self._fresh:
                return False
            self._fresh.add(full)
        known = self._stats.get(full)
        if known is None:
            return False  # in memory, an open buffer, or unreadable
        self.stat_count += 1
        try:
            st = os.stat(full)
            now = (st.st_mtime_ns, st.st_size)
        except OSError:
            now = None
        if now == known:
            return False
        self.refresh(full)
        return True

    def digest(self, path: str) -> str | None:
        full = normalise(path)
        self.read_bytes(full)
        return self._digest_of(full)

    def _digest_of(self, full: str) -> str | None:
        """The digest of what was read of ``full`` (None: nothing was), computed once."""
        if full.endswith(RUN_IMPORTERS):
            return self.importers_digest(full[: -len(RUN_IMPORTERS)])
        if full.endswith(LISTING):
            return self.listing_digest(full[: -len(LISTING)])
        digest = self._digests.get(full)
        if digest is None:
            data = self._data.get(full)
            if data is not None:
                digest = self._digests[full] = _digest(data)
        return digest

    def _error(
        self, path: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        key = (path, message)
        if key in self._error_keys:
            return
        self._error_keys.add(key)
        self.errors.append(FileError(path, message, line, column))

    # ------------------------------------------------------------------ modules
    def _reached_module(self, full: str, touch: bool = True) -> None:
        """Module ``full`` is reached by the lint (and the answer) under way, and, with
        ``touch``, a dependency of it."""
        if touch:
            self._touch(full)
        self._loaded.add(full)
        if self._frames:
            self._frames[-1].loaded.add(full)

    def module(self, path: str, touch: bool = True) -> ModuleInfo | None:
        """Parsed once per content (cached; see KEEP_PARSED_CHARS). None when unreadable,
        unparsable or over the size bounds; the error is recorded once in ``errors``. Cycles
        are the caller's memo's job. ``touch=False``: not a dependency of the lint asking (what
        it asks was reached through an answer whose own lint counted the module)."""
        full = normalise(path)
        self._reached_module(full, touch)
        if full in self._modules and not self._stale(full):
            info = self._modules[full]
        else:
            if full in self._data or full in self._away:
                self._stale(full)  # its bytes were read before (an import scan): still them?
            info = self._modules[full] = self._load_module(full)
        if info is not None:
            self._keep(full, len(info.text))
        return info

    def _keep(self, full: str, size: int) -> None:
        """``full`` was used now: the last to be let go."""
        known = self._kept.pop(full, None)
        if known is None:
            self._kept_chars += size
        self._kept[full] = size

    def _let_go(self, budget: int) -> None:
        """Between lints: forget the parses of the least recently used modules beyond
        ``budget`` characters of their text (their trees, indexes and Facts; what was learnt
        of them as plain data stays).

        A module's Facts and index point at each other (and its scopes at their bindings):
        their cycles are broken here (``release``), so reference counting frees the parse at
        once, with no walk of everything alive by the cyclic collector (the lints keep it
        paused). Nothing outside the project holds them between lints: a lint's analysis
        keeps other modules' facts only while it runs (callers are kept as paths)."""
        gone: dict[int, Any] = {}  # id(index) -> index, of parses no module holds now
        let_go: set[tuple[str, int]] = set()  # (path, id(index)) of the modules let go
        while self._kept_chars > budget and self._kept:
            full = next(iter(self._kept))
            self._kept_chars -= self._kept.pop(full)
            info = self._modules.pop(full, None)
            if info is None:
                continue
            let_go.add((full, id(info.index)))
            if not any(i is not None and i.digest == info.digest for i in self._modules.values()):
                if self._parsed.pop(info.digest, None) is not None:
                    gone[id(info.index)] = info.index
        if let_go:
            self._release(let_go, gone)

    def _release(self, let_go: set[tuple[str, int]], gone: dict[int, Any]) -> None:
        """Release the Facts of the modules ``let_go`` ((path, id(index))) and the indexes
        ``gone``; drop the answers keyed by the nodes of their trees."""
        facts = []
        for key in [k for k in self.memo if type(k) is tuple and k[0] in _BY_INDEX]:
            if key[0] == "facts":
                if (key[1], key[2]) in let_go:
                    facts.append(self.memo.pop(key))
            elif key[-2] in gone:  # answers about nodes of a tree let go: never asked again
                del self.memo[key]
        for held in facts:
            held.release()
        for index in gone.values():
            index.release()

    def add_module(
        self, path: str, data: bytes, module: Any = None, index: Any = None
    ) -> ModuleInfo | None:
        """Register the linted file's own parse (the runner parsed it already): a whole-tree
        run then parses every module once, whether it is linted or imported first."""
        full = normalise(path)
        digest = _digest(data)
        known = self._modules.get(full)
        if known is not None and known.digest == digest:
            return known
        if (full in self._data or full in self._away) and self._digest_of(full) != digest:
            self.refresh(full)  # the linted text differs from what was read before
        self._held_bytes -= self._held.pop(full, 0)  # (held here whatever its source)
        self._away.discard(full)
        self._data[full] = data
        self._digests[full] = digest
        if self._memory is None and full not in self._overlay:
            try:  # a later change on disk must be noticed (see `_stale`)
                st = os.stat(full)
                if st.st_size == len(data):
                    self._stats[full] = (st.st_mtime_ns, st.st_size)
            except OSError:
                pass
        if module is not None and index is not None:
            self._parsed.setdefault(digest, (module, index))
        info = self._load_module(full)
        self._modules[full] = info
        return info

    def parsed(self, path: str, data: str | bytes) -> tuple[Any, Any] | None:
        """(module, index) of ``data`` when this project already parsed that content."""
        if not self._parsed:
            return None  # nothing parsed yet: no digest to compute
        raw = data if isinstance(data, bytes) else data.encode("utf-8")
        return self._parsed.get(_digest(raw))

    def _load_module(self, full: str) -> ModuleInfo | None:
        data = self.read_bytes(full)
        if data is None:
            return None
        digest = self._digest_of(full)
        assert digest is not None  # the bytes were read
        parsed = self._parsed.get(digest)
        from distlint.parse import decode_source

        decoded = decode_source(data, full)
        if isinstance(decoded, FileError):
            self._error(full, decoded.message)
            return None
        text = decoded[0]
        if parsed is None:
            parsed = self._parse(full, data, text)
            if parsed is None:
                return None
            self._parsed[digest] = parsed
        module, index = parsed
        return ModuleInfo(full, text, module, index, digest)

    def _parse(self, full: str, data: bytes, text: str) -> tuple[Any, Any] | None:
        from distlint.analysis.index import Index
        from distlint.parse import parse

        parsed = parse(text, full, source=data, checked=False)
        if isinstance(parsed, FileError):
            self._error(full, parsed.message, parsed.line, parsed.column)
            return None
        self.parse_count += 1
        module, source = parsed
        try:  # a module the analysis cannot take is reported like one LibCST cannot parse
            return module, Index(module, text, source if source.cuts else None)
        except RecursionError:
            self._error(full, "source is too deeply nested to parse")
        except Exception as exc:
            self._error(full, f"cannot parse: {exc}")
        return None

    # ------------------------------------------------------------------ config files
    def config_file(self, path: str) -> ConfigDoc | None:
        """A YAML / JSON / TOML file parsed once (see :mod:`distlint.analysis.configfiles`);
        None when missing, unreadable or invalid (the error recorded once)."""
        from distlint.analysis import configfiles

        full = normalise(path)
        if not self.is_file(full):
            return None
        self._touch(full)
        if full in self._configs and not self._stale(full):
            known: ConfigDoc | None = self._configs[full]
            return known
        data = self.read_bytes(full, MAX_CONFIG_BYTES)
        doc = None
        if data is not None:
            try:
                doc = configfiles.parse(full, data)
            except configfiles.ConfigFileError as exc:
                self._error(full, exc.message, exc.line)
        self._configs[full] = doc
        return doc

    # ------------------------------------------------------------------ trigger words
    def imported_words(
        self, path: str, text: str, wanted: set[str], depth: int = 2
    ) -> Iterator[set[str]]:
        """The words of ``wanted`` written in each project module ``text`` (the file ``path``)
        imports, and in theirs up to ``depth`` levels, one module at a time (imports found by
        a line scan before anything is parsed): a rule whose trigger word is only in a helper
        module (a seeding helper, a loader factory) still runs on the file that calls it.

        ``wanted`` is the caller's: it may take out words between modules (a rule already
        awake needs its words no more), and a module's text is searched only for the words
        still wanted, each word once per module in a run. Every module yielded is a
        dependency of the lint; the caller stops the iteration once it knows enough."""
        start = normalise(path)
        seen = {start}
        frontier = [self._scan_text(start, text)[1]]
        for level in range(depth):
            following = []
            last = level == depth - 1  # the imports of these are not followed: not scanned
            for targets in frontier:
                for target in targets:
                    if target in seen:
                        continue
                    seen.add(target)
                    self._touch(target)  # a dependency of the lint (cache key, editor)
                    data = self._read_full(target)  # (the import scan's paths: normalised)
                    if data:
                        yield self._written(target, wanted, data)
                        if not last:
                            following.append(self._targets(target))
            frontier = following

    def _written(self, full: str, words: Collection[str], data: bytes | None) -> set[str]:
        """The ``words`` module ``full`` writes (its bytes ``data``): each word searched for
        once per module (forgotten when its text changes)."""
        known = self._words.get(full)
        if known is None:
            known = self._words[full] = (set(), set())
        asked, written = known
        if not asked.issuperset(words):
            new = frozenset(w for w in words if w not in asked)
            written |= _spelled(new, data)
            asked |= new
        return written.intersection(words)

    def words_reached(
        self,
        path: str,
        vocabulary: frozenset[str],
        enough: Callable[[frozenset[str]], bool] | None = None,
    ) -> frozenset[str]:
        """The words of ``vocabulary`` written in module ``path`` or in a project module it
        imports, directly or through others (imports found by the line scan; nothing parsed).

        A value made in another module is reached through imports whose texts spell its name:
        when no module reachable from ``path`` writes `Accelerator`, no call ``path`` makes
        into the project can return one, and the analysis need not summarise those calls.
        ``enough``: the caller's question is answered once it holds of the words found so far,
        and the search stops there (nearest modules first): more words cannot change a yes.
        Every module read is a dependency of the lint; one changed on disk since it was read
        is read again (a long-lived process)."""
        start = normalise(path)
        while True:
            found = self._search(start, vocabulary, enough)
            if found is not None:
                return found

    def _search(
        self,
        start: str,
        vocabulary: frozenset[str],
        enough: Callable[[frozenset[str]], bool] | None,
    ) -> frozenset[str] | None:
        """One breadth-first search of `words_reached`, resumed where an earlier one stopped:
        each module is scanned once, only when a search gets to it. None: a module changed on
        disk (forgotten with every search): search again."""
        search = self._closures.get(start)
        if search is None:
            search = self._closures[start] = _Search(start)
        order = search.order
        words: set[str] = set()
        i = 0
        while i < len(order):  # (grows while iterated)
            full = order[i]
            if self._stale(full):
                return None
            self._touch(full)
            scan = self._targets(full)
            if i >= search.scanned:
                for target in scan:
                    if target not in search.seen:
                        search.seen.add(target)
                        order.append(target)
                search.scanned = i + 1
            own = self._written(full, vocabulary, self.read_bytes(full))
            if own:
                words |= own
                if enough is not None and enough(frozenset(words)):
                    break
            i += 1
        return frozenset(words)

    def _targets(self, full: str) -> tuple[str, ...]:
        """The project modules the import lines of module ``full`` resolve to, scanned once."""
        found = self._scans.get(full)
        if found is None:
            frame = self._record()
            try:
                data = self.read_bytes(full)
                text = data.decode("utf-8", "replace") if data is not None else ""
                found = self._scans[full] = self._scan_text(full, text)[1] if text else ()
            finally:
                self._scan_deps[full] = self._recorded(frame)
        else:
            self._replay(self._scan_deps.get(full))
        return found

    def _scan_text(self, full: str, text: str) -> tuple[str, tuple[str, ...]]:
        """``text`` and the project modules its import lines resolve to (from file ``full``)."""
        targets: dict[str, None] = {}
        here = os.path.dirname(full)  # (normalised: its folder is asked directly)
        for module, names, level in _IMPORT_LINE.scan(text):
            for target in self._import_targets(here, module, names, level):
                targets[target] = None
        return text, tuple(targets)

    def _import_targets(
        self, here: str, module: str, names: list[str], level: int
    ) -> Iterator[str]:
        """The project modules one import line of a module in folder ``here`` resolves to."""
        if not names:  # `import a.b`
            hit = self._import_in(here, module, 0)
            if hit is not None:
                yield hit
            return
        # `from pkg import x` / `from . import x`: the package (x may be defined there) ...
        hit = self._import_in(here, module, level) if module or level else None
        if hit is not None:
            yield hit
        folder = self._package_folder(here, module, level)  # found once for all the names
        if folder is None:
            return
        for name in names:  # `from pkg import mod`: a submodule file
            sub = self._submodule(folder, name)
            if sub is not None:
                yield sub

    def reexport_of(self, path: str, name: str) -> tuple[str, str] | None:
        """The (project module, name) that ``name`` of module ``path`` only re-exports, read
        from its outline: the module defines no function or class ``name`` and binds it at
        module level, and anywhere else, only by `from ... import` statements naming the same
        module and name (a package `__init__` forwarding what a submodule defines). What its
        summary would be is then that one's: the module need not be parsed for it. None: no
        such binding, or the text cannot tell (parse it). The module is consulted and counts
        as reached, as its parse would."""
        full = normalise(path)
        self._reached_module(full)
        if self._stale(full):
            self._outlines.pop(full, None)
        info = self._outline(full)
        if info is None or name in info.defs or name not in info.module_imports:
            return None
        targets = {(imp.module, imp.name, imp.level) for imp in info.imports.get(name, ())}
        if len(targets) != 1:
            return None
        module, imported, level = targets.pop()
        if imported is None or imported == "*":
            return None  # `import pkg.mod as name`: a module, no name in one
        found = self.resolve_import(full, module, level)
        return (found, imported) if found is not None else None

    # ------------------------------------------------------------------ one name's text
    def name_may_write(self, path: str, name: str, spellings: Any) -> bool:
        """The definition of ``name`` in module ``path`` may reach one of ``spellings`` (a
        :class:`~distlint.analysis.common._Spellings`): its text, the module-level code and
        the imports of the names it uses, and the definitions of those in other project
        modules, followed transitively, write both parts of one of the spellings. False means
        no summary of ``name`` can hold what the spellings name, so the module need not be
        parsed for it; a text the outline cannot read answers True (parse it)."""
        full = normalise(path)
        key = (spellings, full, name)
        found = self._may_write.get(key)
        if found is not None and not self._search_fresh("write", key):
            found = None  # (a module it read changed on disk)
        if found is None:
            frame = self._record()
            try:
                while True:
                    found = self._name_closure(full, name, spellings)
                    if found is not None:
                        break
            finally:
                self._may_write_deps[key] = self._recorded(frame)
            self._may_write[key] = found
            self._searched("write", key)
        else:
            self._replay(self._may_write_deps.get(key))
        return found

    def _name_closure(self, start: str, name: str, spellings: Any) -> bool | None:
        """One search of `name_may_write`; None: a module changed on disk (search again).

        What one search learns serves the next (a chain of helpers asked link by link stays
        linear): a name that reaches a definition writing a whole spelling by itself answers
        yes, and so does every name on the way to it; a search that ends in no leaves, for
        each name it visited, the words it found (a superset of what that name reaches)."""
        pairs = spellings
        known = self._reach
        words: set[str] = set()
        via: dict[tuple[str, str], tuple[str, str] | None] = {}
        todo: list[tuple[tuple[str, str], tuple[str, str] | None]] = [((start, name), None)]
        while todo:
            item, parent = todo.pop()
            if item in via:
                continue
            via[item] = parent
            if self._stale(item[0]):
                return None
            self._touch(item[0])
            found: Any = known.get((pairs, item))  # True, a set of words, or None
            if found is not None and not self._search_fresh("reach", (pairs, item)):
                return None  # a module it read changed on disk: what was found may be stale
            if found is not None:
                self._replay(self._reach_deps.get((pairs, item)))  # what learnt it consulted
            else:
                uses = self._uses_at(item)
                if uses is None:
                    return True  # a text the outline cannot read: ask the parse
                written, following = uses
                found = spellings.among(written)
                if found and spellings.written_in(found):
                    found = True
                todo += [(f, item) for f in following]
            if found is True:
                step: tuple[str, str] | None = item
                deps = self._consulted_now()
                while step is not None:  # every name on the way reaches it too
                    known[(pairs, step)] = True
                    self._reach_deps[(pairs, step)] = deps
                    self._searched("reach", (pairs, step))
                    step = via[step]
                return True
            words |= found
            if spellings.written_in(words):
                return True
        reached = frozenset(words)
        deps = self._consulted_now()
        for item in via:
            known[(pairs, item)] = reached
            self._reach_deps[(pairs, item)] = deps
            self._searched("reach", (pairs, item))
        return False

    def _searched(self, kind: str, key: Any) -> None:
        """A name search's answer was (re)learnt in this run: fresh until the next."""
        self._searches_unchecked.discard((kind, key))
        self._searched_files.pop((kind, key), None)

    def _search_fresh(self, kind: str, key: Any) -> bool:
        """Does the answer of a name search (`_may_write` for ``kind`` "write", `_reach` for
        "reach") still hold, at its first use in a run: is every module it read unchanged on
        disk? One that changed is read again (`_stale`), which forgets the answers that read
        it (`_forget_searches`)."""
        if (kind, key) not in self._searches_unchecked:
            return True
        self._searches_unchecked.discard((kind, key))
        memo: dict[Any, Any] = self._may_write if kind == "write" else self._reach
        files = self._search_files(kind, key)
        if files is None:
            memo.pop(key, None)
            return False
        for path in files:
            self._stale(path)
        return key in memo

    def _search_files(self, kind: str, key: Any) -> frozenset[str] | None:
        """The files a name search's answer read (None: not recorded), worked out once."""
        known = self._searched_files.get((kind, key))
        if known is None:
            deps = self._may_write_deps if kind == "write" else self._reach_deps
            record = deps.get(key)
            if record is None:
                return None
            known = self._searched_files[(kind, key)] = frozenset(_files((record,)))
        return known

    def _forget_searches(self, full: str | None) -> None:
        """Forget what name searches learnt from file ``full``: the answers whose search read
        it (None: every answer)."""
        pairs: tuple[tuple[str, dict[Any, Any], dict[Any, Any]], ...] = (
            ("write", self._may_write, self._may_write_deps),
            ("reach", self._reach, self._reach_deps),
        )
        for kind, memo, deps in pairs:
            if full is None:
                memo.clear()
                deps.clear()
                continue
            for key in list(memo):
                files = self._search_files(kind, key)
                if files is None or full in files:
                    del memo[key]
                    deps.pop(key, None)
                    self._searched_files.pop((kind, key), None)
        if full is None:
            self._searched_files.clear()

    def _uses_at(
        self, item: tuple[str, str]
    ) -> tuple[frozenset[str], tuple[tuple[str, str], ...]] | None:
        """`_uses_of` the (path, name), once; None when the module's text cannot be read
        with confidence; nothing for an unreadable module (it has no summary either)."""
        uses = self._uses.get(item)
        if uses is None:
            info = self._outline(item[0])
            if info is None:
                if item[0] in self._outlines:
                    return None
                uses = (frozenset(), ())
            else:
                frame = self._record()
                try:
                    uses = self._uses_of(item[0], info, item[1])
                finally:
                    self._uses_deps[item] = self._recorded(frame)
            self._uses[item] = uses
        else:
            self._replay(self._uses_deps.get(item))
        return uses

    def _uses_of(
        self, path: str, info: Outline, ident: str
    ) -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
        """What the name ``ident`` of module ``path`` is written with, and the (module, name)
        pairs those words may stand for."""
        texts = list(info.defs.get(ident, ()))
        headers = info.headers.get(ident, ())
        texts += [info.module_lines[i] for i in info.by_ident.get(ident, ())]
        used: set[str] = {ident}
        called: set[str] = {ident}
        keys: set[str] = set()
        for begin, end in headers:
            # a base class, a decorator, a default; not an annotation: a type names no value
            # (`optimizer: Optimizer` makes no optimizer, `unet: UNet2DConditionModel` leads
            # to no model's module)
            header = info.header_words(begin, end)
            used |= header
            called |= header
        starts = {begin: end for begin, end in headers}
        for begin, end in texts:
            body = starts.get(begin, begin)  # (a definition's text after its header)
            used |= info.words(body, end)
            called |= info.called(body, end)
            keys |= info.keys_in(begin, end)  # `os.environ["RANK"]`: written, names nothing
        words = used | keys
        # the module's own definitions and variables it names (a value may flow from them)
        out = [
            (path, w)
            for w in used
            if w != ident and (w in info.defs or w in info.by_ident or w in info.globals)
        ]
        out += [(path, fn) for fn in info.globals.get(ident, ())]
        for w in used:
            for imp in info.imports.get(w, ()):
                words |= imp.words
                if w in called:  # another module is reached through what is called
                    out += self._import_uses(path, info, w, imp)
        if not texts and ident not in info.imports:
            for star in info.stars:  # `from pkg.helpers import *` may bind it
                target = self.resolve_import(path, star.module, star.level)
                if target is not None:
                    out.append((target, ident))
        return frozenset(words), tuple(out)

    def _import_uses(self, path: str, info: Outline, bound: str, imp: Any) -> list[tuple[str, str]]:
        """The (module, name) pairs an import binding ``bound`` in ``path`` may stand for: the
        name it imports, and the attributes read from it when it is a module."""
        out: list[tuple[str, str]] = []
        if imp.name is None:  # `import pkg.mod [as bound]`
            target = self.resolve_import(path, imp.module, 0)
            if target is not None:
                out += [(target, a) for a in info.attributes(bound)]
                if bound != imp.module and "." in imp.module:
                    out += [(target, a) for a in info.attributes(imp.module)]
            return out
        if imp.module or imp.level:
            package = self.resolve_import(path, imp.module, imp.level)
            if package is not None:
                out.append((package, imp.name))
        sub = self.resolve_from_import(path, imp.module, imp.name, imp.level)
        if sub is not None:  # `from pkg import mod`: a module, its attributes read
            out += [(sub, a) for a in info.attributes(bound)]
        return out

    def own_code(self, path: str, name: str) -> str | None:
        """The code of the top-level definitions of ``name`` in module ``path`` (strings
        blanked), a re-export followed to the module defining it; None when the outline cannot
        say (an unreadable text, a name bound some other way, a star import)."""
        full = normalise(path)
        seen: set[tuple[str, str]] = set()
        while (full, name) not in seen and len(seen) < 8:
            seen.add((full, name))
            info = self._outline(full)
            if info is None or name in info.by_ident:
                return None
            spans = info.defs.get(name)
            if spans:
                return "".join(info.code[begin:end] for begin, end in spans)
            imports = info.imports.get(name, ())
            imp = imports[0] if len(imports) == 1 else None
            if imp is None or imp.name is None:
                return None
            target = self.resolve_import(full, imp.module, imp.level)
            if target is None:
                return None
            full, name = target, imp.name
        return None

    def defines_only_functions(self, path: str, name: str) -> bool:
        """Module ``path``'s text defines ``name`` at top level, only with `def` (not a class,
        nor bound any other way): read from its outline, nothing parsed."""
        found = self._outline(normalise(path))
        if found is None or name in found.imports or name in found.by_ident:
            return False
        spans = found.defs.get(name, [])
        return bool(spans) and all(found.code.startswith("def", s) for s, _ in spans)

    def defines_only_classes(self, path: str, name: str) -> bool:
        """Module ``path``'s text defines ``name`` at top level only with `class` statements,
        and binds it by no import and no `global`: its summary is a class's. Read from its
        outline, nothing parsed; the module then counts as reached, as its parse would."""
        full = normalise(path)
        if self._stale(full):
            self._outlines.pop(full, None)
        found = self._outline(full)
        if found is None or name in found.imports or name in found.globals:
            return False
        kinds = found.kinds.get(name)
        if not kinds or any(kind != "class" for kind in kinds):
            return False
        self._reached_module(full)
        return True

    def _outline(self, full: str) -> Outline | None:
        if full in self._outlines:
            return self._outlines[full]
        data = self.read_bytes(full)
        if data is None:
            return None  # (not recorded: unreadable, not unknown)
        found = self._outlines[full] = outline(data.decode("utf-8", "replace"))
        return found

    # ------------------------------------------------------------------ resolution
    def resolve_import(self, importer: str, module: str, level: int = 0) -> str | None:
        """Absolute path of the project file that ``import module`` (level 0) or
        ``from <level dots><module> import ...`` in file ``importer`` refers to: a module .py
        or a package __init__.py, searched in the importer's folder, the project root, src/
        layouts and the configured ``src = [...]``; None for stdlib / third-party / not found."""
        given = _as_given(importer, module, level)
        if given in self._resolved:  # asked once per call of the linted file: no normalising
            self._replay(self._resolved_deps.get(given))
            return self._resolved[given]
        # what an import means depends on the importer's folder only: its sibling files share
        here = os.path.dirname(normalise(importer))
        found = self._resolved[given] = self._import_in(here, module, level)
        deps = self._resolved_deps.get(("in", here, module, str(level)))
        if deps:
            self._resolved_deps[given] = deps
        return found

    def _import_in(self, here: str, module: str, level: int) -> str | None:
        """`resolve_import` for an importer in folder ``here`` (normalised)."""
        key = ("in", here, module, str(level))
        if key in self._resolved:
            self._replay(self._resolved_deps.get(key))
            return self._resolved[key]
        found = None
        frame = self._record()
        try:
            for base in self._bases(here, level):
                hit = self._find(base, module)
                if hit is not None:
                    found = hit if hit.endswith(".py") else None
                    break
        finally:
            self._resolved_deps[key] = self._recorded(frame)
        self._resolved[key] = found
        return found

    def resolve_from_import(
        self, importer: str, module: str, name: str, level: int = 0
    ) -> str | None:
        """For ``from pkg import mod`` where ``mod`` is a submodule FILE: its path, else None."""
        given = _as_given("from", importer, module, name, str(level))
        if given in self._resolved:
            self._replay(self._resolved_deps.get(given))
            return self._resolved[given]
        here = os.path.dirname(normalise(importer))
        found = self._resolved[given] = self._from_import_in(here, module, name, level)
        deps = self._resolved_deps.get(("from-in", here, module, name, str(level)))
        if deps:  # (forgotten with the rest when a file changes)
            self._resolved_deps[given] = deps
        return found

    def _from_import_in(self, here: str, module: str, name: str, level: int) -> str | None:
        """`resolve_from_import` for an importer in folder ``here`` (normalised)."""
        key = ("from-in", here, module, name, str(level))
        if key in self._resolved:
            self._replay(self._resolved_deps.get(key))
            return self._resolved[key]
        frame = self._record()
        try:
            found = self._resolved[key] = self._from_import(here, module, name, level)
        finally:
            self._resolved_deps[key] = self._recorded(frame)
        return found

    def _from_import(self, here: str, module: str, name: str, level: int) -> str | None:
        folder = self._package_folder(here, module, level)
        return self._submodule(folder, name) if folder is not None else None

    def _submodule(self, folder: str, name: str) -> str | None:
        """The module file (or subpackage `__init__.py`) ``name`` of the package in
        ``folder``; None when ``name`` is none there."""
        hit = self._find(folder, name)
        return hit if hit is not None and hit.endswith(".py") else None

    def _package_folder(self, here: str, module: str, level: int) -> str | None:
        """The folder of the package that ``from <level dots><module> import ...`` in folder
        ``here`` imports from (its submodule files are there); None when it is not found or
        is a module, not a package."""
        for base in self._bases(here, level):
            package = self._find(base, module) if module else base
            if package is None:
                continue
            if package.endswith(".py") and not package.endswith("__init__.py"):
                return None  # `from mod import name`: a name inside a module, not a file
            # the package was found here: Python stops at the first match
            return os.path.dirname(package) if package.endswith(".py") else package
        return None

    def _bases(self, here: str, level: int) -> list[str]:
        """The folders an import in a module of folder ``here`` is searched in."""
        if level > 0:
            # `from ..x` in a.b.c means a.x: the importer's folder and the level - 1 folders
            # above it are packages (the root itself only when it has an __init__.py)
            base = here
            for step in range(level):
                if not self._within(base) or (
                    base == self.root and not self.is_file(os.path.join(base, "__init__.py"))
                ):
                    if not (step == 0 and level == 1 and base == self.root):
                        return []
                if step < level - 1:
                    base = os.path.dirname(base)
            return [base]
        return list(dict.fromkeys((here, *self.search_roots)))

    def run_importers(self, path: str) -> tuple[str, ...]:
        """The other files of this run whose import lines reach module ``path`` (a line scan,
        done once per run; nothing parsed): where the callers of its functions may be.

        What a lint finds from them depends on which files this run lints: a stand-in
        dependency (``path`` + RUN_IMPORTERS, digest :meth:`importers_digest`) makes a cached
        result answer only a run with the same importers (`check helper.py` alone must not
        answer a later `check .`)."""
        full = normalise(path)
        self._touch(full + RUN_IMPORTERS)
        return self._run_importers(full)

    def importers_digest(self, full: str) -> str:
        """The digest of the files of this run importing module ``full`` (see run_importers)."""
        return "importers " + _digest("\n".join(self._run_importers(full)).encode())

    def _run_importers(self, full: str) -> tuple[str, ...]:
        found = self._importers
        if found is None:
            found = self._importers = {}
            for importer in sorted(_RUN_FILES):
                if not importer.endswith(".py") or not self._within(importer):
                    continue
                for target in self._targets(importer):
                    found.setdefault(target, []).append(importer)
        return tuple(p for p in found.get(full, ()) if p != full)

    def _within(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _find(self, base: str, module: str) -> str | None:
        """``module`` (dotted) below folder ``base``: a .py file, a package's __init__.py, or the
        folder of a namespace package; None when absent (asked once per folder and module:
        `from transformers import A, B, C` asks for each name)."""
        key = (base, module)
        if key in self._found:
            self._replay(self._found_deps.get(key))
            return self._found[key]
        frame = self._record()
        try:
            found = self._found[key] = self._find_now(base, module)
        finally:
            self._found_deps[key] = self._recorded(frame)
        return found

    def _find_now(self, base: str, module: str) -> str | None:
        # What is found depends on what is at each path looked at, in order (a module or
        # package appearing at one looked at before shadows what was found): each question
        # and its answer is a dependency, (folder, name, "1" / "0"), a name ending in "/"
        # asking for a folder (see `_GROUP`); so are the names in a namespace package.
        touch = self._touch
        if not module:
            init = os.path.join(base, "__init__.py")
            if self._listed_file(init):
                touch((base, "__init__.py", "1"))
                return init
            touch((base, "__init__.py", "0"))
            here = self._listed_dir(base)
            touch((os.path.dirname(base), os.path.basename(base) + "/", "1" if here else "0"))
            return base if here else None
        parts = module.split(".")
        if any(not p or p in (os.curdir, os.pardir) for p in parts):
            return None
        folder = base
        for part in parts[:-1]:  # nothing is found below a folder that is not there
            above, folder = folder, os.path.join(folder, part)
            if not self._listed_dir(folder):
                touch((above, part + "/", "0"))
                return None
        name = parts[-1]
        target = os.path.join(folder, name)
        package = self._listed_dir(target)
        touch((folder, name + "/", "1" if package else "0"))
        if package:
            init = os.path.join(target, "__init__.py")
            if self._listed_file(init):
                touch((target, "__init__.py", "1"))
                return init
            touch((target, "__init__.py", "0"))
        if self._listed_file(target + ".py"):
            touch((folder, name + ".py", "1"))
            return target + ".py"
        touch((folder, name + ".py", "0"))
        if package:
            touch(target + LISTING)
            if self._has_python(target):
                return target  # a namespace package (PEP 420)
        return None

    def _listed_file(self, path: str) -> bool:
        """`is_file`, answered from the listing of the file's folder (see `_entries`)."""
        kind = self._entry(path)
        return self.is_file(path) if kind == _LINK else kind == _FILE

    def _listed_dir(self, path: str) -> bool:
        """`is_dir`, answered from the listing of the folder's parent (see `_entries`)."""
        kind = self._entry(path)
        return self.is_dir(path) if kind == _LINK else kind == _DIR

    def _entry(self, path: str) -> str | None:
        """What ``path`` is by its folder's listing: _FILE (anything not a folder, as
        `is_file` counts), _DIR, _LINK (a symbolic link: stat'ed as before), None (absent);
        _LINK too where no listing is used (files in memory, an editor's buffers)."""
        if self._memory is not None or path in self._overlay:
            return _LINK
        return self._kind_in(os.path.dirname(path), os.path.basename(path))

    def _kind_in(self, folder: str, name: str) -> str | None:
        """What entry ``name`` of ``folder`` is by the folder's listing (see `_entry`)."""
        entries = self._entries(folder)
        if entries is None:
            return None
        return entries.get(name) if entries is not _UNLISTED else _LINK

    def _entries(self, folder: str) -> dict[str, str] | None:
        """The entries of ``folder`` (name -> kind), listed once, not stat'ed one candidate at
        a time: resolving the imports of a script in a large package asks each folder for
        dozens of names (`x/__init__.py`, `x.py`, `x/` for each). None: not a folder;
        _UNLISTED: a folder that cannot be listed (its entries are stat'ed one by one). A file
        that appears or goes is told by `refresh`, which lists its folder again; each run
        lists a folder again the first time it asks it (what was resolved stays resolved)."""
        known = self._folder_entries.get(folder)
        if known is not None and known[0] == self.run_number:
            return known[1]
        found: dict[str, str] | None = {}
        try:
            with os.scandir(folder) as listing:
                for e in listing:
                    if e.is_symlink():
                        found[e.name] = _LINK  # type: ignore[index]
                    else:
                        found[e.name] = _DIR if e.is_dir() else _FILE  # type: ignore[index]
        except (FileNotFoundError, NotADirectoryError, ValueError):
            found = None
        except OSError:  # (a folder one may enter but not read)
            found = _UNLISTED
        self._folder_entries[folder] = (self.run_number, found)
        return found

    def _has_python(self, folder: str) -> bool:
        if self._memory is not None:
            prefix = folder + os.sep
            return any(p.startswith(prefix) and p.endswith(".py") for p in self._memory)
        entries = self._entries(folder)
        if entries is None or entries is _UNLISTED:
            return False  # (as a folder that cannot be listed always answered)
        return any(
            name.endswith(".py")
            or (
                not name.startswith(".")
                and (kind == _DIR or kind == _LINK and self.is_dir(os.path.join(folder, name)))
            )
            for name, kind in entries.items()
        )

    # ------------------------------------------------------------------ dependencies
    # What a lint depends on is what it consulted itself plus what every answer it used
    # consulted when it was computed (found in memory, read from the store, or computed now):
    # each lint and each memoised answer (`answer`) is a frame recording the paths consulted
    # while it runs (files, with their digests; folder listings, for resolutions that may be
    # shadowed; stand-ins such as RUN_IMPORTERS), and a frame that uses an answer takes that
    # answer's record. Caches below answers (resolutions, import scans, name searches) keep
    # the record of what they consulted too, replayed on every hit. A module's Facts hold
    # answers of their own (cached properties): a Facts keeps the union of what every frame
    # it was handed to consulted (`handed_out`), and a frame that gets it takes that union.
    def _touch(self, full: str | tuple[str, str, str]) -> None:
        frames = self._frames
        if frames:
            frames[-1].paths.add(full)
        else:
            self._consulted.add(full)  # asked outside a lint (`dependencies`)

    def _replay(self, deps: _Record | None) -> None:
        """A cache hit: what its entry consulted is consulted by the frame asking now."""
        if deps is not None and self._frames:
            self._frames[-1].parts[id(deps)] = deps

    def remember(self, compute: Callable[[], Any]) -> tuple[Any, _Record | None]:
        """``compute()`` and what it consulted: for a cache outside the project, which
        gives it to `replay` on every hit (so a lint using the cached value depends on it)."""
        frame = self._record()
        try:
            value = compute()
        finally:
            deps = self._recorded(frame)
        return value, deps

    def replay(self, deps: _Record | None) -> None:
        """A hit of a cache filled by `remember`: what its value consulted counts now."""
        self._replay(deps)

    def _consulted_now(self) -> _Record | None:
        """What the innermost frame consulted so far (what a search learnt depends on)."""
        return self._frames[-1].freeze() if self._frames else None

    def _record(self) -> _Frame:
        frame = _Frame()
        self._frames.append(frame)
        return frame

    def _recorded(self, frame: _Frame) -> _Record | None:
        """End a frame opened by `_record` (a cache entry's): what it consulted, which the
        frame around it consulted too."""
        return self._close(frame)

    def _close(self, frame: _Frame) -> _Record | None:
        """End a lint's or an answer's frame: the Facts handed to it absorb what it consulted
        (their cached answers may hold any of it), and so does the frame around it. Returns
        the frame's record."""
        popped = self._frames.pop()
        assert popped is frame
        record = frame.freeze()
        for facts in frame.used.values():
            held = facts.__dict__
            held["_consulted"].keep(record)
            if held.get("_order_dependent"):
                frame.clean = False
        if self._frames:
            outer = self._frames[-1]
            outer.take(record)
            outer.loaded |= frame.loaded
            if not frame.clean:
                outer.clean = False
        elif self._pool is not None:
            self._pool.keep(record)  # (a lint's frame holds what every frame within consulted)
        return record

    def handed_out(self, path: str, facts: Any, escapes: bool = False, holder: Any = None) -> None:
        """The Facts of module ``path`` were handed to the frame computing now: it depends
        on what their cached answers consulted. ``escapes``: the Facts ``holder`` keeps them
        (a list of callers among the run's files), so what they hold may be filled by any
        later frame: both depend, from now on, on everything the lints consult (a pool they
        share), and neither is stored on disk (what they hold depends on the run)."""
        held = facts.__dict__
        consulted: _Gather | None = held.get("_consulted")
        if consulted is None:
            consulted = held["_consulted"] = _Gather({normalise(path)})
        pool = self._pool
        if escapes:
            if pool is None:
                pool = self._pool = _Gather()
            for owner in (facts, holder):
                if owner is not None and owner.__dict__.get("_consulted") is not pool:
                    known = owner.__dict__.get("_consulted")
                    if known is not None:
                        pool.keep(known.freeze())
                    owner.__dict__["_consulted"] = pool
                    owner.__dict__["_order_dependent"] = True
            consulted = pool
        frames = self._frames
        if not frames:
            return
        top = frames[-1]
        if consulted is pool:
            # what they hold may have been filled by frames still open: take those too
            top.clean = False
            for frame in frames[:-1]:
                top.take(frame.freeze())
            top.take(pool.freeze())
            top.used[id(facts)] = facts
            return
        if id(facts) in top.used:
            return
        top.used[id(facts)] = facts
        top.take(consulted.freeze())
        if held.get("_order_dependent"):
            top.clean = False

    def order_dependent(self, facts: Any = None) -> None:
        """A question met itself (a recursion guard answered "unknown"): what is being
        computed now, and every answer the module's Facts give from now on, depend on the
        order questions were asked in, so none of them is stored on disk (another process,
        asking in another order, would compute something else)."""
        if facts is not None:
            facts.__dict__["_order_dependent"] = True
        if self._frames:
            self._frames[-1].clean = False

    def answer(self, key: tuple[Any, ...], compute: Callable[[], Any], busy: Any = None) -> Any:
        """The answer ``key`` (a tuple naming what is asked, the module's path second):
        memoised with what its computation consulted, which every lint using it inherits;
        read from and written to the answer store on disk (when the project has one) while
        the files it consulted are unchanged. ``busy``: the answer of a question asked again
        while it is being computed (a cycle between modules), which makes the answers on the
        way order-dependent (never stored)."""
        memo = self.memo
        found = memo.get(key)
        if type(found) is Answer:
            self.answer_counts["memory"] += 1
            self._use(found)
            return found.value
        if found is _BUSY:
            for frame in reversed(self._frames):
                frame.clean = False
                if frame.key == key:
                    break
            return busy
        store = self.answers
        if store is not None:
            known = store.get(key, self._dependency_now, self._checked)
            if known is not None:
                value, deps, loaded = known
                found = memo[key] = Answer(value, _Record(frozenset(_expanded(deps)), ()), True)
                self._loaded.update(loaded)
                if self._frames:
                    self._frames[-1].loaded.update(loaded)
                self.answer_counts["disk"] += 1
                self._use(found)
                return value
        memo[key] = _BUSY
        frame = _Frame(key)
        self._frames.append(frame)
        try:
            value = compute()
        except BaseException:
            memo.pop(key, None)
            self._close(frame)
            raise
        record = self._close(frame)
        found = memo[key] = Answer(value, record, frame.clean)
        self.answer_counts["computed"] += 1
        if store is not None and frame.clean:
            paths = _flatten((record,), looked=True)
            if self._storable(paths):
                deps = sorted(self._deps_now(paths).items())
                if store.put(key, value, deps, sorted(frame.loaded)):
                    self.answer_counts["stored"] += 1
        return value

    def _use(self, found: Answer) -> None:
        frames = self._frames
        if frames:
            top = frames[-1]
            if id(found) in top.merged:
                return  # (asked again by the same lint: taken once)
            top.merged[id(found)] = found
            top.take(found.record)
            if not found.clean:
                top.clean = False

    def _storable(self, paths: set[Any]) -> bool:
        """An answer that consulted ``paths`` may go to disk: it consulted no editor buffer (an
        unsaved text is not the disk's: the language server stores what it learnt of the
        modules it did not open), and no file it consulted has an error to report (a run that
        reads the answer would not parse them, and could not report it)."""
        if self._memory is not None:
            return False  # an in-memory project
        if self._overlay and self._consulted_buffer(paths):
            return False
        return not any(e.path in paths for e in self.errors)

    def _consulted_buffer(self, paths: Iterable[Any]) -> bool:
        """Did what consulted ``paths`` read an editor buffer: its text, whether it is there
        (an import that found it, or a buffer of a file not saved yet that it may have found),
        or the names of a folder holding one?"""
        buffers = self._overlay
        folders = {os.path.dirname(p) for p in buffers}
        for p in paths:
            if type(p) is tuple:  # (folder, name, found): a path an import looked at
                if os.path.join(p[0], p[1]) in buffers:
                    return True
            elif p in buffers or (p.endswith(LISTING) and p[: -len(LISTING)] in folders):
                return True
        return False

    def _dependency_now(self, dep: str) -> str | None:
        """The digest now of a path an answer read from the store consulted (None: a file
        this project has not read, which the store checks itself)."""
        if dep.endswith(">"):
            found = group_digest(dep, self.exists_digest)
            if found is not None:
                return found
        if dep.endswith(RUN_IMPORTERS) or dep.endswith(LISTING):
            return self._digest_of(dep)
        if dep in self._data or dep in self._overlay:  # (an editor's buffer, not the disk)
            return self.digest(dep) or "missing"
        return None

    def exists_digest(self, path: str) -> str:
        """`exists_digest` (below) as this project's resolutions see it."""
        if path.endswith(os.sep):
            return "1" if self.is_dir(path[:-1]) else "0"
        return "1" if self.is_file(path) else "0"

    def _deps_now(self, paths: Iterable[Any], exclude: str | None = None) -> dict[str, str]:
        """path -> digest now of what a frame consulted, the paths imports looked at grouped
        by folder (one dependency each: see `_GROUP`)."""
        out: dict[str, str] = {}
        groups: dict[str, list[tuple[str, str, str]]] = {}  # folder -> its triples
        digest_of = self._digest_of
        for p in paths:
            if type(p) is tuple:
                held = groups.get(p[0])
                if held is None:
                    groups[p[0]] = [p]
                else:
                    held.append(p)
            elif p != exclude:
                digest = digest_of(p)
                out[p] = digest if digest is not None else "missing"
        for folder, looked in groups.items():
            looked.sort()  # (one folder: by name, then found)
            names = "|".join([name for _, name, _ in looked])
            out[folder + _GROUP + names + ">"] = "exists " + "".join([f for _, _, f in looked])
        return out

    def listing_digest(self, folder: str) -> str:
        """The names in ``folder`` an import could find (Python files and folders), as a
        digest (``missing`` without the folder): a resolution that searched it is answered
        again when a file or package appears there (it may shadow what was found)."""
        found = self._listings.get(folder)
        if found is None:
            if self._memory is not None:
                prefix = folder.rstrip(os.sep) + os.sep
                names = {
                    p[len(prefix) :].split(os.sep, 1)[0]
                    for p in (*self._memory, *self._memory_dirs)
                    if p.startswith(prefix)
                }
                found = _names_digest(names) if folder in self._memory_dirs else "missing"
            else:
                found = listing_digest(folder)
            shown = {os.path.basename(p) for p in self._overlay if os.path.dirname(p) == folder}
            if shown:  # an editor's buffer of a file not saved yet resolves too
                known = found.split(" ", 1)[-1]
                found = _names_digest(shown | {known}) if found != "missing" else found
            self._listings[folder] = found
        return found

    def dependencies(self) -> dict[str, str]:
        """path -> digest of every module and config file consulted so far (cache keys, LSP)."""
        out = {}
        for path in self._consulted:
            if not isinstance(path, str):
                continue  # (a path an import looked at: not a module nor a config file)
            digest = self._digest_of(path)
            if digest is not None:
                out[path] = digest
        return out

    @contextmanager
    def tracking(self, path: str | None = None, digests: bool = True) -> Iterator[dict[str, str]]:
        """Collect, into the yielded dict, path -> digest of what the analysis of one file
        consults, also through answers memoised while another file was linted (each answer
        records what its own computation consulted: see `answer`). ``digests`` False: only
        which files it consulted (path -> ""), for a caller that keeps no cache (the import
        look-ups, most of what a lint consulted, are then never walked nor digested)."""
        deps: dict[str, str] = {}
        self_path = normalise(path) if path is not None else None
        if self_path is None or self_path not in _RUN_FILES:
            self.begin_run()  # an editor's lint, a test's: what changed on disk since counts
        frame = _Frame()
        self._frames.append(frame)
        self._depth += 1
        try:
            yield deps
        finally:
            self._depth -= 1
            record = self._close(frame)
            paths = _flatten((record,), looked=True) if digests else _files((record,))
            if not self._depth:
                self._let_go(KEEP_PARSED_CHARS)
            # (`dependencies` reports files: the paths imports looked at are not kept here)
            files = paths if not digests else {p for p in paths if type(p) is str}
            self._consulted.update(files)
            self.reached = tuple(sorted(p for p in files if p in self._loaded and p != self_path))
            if digests:
                deps.update(self._deps_now(paths, self_path))
            else:
                deps.update(dict.fromkeys((p for p in files if p != self_path), ""))

    def begin_run(self) -> None:
        """Check files against the disk again (each at most once until the next call): a run
        sees every file as it was when the run first looked at it."""
        self._fresh.clear()
        self._importers = None
        self.run_number += 1  # facts that depend on the run's files are asked again
        # what name searches learnt skips the modules behind it: the modules each answer read
        # are checked against the disk when the run first uses it (`_search_fresh`)
        self._searches_unchecked = {("write", key) for key in self._may_write}
        self._searches_unchecked.update(("reach", key) for key in self._reach)
        self._listings.clear()
        self._checked.clear()

    def report_errors(self, deps: Mapping[str, str], exclude: str | None = None) -> list[FileError]:
        """The recorded errors of files in ``deps`` not reported yet in this run (each is
        reported once), leaving out files that are linted themselves in this run."""
        own = normalise(exclude) if exclude else None
        out = []
        keys = []
        for err in self.errors:
            if err.path == own or err.path not in deps or err.path in _RUN_FILES:
                continue
            key = (err.path, err.message)
            if key in self._reported:
                continue
            keys.append(key)
            out.append(err)
        if _DEFERRED is not None and own is not None:
            _DEFERRED.setdefault(own, (self, []))[1].extend(keys)  # claimed when handed on
        else:
            self._reported.update(keys)
        return out

    def dependents_of(self, changed: str, results: Mapping[str, Iterable[str]]) -> list[str]:
        """Of ``results`` (path -> its dependency paths), those that depend on ``changed``."""
        full = normalise(changed)
        return [p for p, deps in results.items() if full in {normalise(d) for d in deps}]


# memo entries of one parse: ("facts", path, id(index)), and configsource's answers keyed by
# (..., id(index), id(node))
_BY_INDEX = ("facts", "configsource.value", "configsource.argparse")


def _memo_owners(memo: Mapping[Any, Any]) -> dict[Any, int | None]:
    """The index (by id) whose Facts each entry that is not an answer nor Facts belongs to
    (None: not known): configsource's answers are keyed by the nodes of a module's tree."""
    out: dict[Any, int | None] = {}
    for key in memo:
        owner = None
        if isinstance(key, tuple) and len(key) >= 3:
            if key[0] == "facts":
                continue
            if key[0] == "configsource.value":
                owner = key[1]
            elif key[0] == "configsource.argparse":
                owner = key[2]
        out[key] = owner
    return out


class _Search:
    """A breadth-first search of the modules reached by imports from ``start``, kept between
    questions: ``order`` the modules found, the first ``scanned`` of them expanded."""

    __slots__ = ("order", "seen", "scanned")

    def __init__(self, start: str) -> None:
        self.order = [start]
        self.seen = {start}
        self.scanned = 0


class _ImportLines:
    """``import a.b, c`` / ``from ..pkg import x, (y as z)`` lines, without parsing.

    The patterns start at the line break before the line (the text is read after a "\n"):
    the regex engine then jumps from one line break to the next, where a pattern starting
    with ``^`` (re.M) is tried at every character (3-4x slower on real modules)."""

    _FROM = re.compile(r"\n[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)")
    _IMPORT = re.compile(r"\n[ \t]*import[ \t]+([\w., \t]+)")

    def scan(self, text: str) -> Iterator[tuple[str, list[str], int]]:
        text = "\n" + text  # the first line has a line break before it too
        for m in self._FROM.finditer(text):
            body = re.sub(r"#[^\n]*", "", m.group(3)).strip("() \t")
            flat = body.replace("\\", " ").replace("\n", " ")
            names = [n.split()[0] for n in flat.split(",") if n.strip()]
            yield m.group(2), names, len(m.group(1))
        for m in self._IMPORT.finditer(text):
            for part in m.group(1).split(","):
                words = part.split()
                if words:
                    yield words[0], [], 0


_IMPORT_LINE = _ImportLines()


# ---------------------------------------------------------------------------------- per run
_PROJECTS: dict[tuple[str, tuple[str, ...], str | None], Project] = {}


def project_for(path: str, config: Any = None) -> Project:
    """The shared :class:`Project` of ``path`` in this process (one per root and ``src``), so
    every file of a run reuses the modules and config files already parsed."""
    src = tuple(getattr(config, "src", ()) or ())
    base = getattr(config, "root", None) if src else None
    root = find_root(path)
    key = (root, src, base)
    project = _PROJECTS.get(key)
    if project is None:
        project = _PROJECTS[key] = Project(root, src, src_base=base)
    return project


def forget_projects() -> None:
    """Drop every shared project (tests; a long-lived process that wants a fresh view)."""
    _PROJECTS.clear()
    _RUN_FILES.clear()
    _marked_root.cache_clear()


_RUN_FILES: set[str] = set()
# linted path -> (its project, the keys of the errors of other modules its lint reported)
Deferred = dict[str, tuple[Project, list[tuple[str, str]]]]
# While a file of a run is linted ahead of its turn (see `deferring_reports`): where its lint
# puts the errors of other modules it reports, unclaimed; None: a lint claims them at once.
_DEFERRED: Deferred | None = None
# Appended to a module's path: the dependency of a result on the run's files importing that
# module (a path below a file, so it never names a file on disk).
RUN_IMPORTERS = os.sep + "<files of the run importing it>"
# Appended to a folder's path: the dependency of a resolution on the names in that folder
# (see `Project.listing_digest`): a module or package that appears there may shadow the one
# an import found, or make one found that was not.
LISTING = os.sep + "<names in the folder>"


def exists_digest(path: str) -> str:
    """``1`` when ``path`` is a file (anything but a folder: what an import would open) or,
    ending in a separator, a folder; ``0`` otherwise."""
    try:
        is_dir = stat.S_ISDIR(os.stat(path.rstrip(os.sep) or os.sep).st_mode)
    except (OSError, ValueError):
        return "0"
    return "1" if is_dir == path.endswith(os.sep) else "0"


# The paths imports looked at in one folder, as a result or an answer is kept: one dependency
# `folder/<exists __init__.py|torch/|torch.py>` (a name ending in "/" asks for a folder), its
# digest `exists 001`: whether each was there (a lint of a diffusers script looks at ~5,000
# paths in ~160 folders). In memory, each is a (folder, name, "1" / "0") triple.
_GROUP = os.sep + "<exists "


def _expanded(deps: Iterable[tuple[str, str]]) -> Iterator[Any]:
    """Dependencies as kept on disk, as frames hold them (folder groups as triples)."""
    for path, digest in deps:
        at = path.rfind(_GROUP) if path.endswith(">") else -1
        if at < 0:
            yield path
        else:
            folder = path[:at]
            names = path[at + len(_GROUP) : -1].split("|")
            yield from zip([folder] * len(names), names, digest[len("exists ") :])


def group_digest(path: str, exists: Callable[[str], str] = exists_digest) -> str | None:
    """The digest now of a group of paths imports looked at (None: ``path`` is not one)."""
    at = path.rfind(_GROUP)
    if at < 0 or not path.endswith(">"):
        return None
    folder, names = path[:at], path[at + len(_GROUP) : -1].split("|")
    return "exists " + "".join(exists(os.path.join(folder, n)) for n in names)


def listing_digest(folder: str) -> str:
    """The digest of the names in ``folder`` an import can find (files ending in .py and
    folders), ``missing`` without the folder; remembered while its mtime is unchanged (an
    entry added, removed or renamed changes the folder's mtime)."""
    try:
        st = os.stat(folder)
    except OSError:
        return "missing"
    known = _LISTED.get(folder)
    if known is not None and known[0] == st.st_mtime_ns:
        return known[1]
    try:
        with os.scandir(folder) as entries:
            names = {
                e.name
                for e in entries
                if e.name.endswith(".py") or e.is_dir() and not e.name.startswith(".")
            }
    except OSError:
        return "missing"
    found = _names_digest(names)
    # (a folder changed within the last 2 s may change again within its mtime's tick)
    if st.st_mtime_ns < time.time_ns() - 2_000_000_000:
        _LISTED[folder] = (st.st_mtime_ns, found)
    return found


_LISTED: dict[str, tuple[int, str]] = {}


def _names_digest(names: Iterable[str]) -> str:
    return "names " + _digest("\n".join(sorted(names)).encode("utf-8", "surrogateescape"))


def held_parses() -> list[str]:
    """The modules whose parse a shared project holds now (see KEEP_PARSED_CHARS), the next
    to be let go first."""
    return [path for project in _PROJECTS.values() for path in project._kept]


@contextmanager
def deferring_reports(into: Deferred) -> Iterator[None]:
    """A file linted meanwhile reports the errors of other modules it reaches without claiming
    them (see `Project.report_errors`); they go ``into`` that, to be claimed by `claim_reports`
    when the file's result is handed on, in the run's order: a file linted ahead of its turn
    must not take an error from a file before it in the run."""
    global _DEFERRED
    known, _DEFERRED = _DEFERRED, into
    try:
        yield
    finally:
        _DEFERRED = known


def claim_reports(deferred: Deferred, path: str) -> set[tuple[str, str]]:
    """Claim the errors of other modules that the lint of ``path`` reported ``deferred``;
    returns the (path, message) keys a file handed on before it had claimed (to leave out of
    its result)."""
    project, keys = deferred.pop(normalise(path), (None, []))
    if project is None:
        return set()
    taken = {key for key in keys if key in project._reported}
    project._reported.update(keys)
    return taken


def lint_run(paths: Iterable[str]) -> None:
    """Declare the files a run lints: their own errors are theirs to report."""
    _RUN_FILES.clear()
    _RUN_FILES.update(normalise(p) for p in paths)
    for project in _PROJECTS.values():
        project.begin_run()


# what a folder's listing says an entry is (see `Project._entry`)
_FILE, _DIR, _LINK = "file", "dir", "link"
_UNLISTED: dict[str, str] = {}


def _spelled(words: frozenset[str], data: bytes | None) -> frozenset[str]:
    """The ``words`` written in ``data`` as its text decodes (UTF-8, errors replaced): an
    ASCII word is in that text exactly when its bytes are in ``data``."""
    if not data:
        return frozenset()
    text: str | None = None
    out = []
    for w in words:
        if w.isascii():
            found = w.encode("ascii") in data
        else:
            text = data.decode("utf-8", "replace") if text is None else text
            found = w in text
        if found:
            out.append(w)
    return frozenset(out)


def _digest(data: bytes) -> str:
    import hashlib  # here: a run that follows no module never hashes one

    return hashlib.sha256(data).hexdigest()
