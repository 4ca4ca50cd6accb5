"""Text to tree: the one way source becomes a LibCST module.

Bytes are decoded as the interpreter would (PEP 263 cookie, BOM; the decoding itself is pure
text and lives in :mod:`distlint.edits`, for callers that must not load LibCST), the text is
refused before LibCST sees it when it would crash, stall or exhaust the linter
(:mod:`distlint.guard`), and a syntax error is located the way Python reports it. The runner (the linted file, the fixer's
re-parse gate) and the project reader (the modules a linted file imports) both go through here,
so a file gets the same verdict and the same message whichever of them reads it first.

Nothing is executed or imported: the text is only parsed.
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

import libcst as cst

from distlint import guard
from distlint._libcst_compat import UNCHECKED_PARSE, checks_off
from distlint.collector import paused as collector_paused
from distlint.edits import decode  # pure text: the cache and the CLI decode without LibCST
from distlint.model import FileError
from distlint.positions import SourceMap


def decode_source(data: bytes, path: str) -> tuple[str, str] | FileError:
    """(text, codec) of ``data`` (see :func:`distlint.edits.decode`), or the error to report
    for the file ``path``."""
    try:
        return decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FileError(path, f"cannot decode source: {exc}")


def null_byte(text: str, path: str) -> FileError | None:
    """The error for a text holding a null byte (neither Python nor LibCST accepts one)."""
    if "\x00" not in text:
        return None
    line = text.count("\n", 0, text.index("\x00")) + 1
    return FileError(path, "source contains a null byte", line)


def parse(
    text: str,
    path: str,
    *,
    source: str | bytes | None = None,
    max_file_size: int | None = guard.DEFAULT_MAX_FILE_SIZE,
    tops: list[int] | None = None,
    passes: Counter[str] | None = None,
    checked: bool = True,
) -> tuple[cst.Module, SourceMap] | FileError:
    """``text`` (the file ``path``) parsed, with where LibCST's code stands in the text, or the
    error to report.

    LibCST reads odd indentation (a backslash-only line or a form feed before a statement)
    otherwise than Python: it drops it from its code (every position after it is then off) or
    refuses valid code. The guard's scan finds those spans; LibCST parses the text without them
    (Python reads both the same), and the :class:`~distlint.positions.SourceMap` places every
    position back in ``text``.

    ``source``: what LibCST parses when not ``text`` itself and nothing is cut (the undecoded
    bytes: the module then knows its encoding). ``tops``: receives where statements start at
    column 0 in LibCST's code, from the guard's scan (see :func:`distlint.guard.check_source`).
    ``passes``: counts ``"parse"`` for every text that reaches LibCST. ``checked=False``: skip
    LibCST's checks of its nodes (``_validate``, ~15% of a parse) where they cannot refuse the
    text: the verdict is the same, the tree equal. That is the lint path's parse; the fixer's
    re-parse always checks (a fix never writes what LibCST refuses). Of LibCST's checks, its
    native parser can violate only those the guard's scan looks for (``checks`` of
    :func:`distlint.guard.check_source`; the reading of each check and the differential test
    are in benchmarks/libcst_checks.py), for the versions read
    (:func:`distlint._libcst_compat.checks_off`)."""
    cuts: list[tuple[int, int]] = []
    checks: list[str] | None = None if checked or not UNCHECKED_PARSE else []
    refused = null_byte(text, path) or guard.check_source(
        text, path, max_file_size, tops, cuts, checks
    )
    if refused is not None:  # before LibCST sees it
        return refused
    mapped = SourceMap(text, cuts)
    if cuts:
        source = mapped.parsed
    guard.ensure_recursion_headroom()
    if passes is not None:
        passes["parse"] += 1
    unchecked = checks is not None and not checks
    try:
        with collector_paused():  # the tree holds no cycles: collecting while it grows is waste
            with checks_off() if unchecked else nullcontext():
                return cst.parse_module(text if source is None else source), mapped
    except RecursionError:
        return FileError(path, "source is too deeply nested to parse")
    except Exception as exc:  # a ParserSyntaxError, or one of a few other types on odd input
        return syntax_error(path, text, exc, mapped)


def parse_piece(text: str, path: str) -> cst.Module | None:
    """``text``, a piece of a file an editor changed (its statements around an edit), parsed
    as :func:`parse` would parse it in the whole text: refused by the guard, or skipping
    LibCST's node checks only where they cannot refuse it; None when refused or when it does
    not parse (the whole text's parse then reports why: a piece is only a shortcut). Counted
    in :data:`PIECE_CHECKS` (``"checked"`` / ``"unchecked"``)."""
    checks: list[str] | None = [] if UNCHECKED_PARSE else None
    if guard.check_source(text, path, None, None, None, checks) is not None:
        return None
    unchecked = checks is not None and not checks
    PIECE_CHECKS["unchecked" if unchecked else "checked"] += 1
    try:
        with collector_paused():
            with checks_off() if unchecked else nullcontext():
                return cst.parse_module(text)
    except Exception:  # a syntax error, or deeper than the stack allows: the whole parse's
        return None


# pieces of edited texts parsed with LibCST's node checks and without (see `parse_piece`)
PIECE_CHECKS: Counter[str] = Counter()


def syntax_error(
    path: str, text: str, exc: Exception, mapped: SourceMap | None = None
) -> FileError:
    """Locate a syntax error the way Python reports it (LibCST's native parser positions are
    approximate). Code Python accepts is LibCST's limit, said as such, at the line LibCST names
    (placed in ``text`` through ``mapped``)."""
    try:
        compile(text, path, "exec", flags=0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    except SyntaxError as err:
        hint = " (Python 2 code?)" if "Missing parentheses in call to" in (err.msg or "") else ""
        return FileError(path, f"syntax error: {err.msg}{hint}", err.lineno, err.offset)
    except (ValueError, RecursionError, MemoryError):
        pass
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        message = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
    line = getattr(exc, "editor_line", None) or 1
    if mapped is not None and mapped.cuts:
        starts = mapped.parsed_starts
        line = mapped.position(starts[min(line, len(starts)) - 1])[0]
    return FileError(
        path, f"LibCST cannot parse this file (line {line}): {message}; Python accepts it", line
    )
