"""The lint path's parse skips LibCST's node checks (``_validate``) where they cannot refuse the
text; every text where they can is still checked and refused as before; the fixer's re-parse,
and other threads' nodes, are always checked. The differential run over real files and
generated texts is ``benchmarks/libcst_checks.py``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import libcst as cst
import pytest

from distlint import _libcst_compat as compat
from distlint import guard, runner
from distlint import parse as parse_mod
from distlint.api import Config, lint_source
from distlint.incremental import Document
from distlint.model import FileError
from distlint.parse import parse
from tests.helpers import FIXTURES

pytestmark = pytest.mark.skipif(
    not compat.UNCHECKED_PARSE, reason="LibCST's checks were read for another version"
)

# Texts the native parser accepts and a check of LibCST refuses, each found by the
# differential run; the guard must send every one to the checking parse.
REFUSED_BY_CHECKS = {
    "keyword-before-dot-number": "if.5:\n    pass\n",
    "keyword-before-star": "for*a in b:\n    pass\n",
    "number-then-keyword-then-dot-number": "x = 1if.5 else 2\n",
    "else-before-dot-number": "x = a if b else.5\n",
    "await-before-keyword": "x = await(a)if b else c\n",
    "bare-except-before-handler": "try:\n    pass\nexcept:\n    pass\nexcept E:\n    pass\n",
    "string-and-bytes": 'x = "a" b"b"\n',
    "f-string-and-bytes": 'x = f"a" b"b"\n',
    "f-string-field": 'x = f"{a if b else.5}"\n',
    "nested-quotes-field": 'x = f"{x}{"a" if y else.5}"\n',
    "name-unknown-to-this-python": "x = \U00011f04\n",
    "in-a-name-unknown-to-this-python": "x = a\U00011f04\n",
    "in-an-f-string-field": 'x = f"→{a}{\U00011f04}"\n',
}


@pytest.fixture
def name_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records the value of every ``Name`` node LibCST checks."""
    checked: list[str] = []
    original = cst.Name._validate

    def counting(node: cst.Name) -> None:
        checked.append(node.value)
        original(node)

    monkeypatch.setattr(cst.Name, "_validate", counting)
    yield checked


def test_the_lint_path_skips_the_checks(name_checks: list[str]) -> None:
    text = (FIXTURES / "DL101" / "bad.py").read_text(encoding="utf-8")
    result = lint_source(text, "train.py", Config(select=("ALL",)))
    assert result.findings and not result.errors
    linted = list(name_checks)  # only names the fixes' plans build (`set_seed`, ...)
    name_checks.clear()
    assert not isinstance(parse(text, "train.py"), FileError)  # the default checks
    assert len(name_checks) > 100 > 10 * len(linted)
    assert "torch" in name_checks and "torch" not in linted


@pytest.mark.parametrize("text", REFUSED_BY_CHECKS.values(), ids=REFUSED_BY_CHECKS.keys())
def test_what_the_checks_refuse_is_refused_as_before(text: str) -> None:
    checks: list[str] = []
    assert guard.check_source(text, "t.py", None, None, None, checks) is None
    assert checks, "the scan must send this text to the checking parse"
    before = parse(text, "t.py", checked=True)
    assert isinstance(before, FileError)
    assert parse(text, "t.py", checked=False) == before  # the message and the line
    with pytest.raises(cst.CSTValidationError):  # refused by a check, not by the parser
        cst.parse_module(text)


def test_the_native_parser_alone_accepts_them() -> None:
    """Without the guard's routing, the unchecked parse would take these texts."""
    accepted = []
    for text in REFUSED_BY_CHECKS.values():
        with compat.checks_off():
            try:
                cst.parse_module(text)
                accepted.append(text)
            except Exception:
                pass
    assert accepted == list(REFUSED_BY_CHECKS.values())


def test_a_fixed_text_is_parsed_with_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []
    real = runner.parse

    def spy(text: str, path: str, **kwargs: object) -> object:
        calls.append((text, bool(kwargs.get("checked", True))))
        return real(text, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "parse", spy)
    text = (FIXTURES / "DL101" / "bad.py").read_text(encoding="utf-8")
    result = lint_source(text, "train.py", Config(select=("ALL",)), fix=True, unsafe_fixes=True)
    assert result.fixed_source is not None
    assert calls[0] == (text, False)  # the lint's own parse
    assert (result.fixed_source, True) in calls  # the fixer's re-parse gate
    assert all(checked for source, checked in calls[1:])


