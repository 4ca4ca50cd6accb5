"""flake8 plugin: distlint's findings as flake8 ``DL`` errors, for teams that run flake8.

Installed with distlint (entry point ``flake8.extension``: ``DL``). The rules, their options and
``select`` / ``per-file-ignores`` come from distlint's own configuration (``[tool.distlint]`` in
pyproject.toml or distlint.toml) found from the linted file; flake8's ``--select`` /
``--extend-ignore`` then filter the ``DL`` codes like any other. distlint's ``# noqa`` rules apply
(the comment may also sit on the first line of a multi-line statement). flake8 never fixes: run
``distlint fix`` for that.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distlint import __version__


class Flake8Plugin:
    name = "distlint"
    version = __version__

    def __init__(self, tree, filename: str, lines: Sequence[str]) -> None:
        # `tree` is requested so that flake8 runs this once per file; distlint parses with LibCST.
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type[Flake8Plugin]]]:
        from distlint.api import ConfigError, config_for, lint_source

        path = self.filename if self.filename not in ("stdin", "-", None) else "stdin.py"
        if path.endswith(".ipynb"):
            # flake8 reads a notebook as Python source (its JSON): positions in it would be
            # meaningless. Say so once instead of reporting findings at the wrong lines.
            yield (
                1,
                0,
                "DL000 notebooks are not linted through flake8 (it reads the JSON as Python); "
                f"run `distlint check {path}`",
                type(self),
            )
            return
        try:
            config = config_for(path)
        except ConfigError as exc:
            yield 1, 0, f"DL000 distlint configuration error: {exc}", type(self)
            return
        result = lint_source("".join(self.lines), path, config)
        for finding in result.findings:
            # flake8 columns are 0-based
            yield finding.line, finding.column - 1, f"{finding.code} {finding.message}", type(self)
        for error in result.errors:
            yield (
                error.line or 1,
                max((error.column or 1) - 1, 0),
                f"DL000 {error.message}",
                type(self),
            )
