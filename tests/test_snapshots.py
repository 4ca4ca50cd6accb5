"""The snapshot files themselves: each belongs to a test (a renamed or removed test leaves none
behind), and the format renders what it promises. See tests/helpers.py (render) and the
`snapshot` fixture in tests/conftest.py."""

import textwrap

import pytest
from conftest import SNAPSHOT_TESTS
from helpers import ROOT, compare_snapshot, lint_snippet, snapshot_folders, snapshot_path


def test_every_snapshot_belongs_to_a_test(request):
    collected = request.config.stash.get(SNAPSHOT_TESTS, {})
    update = request.config.getoption("update_snapshots")
    orphans = []
    for folder in snapshot_folders():
        module_exists = (folder.parent.parent / f"{folder.name}.py").exists()
        if module_exists and folder not in collected:
            continue  # not collected in this run (or named with `::`): nothing to compare
        wanted = collected.get(folder, set())
        orphans += [p for p in sorted(folder.iterdir()) if p.name not in wanted]
    if update:
        for path in orphans:
            path.unlink()
            if not any(path.parent.iterdir()):
                path.parent.rmdir()
        return
    assert not orphans, (
        "snapshots without a test (renamed or removed?): "
        + ", ".join(str(p.relative_to(ROOT)) for p in orphans)
        + "\nremove them, or run the whole module with --update-snapshots"
    )


def test_snapshot_names_keep_the_param_id_and_tame_odd_characters():
    path = snapshot_path(ROOT / "tests" / "rules" / "test_x.py", "test_y[a b/c::d]")
    assert path == ROOT / "tests" / "rules" / "snapshots" / "test_x" / "test_y[a_b_c__d].txt"


def test_render_pins_range_code_message_source_and_both_diffs():
    linted = lint_snippet(
        "DL201",
        """
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        opt = torch.optim.SGD([], lr=0.1)
        """,
    )
    text = linted.render()
    assert text.startswith("5:30-5:33 DL201 learning rate `0.1` ")
    assert "\n  | opt = torch.optim.SGD([], lr=0.1)\n  |                              ^^^\n" in text
    assert "\n  fix (unsafe): " in text
    assert "\n    -opt = torch.optim.SGD([], lr=0.1)\n" in text
    assert "\n    +opt = torch.optim.SGD([], lr=0.1 * accelerator.num_processes)\n" in text
    assert text.endswith(
        "fix --unsafe-fixes: the fix above, nothing else\nremaining after the fix: none\n"
    )


def test_a_clean_snippet_renders_as_no_findings():
    assert lint_snippet("DL201", "import torch\n").render() == "no findings\n"


def test_lint_snippet_dedents_and_nothing_else():
    source = """
        import torch
        x = 1
    """
    assert lint_snippet("DL201", source).source == textwrap.dedent(source)


def test_a_missing_snapshot_fails_with_the_command_to_write_it(tmp_path):
    path = tmp_path / "test_m" / "test_case.txt"
    with pytest.raises(pytest.fail.Exception, match="missing; write it with\n    CMD"):
        compare_snapshot(path, "no findings", update=False, command="CMD")
    assert not path.exists()


def test_update_writes_and_a_change_fails_with_its_diff(tmp_path):
    path = tmp_path / "test_m" / "test_case.txt"
    compare_snapshot(path, "1:1-1:2 DL201 old", update=True, command="CMD")
    assert path.read_text() == "1:1-1:2 DL201 old\n"
    compare_snapshot(path, "1:1-1:2 DL201 old\n", update=False, command="CMD")
    with pytest.raises(pytest.fail.Exception) as failed:
        compare_snapshot(path, "1:1-1:2 DL201 new", update=False, command="CMD")
    assert "-1:1-1:2 DL201 old\n+1:1-1:2 DL201 new" in str(failed.value)
    assert "CMD" in str(failed.value)