def test_other_threads_nodes_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """While this thread parses unchecked, a node built in another thread is checked."""
    seen: list[BaseException | None] = []
    real = cst.parse_module

    def parse_module(source: str | bytes) -> cst.Module:
        assert compat._UNCHECKED.on  # inside the unchecked window

        def build() -> None:
            try:
                cst.Name("not a name")
                seen.append(None)
            except cst.CSTValidationError as exc:
                seen.append(exc)

        worker = threading.Thread(target=build)
        worker.start()
        worker.join()
        return real(source)

    monkeypatch.setattr(parse_mod.cst, "parse_module", parse_module)
    assert not isinstance(parse("x = 1\n", "t.py", checked=False), FileError)
    assert len(seen) == 1 and isinstance(seen[0], cst.CSTValidationError)
    assert not compat._UNCHECKED.on  # and the switch is off again
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_another_libcst_version_is_always_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cst.CSTNode, "__post_init__", lambda node: node._validate())
    monkeypatch.setattr(compat, "CHECKS_READ_FOR", ("0.0.0",))
    assert compat._install() is False
    monkeypatch.setattr(compat, "CHECKS_READ_FOR", (compat.LIBCST_VERSION,))
    assert compat._install() is True
    assert cst.CSTNode.__post_init__ is compat._post_init


# ------------------------------------------------------------------ the editor's piece parse
EDITED_SCRIPT = "import torch\n\ntorch.manual_seed(0)\n\n\ndef main():\n    x = 1\n    y = 2\n    return x + y\n\n\nz = 3\n"


def _edited_in_a_document(new: str) -> tuple[object, Document]:
    """Lint ``EDITED_SCRIPT`` in an editor's document, then its edit ``new``."""
    document = Document()
    config = Config(select=("ALL",))
    runner.lint_source(EDITED_SCRIPT, "t.py", config, document=document)
    return runner.lint_source(new, "t.py", config, document=document), document


def test_the_editors_piece_parse_skips_the_checks(name_checks: list[str]) -> None:
    """A re-lint after an edit parses the edited statements (in their block, and at the top
    level) without LibCST's checks, as the lint's whole parse does."""
    for old, new in (("y = 2", "y = total_count * 2"), ("z = 3", "z = other_name + 3")):
        before = dict(parse_mod.PIECE_CHECKS)
        edited = EDITED_SCRIPT.replace(old, new)
        result, document = _edited_in_a_document(edited)
        assert document.reparsed and document.text == edited
        assert result == runner.lint_source(edited, "t.py", Config(select=("ALL",)))
        assert parse_mod.PIECE_CHECKS["unchecked"] == before.get("unchecked", 0) + 1
        assert parse_mod.PIECE_CHECKS["checked"] == before.get("checked", 0)
        assert new.split()[2] not in name_checks  # the new name: parsed, never checked
        name_checks.clear()


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # (Python's own reading of `1if.5`)
@pytest.mark.parametrize("text", REFUSED_BY_CHECKS.values(), ids=REFUSED_BY_CHECKS.keys())
def test_what_the_checks_refuse_is_refused_in_the_editor_as_in_a_whole_lint(text: str) -> None:
    """An edit that writes a text LibCST's checks refuse into a function's body (a piece of
    the document) is refused with the message and line of the whole lint."""
    body = "".join("    " + line + "\n" for line in text.splitlines())
    edited = EDITED_SCRIPT.replace("    y = 2\n", body)
    before = dict(parse_mod.PIECE_CHECKS)
    result, document = _edited_in_a_document(edited)
    whole = runner.lint_source(edited, "t.py", Config(select=("ALL",)))
    assert whole.errors and result.errors == whole.errors  # the message and the line
    assert document.text == EDITED_SCRIPT  # the last good parse kept
    # (the block's statements, then the function's: each piece sent to the checking parse)
    assert parse_mod.PIECE_CHECKS["checked"] > before.get("checked", 0)
    assert parse_mod.PIECE_CHECKS["unchecked"] == before.get("unchecked", 0)
