"""Refuse, before LibCST sees it, source that would crash, stall or exhaust the linter.

LibCST's native parser recurses on the C stack (3,000 nested parentheses split over lines
segfault the process), takes time quadratic in the length of a left-recursive chain (a sum,
an attribute/call/subscript chain: a 5,000-link call chain runs for minutes) and memory
quadratic in right-recursive nesting (unary operators, ``**``, ``lambda``, conditional
expressions); the rules then walk the tree recursively. :func:`check_source` measures each
text with one linear scan (a small tokenizer: strings, comments, brackets, operators, keywords;
it never recurses and holds O(nesting) state) and returns one :class:`FileError` naming the
file, the line and the bound when the text is over one of them:

=========================  ========================================================
``max-file-size``          bytes of one file that is parsed (configurable, default 512 KiB;
                           LibCST needs ~650 MB and ~13 s per MiB of ordinary code)
``MAX_BRACKETS`` (200)     nested brackets: Python's own limit ("too many nested
                           parentheses"); LibCST segfaults at ~1,400 over lines
``MAX_DEPTH`` (1,200)      estimated nesting of the syntax tree in one statement: brackets,
                           operators, trailers, ``not``/``and``/``or``, ``lambda``,
                           conditional expressions, implicitly concatenated strings,
                           ``elif`` chains, indented blocks
``MAX_CHAIN_COST`` (4 M)   links x tokens of one left-recursive chain (``a + b + ...``,
                           ``x.f().g()[0]...``): LibCST's parse time grows with it (~1 s at
                           the bound; a sum of 1,400 terms)
``MAX_PARSE_COST``         LibCST's estimated memory for the nesting of the file's
(512 MiB)                  statements (quadratic in each statement's depth of brackets,
                           conditional expressions, lambdas, unary operators, ``**``;
                           summed over the file): ~6 s of parsing at the bound
=========================  ========================================================

Valid code within the bounds is linted; the text is never executed or imported. The language
server and the command line share this one function.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Callable

from distlint.config import DEFAULT_MAX_FILE_SIZE  # 512 KiB: `max-file-size`
from distlint.files import human_size
from distlint.model import FileError

MAX_BRACKETS = 200  # CPython's tokenizer refuses more ("too many nested parentheses")
MAX_DEPTH = 1200
MAX_CHAIN_COST = 4_000_000
# The rules and LibCST's own visitors recurse per tree level (2-4 Python frames each): the
# interpreter's default limit of 1,000 frames stops them at ~450 levels. Within MAX_DEPTH
# this many frames use well under 8 MB of C stack (measured to 6,000 levels in a thread).
RECURSION_LIMIT = 12 * MAX_DEPTH
# LibCST's parser (a packrat parser in Rust) keeps, for every token of a statement, what it
# parsed from there: right-recursive nesting (brackets, conditional expressions, lambdas, unary
# operators, `**`) costs memory and time quadratic in its depth, and what a file's statements
# cost adds up. The scan estimates it: each level opened adds its depth in the statement times
# the bytes one such level was measured to cost (LibCST 1.9, per level below it: a bracket
# 1.6 KB, `lambda` 550, `if` 400, `**` 250, `not` or a unary operator 120; the estimate is
# within 0.9-1.5x of the memory measured for each construct nested 100-1,100 deep, and the
# time is ~1.2 s per 100 MB). Ordinary code stays far below the bound (see
# tests/test_robustness.py); a 1,100-deep conditional expression estimates at ~240 MB
# (measured: 215 MB, 1.3 s): a file may hold two, not three; the bound is ~6 s of parsing.
MAX_PARSE_COST = 512 << 20  # estimated bytes of LibCST's parse of one file beyond the linear part
BRACKET_COST = 1600
# Keywords whose operand LibCST nests right-recursively (`and` / `or` chains are flat).
_KEYWORD_COSTS = {"lambda": 550, "if": 400, "await": 400, "yield": 400, "not": 120}
UNARY_COST = 120
POWER_COST = 250

# Keywords that nest what follows them one level deeper (right-recursive in the tree), and
# the others (they end the chain before them).
_NESTING_KEYWORDS = "not and or if lambda await yield"
_OTHER_KEYWORDS = (
    "False None True as assert async break class continue def del elif else except finally "
    "for from global import in is nonlocal pass raise return try while with"
)
# LibCST builds each node through its constructor, which checks the node (``_validate``): the
# lint path's parse skips those checks (:func:`distlint.parse.parse`) where they cannot refuse
# anything LibCST's native parser accepts. They can (checked for LibCST 1.9 by reading each
# check and by parsing with and without them: see benchmarks/libcst_checks.py) only where a
# keyword touches what follows it or what precedes it without a blank: a keyword right before a
# number starting with a dot or a star (``if.5``, ``return*a``), an ``await`` expression right
# before a keyword (``await(a)if b else c``); a bytes literal concatenated with a string; a bare
# ``except:`` before another handler; and the same inside an f-string's or t-string's fields.
# The scan sends such a text to the parse that checks (see ``checks`` of check_source).
_UNCHECKED_AFTER_KEYWORD = ("*", *(f".{digit}" for digit in "0123456789"))


def _one_of(words: str) -> str:
    """A regex alternation of the space-separated ``words``, grouped by first letter: the
    engine tries one branch per letter, not one per word."""
    by_letter: dict[str, list[str]] = {}
    for word in sorted(words.split(), key=len, reverse=True):
        by_letter.setdefault(word[0], []).append(word[1:])
    return "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in by_letter.items())


# One token per match; leading blanks are eaten by the match (a search from every blank is what
# makes a naive alternation slow). Possessive quantifiers: no backtracking, linear time. The
# groups tell the kinds apart (each kind has its step in `_Scanner`). The operators' groups
# exclude each other, so they are in the order of how often they come in ordinary code (what
# the engine's speed depends on); keywords come before names, dots before numbers. A name or a
# number of ASCII letters and digits only has a group of its own (what the checks of
# check_source need not look at), as has a character other than ASCII that no token holds.
_TOKEN_PATTERN = r"""[ \t\f]*+(?:
    (?P<nl>\r\n|\r|\n)
    |(?P<separator>[,;~]|==?|\*\*=|//=|<<=|>>=|->|[-+*/%@&|^<>!]=|<(?![<=])|>(?![>=]))
    |(?P<dot>\.(?!\.\.))
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<colon>:(?!=))
    |(?P<nesting>(?:NESTING)(?![\w'"]))
    |(?P<keyword>(?:KEYWORDS)(?![\w'"]))
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*+)(?![\w'"])
    |(?P<uname>[^\W\d]\w*+)(?!['"])
    |(?P<str>[rRbBuUfF]{0,2}(?:
        '''(?:[^'\\]|\\.|'(?!''))*+'''
        |\"\"\"(?:[^"\\]|\\.|"(?!""))*+\"\"\"
        |'(?:[^'\\\r\n]|\\.)*+'
        |"(?:[^"\\\r\n]|\\.)*+"))
    |(?P<comment>\#[^\r\n]*+)
    |(?P<binary>//(?!=)|<<(?!=)|>>(?!=)|-(?![=>])|[+%@&|^](?!=)|\*(?![*=])|/(?![/=]))
    |(?P<power>\*\*(?!=))
    |(?P<ellipsis>\.\.\.)
    |(?P<walrus>:=)
    |(?P<num>\.?\d[0-9_.]*+)(?![\w.])
    |(?P<wnum>\.?\d[\w.]*+)
    |(?P<cont>\\(?:\r\n|\r|\n))
    |(?P<bad>['"\\])
    |(?P<other>[^\x00-\x7f])
    )""".replace("NESTING", _one_of(_NESTING_KEYWORDS)).replace(
    "KEYWORDS", _one_of(_OTHER_KEYWORDS)
)


def without_possessive(pattern: str) -> str:
    """``pattern`` with each possessive run ``ATOM*+`` (Python 3.11+) written as
    ``(?=(?P<_runN>ATOM*))(?P=_runN)``, which Python 3.9 and 3.10 read: the lookahead takes the
    longest run and the back-reference consumes exactly it, so nothing of it is given back.
    ATOM is what precedes the quantifier: a character class, a group, an escape or a character."""
    out: list[str] = []  # pieces of the result; the last one is the atom before a quantifier
    opens: list[int] = []  # where each group still open starts in ``out``
    i = runs = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            piece, i = pattern[i : i + 2], i + 2
        elif c == "[":
            j = i + 1
            j += pattern.startswith("^", j)
            j += pattern.startswith("]", j)  # a leading ] is a member of the class
            while pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            piece, i = pattern[i : j + 1], j + 1
        elif c == "(":
            opens.append(len(out))
            piece, i = c, i + 1
        elif c == ")":
            start = opens.pop()
            piece, i = "".join(out[start:]) + c, i + 1
            del out[start:]
        elif pattern.startswith("*+", i):
            runs += 1
            piece, i = f"(?=(?P<_run{runs}>{out.pop()}*))(?P=_run{runs})", i + 2
        else:
            piece, i = c, i + 1
        out.append(piece)
    return "".join(out)


_TOKEN = re.compile(
    _TOKEN_PATTERN if sys.version_info >= (3, 11) else without_possessive(_TOKEN_PATTERN),
    re.VERBOSE | re.DOTALL,
)


@functools.cache
def _unchecked_in_fields() -> re.Pattern[str]:
    """What sends an f-string's or t-string's fields to the checking parse (see above);
    compiled when first asked (a command's start pays for no more than it uses)."""
    return re.compile(
        r"(?<!\w)(?:(?:KEYWORDS)(?:\.\d|\*)|[bB][rR]?['\"]|[rR][bB]['\"]|await(?!\w))".replace(
            "KEYWORDS", _one_of(f"{_NESTING_KEYWORDS} {_OTHER_KEYWORDS}")
        )
    )


# A character other than ASCII in an f-string's field (before any nested field).
_NON_ASCII_FIELD = re.compile(r"\{[^{}]*[^\x00-\x7f]")
# A keyword inside a number's token (the scan reads ``1if.5`` as one).
_UNCHECKED_NUMBER = re.compile(r"[^\W\d]\.\d")
# Token kinds: the group a match closes last (``m.lastindex``), numbered in the pattern's order.
(
    _NL,
    _SEPARATOR,
    _DOT,
    _OPEN,
    _CLOSE,
    _COLON,
    _NESTING,
    _KEYWORD,
    _NAME,
    _UNAME,
    _STR,
    _COMMENT,
    _BINARY,
    _POWER,
    _ELLIPSIS,
    _WALRUS,
    _NUM,
    _WNUM,
    _CONT,
    _BAD,
    _OTHER,
) = (
    _TOKEN.groupindex[kind]
    for kind in (
        "nl separator dot open close colon nesting keyword name uname str comment binary power "
        "ellipsis walrus num wnum cont bad other"
    ).split()
)
# What the previous token ends (`_Scanner.after`): nothing that takes a trailer, an operand, or a
# string literal (an operand too; a string right after it is implicitly concatenated).
_NOTHING, _OPERAND, _STRING = 0, 1, 2


def ensure_recursion_headroom() -> None:
    """Let the tree walks reach MAX_DEPTH levels (only ever raises the interpreter's limit)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def check_size(size: int, path: str, max_file_size: int | None = DEFAULT_MAX_FILE_SIZE):
    """A FileError when ``size`` bytes are over the ``max-file-size`` budget (None or 0: none)."""
    if max_file_size and size > max_file_size:
        return FileError(
            path,
            f"file is {human_size(size)}, over the {human_size(max_file_size)} budget for one file "
            "(max-file-size in [tool.distlint]); not linted",
            1,
        )
    return None


def check_source(
    text: str,
    path: str = "<stdin>",
    max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
    tops: list[int] | None = None,
    irregular: list[tuple[int, int]] | None = None,
    checks: list[str] | None = None,
) -> FileError | None:
    """``None`` when ``text`` is safe to give LibCST, else the error to report for ``path``.

    Linear in the length of the text; never raises on any text (a syntax error is left to the
    parser, which reports it with its location). ``tops``: a list to receive the offset of
    the first token of every line that starts a statement at column 0 (a top-level statement,
    a decorator, or an ``else:`` / ``except:`` clause of one): where the top-level statements
    are, known without asking Python's parser (:func:`distlint.positions.offsets_from_tops`).
    ``irregular``: a list to receive the spans to take out of the text for LibCST to read it as
    Python does (see :func:`indentation_cuts`); ``tops`` then hold offsets in that shorter text.
    ``checks``: a list to receive why LibCST's own checks of its nodes must run on the text
    (what its native parser accepts and they refuse may be in it; see ``_UNCHECKED_AFTER_KEYWORD``);
    left empty, the parse may skip them.
    """
    if max_file_size and len(text) > max_file_size // 4:  # cheap: a character is <= 4 bytes
        size = len(text.encode("utf-8", "surrogatepass"))
        error = check_size(size, path, max_file_size)
        if error is not None:
            return error
    try:
        scanner = _Scanner(text, path, tops, irregular, MAX_PARSE_COST, checks)
        error = scanner.scan()
        if checks is not None:
            if not scanner.finished:
                checks.append("the scan stopped early")
            if "await" in text:  # an await expression right before a keyword
                checks.append("await")
        return error
    except RecursionError:  # pragma: no cover - the scan does not recurse
        return FileError(path, "source is too deeply nested to analyse", 1)


def _line(text: str, pos: int) -> int:
    newline = "\n" if "\n" in text else "\r"
    return text.count(newline, 0, pos) + 1


def indentation_cuts(text: str, begin: int, token: int) -> list[tuple[int, int]]:
    """The spans of ``text[begin:token]`` (the blanks, form feeds and backslash continuations
    from the start of a logical line to its first token) to take out so that what is left is
    plain blanks of the indentation CPython gives the line, which LibCST then reads the same.

    CPython's tokenizer (3.10+) counts the columns of blanks across continuation lines, starts
    again from 0 at a form feed, and takes the column at the first backslash that follows some
    blanks as the line's indentation. LibCST's tokenizer does neither: it drops a leading form
    feed or a backslash-only line from the code it gives back (positions after it are then a
    line or some columns off) or refuses valid code (``if x:\n   \\\n return 1``: "expected
    INDENT"; a form feed in a block: "no matching outer block for dedent")."""
    run = begin  # where the blanks counted since the last reset of the column start
    blanks = False
    decided: tuple[int, int] | None = None  # the blanks before the deciding backslash
    i = begin
    while i < token:
        c = text[i]
        if c == "\\":
            if decided is None and blanks:
                decided = (run, i)
            i += 3 if text.startswith("\r\n", i + 1) else 2
            if decided is None:
                run = i
        elif c == "\x0c":
            i += 1
            run, blanks = i, False
        else:
            i += 1
            blanks = True
    keep = decided or (run, token)
    return [(a, b) for a, b in ((begin, keep[0]), (keep[1], token)) if a < b]


class _Stop(Exception):
    """Ends the scan early; ``error`` is its verdict (None: leave the text to the parser)."""

    def __init__(self, error: FileError | None) -> None:
        super().__init__()
        self.error = error


class _Blocks:
    """The blocks a statement is in, known from its indentation: LibCST nests a block three
    tree levels below its header, and each ``elif`` in the ``if``/``elif`` before it."""

    __slots__ = ("indents", "ifs", "elifs", "depth")

    def __init__(self) -> None:
        self.indents = [0]  # indentation columns of the enclosing blocks
        self.ifs: list[list[int]] = []  # [column, elif count] of each if-statement still open
        self.elifs = 0  # their elif counts, summed
        self.depth = 0  # of the last statement entered

    def enter(self, column: int, first: str) -> int:
        """The tree depth of a statement at ``column`` whose first token is ``first``."""
        indents, ifs = self.indents, self.ifs
        while column < indents[-1]:
            indents.pop()
        if column > indents[-1]:
            indents.append(column)
        while ifs and ifs[-1][0] > column:
            self.elifs -= ifs.pop()[1]
        if first == "elif" or first == "else":
            if first == "elif" and ifs and ifs[-1][0] == column:
                ifs[-1][1] += 1  # LibCST nests each `elif` in the one before
                self.elifs += 1
        else:
            if ifs and ifs[-1][0] == column:
                self.elifs -= ifs.pop()[1]
            if first == "if":
                ifs.append([column, 0])
        self.depth = 3 * (len(indents) - 1) + self.elifs
        return self.depth


class _Scanner:
    """One pass over the tokens of a text: a small state machine with one step per kind of
    token (a group of :data:`_TOKEN`), and two tables of steps: one for the first token of a
    line, which starts a statement, and one for the tokens after it.

    The current frame (a bracket level, or a lambda's parameters) is ``base``, ``depth``,
    ``links``, ``start``, ``start_pos``, ``is_lambda``; the enclosing ones are saved on
    ``outer``. depth: levels the current element adds above ``base``; links: of the current
    left-recursive chain, which started after token number ``start`` (offset ``start_pos``).
    A step that finds the text over a bound raises :class:`_Stop` with the error."""

    __slots__ = (
        "text", "path", "tops", "irregular", "max_cost", "outer", "base", "depth", "links",
        "start", "start_pos", "is_lambda", "brackets", "blocks", "line_start", "statement_pos",
        "after", "tokens", "odd", "cut", "floor", "cost", "finished", "checks", "bare_except",
        "steps", "first_steps", "inline_steps",
    )  # fmt: skip

    def __init__(
        self,
        text: str,
        path: str,
        tops: list[int] | None,
        irregular: list[tuple[int, int]] | None,
        max_cost: int,
        checks: list[str] | None = None,
    ) -> None:
        self.text, self.path, self.tops, self.irregular = text, path, tops, irregular
        self.max_cost = max_cost
        self.outer: list[tuple[int, int, int, int, int, bool]] = []
        self.base = self.depth = self.links = self.start = self.start_pos = 0
        self.is_lambda = False
        self.brackets = 0
        self.blocks = _Blocks()
        self.line_start = 0  # offset after the last newline outside brackets
        self.statement_pos = 0  # offset of the current statement's first token
        self.after = _NOTHING  # what the previous token ends (an operand: a trailer may follow)
        self.tokens = 0
        self.odd = irregular is not None and ("\x0c" in text or "\\\n" in text or "\\\r" in text)
        self.cut = 0  # characters of the text cut before the current line (see `irregular`)
        self.floor = 0  # `base` at the statement's start: levels above it are the statement's
        self.cost = 0  # LibCST's estimated parse cost so far (see MAX_PARSE_COST)
        self.finished = False  # the scan read the whole text
        self.checks = checks  # receives why LibCST must check its nodes (see check_source)
        self.bare_except = False  # a bare `except:` came before
        self.first_steps, self.inline_steps = _step_tables(_TOKEN, checks is not None)
        self.steps = self.first_steps

    def scan(self) -> FileError | None:
        """The error to report for the text, or None (nothing over a bound)."""
        try:
            for m in _TOKEN.finditer(self.text):
                self.steps[m.lastindex](self, m)  # type: ignore[index]
        except _Stop as stop:
            return stop.error
        self.finished = True
        return None

    # The steps, one per kind of token.

    def _newline(self, m: re.Match[str]) -> None:
        if self.brackets:
            return  # inside brackets a newline is a blank
        while self.is_lambda:  # a lambda without its colon: a syntax error
            self._pop()
        self.line_start = m.end()
        self.steps = self.first_steps
        self.depth = self.links = 0
        self.after = _NOTHING

    def _skip(self, m: re.Match[str]) -> None:
        pass

    def _bad(self, m: re.Match[str]) -> None:
        raise _Stop(None)  # an unterminated string: the parser reports it with its position

    def _first(self, m: re.Match[str]) -> None:
        """A statement's first token: its indentation says which blocks it is in."""
        self.steps = self.inline_steps
        kind: int = m.lastindex  # type: ignore[assignment]
        pos = self.statement_pos = m.start(kind)
        column = pos - self.line_start
        if self.odd and column:
            column -= self._cut_indentation(pos)
        if column == 0 and self.tops is not None:
            self.tops.append(pos - self.cut)
        blocks = self.blocks
        if kind == _KEYWORD or kind == _NESTING:
            first = m.group(kind)
            if first == "except" and self.checks is not None:
                self._except(m)
            self.base = self.floor = blocks.enter(column, first)
        elif column == blocks.indents[-1] and not blocks.ifs:
            self.base = self.floor = blocks.depth  # in the blocks of the statement before
        else:
            self.base = self.floor = blocks.enter(column, "")
        self.start, self.start_pos = self.tokens, pos  # this token is number tokens + 1
        if self.base > MAX_DEPTH:
            raise _Stop(_depth_error(self.path, self.text, pos))
        self.inline_steps[kind](self, m)

    def _operand(self, m: re.Match[str]) -> None:
        """A name, ``...``."""
        self.tokens += 1
        self.after = _OPERAND

    def _keyword(self, m: re.Match[str]) -> None:
        """A keyword, or a separator: the chain before it ends, the next starts after it."""
        self.tokens += 1
        if self.links:
            self._check_chain()
        self.links, self.start, self.start_pos = 0, self.tokens, m.end()
        self.after = _NOTHING

    def _nesting(self, m: re.Match[str]) -> None:
        """``not`` ``and`` ``or`` ``if`` ``lambda`` ``await`` ``yield``: one level deeper."""
        self._keyword(m)
        self.depth += 1
        value = m.group(_NESTING)
        weight = _KEYWORD_COSTS.get(value)
        if weight:
            self._pay((self.base + self.depth - self.floor) * weight)
        if value == "lambda":  # its parameters are a level of their own
            self._push()
            self.base, self.depth, self.is_lambda = self.base + self.depth, 0, True
        self._check_depth()

    def _separator(self, m: re.Match[str]) -> None:
        """``,`` ``;`` ``=`` ``->``, augmented assignments, comparisons, ``~``: what follows
        is a sibling, not a child."""
        self.tokens += 1
        if self.links:
            self._check_chain()
        self.links, self.depth, self.start, self.start_pos = 0, 0, self.tokens, m.end()
        self.after = _NOTHING

    def _colon(self, m: re.Match[str]) -> None:
        self._keyword(m)
        if self.is_lambda:  # the lambda's body: nested in the lambda, which is counted already
            self.base, self.depth, _, _, _, self.is_lambda = self.outer.pop()
        else:
            self.depth = 0

    def _walrus(self, m: re.Match[str]) -> None:
        self._keyword(m)
        self.depth += 1

    def _dot(self, m: re.Match[str]) -> None:
        self.tokens += 1
        if self.after:
            self.links += 1  # an attribute: a link of the chain
            self.depth += 1
        self.after = _NOTHING
        # (the bounds' two checks, asked at once: the commonest operator's step is the hottest)
        chain = self.links * (self.tokens - self.start)
        if chain > MAX_CHAIN_COST or self.base + self.depth > MAX_DEPTH:
            self._check_chain()
            self._check_depth()

    def _operator(self, m: re.Match[str]) -> None:
        """A binary operator (``**`` right-recursive), or a unary one (``-x``, ``f(**kw)``):
        one level either way."""
        self.tokens += 1
        self.depth += 1
        if not self.after:
            self._pay((self.base + self.depth - self.floor) * UNARY_COST)
        else:
            self.links += 1
            if m.lastindex == _POWER:
                self._pay((self.base + self.depth - self.floor) * POWER_COST)
        self.after = _NOTHING
        self._check_chain()
        self._check_depth()

    def _open(self, m: re.Match[str]) -> None:
        self.tokens += 1
        if self.after:  # a call or a subscript: a link of the chain around it
            self.links += 1
            self.depth += 1
            self._check_chain()
        self.brackets += 1
        # a trailer's bracket (`a.f()[0]`) nests in the chain, which LibCST does not pay for
        self._pay((self.base + self.depth - self.links - self.floor) * BRACKET_COST)
        if self.brackets > MAX_BRACKETS:
            raise _Stop(
                FileError(
                    self.path,
                    f"more than {MAX_BRACKETS} nested brackets: Python itself refuses this "
                    "(too many nested parentheses); not linted",
                    _line(self.text, m.start(_OPEN)),
                )
            )
        self._push()
        self.base, self.depth, self.links, self.is_lambda = self.base + self.depth + 2, 0, 0, False
        self.start, self.start_pos = self.tokens, m.end()
        self.after = _NOTHING
        if self.base > MAX_DEPTH:
            self._check_depth()

    def _close(self, m: re.Match[str]) -> None:
        self.tokens += 1
        if self.links:
            self._check_chain()
        while self.is_lambda:
            self._pop()
        if self.brackets:
            self.brackets -= 1
            self._pop()
        self.after = _OPERAND

    def _string(self, m: re.Match[str]) -> None:
        self.tokens += 1
        if self.after != _STRING:
            self.after = _STRING
        else:
            self.depth += 1  # implicit concatenation: LibCST nests each string in the next
            self._check_depth()

    # The steps of a scan that looks for what LibCST's checks refuse (see check_source):
    # each looks, then takes the step of its kind.

    def _keyword_checked(self, m: re.Match[str]) -> None:
        """``_keyword`` (written out: a step per keyword), looking at what touches it."""
        end = m.end()
        if self.text.startswith(_UNCHECKED_AFTER_KEYWORD, end):
            self._unchecked("a keyword touches what follows it", end)
        self.tokens += 1
        if self.links:
            self._check_chain()
        self.links, self.start, self.start_pos = 0, self.tokens, end
        self.after = _NOTHING

    def _nesting_checked(self, m: re.Match[str]) -> None:
        if self.text.startswith(_UNCHECKED_AFTER_KEYWORD, m.end()):
            self._unchecked("a keyword touches what follows it", m.end())
        self._nesting(m)

    def _number_checked(self, m: re.Match[str]) -> None:
        """A number with letters: Python reads ``1if.5`` as ``1 if .5``, ``1or*a`` as
        ``1 or *a``."""
        token = m.group(_WNUM)
        if _UNCHECKED_NUMBER.search(token) or (
            token[-1].isalpha() and self.text.startswith("*", m.end())
        ):
            self._unchecked("a keyword touches a number", m.end())
        self._operand(m)

    def _name_checked(self, m: re.Match[str]) -> None:
        """A name not all ASCII: the native parser's test of an identifier (the Unicode tables
        of Rust's regex crate) is not the one LibCST's check asks (``str.isidentifier``)."""
        self._unchecked("a name not in ASCII", m.end())
        self._operand(m)

    def _other_checked(self, m: re.Match[str]) -> None:
        """A character other than ASCII outside strings, comments and this Python's names."""
        self._unchecked("a character other than ASCII", m.end())

    def _string_checked(self, m: re.Match[str]) -> None:
        start = m.start(_STR)
        text = self.text
        if text[start] not in "'\"" or (start and text[start - 1] in "tT"):
            # a prefix (a t-string's, `t"..."` `rt"..."`, is before the token)
            self._prefixed(m.group(_STR), start, start > 0 and text[start - 1] in "tT")
        self.tokens += 1  # `_string`, written out (a step per string)
        if self.after != _STRING:
            self.after = _STRING
        else:
            self.depth += 1
            self._check_depth()

    def _prefixed(self, token: str, start: int, template: bool) -> None:
        """A string with a prefix (a t-string's is before the token): a bytes literal, or an
        f-string or t-string, whose fields LibCST parses as code."""
        prefix = token[: len(token) - len(token.lstrip("rRbBuUfF"))].lower()
        if "b" in prefix:
            self._unchecked("a bytes literal", start)
        elif (
            ("f" in prefix or template)
            and ("{" in token or "}" in token)
            and (
                token.count("{") != token.count("}")  # a field with quotes of its own (3.12)
                or not token.isascii()
                and _NON_ASCII_FIELD.search(token)
                or _unchecked_in_fields().search(token)
            )
        ):
            self._unchecked("an f-string's fields", start)

    def _except(self, m: re.Match[str]) -> None:
        """An ``except`` clause: a bare one before another asks for LibCST's checks."""
        if self.bare_except:
            self._unchecked("a handler after a bare except", m.end())
        elif self.text[m.end() : m.end() + 16].lstrip(" \t\x0c\\\r\n").startswith(":"):
            self.bare_except = True

    def _unchecked(self, what: str, pos: int) -> None:
        assert self.checks is not None
        self.checks.append(f"{what} (line {_line(self.text, pos)})")

    # What the steps share.

    def _push(self) -> None:
        self.outer.append(
            (self.base, self.depth, self.links, self.start, self.start_pos, self.is_lambda)
        )

    def _pop(self) -> None:
        self.base, self.depth, self.links, self.start, self.start_pos, self.is_lambda = (
            self.outer.pop()
        )

    def _cut_indentation(self, pos: int) -> int:
        """Record the spans of the indentation before ``pos`` to take out (see `irregular`);
        how many characters they hold."""
        prefix = self.text[self.line_start : pos]
        if "\x0c" not in prefix and "\\" not in prefix:
            return 0
        cuts = indentation_cuts(self.text, self.line_start, pos)
        assert self.irregular is not None
        self.irregular += cuts
        removed = sum(b - a for a, b in cuts)
        self.cut += removed
        return removed

    def _check_chain(self) -> None:
        if self.links * (self.tokens - self.start) > MAX_CHAIN_COST:
            raise _Stop(_chain_error(self.path, self.text, self.links, self.start_pos))

    def _check_depth(self) -> None:
        if self.base + self.depth > MAX_DEPTH:
            raise _Stop(_depth_error(self.path, self.text, self.statement_pos))

    def _pay(self, cost: int) -> None:
        self.cost += cost
        if self.cost > self.max_cost:
            raise _Stop(_cost_error(self.path, self.text, self.cost, self.statement_pos))


_Step = Callable[[_Scanner, "re.Match[str]"], None]
_TABLES: dict[tuple[re.Pattern[str], bool], tuple[tuple[_Step, ...], tuple[_Step, ...]]] = {}


def _step_tables(
    token: re.Pattern[str], checks: bool = False
) -> tuple[tuple[_Step, ...], tuple[_Step, ...]]:
    """The steps of :class:`_Scanner` by group number of ``token``: for the first token of a
    line, and for the tokens after it (a group no token closes: a number's). ``checks``: the
    steps that look for what LibCST's checks refuse (see :func:`check_source`)."""
    found = _TABLES.get((token, checks))
    if found is not None:
        return found
    by_kind: dict[str, _Step] = {
        "nl": _Scanner._newline,
        "separator": _Scanner._separator,
        "dot": _Scanner._dot,
        "open": _Scanner._open,
        "close": _Scanner._close,
        "colon": _Scanner._colon,
        "nesting": _Scanner._nesting,
        "keyword": _Scanner._keyword,
        "str": _Scanner._string,
        "binary": _Scanner._operator,
        "power": _Scanner._operator,
        "walrus": _Scanner._walrus,
        "comment": _Scanner._skip,
        "cont": _Scanner._skip,
        "bad": _Scanner._bad,
        "other": _Scanner._skip,
    }
    if checks:
        by_kind.update(
            keyword=_Scanner._keyword_checked,
            nesting=_Scanner._nesting_checked,
            wnum=_Scanner._number_checked,
            uname=_Scanner._name_checked,
            other=_Scanner._other_checked,
            str=_Scanner._string_checked,
        )
    inline: list[_Step] = [_Scanner._operand] * (token.groups + 1)  # names, `...`
    first: list[_Step] = [_Scanner._first] * (token.groups + 1)
    for kind, number in token.groupindex.items():
        step = by_kind.get(kind)
        if step is not None:
            inline[number] = step
            if kind in ("nl", "comment", "cont", "bad", "other"):  # not a statement's first
                first[number] = step
    found = _TABLES[token, checks] = (tuple(first), tuple(inline))
    return found


def _depth_error(path: str, text: str, pos: int) -> FileError:
    return FileError(
        path,
        f"too deeply nested: more than {MAX_DEPTH} levels in one statement (operators, "
        "brackets, concatenated strings, elif chains); not linted",
        _line(text, pos),
    )


def _cost_error(path: str, text: str, cost: int, pos: int) -> FileError:
    return FileError(
        path,
        f"nested expressions too costly for distlint's parser: parsing this file would take "
        f"over {human_size(cost)} (bound: {human_size(MAX_PARSE_COST)}; brackets, conditional "
        "expressions, lambdas and unary operators nested deeply, here and above); not linted",
        _line(text, pos),
    )


def estimated_parse_cost(text: str) -> int:
    """The scan's estimate of LibCST's parse cost of ``text`` beyond the linear part (bytes;
    see MAX_PARSE_COST), without a bound: what tests and calibration compare with the cost
    measured. 0 for a text the scan stops early on (an unterminated string)."""
    scanner = _Scanner(text, "<estimate>", None, None, 1 << 62)
    scanner.scan()
    return scanner.cost if scanner.finished else 0


def _chain_error(path: str, text: str, links: int, pos: int) -> FileError:
    return FileError(
        path,
        f"a chain of {links:,}+ operators/calls/subscripts in one expression is too long "
        f"for distlint's parser (bound: links x tokens <= {MAX_CHAIN_COST:,}); not linted",
        _line(text, pos),
    )
