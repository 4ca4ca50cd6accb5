import re

import pytest

from distlint.registry import RegistryError, _check_unique, all_rules, lookup, normalise_selector
from distlint.rule import Rule


def test_codes_and_names_are_unique_and_well_formed():
    rules = all_rules()
    assert len({r.CODE for r in rules}) == len(rules)
    assert len({r.NAME for r in rules}) == len(rules)
    for r in rules:
        assert re.fullmatch(r"DL\d{3}", r.CODE), r.CODE
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.NAME), r.NAME
        assert r.MESSAGE


def test_duplicate_codes_are_rejected():
    class A(Rule):
        CODE, NAME = "DL999", "a"

    class B(Rule):
        CODE, NAME = "DL999", "b"

    with pytest.raises(RegistryError, match="duplicate rule code DL999"):
        _check_unique([A, B])


def test_core_rules_present():
    codes = {r.CODE for r in all_rules()}
    assert {"DL101"} <= codes


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("DL201", "DL201"),
        (" dl2 ", "DL2"),
        ("all", "ALL"),
        ("unscaled-learning-rate", "DL201"),
        ("Seed-Only-Torch", "DL101"),
    ],
)
def test_selectors_name_codes_prefixes_or_rules(selector, expected):
    assert normalise_selector(selector) == expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("", "empty rule code ''"),
        ("  ", "empty rule code '  '"),
        ("DL2O1", "unknown rule code, prefix or name 'DL2O1' (did you mean DL201?)"),
        ("seed-only-torh", "(did you mean seed-only-torch?)"),
        ("XY9", "unknown rule code, prefix or name 'XY9'"),
    ],
)
def test_bad_selectors_say_why_and_suggest(selector, message):
    with pytest.raises(ValueError) as info:
        normalise_selector(selector)
    assert message in str(info.value)
    if selector == "XY9":
        assert "did you mean" not in str(info.value)


def test_rule_lookup_by_code_or_name_in_any_case():
    assert lookup("dl101") is lookup("seed-only-torch") is lookup("SEED-ONLY-TORCH")


def test_messages_are_concise_and_name_the_value():
    """ruff-like messages (issue #30): what and where in about 100 characters, the value named
    in backticks; the explanation lives in `distlint rule CODE`. Values and origins are the
    variable part and are not counted."""
    from helpers import FIXTURES

    from distlint.config import Config
    from distlint.runner import lint_source

    config = Config(select=("ALL",))
    seen = set()
    for bad in sorted(FIXTURES.glob("DL*/bad.py")):
        for finding in lint_source(bad.read_text(), str(bad), config).findings:
            seen.add(finding.code)
            fixed_part = re.sub(r"`[^`]*`", "`v`", finding.message)
            fixed_part = re.sub(r" \((from|read by) [^)]*\)", "", fixed_part)
            assert len(fixed_part) <= 105, finding.message
            if finding.code != "DL001":
                assert "`" in finding.message, finding.message  # the value or the remedy, named
    assert seen >= {"DL101", "DL102", "DL201", "DL202", "DL203", "DL301", "DL302", "DL303"}
