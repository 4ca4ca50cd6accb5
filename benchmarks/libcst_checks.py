"""The lint path's parse without LibCST's node checks gives what the checking parse gives.

LibCST checks every node its parser builds (``CSTNode.__post_init__`` calls ``_validate``);
:func:`distlint.parse.parse` with ``checked=False`` skips that (~15% of a parse) unless the
guard's scan found what the native parser accepts and a check refuses. This script parses
texts both ways and compares: the same error (message, line) or the same tree (``deep_equals``)
and code. Any disagreement is printed and makes the exit status 1.

Texts: every ``.py`` file under the folders given; every keyword context of a template list
with every expression shape of a list touching it on the left and the right, and each newline
(``\\n``, ``\\r\\n``, ``\\r``); random texts from a small alphabet of tokens and whitespace.

    python benchmarks/libcst_checks.py [--random N] [--seed S] [FOLDER ...]

What was read (LibCST 1.9.0: ``libcst/_nodes/*.py``'s 89 ``_validate`` methods, and the native
parser at tag v1.9.0: ``native/libcst/src/tokenizer``, ``parser/grammar.rs``,
``parser/numbers.rs``, ``tokenizer/whitespace_parser.rs``):

- Whitespace, comments, newlines (``SimpleWhitespace``, ``Comment``, ``Newline``,
  ``IndentedBlock``'s indent): the native parser takes them with the same character classes
  the checks' patterns hold (``parse_simple_whitespace``: blanks, tabs, form feeds, a backslash
  and ``\\r\\n``/``\\r``/``\\n``; ``parse_comment``: ``#`` to the line's end; ``parse_newline``).
- "Must have at least one space" (31 checks: ``not``, ``and``/``or``, comparisons, ``if``/
  ``else``, ``for``/``in``, ``from``, ``yield``, ``await``, ``return``, ``raise``, ``assert``,
  ``del``, ``with``/``as``, ``except``, ``import``, ``global``, ``lambda``...): the whitespace
  is what lies between two tokens, empty only where they touch; a keyword touches a name or a
  number after it only by being part of it. What can touch and is refused: a keyword before a
  number starting with a dot or a star (``if.5``, ``return*a``, ``for*a in b``), also inside a
  number's token as the scan reads it (``1if.5``), and an ``await`` expression before a keyword
  (``await(a)if b else c``). The scan sends those texts (any text holding ``await``) to the
  checking parse.
- Structure (parentheses paired, at least one target/alias/handler/case, trailing commas,
  semicolons, parameter and argument order, stars, empty subscripts, sets, tuples, match
  patterns, type parameters): the grammar builds only what it matched, which satisfies them;
  except two the grammar does not enforce: a bare ``except:`` before another handler, and a
  bytes literal concatenated with a string. The scan sends texts with a bare ``except:``
  followed by another ``except``, and with any bytes literal, to the checking parse.
- Token values (``Name``, ``Integer``/``Float``/``Imaginary``, string prefixes and quotes,
  f-/t-string prefixes, quotes and conversions, ``!=``): the tokenizer's patterns are the
  checks' (numbers: ``parser/numbers.rs``; a number matching none becomes an Integer, but
  the tokenizer gives none such); an identifier other than ASCII is tested by the regex
  crate's Unicode tables, not Python's (``str.isidentifier``): the scan sends texts with a
  name other than ASCII to the checking parse. f-/t-string fields are code parsed into nodes:
  a string with braces is searched for the cases above.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import warnings
from collections.abc import Iterator

from distlint import guard
from distlint._libcst_compat import UNCHECKED_PARSE
from distlint.model import FileError
from distlint.parse import parse

TEMPLATES = r"""if X:pass|while X:pass|x = not X|x = a if X else b|x = a if b else X|x = X if a else b
def f():\n return X|def f():\n yield X|def f():\n yield from X|async def f():\n await X
assert X|assert a, X|del X|raise X|raise a from X|raise X from a|for a in X:pass|for X in a:pass
x = [a for a in X]|x = [a for X in b]|x = [a for a in b if X]|x = [X for a in b]
x = {a: b for a in X}|x = a or X|x = X or a|x = X and a|x = X in a|x = a in X|x = a not in X
x = X not in a|x = X is a|x = a is not X|x = lambda: X|with X as a:pass|with a as X:pass
try:pass\nexcept X as a:pass|try:pass\nexcept X:pass|try:pass\nexcept* X:pass|import X
from X import a|match X:\n case a:pass|match a:\n case X:pass|print(X, a)|f(a, *X)|type X = a
x = f"{X}"|x = f"{a if X else b}"|global X""".replace("\n", "|").replace("\\n", "\n")
SHAPES = (
    ".5", "5", "5.", "5j", "0x1f", "1e5", "(a)", "(a)+b", "[a]", "[a][0]", '"s"', 'b"s"',
    'rb"s"', 'f"s"', 'u"s"', '"s""t"', '"s".b', "...", "-a", "~a", "*a", "*a,b", "**a",
    "(a).b", "(a)(b)", "(a)if b else c", "not(a)", "{a}", "{}", "(a)or b", "(a)in b",
    "lambda:0", "await(a)", "(yield)", "a", "a.b", "a(b)", "(a,)", "()", "(a:=b)", "a,(b)",
    ".5if a else b", "5if a else b", "5or a", "5not in a", "a,", "\\\n a", "\\\r a", "\x0c a",
    "\t a", "é", "a·", "\U00011f04", "a\xa0",
)  # fmt: skip
ALPHABET = (
    "a", " ", " ", "\\", "\r", "\n", "\r\n", "\t", "\x0c", "(", ")", "=", "1", ".5", "if",
    "else", ":", "#", '"', "'", 'b"', "not", "in", ",", "*", "await", "lambda", "pass", "for",
    "yield", "return", "def f():", "try:", "except", "[", "]", "+", "is", "or", "@", ".",
    'f"', "{", "}", "as", "from", "import", ";", "match", "case", "0x1f", "1j", "·", "é", "\U00011f04",
)  # fmt: skip


def generated() -> Iterator[str]:
    """Each template with each shape in place of X, touching its neighbours or not."""
    for template, shape in itertools.product(TEMPLATES.split("|"), SHAPES):
        before, after = template.split("X")
        for left, right in itertools.product((True, False), repeat=2):
            pre = before[:-1] if left and before.endswith(" ") else before
            post = after[1:] if right and after.startswith(" ") else after
            for newline in ("\n", "\r\n", "\r"):
                yield (pre + shape + post).replace("\n", newline) + newline


def randomly(count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14)))
        yield from (text, f"x = {text}\n", f"if a:\n {text}\n")


def files(folders: list[str]) -> Iterator[str]:
    for folder in folders:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if name.endswith(".py"):
                    try:
                        with open(os.path.join(root, name), encoding="utf-8") as f:
                            yield f.read()
                    except (OSError, UnicodeDecodeError):
                        continue


def disagreement(text: str) -> str | None:
    """None when both parses of ``text`` agree, else what differs."""
    checked = parse(text, "t.py", checked=True, max_file_size=None)
    unchecked = parse(text, "t.py", checked=False, max_file_size=None)
    if isinstance(checked, FileError) or isinstance(unchecked, FileError):
        return None if checked == unchecked else f"checked: {checked}; unchecked: {unchecked}"
    a, b = checked[0], unchecked[0]
    if not a.deep_equals(b) or a.code != b.code:
        return "the trees differ"
    return None


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("folders", nargs="*")
    options.add_argument("--random", type=int, default=20000, help="random texts (x3)")
    options.add_argument("--seed", type=int, default=1)
    args = options.parse_args()
    if not UNCHECKED_PARSE:
        print("this LibCST's checks were not read: every parse checks")
        return 0
    warnings.simplefilter("ignore")  # SyntaxWarnings of Python's own parse of odd texts
    failed = 0
    for name, texts in (
        ("files", files(args.folders)),
        ("generated", generated()),
        ("random", randomly(args.random, args.seed)),
    ):
        count = routed = refused = 0
        for text in texts:
            count += 1
            checks: list[str] = []
            if guard.check_source(text, "t.py", None, None, None, checks) is None and checks:
                routed += 1
            problem = disagreement(text)
            if problem is not None:
                failed += 1
                print(f"DISAGREE {text[:200]!r}: {problem}")
            elif isinstance(parse(text, "t.py", max_file_size=None), FileError):
                refused += 1
        print(
            f"{name}: {count} texts, {refused} refused by both, {routed} sent to the "
            f"checking parse, {failed} disagreements so far"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
