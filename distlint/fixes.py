"""Fix plans and their application.

A rule describes a fix as node replacements (keyed by node identity), statements to insert
before an anchor statement, and imports it needs. All chosen fixes of a file are applied in one
transformer pass, then all imports are added in one ``AddImportsVisitor`` pass, and the result is
re-parsed; a fix whose result does not parse is dropped and reported, never written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

import libcst as cst

from distlint.model import Applicability

if TYPE_CHECKING:  # pragma: no cover
    from distlint.analysis import Index

Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]


@dataclass(eq=False)
class ImportSpec:
    module: str
    name: str | None = None  # None: `import module`
    asname: str | None = None


@dataclass(eq=False)
class Fix:
    """One finding's fix. ``applicability`` None means the rule's FIX_SAFETY."""

    replace: dict[cst.CSTNode, Replacement] = field(default_factory=dict)
    insert_before: dict[cst.CSTNode, list[cst.BaseStatement]] = field(default_factory=dict)
    imports: list[ImportSpec] = field(default_factory=list)
    applicability: Applicability | None = None
    title: str = ""

    def touched(self) -> list[cst.CSTNode]:
        return list(self.replace) + list(self.insert_before)


class FixError(Exception):
    pass


def import_name(
    index: Index, qualname: str, at: cst.CSTNode | None = None
) -> tuple[str, ImportSpec | None]:
    """How to refer to ``qualname`` at ``at``: reuse an existing binding, else import it.

    Returns the expression text to use and the import to add (None when already bound).
    ``accelerate.utils.set_seed`` -> (``set_seed``, ``from accelerate.utils import set_seed``),
    or (``set_seed``, None) when the file already imports it, or ``accelerate_set_seed`` when the
    file binds ``set_seed`` to something else.
    """
    existing = index.binding_for(qualname, at)
    if existing is not None:
        return existing, None
    module, _, name = qualname.rpartition(".")
    if not index.is_bound(name, at) and name not in _module_level_names(index):
        return name, ImportSpec(module, name)
    alias = f"{module.split('.')[0]}_{name}"
    return alias, ImportSpec(module, name, alias)


def _module_level_names(index: Index) -> set[str]:
    names: set[str] = set()
    for scope in index.scopes:
        names.update(scope.bindings)
    return names


class _ApplyTransformer(cst.CSTTransformer):
    def __init__(
        self,
        replace: dict[cst.CSTNode, Replacement],
        inserts: dict[cst.CSTNode, list[cst.BaseStatement]],
    ):
        super().__init__()
        self.replace = replace
        self.inserts = inserts

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        result = self.replace.get(original_node, updated_node)
        inserted = self.inserts.get(original_node)
        if inserted:
            if isinstance(result, cst.RemovalSentinel):
                return cst.FlattenSentinel(inserted)
            if isinstance(result, cst.FlattenSentinel):
                return cst.FlattenSentinel([*inserted, *result.nodes])
            return cst.FlattenSentinel([*inserted, result])
        return result


def _conflicts(
    index: Index, fix: Fix, claimed: set[cst.CSTNode], claimed_ancestors: set[cst.CSTNode]
) -> bool:
    """A fix conflicts when it rewrites a node that another chosen fix rewrites, contains or is
    contained in, or inserts statements inside a node another fix replaces."""
    for node in fix.replace:
        if (
            node in claimed
            or node in claimed_ancestors
            or any(a in claimed for a in index.ancestors(node))
        ):
            return True
    return any(any(a in claimed for a in index.ancestors(anchor)) for anchor in fix.insert_before)


def apply(
    module: cst.Module, index: Index, fixes: Sequence[Fix]
) -> tuple[cst.Module, list[Fix], list[tuple[Fix, str]]]:
    """Apply compatible fixes. Returns (new module, applied, dropped with reasons).

    Overlapping fixes: the first wins; the others are left for the next round (the runner
    re-lints and applies again until nothing changes).
    """
    chosen: list[Fix] = []
    deferred: list[tuple[Fix, str]] = []
    claimed: set[cst.CSTNode] = set()
    claimed_ancestors: set[cst.CSTNode] = set()
    for fix in fixes:
        if _conflicts(index, fix, claimed, claimed_ancestors):
            deferred.append((fix, "overlaps another fix"))
            continue
        chosen.append(fix)
        for node in fix.replace:
            claimed.add(node)
            claimed_ancestors.update(index.ancestors(node))
    if not chosen:
        return module, [], deferred
    new_module = _transform(module, chosen)
    if new_module is None:
        # Find the culprit(s): apply each alone and keep those that produce valid code.
        good: list[Fix] = []
        for fix in chosen:
            if _transform(module, good + [fix]) is not None:
                good.append(fix)
            else:
                deferred.append((fix, "the fixed code would not parse; fix dropped"))
        chosen = good
        new_module = _transform(module, chosen) if chosen else module
        assert new_module is not None
    return new_module, chosen, deferred


def _transform(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module | None:
    replace: dict[cst.CSTNode, Replacement] = {}
    inserts: dict[cst.CSTNode, list[cst.BaseStatement]] = {}
    imports: list[ImportSpec] = []
    for fix in fixes:
        replace.update(fix.replace)
        for anchor, stmts in fix.insert_before.items():
            inserts.setdefault(anchor, []).extend(stmts)
        imports.extend(fix.imports)
    try:
        new = module.visit(_ApplyTransformer(replace, inserts))
        if imports:
            # libcst.codemod pulls in libcst.matchers (~0.5 s of imports): only a fix needs it.
            from libcst.codemod import CodemodContext
            from libcst.codemod.visitors import AddImportsVisitor

            context = CodemodContext()
            for spec in imports:
                AddImportsVisitor.add_needed_import(context, spec.module, spec.name, spec.asname)
            new = AddImportsVisitor(context).transform_module(new)
        code = new.code
        reparsed = cst.parse_module(code)
    except (cst.ParserSyntaxError, RecursionError, Exception):
        return None
    # keep encoding / newline settings of the original
    return (
        reparsed.with_changes(
            encoding=module.encoding,
            default_newline=module.default_newline,
            default_indent=module.default_indent,
        )
        if isinstance(reparsed, cst.Module)
        else None
    )


# ------------------------------------------------------------------------------------------
# Writing files
# ------------------------------------------------------------------------------------------


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` without ever leaving it half-written.

    The bytes go to a temporary file in the same directory, which is flushed, given the original
    file's mode and renamed over the original (atomic on POSIX). A symlink is followed: its target
    is rewritten and the link stays a link.
    """
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    st = os.stat(real)
    fd, tmp = tempfile.mkstemp(prefix=".distlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
