"""The per-file cost of a run inside a project (issue #32): what each linted file's lint does
once per run instead of once per file, with the same rules, parses and findings."""

from __future__ import annotations

import os

import pytest

from distlint import runner
from distlint.analysis import project as project_mod
from distlint.analysis.project import Project
from distlint.config import Config

ROOT = os.path.abspath("/proj")

# helpers whose trigger words reach their importers (two levels of imports, not three)
HELPERS = {
    "helpers/__init__.py": "",
    "helpers/seeding.py": "import random\n\ndef seed_all(s):\n    random.seed(s)\n",
    "helpers/loader.py": (
        "from torch.utils.data import DataLoader\nfrom helpers.deep import gather_all\n\n"
        "def make(ds):\n    return DataLoader(ds)\n"
    ),
    "helpers/deep.py": "from helpers.deeper import ok\n\ndef gather_all(x):\n    return x.gather()\n",
    "helpers/deeper.py": "def ok(x):\n    return x.backward()\n",
}
SCRIPTS = {
    "train_a.py": "from helpers.seeding import seed_all\nseed_all(0)\n",
    "train_b.py": "from helpers.seeding import seed_all\nfrom helpers.loader import make\n",
    "train_c.py": "from helpers import loader\nloader.make(None)\n",
    "plain.py": "x = 1\n",
}
# what each script's lint may need: its own text and the helpers its imports reach in two
# steps (helpers/deeper.py is three steps from every script: its `backward` wakes nothing)
REACHED = {
    "train_a.py": ["helpers/seeding.py"],
    "train_b.py": ["helpers/seeding.py", "helpers/loader.py", "helpers/deep.py"],
    "train_c.py": ["helpers/__init__.py", "helpers/loader.py", "helpers/deep.py"],
    "plain.py": [],
}


def _path(rel: str) -> str:
    return os.path.join(ROOT, *rel.split("/"))


def test_trigger_filter_wakes_the_rules_of_imported_words_searching_each_module_once(
    monkeypatch,
):
    project = Project.from_sources(ROOT, {**HELPERS, **SCRIPTS})
    config = Config()
    searched: list[tuple[bytes, str]] = []  # (a text searched, a word searched for in it)
    spelled = project_mod._spelled

    def spy(words: frozenset[str], data: bytes | None) -> frozenset[str]:
        searched.extend((data or b"", w) for w in words)
        return spelled(words, data)

    monkeypatch.setattr(project_mod, "_spelled", spy)
    everything = runner.enabled_rules(config, "x.py", _all_codes())
    for script, text in SCRIPTS.items():
        together = text + "".join(HELPERS[h] for h in REACHED[script])
        expected = {r.CODE for r in everything if any(t in together for t in r.TRIGGERS)}
        active = runner._triggered(everything, text, _path(script), project)
        assert {r.CODE for r in active} == expected, script
        if script == "train_a.py":  # the first: its one helper searched for the asleep words
            awake = [r for r in everything if any(t in text for t in r.TRIGGERS)]
            asleep = {t for r in everything if r not in awake for t in r.TRIGGERS}
            assert {w for _, w in searched} == asleep
            assert "seed" not in asleep  # (its own text wakes the seeding rule)
    assert {"DL102", "DL301", "DL402"} <= {
        r.CODE for r in runner._triggered(everything, SCRIPTS["train_b.py"], _path("x.py"), project)
    }
    # every helper module searched for each trigger word at most once in the run, whoever
    # imports it, and only for the words of rules still asleep
    assert len(searched) == len(set(searched))
    assert {data for data, _ in searched} == {
        HELPERS[h].encode() for h in ("helpers/seeding.py", "helpers/loader.py", "helpers/deep.py")
    }


def _admitted_by_the_definition(
    project: Project, everything: tuple, text: str, path: str
) -> frozenset[str]:
    """What the trigger filter means, asked the long way: the rules whose words the file or
    any module of its imports' two levels writes (every module searched for every word)."""
    written = {t for r in everything for t in r.TRIGGERS if t in text}
    for words in project.imported_words(path, text, {t for r in everything for t in r.TRIGGERS}):
        written |= words
    return frozenset(r.CODE for r in everything if not r.TRIGGERS or written & set(r.TRIGGERS))


