"""``--format junit``: JUnit XML for CI dashboards: one test case per file, one ``<failure>`` per
finding, one ``<error>`` per problem reading or parsing the file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TextIO

from distlint.escape import printable
from distlint.model import FileResult
from distlint.reporting import ReportContext
from distlint.reporting.text_format import location


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    failures = sum(len(r.findings) for r in results)
    errors = sum(len(r.errors) for r in results)
    counts = {"tests": str(len(results)), "failures": str(failures), "errors": str(errors)}
    root = ET.Element("testsuites", {"name": "distlint", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "distlint", **counts})
    for result in results:
        # XML 1.0 cannot hold control characters even escaped: written as `\x1b` text
        path = printable(result.path)
        case = ET.SubElement(suite, "testcase", name=path, classname="distlint", file=path)
        for f in result.findings:
            message = printable(f"{f.code} {f.message}")
            failure = ET.SubElement(case, "failure", message=message, type=f.code)
            failure.text = printable(f"{location(f)}: {f.code} {f.message}")
            if f.cell is not None:  # a notebook: the line is relative to the cell
                failure.set("message", f"cell {f.cell}, line {f.line}: {message}")
                failure.set("cell", str(f.cell))
            if f.line:
                failure.set("line", str(f.line))
        for e in result.errors:
            error = ET.SubElement(case, "error", message=printable(e.message), type="error")
            error.text = printable(str(e))
    ET.indent(root)
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(ET.tostring(root, encoding="unicode"))
    stream.write("\n")
