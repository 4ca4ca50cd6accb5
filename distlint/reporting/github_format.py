"""``--format github``: GitHub Actions workflow commands, shown as annotations on the diff.

One ``::error file=…,line=…,col=…,endLine=…,endColumn=…,title=…::message`` line per finding and
per file that could not be linted. Notebook findings point at the notebook file (its lines are
JSON, not code), with the cell and cell-relative position in the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from distlint.escape import printable
from distlint.model import FileResult
from distlint.reporting import ReportContext


def _escape_data(text: str) -> str:
    text = printable(text, newlines=True)  # no ANSI escape reaches the workflow log
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, properties: Sequence[tuple[str, object]], message: str) -> str:
    props = ",".join(
        f"{key}={_escape_property(str(value))}" for key, value in properties if value is not None
    )
    return f"::{level} {props}::{_escape_data(message)}\n"


def render(results: Sequence[FileResult], stream: TextIO, context: ReportContext) -> None:
    for result in results:
        for f in result.findings:
            title = f"distlint ({f.code})"
            if f.cell is not None:
                # the notebook's lines are JSON, not code: a file annotation naming the cell
                where = f"{f.path}:cell {f.cell}:{f.line}:{f.column}"
                props: list[tuple[str, object]] = [
                    ("title", f"{title} cell {f.cell}"),
                    ("file", f.path),
                ]
            else:
                where = f"{f.path}:{f.line}:{f.column}"
                props = [
                    ("title", title),
                    ("file", f.path),
                    ("line", f.line),
                    ("col", f.column),
                    ("endLine", f.end_line),
                    ("endColumn", f.end_column),
                ]
            stream.write(_command(f.severity.value, props, f"{where}: {f.code} {f.message}"))
        for e in result.errors:
            error_props: list[tuple[str, object]] = [
                ("title", "distlint (error)"),
                ("file", e.path),
                ("line", e.line),
                ("col", e.column),
            ]
            stream.write(_command("error", error_props, str(e)))
