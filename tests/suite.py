"""What the suite needs in more than one place: which tests are slow, and how pre-commit is run.
(A module of its own: `conftest` names two modules here, tests/ and tests/verify/.)"""

from __future__ import annotations

import sys

import pytest


def pre_commit_command() -> list[str]:
    """How the tests run pre-commit: the running interpreter's own (`python -m pre_commit`), so
    that a venv's python works without the venv on PATH; skipped, saying why, without it."""
    import importlib.util

    if importlib.util.find_spec("pre_commit") is None:
        pytest.skip(f"pre-commit is not installed for {sys.executable} (pip install -e '.[dev]')")
    return [sys.executable, "-m", "pre_commit"]


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


def is_slow(item) -> bool:
    return (
        "distlint_exe" in getattr(item, "fixturenames", ())
        or item.path.name in SLOW_MODULES
        or getattr(item, "originalname", item.name) in SLOW_TESTS
    )
