import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, compare_snapshot, snapshot_path  # noqa: F401
from rule_tests import parametrize_cases
from suite import is_slow


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots",
        "--update-fixtures",
        dest="update_snapshots",
        action="store_true",
        default=False,
        help="Write the expected files (tests/**/snapshots/**.txt, fixtures/<CODE>/bad.fixed.py) "
        "from the current output instead of comparing; review them with `git diff`.",
    )


SNAPSHOT_TESTS = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect: every test of a collected module
def pytest_collection_modifyitems(session, config, items):
    """Remember which tests take a snapshot, per module, for the orphaned-snapshot check
    (tests/test_snapshots.py). A module named with `::` on the command line is only partly
    collected and is left out."""
    partial = {Path(arg.split("::")[0]).resolve() for arg in config.args if "::" in arg}
    names: dict = {}  # snapshot folder -> the file names its tests take
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
        if "snapshot" in getattr(item, "fixturenames", ()) and item.path not in partial:
            path = snapshot_path(item.path, item.name)
            names.setdefault(path.parent, set()).add(path.name)
    config.stash[SNAPSHOT_TESTS] = names


def pytest_generate_tests(metafunc):
    """The tests every rule has (tests/rule_tests.py), parametrized from each rule test file's
    rule: its snippets and its fixtures."""
    if metafunc.cls is None:
        return
    for name, cases in parametrize_cases(metafunc.cls, metafunc.fixturenames):
        metafunc.parametrize(name, [c.value for c in cases], ids=[c.id for c in cases])


@pytest.fixture
def update_fixtures(request):
    return request.config.getoption("update_snapshots")


@pytest.fixture
def snapshot(request):
    """``snapshot(value)``: compare ``value`` (text, or anything with ``render()``) with
    snapshots/<module>/<test name>.txt beside the test module and return ``value``. A missing or different
    snapshot fails with the command that writes it; ``--update-snapshots`` writes it instead.
    One snapshot per test."""
    path = snapshot_path(request.path, request.node.name)
    command = f"python -m pytest '{request.node.nodeid}' --update-snapshots"
    used = []

    def check(value):
        assert not used, "one snapshot per test: parametrize the test instead"
        used.append(path)
        text = value.render() if hasattr(value, "render") else str(value)
        compare_snapshot(
            path, text, update=request.config.getoption("update_snapshots"), command=command
        )
        return value

    return check


@pytest.fixture(scope="session")
def distlint_exe():
    """The installed `distlint` console script, as users and pre-commit run it."""
    # the one beside the running interpreter first: a venv's python run without activating
    # the venv must not pick up another installation's `distlint` from PATH
    candidate = Path(sys.executable).parent / "distlint"
    exe = str(candidate) if candidate.exists() else shutil.which("distlint")
    assert exe is not None, "the distlint command is not installed (pip install -e '.[dev]')"
    return exe


@pytest.fixture
def fresh_projects():
    """No shared project analysis left by an earlier test (before and after), nor an answer
    store after."""
    from distlint import cache
    from distlint.analysis.project import forget_projects

    forget_projects()
    yield
    forget_projects()
    cache._STORES.clear()
