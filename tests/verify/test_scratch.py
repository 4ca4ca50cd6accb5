"""The scratch copy each run works in, and the watch over the user's tree (no torch run here:
plain Python scripts stand in for the launcher)."""

import json
import os
import subprocess
import sys

from verify_helpers import ROOT

from distlint.verify.scratch import changes, mirror_tree, snapshot


def _user_tree(root):
    deep = root / "a" / "b" / "c"
    (deep / "d" / "e").mkdir(parents=True)
    (deep / "file.txt").write_text("the user's file\n")
    (deep / "d" / "e" / "weights.bin").write_bytes(b"w" * 100)
    (root / "top.txt").write_text("top\n")
    return deep


def test_every_level_is_copied_so_deep_writes_of_any_kind_stay_in_scratch(tmp_path):
    user = tmp_path / "user"
    _user_tree(user)
    before = snapshot(str(user))
    scratch = tmp_path / "scratch"
    mirror = mirror_tree(str(user), str(scratch))
    assert mirror.copied == 3 and not mirror.linked_files and not mirror.linked_dirs
    script = (
        "import os, shutil\n"
        "import numpy as np\n"
        "import torch\n"
        "fd = os.open('a/b/c/file.txt', os.O_WRONLY | os.O_TRUNC)\n"
        "os.write(fd, b'os.open wrote here'); os.close(fd)\n"
        "shutil.copy('top.txt', 'a/b/c/d/e/weights.bin')\n"
        "np.save('a/b/c/d/e/array.npy', np.zeros(3))\n"
        "torch.save({'w': 1}, 'a/b/c/d/ckpt.pt')\n"
        "with open('a/b/c/file.txt', 'a') as f: f.write('appended')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=scratch, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert changes(before, snapshot(str(user))) == []  # nothing reached the user's tree
    assert (user / "a" / "b" / "c" / "file.txt").read_text() == "the user's file\n"
    assert (scratch / "a" / "b" / "c" / "file.txt").read_text() == "os.open wrote hereappended"
    assert (scratch / "a" / "b" / "c" / "d" / "e" / "array.npy").exists()


def test_files_over_the_budget_are_links_and_a_change_through_them_is_seen(tmp_path):
    user = tmp_path / "user"
    deep = _user_tree(user)
    before = snapshot(str(user))
    scratch = tmp_path / "scratch"
    mirror = mirror_tree(str(user), str(scratch), file_limit=50)  # weights.bin is 100 bytes
    assert mirror.linked_files == [str(deep / "d" / "e" / "weights.bin")]
    linked = scratch / "a" / "b" / "c" / "d" / "e" / "weights.bin"
    assert linked.is_symlink() and linked.read_bytes() == b"w" * 100
    fd = os.open(linked, os.O_WRONLY | os.O_APPEND)  # what the probe cannot intercept
    os.write(fd, b"more")
    os.close(fd)
    assert changes(before, snapshot(str(user))) == ["a/b/c/d/e/weights.bin (changed)"]


DRIVER = r"""
import json, sys
from distlint.verify import core, launch

user, script, keep = sys.argv[1:4]

def plan(label, n):
    return launch.LaunchPlan(label, n, "python", "cpu", [sys.executable, script], {})

core.launch.multi_plan = lambda *a, **k: plan("2 processes", 2)
core.launch.single_plan = lambda *a, **k: plan("1 process", 1)
progress = lambda event, payload: sys.stderr.write(f"progress {event}\n")
result = core.verify(script, device="cpu", keep_dir=keep, cwd=user, progress=progress)
check = result.check("files")
print(json.dumps({"files": check.data["changed"] if check else None, "status": check and check.status,
                  "who": check.data.get("who") if check else None}))
"""


def test_writes_to_the_users_tree_fail_and_verifys_own_outputs_are_not_changes(tmp_path):
    user = tmp_path / "user"
    deep = _user_tree(user)
    script = tmp_path / "train.py"
    script.write_text(
        f"open({str(deep / 'file.txt')!r}, 'a').write('absolute path: the user file')\n"
        f"import os; fd = os.open({str(user / 'top.txt')!r}, os.O_WRONLY | os.O_APPEND)\n"
        "os.write(fd, b'os.open: not seen by the probe'); os.close(fd)\n"
        f"import os; os.makedirs({str(user / '.distlint_cache' / 'entries')!r}, exist_ok=True)\n"
        f"open({str(user / '.distlint_cache' / 'entries' / 'x.json')!r}, 'w').write('{{}}')\n"
        f"os.makedirs({str(user / '__pycache__')!r}, exist_ok=True)\n"
        f"open({str(user / '__pycache__' / 'm.cpython-311.pyc')!r}, 'wb').write(b'')\n"
        "open('a/b/c/relative.txt', 'w').write('in scratch')\n"
    )
    err = user / "v.err"  # `distlint verify train.py 2> v.err` in the user's folder
    with open(err, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(user), str(script), "keep1"],
            cwd=user,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert done.returncode == 0, err.read_text()
    report = json.loads(done.stdout)
    assert report["files"] == ["a/b/c/file.txt (changed)", "top.txt (changed)"]
    assert report["status"] == "fail"
    # who made each change, as far as can be told: the probe saw the open() of the first; the
    # second was written during the run by a call it does not see
    assert report["who"]["a/b/c/file.txt (changed)"].startswith("a process (pid ")
    assert report["who"]["a/b/c/file.txt (changed)"].endswith(
        "of the 2 processes run opened it to write"
    )
    assert report["who"]["top.txt (changed)"].startswith(
        "written during the 2 processes run, not through open()"
    )
    assert "progress start" in err.read_text()  # verify wrote there, and it is not reported
    assert (user / ".distlint_cache" / "entries" / "x.json").exists()  # distlint's own cache
    assert not (user / "a" / "b" / "c" / "relative.txt").exists()
    # --keep keep1 is relative to the user's folder, not to a run's scratch folder
    assert (user / "keep1" / "many" / "cwd" / "a" / "b" / "c" / "relative.txt").exists()
    assert not list((user / "keep1").glob("*/cwd/keep1"))


def test_a_change_made_while_no_run_was_going_is_another_programs(tmp_path):
    """A modification time outside every run's window: no process of the runs was alive."""
    from records_by_hand import make_run, ups

    from distlint.verify.core import attribute_changes, files_check

    run = make_run(tmp_path, "many", 2, [ups([1.0, 0.9])] * 2)
    second = 1_000_000_000
    new = {"notes.md (changed)": 100 * second, "gone.txt (removed)": None}
    who = attribute_changes(new, run, began=200 * second, ended=260 * second)
    assert who["notes.md (changed)"].startswith("written while no run was going")
    assert who["gone.txt (removed)"] == "seen after the 2 processes run; no time to place it"
    assert files_check(["notes.md (changed)"], "/u", who).status == "warn"
    mixed = files_check(["notes.md (changed)", "gone.txt (removed)"], "/u", who)
    assert mixed.status == "fail" and "gone.txt (removed): seen after" in mixed.detail