def test_trigger_filter_admits_what_its_definition_admits_on_every_fixture_project(
    monkeypatch, fresh_projects
):
    """Searching imports only for the words of rules still asleep, and stopping once all
    are awake, admits the same rules as searching every module for every word."""
    from pathlib import Path

    from distlint import api

    folders = sorted(p for p in (Path(__file__).parent.parent / "fixtures" / "projects").iterdir())
    triggered = runner._triggered
    compared: list[tuple[str, frozenset[str], frozenset[str]]] = []

    def both(active, text, path, project):  # type: ignore[no-untyped-def]
        got = triggered(active, text, path, project)
        if project is not None:
            own = {r.CODE for r in active if not r.TRIGGERS or any(t in text for t in r.TRIGGERS)}
            expected = _admitted_by_the_definition(project, active, text, path)
            compared.append((path, frozenset(r.CODE for r in got), expected))
            compared.append(("(own text)", frozenset(own), frozenset(own)))
        return got

    monkeypatch.setattr(runner, "_triggered", both)
    old = os.getcwd()
    try:
        for folder in folders:
            project_mod.forget_projects()
            os.chdir(folder)
            list(api.lint_paths(["."], api.LintOptions(select=("ALL",), cache=False, jobs=1)))
    finally:
        os.chdir(old)
    assert len(compared) > 300
    for path, got, expected in compared:
        assert got == expected, path
    woken = [p for (p, got, _), (_, own, _) in zip(compared[::2], compared[1::2]) if got != own]
    assert len(woken) > 20  # (rules woken through imports: the search was exercised)


def _all_codes() -> frozenset[str]:
    from distlint.registry import all_rules

    return frozenset(r.CODE for r in all_rules())


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_trigger_filter_stops_reading_imports_once_every_rule_is_awake(script):
    """A file whose own text wakes every rule reads none of its imports (no dependency)."""
    project = Project.from_sources(ROOT, {**HELPERS, **SCRIPTS})
    everything = runner.enabled_rules(Config(), "x.py", _all_codes())
    words = " ".join(t for r in everything for t in r.TRIGGERS)
    with project.tracking(_path(script)) as deps:
        active = runner._triggered(
            everything, SCRIPTS[script] + f"# {words}\n", _path(script), project
        )
    assert active == everything
    assert not [d for d in deps if "helpers" in d]


INDEXED = """
import torch
from accelerate import Accelerator


class Trainer:
    lr: float = 1e-3

    def fit(self, model, loader):
        acc = Accelerator()
        for x, y in loader:
            loss = model(x).sum() if x is not None else [v for v in y if v]
            acc.backward(loss)
        while False:
            yield (lambda z: z + 1)(2)
        return {k: v for k, v in model.state_dict().items()}
"""


def test_index_type_and_containment_queries_answer_as_the_tree_says():
    """nodes_of (one type test per node type) and is_inside (the parent chain, walked
    in place) answer exactly what isinstance over the walk and the ancestors say."""
    import libcst as cst

    from distlint.analysis.index import Index, walk

    module = cst.parse_module(INDEXED)
    index = Index(module, INDEXED)
    every = list(walk(module))
    for types in [
        (cst.Name,),
        (cst.Name, cst.Attribute, cst.Subscript),
        (cst.For, cst.CompFor),
        (cst.Yield,),
        (cst.BaseExpression,),
        (cst.BaseSmallStatement, cst.BaseCompoundStatement),
        (cst.Comment,),
    ]:
        expected = [n for n in every if isinstance(n, types)]
        assert index.nodes_of(*types) == expected, types
    stranger = cst.Name("built_by_a_rule")
    for node in every[::3] + [stranger]:
        chain = set(map(id, index.ancestors(node)))
        for container in every[::5] + [module, stranger]:
            expected = node is container or id(container) in chain
            assert index.is_inside(node, container) is expected


