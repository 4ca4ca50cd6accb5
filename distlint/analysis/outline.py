"""What a module's text says about its names, without parsing it: where each function and class
is written, what each import binds, which lines are module-level code.

The project analysis asks another module for the summary of one function or class only when
that definition (with the module-level code and the project definitions it names, followed
transitively) writes one of the names the question is about (see
:meth:`~distlint.analysis.project.Project.name_may_write`): a diffusers pipeline calling
``randn_tensor`` needs no parse of ``torch_utils.py`` to learn that it seeds nothing. The
outline is a superset view: strings and comments are blanked before lines are joined and
indentation is read, so a ``def`` inside a docstring is never taken for one; a text the outline
cannot read with confidence (an unterminated string, unbalanced brackets) answers "maybe"
(``None``), and the caller parses the module as before.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

# Strings (triple-quoted first) and comments. f-strings hold code: their spans are kept to
# read names from, though they are blanked for the structure like every other string. Each
# string body is written "plain run, then (escape or lone quote, plain run) repeated": one way
# to match any text, so a string that never ends fails in linear time (a body written as
# `(?:[^"\\]+|...)*` tries every split of the text: minutes for an unterminated docstring).
# A match starts at its quote or `#`: the letters of a string's prefix (`rb"..."`) are read
# before it by `_blanked`, so the regex engine skips every other character in its own loop.
_BLANKED = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r"|\#[^\n]*",
    re.S,
)
_PREFIX_LETTERS = frozenset("rRbBuUfF")
_LINE_TEXT = re.compile(r"[^\n]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A dotted name not read from another (`mod.f`, not the `f` of `x.f` or `x[0].f`), its first
# name, and the `(` after it when it is called. Each match takes the whole chain: the engine
# looks behind only at a name's first letter, and never backtracks along a chain not called.
_CHAIN = re.compile(r"(([A-Za-z_](?<![\w.].)\w*)(?:\s*\.\s*[A-Za-z_]\w*)*)(\s*\()?")
_WALRUS = re.compile(r"([A-Za-z_]\w*)[ \t]*:=")
_ASSIGNED = re.compile(r"(?<![=!<>])=(?!=)")
_HEADER = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+([A-Za-z_]\w*)")
_FROM = re.compile(r"from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(.*)", re.S)
_IMPORT = re.compile(r"import[ \t]+(.*)", re.S)
_DEF_KEYWORD = re.compile(r"^[ \t]*(?:async[ \t]+)?def\b", re.M)
# what ends or opens a part of a `def` signature: brackets, and at the top level of the
# parameters the `:` of an annotation, the `=` of a default and the `,` between parameters
_SIGNATURE_MARK = re.compile(r"[()\[\]{},:=]")
_IN_FUNCTION_FIRST = frozenset("fig")  # first letters of `from`, `import`, `global`


class Import(NamedTuple):
    """``from <level dots><module> import name [as bound]`` (``name`` None: ``import module
    [as bound]``); ``star``: ``from module import *``."""

    module: str
    name: str | None
    level: int
    words: frozenset[str]  # what the statement writes


class Outline:
    """The text-level structure of one module (see the module docstring)."""

    __slots__ = (
        "code",
        "fstrings",
        "keys",
        "defs",
        "headers",
        "kinds",
        "imports",
        "stars",
        "module_lines",
        "_by_ident",
        "globals",
        "module_imports",
        "_attributes",
        "_called_on",
    )

    def __init__(self, code: str) -> None:
        self.code = code  # the text, strings and comments blanked (same offsets)
        self.fstrings: list[tuple[int, int, str]] = []  # (start, end, text) of f-strings
        # (start, word) of each plain string literal that is one identifier (`"RANK"`,
        # `cfg["world_size"]`): a key, which code reads values by
        self.keys: list[tuple[int, str]] = []
        # name -> spans (start, end) of the top-level (not nested) `def` / `class` of it, and
        # of its header (decorators, bases, defaults)
        self.defs: dict[str, list[tuple[int, int]]] = {}
        self.headers: dict[str, list[tuple[int, int]]] = {}
        self.kinds: dict[str, list[str]] = {}  # name -> `def` or `class`, for each of them
        self.imports: dict[str, list[Import]] = {}  # bound name -> what binds it
        self.stars: list[Import] = []
        self.module_lines: list[tuple[int, int]] = []  # module-level code, imports aside
        self._by_ident: dict[str, list[int]] | None = None
        # name -> the top-level functions assigning it as a `global`
        self.globals: dict[str, list[str]] = {}
        self.module_imports: set[str] = set()  # names bound by a module-level import
        self._attributes: dict[str, set[str]] = {}  # a name -> `attributes` of it
        self._called_on: dict[str, set[str]] | None = None

    @property
    def by_ident(self) -> dict[str, list[int]]:
        """Name -> the indices of the ``module_lines`` that may bind it (read when first
        asked: most outlines are asked about a few names, through their definitions)."""
        found = self._by_ident
        if found is None:
            found = self._by_ident = {}
            code = self.code
            for i, (start, end) in enumerate(self.module_lines):
                for ident in _bound_names(code[start:end].strip()):
                    found.setdefault(ident, []).append(i)
        return found

    def called(self, start: int, end: int) -> set[str]:
        """The first names of the expressions called in ``[start, end)`` (``mod`` of
        ``mod.f()``): what a call there can reach another module through."""
        return {first for _, first, call in _CHAIN.findall(self.code, start, end) if call}

    def attributes(self, spelled: str) -> set[str]:
        """The names called as attributes of ``spelled`` (``mod.f()``, ``pkg.mod.f()``), once
        per name asked."""
        known = self._attributes
        found = known.get(spelled)
        if found is None:
            found = known[spelled] = self._attributes_of(spelled)
        return found

    def _attributes_of(self, spelled: str) -> set[str]:
        """`attributes`, from the dotted names that start with the first part of ``spelled``
        (a search for that word, the regex engine's own loop); from a scan of every dotted
        name where one may run into it (`x . mod.f()`: spaces before the dot)."""
        parts = spelled.split(".")
        head = parts[0]
        if _IDENT.fullmatch(head) is None:
            return self._chains().get(spelled, set())
        search = _word_search(head)
        code = self.code
        depth = len(parts)
        out: set[str] = set()
        for m in search.finditer(code):
            start = before = m.start()
            while before > 0 and code[before - 1].isspace():
                before -= 1
            if before < start and before > 0 and code[before - 1] == ".":
                return self._chains().get(spelled, set())
            chain = _CHAIN.match(code, start)
            assert chain is not None
            if chain.group(3) is None:
                continue  # not called
            names = "".join(chain.group(1).split()).split(".")
            if len(names) > depth and names[:depth] == parts:
                out.add(names[depth])
        return out

    def _chains(self) -> dict[str, set[str]]:
        """Each dotted name called in the module (``pkg.mod`` of ``pkg.mod.f()``) -> the names
        called as its attributes: one scan of every dotted name of the module."""
        if self._called_on is None:
            found: dict[str, set[str]] = {}
            for chain, _, call in _CHAIN.findall(self.code):
                if not call or "." not in chain:
                    continue
                parts = "".join(chain.split()).split(".")
                for i in range(1, len(parts)):
                    found.setdefault(".".join(parts[:i]), set()).add(parts[i])
            self._called_on = found
        return self._called_on

    def words(self, start: int, end: int) -> set[str]:
        """The names written in ``[start, end)``, code and f-strings."""
        out = set(_IDENT.findall(self.code, start, end))
        strings = self.fstrings  # in text order, none overlapping
        i = max(0, bisect_right(strings, (start,)) - 1)
        while i < len(strings) and strings[i][0] < end:
            if strings[i][1] > start:
                out.update(_IDENT.findall(strings[i][2]))
            i += 1
        return out

    def header_words(self, start: int, end: int) -> set[str]:
        """The names a definition's header ``[start, end)`` gives the definition: a class's
        bases, keywords and decorators; a function's decorators, default values and what its
        header calls, not its annotations (a type says nothing of the values passed)."""
        code = self.code
        found = _DEF_KEYWORD.search(code, start, end)
        if found is None:
            return self.words(start, end)
        out = self.words(start, found.start()) | self.called(found.end(), end)
        opening = code.find("(", found.end(), end)
        if opening < 0:
            return out
        depth, kept, annotated = 0, opening + 1, False
        for mark in _SIGNATURE_MARK.finditer(code, opening, end):
            char = mark.group()
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
                if depth == 0:  # the parameters end; what follows is `-> annotation:`
                    if not annotated:
                        out |= self.words(kept, mark.start())
                    break
            elif depth != 1:
                continue
            elif char == ":" and not annotated:
                out |= self.words(kept, mark.start())
                annotated = True
            elif char in ",=" and annotated:
                annotated, kept = False, mark.end()
        return out

    def keys_in(self, start: int, end: int) -> set[str]:
        """The identifiers written as whole string literals in ``[start, end)``."""
        keys = self.keys  # in text order
        i = bisect_right(keys, (start,))
        out = set()
        while i < len(keys) and keys[i][0] < end:
            out.add(keys[i][1])
            i += 1
        return out


def outline(text: str) -> Outline | None:
    """The outline of ``text``; None when it cannot be read with confidence."""
    code, fstrings, keys = _blanked(text)
    if '"' in code or "'" in code:
        return None  # a quote left over: an unterminated string (or a syntax error)
    out = Outline(code)
    out.fstrings = fstrings
    out.keys = keys
    if not _read_blocks(out):
        return None
    return out


def _blanked(
    text: str,
) -> tuple[str, list[tuple[int, int, str]], list[tuple[int, str]]]:
    """``text`` with its strings and comments blanked (newlines kept), its f-strings, and the
    plain strings that are one identifier (see ``Outline.keys``). A string's prefix is the
    one or two letters of `rRbBuUfF` just before its quote (not inside what was blanked)."""
    out: list[str] = []
    fstrings: list[tuple[int, int, str]] = []
    keys: list[tuple[int, str]] = []
    letters = _PREFIX_LETTERS
    last = 0
    for m in _BLANKED.finditer(text):
        start, end = m.span()
        s = m.group()
        if s[0] != "#":
            quote = start
            if start > last and text[start - 1] in letters:
                start -= 1
                if start > last and text[start - 1] in letters:
                    start -= 1
            if start < quote and ("f" in text[start:quote] or "F" in text[start:quote]):
                fstrings.append((start, end, text[start:end]))
            elif end - start < 48 and s[1:-1].isidentifier():
                keys.append((start, s[1:-1]))
        out.append(text[last:start])
        if "\n" in s:
            out.append(_LINE_TEXT.sub(_spaces, text[start:end]))
        else:
            out.append(" " * (end - start))
        last = end
    out.append(text[last:])
    return "".join(out), fstrings, keys


def _spaces(line: re.Match[str]) -> str:
    return " " * (line.end() - line.start())


def _read_blocks(out: Outline) -> bool:
    """Fill ``out`` from its code, logical line by logical line; False when the brackets never
    close. The body of a top-level function or class is read as a whole where it can be
    (see `_body_end`), else line by line."""
    code = out.code
    stack: list[tuple[int, str, int]] = []  # open top-level def/class: (indent, name, start)
    decorated = -1  # where the decorators of the next def/class begin
    logical: Iterator[tuple[int, int, int]] | None = _logical_lines(code, 0)
    while logical is not None:
        reading, logical = logical, None
        for indent, start, end in reading:
            if indent < 0:
                return False
            while stack and indent <= stack[-1][0]:
                _, name, first = stack.pop()
                out.defs.setdefault(name, []).append((first, start))
            if stack:
                # inside a function or class only imports and `global` matter (most lines)
                if code[start + indent] in _IN_FUNCTION_FIRST:
                    _in_function(code[start + indent : end].strip(), out, stack[0][1])
                continue
            stripped = code[start + indent : end].strip()
            header = _HEADER.match(stripped)
            if header is not None:
                first = decorated if decorated >= 0 else start
                stack.append((indent, header.group(2), first))
                out.headers.setdefault(header.group(2), []).append((first, end))
                out.kinds.setdefault(header.group(2), []).append(header.group(1))
                decorated = -1
                after = _body_end(out, end + 1, indent, header.group(2))
                if after is not None:  # read on from the line that ends the body, if any
                    logical = _logical_lines(code, after)  # (none past the end)
                    break
            elif stripped.startswith("@"):
                decorated = start if decorated < 0 else decorated
            else:
                decorated = -1
                if not _imports_in(stripped, out, module_level=True):
                    out.module_lines.append((start, end))
    for _, name, first in stack:
        out.defs.setdefault(name, []).append((first, len(code)))
    return True


# Text whose brackets all close, none closing before it opens, nested 12 deep at most: each
# level is "plain run, then (opener, the level below, closer, plain run) repeated", one way to
# match any text, so a text that is not such fails in linear time.
_PLAIN = r"[^()\[\]{}]*"
_NESTED = _PLAIN
for _ in range(12):
    _NESTED = _PLAIN + r"(?:[(\[{]" + _NESTED + r"[)\]}]" + _PLAIN + r")*"
_BALANCED = re.compile(_NESTED)
# the line break before a statement of a body that may import or declare a `global` (its
# indentation taken whole: a lookahead is never tried again on part of it)
_BODY_STATEMENT = re.compile(r"\n(?=([^\S\n]*))\1(?=from|import|global)")


@lru_cache(maxsize=256)
def _word_search(word: str) -> re.Pattern[str]:
    """A search for the name ``word`` where no other name runs into it (not `x.word`)."""
    spelled = re.escape(word)
    return re.compile(rf"{spelled}(?<![\w.]{spelled})(?!\w)")


@lru_cache(maxsize=64)
def _dedent(indent: int) -> re.Pattern[str]:
    """A line break before a line indented ``indent`` characters at most, not blank."""
    return re.compile(rf"\n[^\S\n]{{0,{indent}}}\S")


def _body_end(out: Outline, body: int, indent: int, owner: str) -> int | None:
    """Where the body from ``body`` of the top-level definition ``owner`` (written at
    ``indent``) ends: the first line written no deeper that is not blank, when every
    bracket opened in between closes and no backslash joins lines there (then that line
    starts a logical line, as `_logical_lines` would find). Its imports and `global`
    statements are read into ``out``. None: the body is read line by line."""
    code = out.code
    found = _dedent(indent).search(code, body - 1)  # (from the line break ending the header)
    after = found.start() + 1 if found is not None else len(code)
    if after <= body:
        return None
    if code.find("\\", body, after) >= 0 or _BALANCED.fullmatch(code, body, after) is None:
        return None
    if code.find("import", body, after) < 0 and code.find("global", body, after) < 0:
        return after  # (what `_in_function` records, such a body cannot write: most bodies)
    read, depth = body, 0
    for statement in _BODY_STATEMENT.finditer(code, body - 1, after):
        depth += _depth_change(code, read, statement.start())
        read = statement.start()
        if depth == 0:  # not a line within brackets: a statement
            first = statement.end()
            _in_function(code[first : _statement_end(code, first, after)].strip(), out, owner)
    return after


def _depth_change(code: str, start: int, end: int) -> int:
    """Brackets opened minus brackets closed in ``code[start:end]``."""
    return (
        code.count("(", start, end)
        + code.count("[", start, end)
        + code.count("{", start, end)
        - code.count(")", start, end)
        - code.count("]", start, end)
        - code.count("}", start, end)
    )


def _statement_end(code: str, first: int, limit: int) -> int:
    """The end of the logical line starting at ``first``: the end of its first physical line
    where its brackets are all closed (they are, by ``limit``)."""
    depth, read = 0, first
    while True:
        end = code.find("\n", read, limit)
        if end < 0:
            return limit
        depth += _depth_change(code, read, end)
        if depth <= 0:
            return end
        read = end + 1


def _in_function(stripped: str, out: Outline, owner: str) -> None:
    """A line inside the top-level function or class ``owner``: an import there binds a name
    too, and a `global` statement makes ``owner`` a binder of module names."""
    _imports_in(stripped, out)
    if stripped.startswith("global"):
        for name in _IDENT.findall(stripped)[1:]:
            out.globals.setdefault(name, []).append(owner)


def _bound_names(stripped: str) -> set[str]:
    """The names a module-level statement may bind (a superset): assignment targets, loop and
    `with` targets, walrus names."""
    out = set(_WALRUS.findall(stripped)) if ":=" in stripped else set()
    if stripped.startswith(("for ", "async for ")):
        head = stripped.split(" in ", 1)[0]
        out.update(_IDENT.findall(head))
    elif stripped.startswith(("with ", "async with ", "except")):
        for part in stripped.split(" as ")[1:]:
            out.update(_IDENT.findall(part)[:1])
    else:
        m = _ASSIGNED.search(stripped)
        if m is not None:
            out.update(_IDENT.findall(stripped, 0, m.start()))
    return out


def _logical_lines(code: str, pos: int) -> Iterator[tuple[int, int, int]]:
    """(indent, start, end) of each non-blank logical line of ``code`` from position ``pos``
    (a line's start, outside brackets) on (brackets and backslashes join physical lines);
    indent -1 when the text ends inside brackets. (Lines are cut as they are read: most of a
    module's lines are in the bodies `_body_end` passes over whole.)"""
    start = -1
    indent = 0
    depth = 0
    find = code.find
    more = True
    while more:
        found = find("\n", pos)
        more = found >= 0
        end = found if more else len(code)
        line = code[pos:end]
        if start < 0:
            body = line.lstrip()
            if not body:
                pos = end + 1
                continue
            start = pos
            indent = len(line) - len(body)
        depth += (
            line.count("(")
            + line.count("[")
            + line.count("{")
            - line.count(")")
            - line.count("]")
            - line.count("}")
        )
        if depth <= 0 and not ("\\" in line and line.rstrip().endswith("\\")):
            yield indent, start, end
            start = -1
            depth = 0
        pos = end + 1
    if start >= 0:
        yield (indent if depth <= 0 else -1), start, pos - 1


def _imports_in(stripped: str, out: Outline, module_level: bool = False) -> bool:
    """Record the import statement ``stripped`` (a logical line); False when it is none.
    ``module_level``: the names it binds are module names (``Outline.module_imports``)."""
    if stripped.startswith("from"):
        bound = _from_import(stripped, out)
    elif stripped.startswith("import"):
        bound = _plain_import(stripped, out)
    else:
        return False
    if bound is None:
        return False
    if module_level:
        out.module_imports.update(bound)
    return True


def _from_import(stripped: str, out: Outline) -> list[str] | None:
    """Record `from <module> import ...`; the names it binds (None: not one)."""
    m = _FROM.match(stripped)
    if m is None:
        return None
    level, module, body = len(m.group(1)), m.group(2), m.group(3)
    found = []
    for part in body.replace("\\", " ").strip("() \t\n").split(","):
        names = part.split()
        if not names:
            continue
        if names[0] == "*":
            out.stars.append(Import(module, "*", level, frozenset()))
            continue
        bound = names[2] if len(names) >= 3 and names[1] == "as" else names[0]
        words = frozenset((*module.split("."), names[0], bound))
        out.imports.setdefault(bound, []).append(Import(module, names[0], level, words))
        found.append(bound)
    return found


def _plain_import(stripped: str, out: Outline) -> list[str] | None:
    """Record `import <module> [as name], ...`; the names it binds (None: not one)."""
    m = _IMPORT.match(stripped)
    if m is None:
        return None
    found = []
    for part in m.group(1).replace("\\", " ").split(","):
        names = part.split()
        if not names:
            continue
        module = names[0]
        if len(names) >= 3 and names[1] == "as":
            bound = names[2]
        else:
            bound = module.split(".")[0]
        words = frozenset((*module.split("."), bound))
        out.imports.setdefault(bound, []).append(Import(module, None, 0, words))
        found.append(bound)
    return found
