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

import re
import sys

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

# One token per match; leading blanks are eaten by the match (a search from every blank is what
# makes a naive alternation slow). Possessive quantifiers: no backtracking, linear time.
_TOKEN_PATTERN = r"""[ \t\f]*+(?:
    (?P<name>[^\W\d]\w*+)(?!['"])
    |(?P<op>\*\*=?|//=?|<<=?|>>=?|->|:=|\.\.\.|[-+*/%@&|^<>=!]=|[-+*/%@&|^~<>.,;:=])
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<nl>\r\n|\r|\n)
    |(?P<num>\.?\d[\w.]*+)
    |(?P<str>[rRbBuUfF]{0,2}(?:
        '''(?:[^'\\]|\\.|'(?!''))*+'''
        |\"\"\"(?:[^"\\]|\\.|"(?!""))*+\"\"\"
        |'(?:[^'\\\r\n]|\\.)*+'
        |"(?:[^"\\\r\n]|\\.)*+"))
    |(?P<comment>\#[^\r\n]*+)
    |(?P<cont>\\(?:\r\n|\r|\n))
    |(?P<bad>['"\\])
    )"""


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
# Token kinds: the group a match closes last (``m.lastindex``), numbered in the pattern's order.
_NAME, _OP, _OPEN, _CLOSE, _NL, _NUM, _STR, _COMMENT, _CONT, _BAD = (
    _TOKEN.groupindex[kind]
    for kind in ("name", "op", "open", "close", "nl", "num", "str", "comment", "cont", "bad")
)

# Left-recursive binary operators: each one is a link of a chain (and a tree level).
_BINARY = frozenset("+ - * / // % @ << >> & | ^".split())
# These end an element (its siblings do not nest in it): depth and chain start again.
_SEPARATORS = frozenset(", ; = += -= *= /= //= %= @= &= |= ^= >>= <<= **= ->".split())
_COMPARISONS = frozenset("< > == != <= >=".split())
_KEYWORDS = frozenset(
    "False None True and as assert async await break class continue def del elif else "
    "except finally for from global if import in is lambda nonlocal not or pass raise "
    "return try while with yield".split()
)
_OPERAND_KEYWORDS = frozenset({"False", "None", "True"})
# Keywords that nest what follows them one level deeper (right-recursive in the tree).
_NESTING_KEYWORDS = frozenset({"not", "and", "or", "if", "lambda", "await", "yield"})


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
) -> FileError | None:
    """``None`` when ``text`` is safe to give LibCST, else the error to report for ``path``.

    Linear in the length of the text; never raises on any text (a syntax error is left to the
    parser, which reports it with its location). ``tops``: a list to receive the offset of
    the first token of every line that starts a statement at column 0 (a top-level statement,
    a decorator, or an ``else:`` / ``except:`` clause of one): where the top-level statements
    are, known without asking Python's parser (:func:`distlint.positions.offsets_from_tops`).
    ``irregular``: a list to receive the spans to take out of the text for LibCST to read it as
    Python does (see :func:`indentation_cuts`); ``tops`` then hold offsets in that shorter text.
    """
    if max_file_size and len(text) > max_file_size // 4:  # cheap: a character is <= 4 bytes
        size = len(text.encode("utf-8", "surrogatepass"))
        error = check_size(size, path, max_file_size)
        if error is not None:
            return error
    try:
        return _scan(text, path, tops, irregular)
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


