import difflib
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, snapshot_path  # noqa: F401


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots",
        "--update-fixtures",
        dest="update_snapshots",
        action="store_true",
        default=False,
        help="Write the expected files (tests/snapshots/**.txt, fixtures/<CODE>/bad.fixed.py) "
        "from the current output instead of comparing; review them with `git diff`.",
    )


@pytest.fixture
def update_fixtures(request):
    return request.config.getoption("update_snapshots")


@pytest.fixture
def snapshot(request):
    """``snapshot(value)``: compare ``value`` (text, or anything with ``render()``) with
    tests/snapshots/<module>/<test name>.txt. A missing or different snapshot fails with the
    command that writes it; ``--update-snapshots`` writes it instead. One snapshot per test."""
    path = snapshot_path(request.path.stem, request.node.name)
    update = request.config.getoption("update_snapshots")
    rel = path.relative_to(ROOT)
    command = f"python -m pytest '{request.node.nodeid}' --update-snapshots"
    used = []

    def check(value):
        assert not used, "one snapshot per test: parametrize the test instead"
        used.append(path)
        text = value.render() if hasattr(value, "render") else str(value)
        if not text.endswith("\n"):
            text += "\n"
        if update:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            return value
        if not path.exists():
            pytest.fail(
                f"snapshot {rel} is missing; write it with\n    {command}\nand review it.\n"
                f"It would be:\n{text}",
                pytrace=False,
            )
        expected = path.read_text(encoding="utf-8")
        if expected != text:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"{rel} (snapshot)",
                    f"{rel} (now)",
                )
            )
            pytest.fail(
                f"snapshot {rel} differs:\n{diff}\nIf the change is intended, write it with\n"
                f"    {command}\nand review the diff.",
                pytrace=False,
            )
        return value

    return check


@pytest.fixture(scope="session")
def distlint_exe():
    """The installed `distlint` console script, as users and pre-commit run it."""
    exe = shutil.which("distlint")
    if exe is None:
        candidate = Path(sys.executable).parent / "distlint"
        exe = str(candidate) if candidate.exists() else None
    assert exe is not None, "the distlint command is not installed (pip install -e '.[dev]')"
    return exe
