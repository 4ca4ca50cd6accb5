import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, compare_snapshot, snapshot_path  # noqa: F401


def pre_commit_command() -> list[str]:
    """How the tests run pre-commit: the running interpreter's own (`python -m pre_commit`), so
    that a venv's python works without the venv on PATH; skipped, saying why, without it."""
    import importlib.util

    if importlib.util.find_spec("pre_commit") is None:
        pytest.skip(f"pre-commit is not installed for {sys.executable} (pip install -e '.[dev]')")
    return [sys.executable, "-m", "pre_commit"]


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


SNAPSHOT_TESTS = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect: every test of a collected module
def pytest_collection_modifyitems(session, config, items):
    """Remember which tests take a snapshot, per module, for the orphaned-snapshot check
    (tests/test_snapshots.py). A module named with `::` on the command line is only partly
    collected and is left out."""
    partial = {Path(arg.split("::")[0]).stem for arg in config.args if "::" in arg}
    names: dict = {}
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        module = item.path.stem
        if "snapshot" in getattr(item, "fixturenames", ()) and module not in partial:
            names.setdefault(module, set()).add(snapshot_path(module, item.name).name)
    config.stash[SNAPSHOT_TESTS] = names


# What makes a test slow is what it does: it starts real processes. `pytest -m "not slow"`
# leaves these out for the inner loop; the full suite (the README's command) runs them all.
# - every end-to-end test: the installed `distlint` command as a subprocess (distlint_exe);
# - modules whose every test drives a real client or real runs: pre-commit, Neovim, the
#   language server, `--verify` on 1 and N processes, mypy/ruff over the tree, other Pythons;
# - generated programs by the hundred (properties) and the 10,000-file tree;
# - tests that run the fixed training scripts or a pool of workers.
SLOW_MODULES = frozenset(
    {
        "test_precommit.py",
        "test_neovim.py",
        "test_lsp.py",
        "test_runs.py",
        "test_habits.py",
        "test_pythons.py",
        "test_properties.py",
        "test_large_tree.py",
        "test_parallel.py",
        "test_flake8.py",
    }
)
SLOW_TESTS = frozenset(
    {
        "test_fixed_runnable_scripts_still_run",
        "test_usage_commands_run",
        "test_pre_commit_local_hooks_snippet_runs",
        "test_install_lines_name_real_extras_and_the_torch_that_is_tested",
        "test_real_probe_errors_never_reach_the_script",
        "test_dataloader_built_before_seeding_shuffles_reproducibly",
        "test_benchmark_script_prints_the_same_totals",
        # subprocesses under memory limits, concurrent processes, files of megabytes
        "test_inputs_at_the_bounds_are_linted_and_fixed",
        "test_ten_megabyte_file",
        "test_files_over_the_budget_are_refused_quickly_in_bounded_memory",
        "test_linting_never_executes_the_script",
        "test_concurrent_fix_processes_leave_files_whole",
        "test_concurrent_runs_are_safe",
        "test_no_cache_and_clean",
        "test_writes_in_the_scratch_folder_never_reach_the_users_files",
        "test_positions_of_statements_an_edit_did_not_touch_are_reused_and_still_right",
    }
)


def _is_slow(item) -> bool:
    return (
        "distlint_exe" in getattr(item, "fixturenames", ())
        or item.path.name in SLOW_MODULES
        or getattr(item, "originalname", item.name) in SLOW_TESTS
    )


@pytest.fixture
def update_fixtures(request):
    return request.config.getoption("update_snapshots")


@pytest.fixture
def snapshot(request):
    """``snapshot(value)``: compare ``value`` (text, or anything with ``render()``) with
    tests/snapshots/<module>/<test name>.txt and return ``value``. A missing or different
    snapshot fails with the command that writes it; ``--update-snapshots`` writes it instead.
    One snapshot per test."""
    path = snapshot_path(request.path.stem, request.node.name)
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
