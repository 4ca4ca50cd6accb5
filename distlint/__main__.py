"""The ``distlint`` command-line process: ``python -m distlint`` and the ``distlint`` script."""

import os
import sys


def _drop_working_directory() -> None:
    """``python -m distlint`` runs with the working directory first on the import path
    (Python's rule for ``-m``): a ``select.py`` or ``click/`` of the linted repository would be
    imported in place of ours. Linting a repository must never run its code, so that entry goes
    before anything else is imported. (The ``distlint`` script has its own folder there
    instead, and ``python -P`` none.)"""
    if not sys.path or getattr(sys.flags, "safe_path", False):
        return
    first = sys.path[0]
    try:
        if first == "" or os.path.samefile(first, os.getcwd()):
            del sys.path[0]
    except OSError:  # a folder that is gone, or no working directory: nothing to import there
        if not first or not os.path.isabs(first):
            del sys.path[0]


if __name__ == "__main__":
    _drop_working_directory()

from distlint import collector  # noqa: E402 - the import path is safe from here on


def main() -> None:
    collector.pause_startup()  # resumed once the lint engine is loaded (distlint.collector)
    from distlint.cli import main as command

    try:
        command()
    finally:
        collector.exiting()


if __name__ == "__main__":
    main()
