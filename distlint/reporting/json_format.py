"""``--format json``: one JSON array of findings with the keys fixed in issue #2."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TextIO

from distlint.model import FileResult
from distlint.reporting import ReportContext


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    # `cell`: the notebook code cell (1-based) the cell-relative line is in; null for .py
    findings = [{**f.to_json(), "cell": f.cell} for r in results for f in r.findings]
    json.dump(findings, stream, indent=2)
    stream.write("\n")