def test_import_line_scan_reads_the_first_line_crlf_and_parenthesised_names():
    from distlint.analysis.project import _IMPORT_LINE

    text = (
        "from .helpers import seed_all, make as m\r\n"
        "import a.b, c\r\n"
        "x = 1  # import nothing\n"
        "    from ..pkg import (\n        one,  # the first\n        two,\n    )\n"
        "\timport   d\n"
        "y = 'from z import w'\n"
    )
    assert list(_IMPORT_LINE.scan(text)) == [
        ("helpers", ["seed_all", "make"], 1),
        ("pkg", ["one", "two"], 2),
        ("a.b", [], 0),
        ("c", [], 0),
        ("d", [], 0),
    ]


def test_a_from_line_finds_its_package_once_with_the_targets_and_looks_of_one_per_name(
    monkeypatch, fresh_projects
):
    """The line scan of `from pkg import a, b, c` finds the package once for all the names:
    the modules it resolves to and what the resolution looked at (the cache's dependencies)
    are those of resolving each name alone, on every module of every fixture project."""
    from functools import partial
    from pathlib import Path

    from distlint.analysis.project import _IMPORT_LINE, _flatten

    def one_per_name(project: Project, full: str, text: str) -> tuple[str, ...]:
        here = os.path.dirname(full)
        found: dict[str, None] = {}
        for module, names, level in _IMPORT_LINE.scan(text):
            level = level if names else 0
            hit = project._import_in(here, module, level) if module or level else None
            found.update({p: None for p in [hit] if p is not None})
            for name in names:
                sub = project._from_import_in(here, module, name, level)
                found.update({p: None for p in [sub] if p is not None})
        return tuple(found)

    calls = {"alone": 0, "counting": False}
    resolve_alone = Project._from_import_in

    def counted(self: Project, *args: object) -> object:
        calls["alone"] += calls["counting"]
        return resolve_alone(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Project, "_from_import_in", counted)
    names = compared = 0
    for folder in sorted((Path(__file__).parent.parent / "fixtures" / "projects").iterdir()):
        for file in sorted(folder.rglob("*.py")):
            text = file.read_text(encoding="utf-8", errors="replace")
            full = str(file)
            project = Project(str(folder))
            calls["counting"] = True
            got, got_looks = project.remember(partial(project._scan_text, full, text))
            got = got[1]
            calls["counting"] = False
            alone = Project(str(folder))
            expected, looks = alone.remember(partial(one_per_name, alone, full, text))
            assert got == expected, full
            assert _flatten((got_looks,)) == _flatten((looks,)), full
            names += sum(len(n) for _, n, _ in _IMPORT_LINE.scan(text))
            compared += bool(expected)
    assert compared > 50 and names > 200
    assert calls["alone"] == 0  # no name resolved alone: its package found once a line


def test_the_calls_a_block_runs_are_those_its_walk_finds_on_every_fixture():
    """calls_inside and calls_run_by (read from the index's numbering, no walk) are the calls
    that walking the node finds, in the same order: all of them, and those outside functions,
    classes and lambdas defined within it (`loops.body_nodes`, which the loop questions used)."""
    from pathlib import Path

    import libcst as cst

    from distlint.analysis.index import Index, walk
    from distlint.analysis.loops import body_nodes

    fixtures = Path(__file__).parent.parent / "fixtures"
    blocks = nested = 0
    for file in sorted(fixtures.rglob("*.py")):
        text = file.read_text(encoding="utf-8", errors="replace")
        try:
            module = cst.parse_module(text)
        except Exception:
            continue  # (fixtures of unparsable files)
        index = Index(module, text)
        for node in walk(module):
            if not isinstance(node, (cst.IndentedBlock, cst.For, cst.While, cst.Module)):
                continue
            every = [n for n in walk(node) if isinstance(n, cst.Call)]
            assert index.calls_inside(node) == every, file
            run = [n for n in body_nodes(node) if isinstance(n, cst.Call)]
            assert index.calls_run_by(node) == run, file
            blocks += 1
            nested += len(run) < len(every)
    assert blocks > 1000 and nested > 50
