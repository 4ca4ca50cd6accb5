"""How to install one of distlint's extras, said for the way distlint itself was installed.

pip records where a package came from in its ``direct_url.json`` (PEP 610): a clone installed
with ``pip install -e .`` (or from its folder) needs ``pip install -e '.[lsp]'`` run in that
clone; a git URL needs that URL again with the extra; only a release from an index or a wheel
file is installed by name (``pip install 'distlint[lsp]'``).
"""

from __future__ import annotations

import json
import shlex
from urllib.parse import unquote, urlparse


def extra_install_command(extra: str) -> str:
    """The command that installs ``extra`` into the environment distlint runs in."""
    origin = _direct_url()
    url = origin.get("url") if isinstance(origin.get("url"), str) else None
    if url is not None and "dir_info" in origin:
        folder = unquote(urlparse(url).path)
        editable = isinstance(origin["dir_info"], dict) and origin["dir_info"].get("editable")
        flag = "-e " if editable else ""
        return f"pip install {flag}'.[{extra}]' (in the clone at {shlex.quote(folder)})"
    if url is not None and isinstance(origin.get("vcs_info"), dict):
        vcs = origin["vcs_info"]
        ref = vcs.get("commit_id") or vcs.get("requested_revision")
        at = f"@{ref}" if ref else ""
        return f"pip install 'distlint[{extra}] @ {vcs.get('vcs', 'git')}+{url}{at}'"
    return f"pip install 'distlint[{extra}]'"


def _direct_url() -> dict:
    from importlib import metadata

    # the installed metadata (a source tree's own `*.egg-info`, found first when the clone is
    # the working directory, has no direct_url.json)
    for dist in metadata.distributions(name="distlint"):
        try:
            text = dist.read_text("direct_url.json")
        except OSError:
            continue
        if text:
            try:
                data = json.loads(text)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}
