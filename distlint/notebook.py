"""Jupyter notebooks: lint the code cells, report ``path:cell N:line:col``, fix in place.

Training is often prototyped in a notebook (Accelerate ships ``notebook_launcher`` for that), and
the hazards are the same as in a script. The code cells are linted as ONE module, in order, so
an import in cell 1 resolves a call in cell 5 exactly as the kernel sees it. Between cells sits
a marker statement; findings are mapped back to their cell with cell-relative lines, and fixed
text is split at the markers and written back into the cells' ``source``.

IPython syntax is not Python, and it is found where IPython finds it: at the start of a logical
line (never inside a string or a bracket), ``%magic``, ``!shell``, ``!!shell``, ``?obj``, ``/f x``,
``,f`` / ``;f`` escapes, each with the lines its trailing backslashes continue; ``x = !cmd`` and
``x = %magic`` assignments; ``obj?`` / ``obj??`` help. In a cell that does not compile, every line
of such a construct is swapped for a placeholder statement at the construct's indentation (so
line numbers and every other line's text stay exact) and restored verbatim after fixing. A
``%%`` cell magic whose body IPython runs as Python in the kernel (``%%time``, ``%%capture``, ...)
has its first line masked; any other (``%%bash``, ``%%writefile``) is skipped whole. A cell that
still does not compile is reported and left out; the other cells are still linted.

The notebook JSON is never re-serialised: only the ``source`` values of changed cells are
replaced in the original text, in the file's own style (list or string, indentation, escaping),
so outputs, metadata and formatting stay byte for byte.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # (C-accelerated, untyped)
from typing import Any

from distlint.config import Config
from distlint.model import FileError, FileResult, Finding, Range

MARKER = "__distlint_cell__({})"
_MARKER_RE = re.compile(r"__distlint_cell__\((\d+)\)\r?\n?")
# An import statement, so that imports a fix adds still go after a cell's leading `!pip install`.
PLACEHOLDER = "import __distlint_magic_{}__"
# IPython's escape characters at the start of a logical line (inputtransformer2.EscapedCommand)
_ESCAPES = frozenset("!%?/,;")
# IPython's help-end form: a (dotted, possibly wildcarded, possibly magic) name, then ? or ??
_HELP_END = re.compile(r"%{0,2}(?!\d)[\w*]+(?:\.[\w*]+)*\?\??")
# %% cell magics whose body IPython runs as Python in the kernel's namespace (%%python and
# %%pypy run a separate interpreter: their body is another program, so they are skipped)
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
MAX_JSON_VALUES = 4_000_000  # ~300 MB of parsed JSON at most (outputs of plots included)
_COMPILE_FLAGS = ast.PyCF_ONLY_AST | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


class _Cell:
    __slots__ = ("number", "position", "original", "text", "magics", "start")

    def __init__(self, number: int, position: int, original: str) -> None:
        self.number = number  # 1-based among the notebook's code cells
        self.position = position  # index in the notebook's "cells" list
        self.original = original  # the cell's source text
        self.text = ""  # what is linted (magics replaced), ending with a newline
        self.magics: dict[str, str] = {}  # placeholder -> original line
        self.start = 0  # first line of the cell in the linted module (1-based)


def lint_notebook_source(
    source: str | bytes,
    path: str,
    config: Config,
    *,
    fix: bool = False,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
    debug: bool = False,
) -> FileResult:
    from distlint.runner import lint_source

    read = _read_notebook(source, path)
    if isinstance(read, FileError):
        return FileResult(path, errors=(read,))
    notebook, text = read
    if not _is_python(notebook):
        return FileResult(path)  # an R or Julia notebook: nothing for a Python linter to say

    cells, errors = _code_cells(notebook["cells"], path)
    if not cells:
        return FileResult(path, errors=tuple(errors))
    module_text = _join(cells)
    result = lint_source(
        module_text,
        path,
        config,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        ignore_noqa=ignore_noqa,
        debug=debug,
    )
    if result.fixed_source is not None:
        # After a fix, the findings are those of the FIXED module: map them with the cells'
        # lines in it (a fix that added lines to cell 1 moves every later cell down).
        _restart(cells, result.fixed_source)
    errors += [_map_error(e, cells, path) for e in result.errors]
    findings = tuple(_map_finding(f, cells) for f in result.findings)
    suppressed = tuple(_map_finding(f, cells) for f in result.suppressed)
    out = FileResult(path, findings, tuple(errors), suppressed=suppressed)
    if result.fixed_source is None:
        return out
    return _with_fixed_cells(out, source, text, cells, result)


def _read_notebook(source: str | bytes, path: str) -> tuple[dict[str, Any], str] | FileError:
    """The notebook's JSON and its text, or the error to report (not UTF-8, too many values
    to read, not JSON, not a notebook)."""
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return FileError(path, f"notebook is not UTF-8: {exc}")
    else:
        text = source
    # json builds every value at once: ~75 bytes each, so a notebook of tiny values (57 MB of
    # `[],` took 1.5 GB) is refused from a count of its separators (an upper bound) first
    values = text.count(",") + text.count("[") + text.count("{")
    if values > MAX_JSON_VALUES:
        return FileError(
            path,
            f"notebook JSON holds up to {values:,} values, over the {MAX_JSON_VALUES:,} "
            "that are read: not linted",
        )
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        return FileError(path, f"invalid notebook JSON: {exc}")
    except RecursionError:  # (json's own nesting limit: the interpreter's recursion limit)
        return FileError(path, "notebook JSON is nested too deeply to read: not a notebook")
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return FileError(path, 'not a Jupyter notebook (nbformat 4): no "cells" list')
    return notebook, text


def _with_fixed_cells(
    out: FileResult, source: str | bytes, text: str, cells: list[_Cell], result: FileResult
) -> FileResult:
    """``out`` with the notebook's fixed text: each fixed cell's source spliced into ``text``
    (encoded like ``source``); an error instead when a fix moved code across cells."""
    assert result.fixed_source is not None
    new_sources = _split(result.fixed_source, cells)
    if new_sources is None:
        return out._replace(
            errors=out.errors
            + (FileError(out.path, "a fix moved code across cells; fixes not applied"),),
        )
    new_text = _splice(
        text, {cell.position: new for cell, new in new_sources if new != cell.original}
    )
    if new_text == text:
        return out
    data = new_text.encode("utf-8")
    if isinstance(source, bytes) and source.startswith(b"\xef\xbb\xbf"):
        data = b"\xef\xbb\xbf" + data
    return out._replace(
        fixed_source=new_text,
        fixed_bytes=data if isinstance(source, bytes) else None,
        fixes_applied=result.fixes_applied,
    )


def _is_python(notebook: dict[str, Any]) -> bool:
    found = notebook.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    for key, sub in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(key, {})
        if isinstance(value, dict) and isinstance(value.get(sub), str):
            return value[sub].lower() == "python"
    return True


def _cell_source(cell: dict[str, Any]) -> str | None:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    return None


def _compiles(text: str) -> SyntaxError | None:
    try:
        compile(text, "<cell>", "exec", flags=_COMPILE_FLAGS, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:
        return SyntaxError(str(exc))
    return None


def _assign_magic_at(line: str) -> bool:
    """``target = %magic ...`` or ``target = !cmd``: IPython's MagicAssign / SystemAssign, found
    at the first plain ``=`` outside brackets and strings."""
    depth = 0
    strings = _Strings()
    k = 0
    while k < len(line):
        ch = line[k]
        k, code = strings.step(line, k)
        if not code:
            continue
        if ch == "#":
            return False
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0:
            at = k - 1
            if line[at + 1 : at + 2] == "=" or (at and line[at - 1] in "=<>!+-*/%&|^@:~"):
                return False  # a comparison, an augmented assignment or a walrus
            rest = line[at + 1 :].lstrip(" \t")
            if rest.startswith("%"):
                return bool(re.match(r"%(?!\d)\w", rest))
            return rest.startswith("!") and not rest.startswith("!=")
    return False


class _Strings:
    """Where a line's strings are, as the lexer walks it (an open triple-quoted string carries
    over to the next line)."""

    def __init__(self) -> None:
        self.quote = ""  # the open string's delimiter

    def step(self, line: str, k: int) -> tuple[int, bool]:
        """Move past ``line[k]`` (an escape, a string's delimiter or one character); the second
        value says whether ``line[k]`` is code, outside every string."""
        quote = self.quote
        if quote:
            if line[k] == "\\":
                return k + 2, False
            if line.startswith(quote, k):
                self.quote = ""
                return k + len(quote), False
            return k + 1, False
        if line[k] in "\"'":
            self.quote = line[k] * 3 if line.startswith(line[k] * 3, k) else line[k]
            return k + len(self.quote), False
        return k + 1, True


def _continued(lines: Sequence[str], i: int) -> int:
    """The last line of the construct starting at line ``i``: the lines its trailing
    backslashes continue (IPython's find_end_of_continued_line)."""
    while i + 1 < len(lines) and lines[i].rstrip("\r\n").endswith("\\"):
        i += 1
    return i


def ipython_constructs(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(first, last) line indices of each IPython construct in a cell's ``lines`` (with their
    line endings), found as IPython finds them: only at the start of a logical line, never in a
    string, a bracket or a backslash continuation of Python code."""
    found: list[tuple[int, int]] = []
    depth = 0
    strings = _Strings()
    continued = False  # the previous line ended in a backslash outside a string
    start = 0  # first line of the current logical line
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        if not (depth or strings.quote or continued):
            start = i
            body = line.lstrip(" \t\f")
            if body[:1] in _ESCAPES or _assign_magic_at(body):
                end = _continued(lines, i)
                found.append((i, end))
                i = end + 1
                continue
        depth, last, comment = _lex_line(line, strings, depth)
        continued = _continues(line, strings, comment)
        if not (depth or strings.quote or continued) and last == "?" and start == i:
            if _HELP_END.fullmatch(line.strip()):
                found.append((i, i))
        i += 1
    return found


def _lex_line(line: str, strings: _Strings, depth: int) -> tuple[int, str, bool]:
    """Lex one physical line of code: the bracket depth after it (from ``depth`` before it),
    its last significant character outside strings and comments, and whether it ends in a
    comment. ``strings`` carries a string open across lines."""
    last = ""
    k = 0
    while k < len(line):
        ch = line[k]
        k, code = strings.step(line, k)
        if code and ch == "#":
            return depth, last, True
        if code and ch in "([{":
            depth += 1
        elif code and ch in ")]}":
            depth = max(0, depth - 1)
        if not ch.isspace():
            last = ch
    return depth, last, False


def _continues(line: str, strings: _Strings, comment: bool) -> bool:
    """Does the logical line go on after the lexed ``line`` (a backslash at its end, outside a
    string and a comment)? An unterminated one-line string ends at the line's end."""
    if strings.quote:
        if len(strings.quote) == 1 and not line.endswith("\\"):
            strings.quote = ""
        return False
    return line.endswith("\\") and not comment


def _mask(cell: _Cell, lines: list[str]) -> None:
    """Swap each line of every IPython construct in ``lines`` for a placeholder statement at
    the construct's indentation; remember the originals in ``cell.magics``."""
    for first, last in ipython_constructs(lines):
        head = lines[first]
        indent = head[: len(head) - len(head.lstrip(" \t\f"))]
        for i in range(first, last + 1):
            line = lines[i]
            body = line.rstrip("\r\n")
            key = PLACEHOLDER.format(len(cell.magics) + 1)
            cell.magics[key] = body
            lines[i] = indent + key + line[len(body) :]


def _cell_magic(source: str) -> str | None:
    """The name of the ``%%`` cell magic a cell starts with (after blank lines), if any."""
    body = source.lstrip()
    if not body.startswith("%%"):
        return None
    match = re.match(r"%%([\w.-]*)", body)
    return match.group(1) if match else ""


def _code_cells(raw_cells: list[Any], path: str) -> tuple[list[_Cell], list[FileError]]:
    cells: list[_Cell] = []
    errors: list[FileError] = []
    number = 0
    for position, raw in enumerate(raw_cells):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        number += 1
        original = _cell_source(raw)
        if original is None:
            errors.append(
                FileError(
                    path, f'cell {number}: "source" is neither a string nor a list of strings'
                )
            )
            continue
        magic = _cell_magic(original)
        if not original.strip() or (magic is not None and magic not in PYTHON_CELL_MAGICS):
            continue  # empty, or a cell magic whose body is not Python (%%bash, %%writefile)
        cell = _Cell(number, position, original)
        lines = original.splitlines(keepends=True)
        problem = _compiles(original)
        if problem is not None:
            _mask(cell, lines)
            problem = _compiles("".join(lines))
        if problem is not None:
            where = f" at line {problem.lineno}" if problem.lineno else ""
            errors.append(
                FileError(
                    path, f"cell {number}: syntax error{where}: {problem.msg}; cell not linted"
                )
            )
            continue
        cell.text = "".join(lines)
        if not cell.text.endswith("\n"):
            cell.text += "\n"
        cells.append(cell)
    return cells, errors


def _join(cells: list[_Cell]) -> str:
    parts: list[str] = []
    line = 1
    for i, cell in enumerate(cells):
        if i:
            parts.append(MARKER.format(cell.number) + "\n")
            line += 1
        cell.start = line
        parts.append(cell.text)
        line += cell.text.count("\n")
    return "".join(parts)


def _restart(cells: list[_Cell], module_text: str) -> None:
    """Set each cell's first line from the markers in ``module_text`` (a fixed module)."""
    starts = {cells[0].number: 1}
    for lineno, line in enumerate(module_text.splitlines(keepends=True), start=1):
        m = _MARKER_RE.fullmatch(line)
        if m:
            starts[int(m.group(1))] = lineno + 1
    for cell in cells:
        cell.start = starts.get(cell.number, cell.start)


def _cell_at(line: int, cells: list[_Cell]) -> _Cell:
    found = cells[0]
    for cell in cells:
        if cell.start <= line:
            found = cell
    return found


def _map_finding(finding: Finding, cells: list[_Cell]) -> Finding:
    cell = _cell_at(finding.line, cells)
    offset = cell.start - 1
    rng = finding.range
    new = Range(
        max(1, rng.line - offset), rng.column, max(1, rng.end_line - offset), rng.end_column
    )
    return finding._replace(range=new, cell=cell.number)


def _map_error(error: FileError, cells: list[_Cell], path: str) -> FileError:
    if error.line is None:
        return error
    cell = _cell_at(error.line, cells)
    return FileError(
        path, f"cell {cell.number}, line {error.line - cell.start + 1}: {error.message}"
    )


def _split(fixed: str, cells: list[_Cell]) -> list[tuple[_Cell, str]] | None:
    """The fixed module cut back into its cells (None when the markers did not survive)."""
    segments: list[list[str]] = [[]]
    numbers: list[int] = [cells[0].number]
    for line in fixed.splitlines(keepends=True):
        m = _MARKER_RE.fullmatch(line)
        if m:
            numbers.append(int(m.group(1)))
            segments.append([])
        else:
            segments[-1].append(line)
    if numbers != [c.number for c in cells]:
        return None
    out = []
    for cell, segment in zip(cells, segments):
        restored = []
        for line in segment:
            body = line.rstrip("\r\n")
            key = body.strip()
            restored.append(cell.magics[key] + line[len(body) :] if key in cell.magics else line)
        text = "".join(restored)
        # the cell keeps its own ending (often no final newline); blank lines a fix leaves
        # before the next cell's marker are dropped
        body = cell.original.rstrip("\r\n")
        text = text.rstrip("\r\n") + cell.original[len(body) :]
        out.append((cell, text))
    return out


# ------------------------------------------------------------------------------------------
# Writing cells back into the original JSON text
# ------------------------------------------------------------------------------------------


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m is not None else i


def _members(text: str, i: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at ``text[i] == '{'``."""
    j = _skip(text, i + 1)
    if text[j] == "}":
        return
    while True:
        key, j = scanstring(text, j + 1)
        j = _skip(text, _skip(text, j) + 1)  # past ':'
        _, end = _DECODER.raw_decode(text, j)
        yield key, j, end
        j = _skip(text, end)
        if text[j] == "}":
            return
        j = _skip(text, j + 1)


def _elements(text: str, i: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each value of the JSON array starting at ``text[i] == '['``."""
    j = _skip(text, i + 1)
    if text[j] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, j)
        yield j, end
        j = _skip(text, end)
        if text[j] == "]":
            return
        j = _skip(text, j + 1)


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    spans: dict[int, tuple[int, int]] = {}
    for key, start, _ in _members(text, _skip(text, 0)):
        if key != "cells":
            continue
        for position, (cell_start, _) in enumerate(_elements(text, start)):
            if text[cell_start] != "{":
                continue
            for cell_key, s, e in _members(text, cell_start):
                if cell_key == "source":
                    spans[position] = (s, e)
    return spans


def _indent_unit(text: str) -> str:
    second = text.split("\n", 2)[1] if text.count("\n") >= 1 else ""
    unit = second[: len(second) - len(second.lstrip(" \t"))]
    return unit or " "


def _serialise(text: str, start: int, end: int, new_source: str, ensure_ascii: bool) -> str:
    old = text[start:end]
    dump = lambda s: json.dumps(s, ensure_ascii=ensure_ascii)  # noqa: E731
    if old.startswith('"'):
        return dump(new_source)
    lines = new_source.splitlines(keepends=True)
    if not lines:
        return "[]"
    items = list(_elements(text, start))
    if items:
        opening = text[start : items[0][0]]
        closing = text[items[-1][1] : end]
        between = text[items[0][1] : items[1][0]] if len(items) > 1 else "," + opening[1:]
    else:
        line_start = text.rfind("\n", 0, start) + 1
        key_line = text[line_start:start]
        key_indent = key_line[: len(key_line) - len(key_line.lstrip(" \t"))]
        inner = key_indent + _indent_unit(text)
        opening, between, closing = "[\n" + inner, ",\n" + inner, "\n" + key_indent + "]"
    return opening + between.join(dump(line) for line in lines) + closing


def _splice(text: str, new_sources: dict[int, str]) -> str:
    """``text`` with the ``source`` of the cells at the given positions replaced."""
    if not new_sources:
        return text
    spans = _source_spans(text)
    ensure_ascii = text.isascii() and bool(
        re.search(r"\\u(?!00[01][0-9a-fA-F])[0-9a-fA-F]{4}", text)
    )
    out: list[str] = []
    last = 0
    for position in sorted(new_sources):
        start, end = spans[position]
        out.append(text[last:start])
        out.append(_serialise(text, start, end, new_sources[position], ensure_ascii))
        last = end
    out.append(text[last:])
    return "".join(out)


# ------------------------------------------------------------------------------------------
# --add-noqa
# ------------------------------------------------------------------------------------------


def add_noqa(data: bytes, findings: Sequence[Finding]) -> tuple[bytes, int]:
    """The notebook ``data`` with ``# noqa: CODE`` comments for ``findings`` (cell-relative
    positions, as :func:`lint_notebook_source` reports them) written into their cells; also
    the number of lines changed. Only the changed cells' sources are replaced in the JSON."""

    bom = data.startswith(b"\xef\xbb\xbf")
    text = data.decode("utf-8-sig")
    notebook = json.loads(text)
    by_cell: dict[int, list[Finding]] = {}
    for finding in findings:
        if finding.cell is not None:
            by_cell.setdefault(finding.cell, []).append(finding)
    new_sources: dict[int, str] = {}
    changed = 0
    number = 0
    for position, raw in enumerate(notebook.get("cells", [])):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        number += 1
        source = _cell_source(raw)
        if source is None or number not in by_cell:
            continue
        new, count = _add_noqa_to_cell(source, by_cell[number])
        if count and new != source:
            new_sources[position] = new
            changed += count
    if not new_sources:
        return data, 0
    out = _splice(text, new_sources).encode("utf-8")
    return (b"\xef\xbb\xbf" + out if bom else out), changed


def _add_noqa_to_cell(source: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """One cell's source with ``# noqa`` comments for its (cell-relative) findings."""
    from distlint.edits import LineIndex, splice
    from distlint.noqa import Placement, directive_edit

    placement = Placement(source)
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        target = placement.target(finding.line)
        if target is None:
            continue  # nowhere to put it: leave the finding visible
        codes = wanted.setdefault(target, [])
        if finding.code not in codes:
            codes.append(finding.code)
    lines = LineIndex(source)
    edits = [e for line, codes in wanted.items() if (e := directive_edit(lines, line, codes))]
    edits.sort(key=lambda e: e.start)
    return splice(source, edits), len(edits)
