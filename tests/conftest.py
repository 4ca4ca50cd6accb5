import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT  # noqa: F401


def pytest_addoption(parser):
    parser.addoption(
        "--update-fixtures",
        action="store_true",
        default=False,
        help="Regenerate fixtures/<CODE>/bad.fixed.py from the current fixes instead of comparing.",
    )


@pytest.fixture
def update_fixtures(request):
    return request.config.getoption("--update-fixtures")


@pytest.fixture(scope="session")
def distlint_exe():
    """The installed `distlint` console script, as users and pre-commit run it."""
    exe = shutil.which("distlint")
    if exe is None:
        candidate = Path(sys.executable).parent / "distlint"
        exe = str(candidate) if candidate.exists() else None
    assert exe is not None, "the distlint command is not installed (pip install -e '.[dev]')"
    return exe
