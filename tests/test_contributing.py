"""CONTRIBUTING.md's map names files that exist: a move or a rename must update the map."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Map: the data path and who owns each step"


def test_every_path_the_map_names_exists():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert HEADING in text, f"CONTRIBUTING.md has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    paths = re.findall(r"`((?:distlint|rules|tests|fixtures)/[\w/.]*)`", section)
    # the providers' row names bare module names: they live in distlint/analysis/
    paths += ["distlint/analysis/" + name for name in re.findall(r"`(\w+\.py)`", section)]
    assert len(paths) >= 20, paths  # the table is there and was read
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert not missing, f"CONTRIBUTING.md's map names files that do not exist: {missing}"
