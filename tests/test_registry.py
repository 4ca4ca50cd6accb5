import re

import pytest

from distlint.registry import RegistryError, _check_unique, all_rules
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
