"""Plant modules that shadow what distlint imports, and tell which of them ran (issue #27 item 1).

A repository opened in an editor or linted from its own folder must never have its code run.
The modules planted are those a real run imports (``sys.modules`` of the CLI with and without
its process pool, of the language server and of its lint worker), each as ``NAME.py`` in the
folder (it would shadow a package of that name too), plus a ``distlint/`` package. Each one,
if imported, creates ``NAME`` in the markers folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """\
import torch
from accelerate import Accelerator

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Linear(2, 2)
import random

random.shuffle(data := [1, 2])
"""

# The modules a `distlint check` process has imported when it exits (run with -I so that
# the list is distlint's, not this folder's).
_LIST_MODULES = """\
import atexit, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write("\\n".join(sys.modules)))
sys.argv = ["distlint", *sys.argv[2:]]
from distlint.__main__ import main
main()
"""


def distlint_command() -> str:
    """The installed ``distlint`` script, as editors and pre-commit start it."""
    here = Path(sys.executable).parent / ("distlint.exe" if os.name == "nt" else "distlint")
    assert here.exists(), f"{here}: distlint is not installed next to {sys.executable}"
    return str(here)


def scripts(folder: Path, count: int = 10) -> list[str]:
    """``count`` training scripts with a DL101 each (enough for the process pool)."""
    names = []
    for i in range(count):
        (folder / f"train_{i}.py").write_text(SCRIPT)
        names.append(f"train_{i}.py")
    return names


def cli_modules(folder: Path) -> set[str]:
    """Top-level modules of `distlint check` runs over ``folder``, in-process and with a pool
    (a forked worker imports what the in-process lint imports)."""
    names: set[str] = set()
    files = scripts(folder)
    for jobs in ("1", "2"):
        out = folder / f"modules-{jobs}.txt"
        subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                _LIST_MODULES,
                str(out),
                "check",
                "--no-cache",
                "-j",
                jobs,
                *files,
            ],
            cwd=folder,
            capture_output=True,
            timeout=120,
        )
        names |= {line.split(".")[0] for line in out.read_text().split()}
        out.unlink()
    assert {"libcst", "click", "distlint", "multiprocessing"} <= names, sorted(names)
    return names


def worker_modules() -> set[str]:
    """Top-level modules of the language server's lint worker, once it has linted."""
    from distlint.api import LintOptions
    from distlint.lsp_worker import Worker

    worker = Worker()
    try:
        worker.call("lint", SCRIPT, os.path.abspath("train.py"), LintOptions(), {}, timeout=60)
        return set(worker.call("modules", timeout=60))
    finally:
        worker.close()


def plant(folder: Path, names: set[str], markers: Path) -> list[str]:
    """Put a module that marks its import in ``markers`` for each name in ``names`` (and a
    ``distlint/`` package) into ``folder``; the names planted."""
    markers.mkdir(exist_ok=True)
    planted = sorted(n for n in names | {"distlint"} if n.isidentifier() and n != "__main__")
    for name in planted:
        code = f"open({str(markers / name)!r}, 'w').close()\n"
        if name == "distlint":
            (folder / "distlint").mkdir(exist_ok=True)
            (folder / "distlint" / "__init__.py").write_text(code)
        else:
            (folder / f"{name}.py").write_text(code)
    # proof that they are live: Python run the plain way in this folder imports them
    subprocess.run([sys.executable, "-c", "import pickle"], cwd=folder, timeout=60)
    assert ran(markers) == ["pickle"], ran(markers)
    (markers / "pickle").unlink()
    return planted


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())
