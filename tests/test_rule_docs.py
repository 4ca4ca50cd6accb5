"""Rule documentation has one source, the registry: the README's rule table, `distlint rules`
and `distlint rule CODE` must agree with it, so they cannot drift apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from distlint.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"
ROW = re.compile(r"^\| (DL\d{3}) \| `([a-z0-9-]+)` \| (.+?) \| (safe\*?|unsafe|-) \|$")


def _listed() -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["rules", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_readme_rule_table_matches_the_registry() -> None:
    rows = {m.group(1): m for line in README.read_text().splitlines() if (m := ROW.match(line))}
    rules = {r["code"]: r for r in _listed()}
    assert sorted(rows) == sorted(rules), "README rule table and `distlint rules` list differ"
    for code, row in rows.items():
        rule = rules[code]
        assert row.group(2) == rule["name"], code
        fix = row.group(4).rstrip("*")
        assert fix == (rule["fix"] or "-"), f"{code}: README says fix {fix!r}, rule {rule['fix']!r}"


def test_every_rule_prints_its_documentation() -> None:
    for rule in _listed():
        result = CliRunner().invoke(main, ["rule", str(rule["code"])])
        assert result.exit_code == 0, result.output
        assert f"# {rule['code']}" in result.output or str(rule["code"]) in result.output
        for section in ("## What it does", "## Why is this bad?"):
            assert section in result.output, (rule["code"], section)