def _scan(
    text: str,
    path: str,
    tops: list[int] | None = None,
    irregular: list[tuple[int, int]] | None = None,
    max_cost: int = MAX_PARSE_COST,
    measured: list[int] | None = None,
) -> FileError | None:
    # The current frame (a bracket level, or a lambda's parameters) lives in locals; the
    # enclosing ones are saved on `outer`. depth: levels the current element adds above
    # `base`; links: of the current left-recursive chain, which started at token `start`.
    outer: list[tuple[int, int, int, int, int, bool]] = []
    base = depth = links = start = start_pos = 0
    is_lambda = False
    brackets = 0
    indents = [0]  # indentation columns of the enclosing blocks
    ifs: list[list[int]] = []  # [column, elif count] of each if-statement still open
    elifs = 0  # their elif counts, summed
    line_start = 0  # offset after the last newline outside brackets
    statement_pos = 0  # offset of the current statement's first token
    at_line_start = True
    operand = False  # the previous token ends an operand: a trailer or binary operator may follow
    was_string = False
    tokens = 0
    odd = irregular is not None and ("\x0c" in text or "\\\n" in text or "\\\r" in text)
    cut = 0  # characters of the text cut before the current line (see `irregular`)
    floor = 0  # `base` at the current statement's start: levels above it are the statement's
    cost = 0  # LibCST's estimated parse cost so far (see MAX_PARSE_COST)

    for m in _TOKEN.finditer(text):
        kind = m.lastindex or 0
        if kind == _NL:
            if not brackets:
                while is_lambda:  # a lambda without its colon: a syntax error
                    base, depth, links, start, start_pos, is_lambda = outer.pop()
                line_start = m.end()
                at_line_start = True
                depth = links = 0
                operand = was_string = False
            continue
        if kind >= _COMMENT:
            if kind == _BAD:
                return None  # an unterminated string: the parser reports it with its position
            continue
        tokens += 1
        if at_line_start:
            # A statement's first token: its indentation says which blocks it is in.
            at_line_start = False
            statement_pos = m.start(kind)
            column = statement_pos - line_start
            if odd and column:
                prefix = text[line_start:statement_pos]
                if "\x0c" in prefix or "\\" in prefix:
                    cuts = indentation_cuts(text, line_start, statement_pos)
                    if cuts:
                        assert irregular is not None
                        irregular += cuts
                        column -= sum(b - a for a, b in cuts)
                        cut += sum(b - a for a, b in cuts)
            if column == 0 and tops is not None:
                tops.append(statement_pos - cut)
            while column < indents[-1]:
                indents.pop()
            if column > indents[-1]:
                indents.append(column)
            while ifs and ifs[-1][0] > column:
                elifs -= ifs.pop()[1]
            first = m.group(kind)
            if first == "elif" or first == "else":
                if first == "elif" and ifs and ifs[-1][0] == column:
                    ifs[-1][1] += 1  # LibCST nests each `elif` in the one before
                    elifs += 1
            else:
                if ifs and ifs[-1][0] == column:
                    elifs -= ifs.pop()[1]
                if first == "if":
                    ifs.append([column, 0])
            base = floor = 3 * (len(indents) - 1) + elifs
            start, start_pos = tokens - 1, statement_pos
            if base > MAX_DEPTH:
                return _depth_error(path, text, statement_pos)

        if kind == _NAME:
            value = m.group(kind)
            if value not in _KEYWORDS:
                operand, was_string = True, False
                continue
            if links and links * (tokens - start) > MAX_CHAIN_COST:
                return _chain_error(path, text, links, start_pos)
            links, start, start_pos = 0, tokens, m.end()
            operand = was_string = False
            if value not in _NESTING_KEYWORDS:
                continue
            depth += 1
            weight = _KEYWORD_COSTS.get(value)
            if weight:
                cost += (base + depth - floor) * weight
                if cost > max_cost:
                    return _cost_error(path, text, cost, statement_pos)
            if value == "lambda":  # its parameters are a level of their own
                outer.append((base, depth, links, start, start_pos, is_lambda))
                base, depth, is_lambda = base + depth, 0, True
        elif kind == _OP:
            value = m.group(kind)
            if value == ".":
                if operand:
                    links += 1  # an attribute: a link of the chain
                    depth += 1
                operand = was_string = False
            elif value in _BINARY or value == "**":
                if operand:
                    links += 1
                depth += 1  # binary, or unary (right-recursive): one level either way
                if not operand or value == "**":
                    cost += (base + depth - floor) * (POWER_COST if operand else UNARY_COST)
                    if cost > max_cost:
                        return _cost_error(path, text, cost, statement_pos)
                operand = was_string = False
            elif value == "...":
                operand, was_string = True, False
                continue
            else:
                if links and links * (tokens - start) > MAX_CHAIN_COST:
                    return _chain_error(path, text, links, start_pos)
                if value == ":" and is_lambda:
                    # the lambda's body: nested in the lambda, which is counted already
                    base, depth, links, start, start_pos, is_lambda = outer.pop()
                elif value == ":=":
                    depth += 1
                else:  # `,` `:` `=` `;` comparisons: the next element is a sibling, not a child
                    depth = 0
                links, start, start_pos = 0, tokens, m.end()
                operand = was_string = False
                continue
            if links and links * (tokens - start) > MAX_CHAIN_COST:
                return _chain_error(path, text, links, start_pos)
        elif kind == _OPEN:
            if operand:  # a call or a subscript: a link of the chain around it
                links += 1
                depth += 1
                if links * (tokens - start) > MAX_CHAIN_COST:
                    return _chain_error(path, text, links, start_pos)
            brackets += 1
            # a trailer's bracket (`a.f()[0]`) nests in the chain, which LibCST does not pay for
            cost += (base + depth - links - floor) * BRACKET_COST
            if cost > max_cost:
                return _cost_error(path, text, cost, statement_pos)
            if brackets > MAX_BRACKETS:
                return FileError(
                    path,
                    f"more than {MAX_BRACKETS} nested brackets: Python itself refuses this "
                    "(too many nested parentheses); not linted",
                    _line(text, m.start(kind)),
                )
            outer.append((base, depth, links, start, start_pos, is_lambda))
            base, depth, links, start, start_pos, is_lambda = (
                base + depth + 2,
                0,
                0,
                tokens,
                m.end(),
                False,
            )
            operand = was_string = False
        elif kind == _CLOSE:
            if links and links * (tokens - start) > MAX_CHAIN_COST:
                return _chain_error(path, text, links, start_pos)
            while is_lambda:
                base, depth, links, start, start_pos, is_lambda = outer.pop()
            if brackets:
                brackets -= 1
                base, depth, links, start, start_pos, is_lambda = outer.pop()
            operand, was_string = True, False
            continue
        elif kind == _STR:
            operand = True
            if not was_string:
                was_string = True
                continue
            depth += 1  # implicit concatenation: LibCST nests each string in the next
        else:  # a number
            operand, was_string = True, False
            continue

        if base + depth > MAX_DEPTH:
            return _depth_error(path, text, statement_pos)
    if measured is not None:
        measured.append(cost)
    return None


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
    measured: list[int] = []
    _scan(text, "<estimate>", None, None, 1 << 62, measured)
    return measured[0] if measured else 0


def _chain_error(path: str, text: str, links: int, pos: int) -> FileError:
    return FileError(
        path,
        f"a chain of {links:,}+ operators/calls/subscripts in one expression is too long "
        f"for distlint's parser (bound: links x tokens <= {MAX_CHAIN_COST:,}); not linted",
        _line(text, pos),
    )
