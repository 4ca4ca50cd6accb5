"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.

The run lists every distlint rule (id, name, descriptions, the full ``distlint rule`` docs as
help, the help URI when a rule has one), one result per finding with its 1-based region, and,
for fixable findings, the fix as one replacement covering the changed line span of the file.
Each finding's fix is recomputed on its own (the quick fix the language server offers), so a
viewer can apply findings one by one. Files that could not be linted are tool notifications.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from distlint import __version__
from distlint.model import Applicability, FileResult, Finding

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
) -> dict:
    uri, base = _uri(path)
    artifact = {"uri": uri}
    if base:
        artifact["uriBaseId"] = base
    physical: dict = {"artifactLocation": artifact}
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
        region = {"startLine": line}
        if column is not None:
            region["startColumn"] = column
        physical["region"] = region
    return {"physicalLocation": physical}


def _replacements(before: str, after: str) -> list[dict]:
    """The changed line spans between ``before`` and ``after``, one replacement each, as
    character regions of ``before`` (SARIF wants them ordered and non-overlapping)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    offsets = [0]
    for line in old:
        offsets.append(offsets[-1] + len(line))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag == "equal":
            continue
        out.append(
            {
                "deletedRegion": {
                    "charOffset": offsets[i1],
                    "charLength": offsets[i2] - offsets[i1],
                },
                "insertedContent": {"text": "".join(new[j1:j2])},
            }
        )
    return out


def _fixes(result: FileResult, context) -> dict[Finding, dict]:
    """Each fixable finding's own fix, as a SARIF fix object."""
    wanted = [f for f in result.findings if f.fix is not None and f.cell is None]
    if not wanted or getattr(context, "diff", False) or result.path.endswith(".ipynb"):
        return {}
    from distlint.api import LintOptions, config_for, fix_source, lint_source
    from distlint.runner import decode

    try:
        with open(result.path, "rb") as handle:
            text = decode(handle.read())
        config = config_for(result.path, context.options or LintOptions())
    except Exception:  # unreadable now, or a config problem already reported: no fixes
        return {}
    fresh = lint_source(text, result.path, config)
    ids = {(f.code, f.range): f.fix_id for f in fresh.findings if f.fix is not None}
    out: dict[Finding, dict] = {}
    for finding in wanted:
        fix_id = ids.get((finding.code, finding.range))
        if fix_id is None:
            continue
        fixed = fix_source(text, result.path, config, fix_ids={fix_id})
        if fixed == text:
            continue
        title = finding.fix.title
        if finding.fix.applicability is Applicability.UNSAFE:
            title += " (unsafe: review it, it may change behaviour)"
        uri, base = _uri(result.path)
        artifact = {"uri": uri}
        if base:
            artifact["uriBaseId"] = base
        out[finding] = {
            "description": {"text": title},
            "artifactChanges": [
                {"artifactLocation": artifact, "replacements": _replacements(text, fixed)}
            ],
        }
    return out


def _rules() -> tuple[list[dict], dict[str, int]]:
    from distlint.registry import all_rules

    descriptors = []
    index: dict[str, int] = {}
    for i, rule in enumerate(all_rules()):
        docs = rule.docs()
        descriptor = {
            "id": rule.CODE,
            "name": rule.NAME,
            "shortDescription": {"text": rule.summary()},
            "fullDescription": {"text": rule.MESSAGE},
            "help": {"text": docs, "markdown": docs},
            "defaultConfiguration": {"level": "error", "enabled": bool(rule.DEFAULT_ENABLED)},
            "properties": {
                "fix": rule.FIX_SAFETY.value if rule.FIX_SAFETY else "none",
                "tags": ["distributed-training", "reproducibility"],
            },
        }
        if rule.URL:
            descriptor["helpUri"] = rule.URL
        descriptors.append(descriptor)
        index[rule.CODE] = i
    return descriptors, index


def render(results: Sequence[FileResult], stream: TextIO, context) -> None:
    rules, rule_index = _rules()
    sarif_results = []
    notifications = []
    for result in results:
        fixes = _fixes(result, context)
        for f in result.findings:
            message = f"{f.code} {f.message}"
            if f.cell is not None:
                message = f"cell {f.cell}, line {f.line}, column {f.column}: {message}"
            item = {
                "ruleId": f.code,
                "level": "error" if f.severity.value == "error" else "warning",
                "message": {"text": message},
                "locations": [_location(f.path, f)],
            }
            if f.code in rule_index:
                item["ruleIndex"] = rule_index[f.code]
            if f.cell is not None:
                item["properties"] = {"cell": f.cell, "line": f.line, "column": f.column}
            if f in fixes:
                item["fixes"] = [fixes[f]]
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
