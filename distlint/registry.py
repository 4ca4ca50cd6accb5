"""The one place rules are found: every Rule subclass in the ``distlint.rules`` package."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from functools import lru_cache

from distlint.rule import Rule


class RegistryError(Exception):
    pass


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """All rules, sorted by code. Raises RegistryError on duplicate codes or names."""
    import distlint.rules as package

    found: list[type[Rule]] = []
    names = sorted(
        entry[:-3]
        for folder in package.__path__
        for entry in os.listdir(folder)
        if entry.endswith(".py") and not entry.startswith("_")
    )
    for name in names:  # one module a rule, each a plain .py file of the package
        module = importlib.import_module(f"{package.__name__}.{name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                found.append(value)
    _check_unique(found)
    return tuple(sorted(found, key=lambda r: r.CODE))


def _check_unique(rules: Iterable[type[Rule]]) -> None:
    codes: dict[str, str] = {}
    names: dict[str, str] = {}
    for rule in rules:
        if not rule.CODE or not rule.NAME:
            raise RegistryError(f"{rule.__module__}.{rule.__name__} has no CODE or NAME")
        if rule.CODE in codes:
            raise RegistryError(
                f"duplicate rule code {rule.CODE}: {codes[rule.CODE]} and {rule.__name__}"
            )
        if rule.NAME in names:
            raise RegistryError(
                f"duplicate rule name {rule.NAME}: {names[rule.NAME]} and {rule.__name__}"
            )
        codes[rule.CODE] = rule.__name__
        names[rule.NAME] = rule.__name__


def by_code() -> dict[str, type[Rule]]:
    return {r.CODE: r for r in all_rules()}


@lru_cache(maxsize=1)
def codes_by_name() -> dict[str, str]:
    """Each rule's kebab-case name (lower case) -> its code."""
    return {r.NAME.lower(): r.CODE for r in all_rules()}


def suggestion(text: str) -> str:
    """`` (did you mean X?)`` for the code or name closest to ``text``, or ``""``."""
    import difflib

    key = text.strip()
    upper = [r.CODE for r in all_rules()]
    close = difflib.get_close_matches(key.upper(), upper, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(key.lower(), list(codes_by_name()), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def normalise_selector(selector: str) -> str:
    """The code or code prefix that ``selector`` names: a code (``DL201``), a prefix (``DL2``),
    ``ALL``, or a rule's name (``unscaled-learning-rate``), in any case. Raises ValueError
    with a one-line reason (and the closest code or name) for anything else."""
    key = selector.strip()
    if not key:
        raise ValueError(f"empty rule code {selector!r}")
    upper = key.upper()
    if upper == "ALL" or any(r.CODE.startswith(upper) for r in all_rules()):
        return upper
    code = codes_by_name().get(key.lower())
    if code is not None:
        return code
    raise ValueError(f"unknown rule code, prefix or name {selector!r}{suggestion(key)}")


def lookup(code_or_name: str) -> type[Rule]:
    key = code_or_name.strip()
    code = codes_by_name().get(key.lower(), key.upper())
    for rule in all_rules():
        if rule.CODE == code:
            return rule
    raise KeyError(code_or_name)
