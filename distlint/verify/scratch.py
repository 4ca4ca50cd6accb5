"""The scratch working folder of a run, and the watch over the user's own tree.

Each run starts in a fresh copy of the user's working directory: every folder level is
re-created and every regular file is copied, up to a size budget, so that any write the script
makes with a relative path (open, os.open, shutil, np.save, torch.save, native code) lands in
the copy. Files over the budget (large datasets, weights) are symbolic links to the originals;
the probe replaces such a link by a file of its own before open() / torch.save / safetensors
write to it (copy on write), and writes that bypass those (os.open on a link) are caught by the
watch: the user's tree is snapshotted (size, modification time, kind) before the runs and
compared afterwards, and any change is a failed check naming the file. verify's own outputs
(a redirected stdout / stderr, the --keep folder), distlint's result cache and Python's
`__pycache__` folders are not the script's changes.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from distlint.cache import CACHE_DIR
from distlint.verify_options import COPY_BUDGET, FILE_COPY_LIMIT

ENTRY_BUDGET = 20_000  # folders and files mirrored / watched; deeper folders are linked whole
PREFIX = "distlint-verify-"


@dataclass
class Mirror:
    copied: int = 0
    copied_bytes: int = 0
    linked_files: list[str] = field(default_factory=list)  # originals reachable through links
    linked_dirs: list[str] = field(default_factory=list)  # folders linked whole (over budget)


def _skipped(path: str, name: str, skip: frozenset[str]) -> bool:
    """verify's own folders (its temporary and --keep folders), distlint's result cache, which
    `check --verify` and any other distlint run may write to while the runs go, and Python's
    bytecode caches, which any interpreter importing from the tree (an editor, a test run)
    writes and which are rebuilt from the sources: never a script's results."""
    return (
        name.startswith(PREFIX)
        or name in (CACHE_DIR, "__pycache__")
        or os.path.realpath(path) in skip
    )


def mirror_tree(
    src: str,
    dst: str,
    skip: Iterable[str] = (),
    copy_budget: int = COPY_BUDGET,
    file_limit: int = FILE_COPY_LIMIT,
    entries: int = ENTRY_BUDGET,
) -> Mirror:
    """Copy the folder `src` into `dst` (breadth first, so that the budget goes to the levels
    a script names most): folders re-created, files copied within the budgets, links kept as
    links, the rest linked to the originals."""
    skipped = frozenset(os.path.realpath(p) for p in skip)
    mirror = Mirror()
    os.makedirs(dst, exist_ok=True)
    todo = [(src, dst)]
    budget = copy_budget
    while todo:
        next_level = []
        for s_dir, d_dir in todo:
            try:
                listing = sorted(os.scandir(s_dir), key=lambda e: e.name)
            except OSError:
                continue
            for entry in listing:
                if _skipped(entry.path, entry.name, skipped):
                    continue
                target = os.path.join(d_dir, entry.name)
                entries -= 1
                try:
                    if entry.is_symlink():
                        os.symlink(os.readlink(entry.path), target)
                    elif entry.is_dir():
                        if entries > 0:
                            os.mkdir(target)
                            next_level.append((entry.path, target))
                        else:
                            os.symlink(entry.path, target)
                            mirror.linked_dirs.append(entry.path)
                    elif entry.is_file():
                        size = entry.stat().st_size
                        if entries > 0 and size <= file_limit and size <= budget:
                            # The content and the modification time (what a script may test);
                            # copy2's permission bits and extended attributes cost syscalls.
                            shutil.copyfile(entry.path, target)
                            st = entry.stat()
                            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
                            budget -= size
                            mirror.copied += 1
                            mirror.copied_bytes += size
                        else:
                            os.symlink(entry.path, target)
                            mirror.linked_files.append(entry.path)
                    # sockets, FIFOs, devices: not mirrored (a run reading one would block)
                except OSError:
                    continue
        todo = next_level
    return mirror


def own_outputs() -> frozenset[tuple[int, int]]:
    """(device, inode) of the files verify itself writes to: its stdout and stderr when they
    are redirected into a file (`distlint verify t.py 2> v.err` in the working directory)."""
    found = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return frozenset(found)


@dataclass
class Snapshot:
    entries: dict[str, tuple[str, int, int]]  # relative path -> (kind, size, mtime_ns)
    complete: bool  # False: the tree was larger than the budget (new or removed files unseen)


def snapshot(
    root: str,
    skip: Iterable[str] = (),
    ignore: frozenset[tuple[int, int]] = frozenset(),
    entries: int = ENTRY_BUDGET,
) -> Snapshot:
    """What the user's tree holds now (folders, files, links), breadth first within a budget."""
    skipped = frozenset(os.path.realpath(p) for p in skip)
    seen: dict[str, tuple[str, int, int]] = {}
    complete = True
    todo = [root]
    while todo and entries > 0:
        next_level = []
        for folder in todo:
            try:
                listing = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in listing:
                if entries <= 0:
                    complete = False
                    break
                if _skipped(entry.path, entry.name, skipped):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in ignore:
                    continue
                entries -= 1
                rel = os.path.relpath(entry.path, root)
                if stat.S_ISDIR(st.st_mode):
                    seen[rel] = ("dir", 0, 0)
                    next_level.append(entry.path)
                elif stat.S_ISLNK(st.st_mode):
                    seen[rel] = ("link", 0, st.st_mtime_ns)
                else:
                    seen[rel] = ("file", st.st_size, st.st_mtime_ns)
        todo = next_level
    return Snapshot(seen, complete and not todo)


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Files the runs created, changed or removed in the user's tree ("path (what)")."""
    out = []
    whole = before.complete and after.complete
    for rel in sorted(set(before.entries) | set(after.entries)):
        old, new = before.entries.get(rel), after.entries.get(rel)
        if old == new or (old and new and old[0] == new[0] == "dir"):
            continue
        if (old is None or new is None) and not whole:
            continue  # past the budget of a large tree, a name may fall in or out of view
        if old is None:
            out.append(f"{rel} (created)")
        elif new is None:
            out.append(f"{rel} (removed)")
        else:
            out.append(f"{rel} (changed)")
    return out
