"""The tests every rule has, shared by the per-rule test files (tests/rules/test_<CODE>.py).

A rule's test file declares ``class TestDL201(SnippetTests, FixtureTests): CODE = "DL201"`` and
gets, parametrized by ``pytest_generate_tests`` in tests/conftest.py:

- ``SnippetTests``: the rule's ``VALID`` snippets (plus the test file's own, ``VALID`` below)
  have no finding; each ``INVALID`` snippet is reported exactly at its ``range``, and its fix
  gives exactly ``fixed`` (or there is none) and is sound. The snippets are the rule docs'
  examples; each runs with that rule alone.
- ``FixtureTests``: ``fixtures/<CODE>/``: ``bad.py`` marks its findings inline with
  ``# expect: CODE`` (all rules run), ``bad.fixed.py`` is the exact output of
  ``fix --unsafe-fixes`` (``--update-snapshots`` writes it), ``good.py`` has no finding and the
  fix leaves it as it is; every fixed output parses, binds every name and is a fixed point.

Below them, the test file holds the rule's own cases, snapshotted next to it in
tests/rules/snapshots/test_<CODE>/.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from helpers import (
    FIXTURES,
    assert_fix_is_sound,
    expected_findings,
    fixture_config,
    lint_snippet,
    lint_text,
    undefined_names,
)

from distlint.api import Config
from distlint.registry import all_rules
from distlint.rule import Invalid, Rule, Valid

ALL = Config(select=("ALL",))


class Case(NamedTuple):
    id: str
    value: Any


def rule_class(code: str) -> type[Rule]:
    (rule,) = [r for r in all_rules() if r.CODE == code]
    return rule


def where(finding: Any) -> str:
    """A finding's range as distlint prints it and ``Invalid(range=)`` spells it."""
    return f"{finding.line}:{finding.column}-{finding.end_line}:{finding.end_column}"


def assert_valid(code: str, snippet: Valid) -> None:
    linted = lint_snippet(code, snippet.code, snippet.options, path="snippet.py")
    assert [f.message for f in linted.findings] == []
    assert linted.fixed_source is None


def assert_invalid(code: str, snippet: Invalid) -> None:
    """Reported by rule ``code`` exactly at the snippet's ranges, fixed exactly as it says."""
    # lint_snippet also checks the fix is sound: it compiles, a second fix changes nothing
    linted = lint_snippet(code, snippet.code, snippet.options, path="snippet.py")
    assert snippet.ranges, (
        f"give the snippet its range: Invalid(..., range={[where(f) for f in linted.findings]!r})"
    )
    assert [(where(f), f.code) for f in linted.findings] == [(r, code) for r in snippet.ranges]
    if snippet.fixed is None:
        assert linted.fixed_source is None, "a fix was applied where the snippet expects none"
        assert all(f.fix is None for f in linted.findings)
        return
    assert linted.fixed_source == snippet.fixed
    assert linted.fix.findings == ()
    assert undefined_names(linted.fixed_source) == []


class SnippetTests:
    CODE: ClassVar[str]
    # More valid snippets, for the tests only (the rule's own VALID are its docs' examples):
    # id -> source (dedented) or a Valid with options. Correct code that must stay silent.
    VALID: ClassVar[Mapping[str, str | Valid]] = {}

    @classmethod
    def snippet_cases(cls) -> dict[str, list[Case]]:
        rule = rule_class(cls.CODE)
        valid = [Case(f"rule-{i}", v) for i, v in enumerate(rule.VALID)]
        valid += [
            Case(name, v if isinstance(v, Valid) else Valid(v)) for name, v in cls.VALID.items()
        ]
        invalid = [Case(f"rule-{i}", v) for i, v in enumerate(rule.INVALID)]
        return {"valid": valid, "invalid": invalid}

    def test_valid_snippet(self, valid: Valid) -> None:
        assert_valid(self.CODE, valid)

    def test_invalid_snippet(self, invalid: Invalid) -> None:
        assert_invalid(self.CODE, invalid)


class FixtureTests:
    CODE: ClassVar[str]

    @classmethod
    def fixture_dir(cls) -> Path:
        return FIXTURES / cls.CODE

    @classmethod
    def fixture_cases(cls) -> dict[str, list[Case]]:
        files = [Case(n, cls.fixture_dir() / n) for n in ("bad.py", "good.py")]
        return {"fixture": files}

    def test_fixture_findings_match_inline_expectations(self, fixture: Path) -> None:
        source = fixture.read_text(encoding="utf-8")
        result = lint_text(fixture.read_bytes(), str(fixture), fixture_config(fixture, source))
        found = {(f.line, f.code) for f in result.findings}
        expected = expected_findings(source)
        missed = sorted(expected - found)
        false_positives = sorted(
            (f.line, f.code, f.message) for f in result.findings if (f.line, f.code) not in expected
        )
        assert not missed and not false_positives, (
            f"missed={missed} false_positives={false_positives}"
        )

    def test_fixture_set_is_complete(self) -> None:
        folder = self.fixture_dir()
        assert (folder / "bad.py").exists() and (folder / "good.py").exists()
        bad = (folder / "bad.py").read_text()
        assert any(code == self.CODE for _, code in expected_findings(bad))
        assert not expected_findings((folder / "good.py").read_text())

    def test_fixed_fixture_is_exact(self, update_fixtures: bool) -> None:
        bad = self.fixture_dir() / "bad.py"
        expected_path = bad.with_name("bad.fixed.py")
        result = lint_text(bad.read_bytes(), str(bad), ALL, fix=True)
        fixed = result.fixed_source if result.fixed_source is not None else bad.read_text()
        if update_fixtures:
            expected_path.write_text(fixed)
        assert expected_path.exists(), (
            f"{expected_path} missing: run python -m pytest tests/rules/test_{self.CODE}.py "
            "--update-snapshots"
        )
        assert fixed == expected_path.read_text()

    def test_fixture_fix_is_valid_idempotent_and_complete(self, fixture: Path) -> None:
        result = lint_text(fixture.read_bytes(), str(fixture), ALL, fix=True)
        source = fixture.read_text(encoding="utf-8")
        assert_fix_is_sound(source, result, str(fixture), ALL, all_bound=True)

    def test_good_fixture_stays_unchanged(self) -> None:
        good = self.fixture_dir() / "good.py"
        assert lint_text(good.read_bytes(), str(good), ALL, fix=True).fixed_source is None


def parametrize_cases(cls: type, fixturenames: list[str]) -> Iterator[tuple[str, list[Case]]]:
    """(argument, cases) for each argument of a test of ``cls`` that its bases parametrize."""
    seen: dict[str, list[Case]] = {}
    if issubclass(cls, SnippetTests):
        seen.update(cls.snippet_cases())
    if issubclass(cls, FixtureTests):
        seen.update(cls.fixture_cases())
    for name in fixturenames:
        if name in seen:
            yield name, seen[name]
