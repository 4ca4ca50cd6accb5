"""The `verify` marker and session fixtures of the verify tests."""

import sys

import pytest


def pytest_configure(config):
    # Registered so `-m "not verify"` can deselect the real runs; they run by default (CI included).
    config.addinivalue_line(
        "markers",
        "verify: runs real 1- and 2-process CPU trainings through `distlint verify` (slow, ~10 s each)",
    )


@pytest.fixture(scope="session")
def linux_proc():
    if not sys.platform.startswith("linux"):
        pytest.skip("the process-table checks read /proc")
