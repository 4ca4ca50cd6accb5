"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.

The run lists every distlint rule it is given (``ReportContext.rules``: id, name, descriptions,
the full ``distlint rule`` docs as help, the help URI when a rule has one), one result per
finding with its 1-based region, and, for fixable findings, the finding's own fix: one
replacement per edit the finding carries (``deletedRegion`` as lines/columns and as a character
offset and length, ``insertedContent``), so a viewer can apply findings one by one. Nothing is read or linted again here. Files that could
not be linted are tool notifications.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from distlint import __version__
from distlint.edits import merged
from distlint.model import Applicability, FileResult, Finding, RuleInfo
from distlint.reporting import ReportContext

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


def _uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId): paths relative to the checkout, as code scanning expects."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            return p.as_uri(), None
    return quote(p.as_posix()), "%SRCROOT%"


def _location(
    path: str,
    finding: Finding | None = None,
    line: int | None = None,
    column: int | None = None,
) -> dict[str, Any]:
    uri, base = _uri(path)
    artifact: dict[str, str] = {"uri": uri}
    if base:
        artifact["uriBaseId"] = base
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if finding is not None:
        # notebooks: the region is in the finding's code cell (cell-relative lines, as viewers
        # of notebook results expect); the cell number is in the result's properties
        physical["region"] = {
            "startLine": finding.line,
            "startColumn": finding.column,
            "endLine": finding.end_line,
            "endColumn": finding.end_column,
        }
    elif finding is None and line is not None:
        region: dict[str, int] = {"startLine": line}
        if column is not None:
            region["startColumn"] = column
        physical["region"] = region
    return {"physicalLocation": physical}


def _replacements(finding: Finding) -> list[dict[str, Any]]:
    """The finding's edits as SARIF replacements, in order (SARIF wants them non-overlapping)."""
    assert finding.fix is not None
    out = []
    for edit in merged(finding.fix.edits):
        rng = edit.range
        out.append(
            {
                "deletedRegion": {
                    "startLine": rng.line,
                    "startColumn": rng.column,
                    "endLine": rng.end_line,
                    "endColumn": rng.end_column,
                    "charOffset": edit.start,
                    "charLength": edit.end - edit.start,
                },
                "insertedContent": {"text": edit.content},
            }
        )
    return out


def _fix(finding: Finding, context: ReportContext) -> dict[str, Any] | None:
    """The finding's own fix as a SARIF fix object. Notebook edits are in the coordinates of the
    joined cells, and after ``--diff`` in those of text that was never written: none then."""
    if finding.fix is None or not finding.fix.edits or finding.cell is not None:
        return None
    if getattr(context, "diff", False):
        return None
    title = finding.fix.title
    if finding.fix.applicability is Applicability.UNSAFE:
        title += " (unsafe: review it, it may change behaviour)"
    uri, base = _uri(finding.path)
    artifact: dict[str, str] = {"uri": uri}
    if base:
        artifact["uriBaseId"] = base
    return {
        "description": {"text": title},
        "artifactChanges": [{"artifactLocation": artifact, "replacements": _replacements(finding)}],
    }


def _rules(rules: Sequence[RuleInfo]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    descriptors = []
    index: dict[str, int] = {}
    for i, rule in enumerate(rules):
        descriptor = {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.message},
            "help": {"text": rule.docs, "markdown": rule.docs},
            "defaultConfiguration": {"level": "error", "enabled": rule.default_enabled},
            "properties": {
                "fix": rule.fix_safety.value if rule.fix_safety else "none",
                "tags": ["distributed-training", "reproducibility"],
            },
        }
        if rule.url:
            descriptor["helpUri"] = rule.url
        descriptors.append(descriptor)
        index[rule.code] = i
    return descriptors, index


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    rules, rule_index = _rules(context.rules)
    sarif_results = []
    notifications = []
    for result in results:
        for f in result.findings:
            message = f"{f.code} {f.message}"
            if f.cell is not None:
                message = f"cell {f.cell}, line {f.line}, column {f.column}: {message}"
            item: dict[str, Any] = {
                "ruleId": f.code,
                "level": "error" if f.severity.value == "error" else "warning",
                "message": {"text": message},
                "locations": [_location(f.path, f)],
            }
            if f.code in rule_index:
                item["ruleIndex"] = rule_index[f.code]
            if f.cell is not None:
                item["properties"] = {"cell": f.cell, "line": f.line, "column": f.column}
            fix = _fix(f, context)
            if fix is not None:
                item["fixes"] = [fix]
            sarif_results.append(item)
        for e in result.errors:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": str(e)},
                    "locations": [_location(e.path, line=e.line, column=e.column)],
                }
            )
    run = {
        "tool": {
            "driver": {
                "name": "distlint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [
            {"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}
        ],
        "results": sarif_results,
    }
    json.dump({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, stream, indent=2)
    stream.write("\n")
