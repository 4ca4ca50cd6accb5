"""distlint.analysis.project: static module resolution, parse-once, errors, dependencies."""

from __future__ import annotations

import os

import pytest

from distlint.analysis.project import Project, find_root, project_for
from distlint.config import Config

ROOT = os.path.abspath("/proj")


def P(rel: str) -> str:
    return os.path.join(ROOT, *rel.split("/"))


def make(files: dict[str, str], src=()) -> Project:
    return Project.from_sources(ROOT, files, src=src)


FLAT = {
    "scripts/train.py": "import utils\nfrom misc import get_world_size\n",
    "scripts/utils.py": "X = 1\n",
    "misc.py": "def get_world_size(): ...\n",
    "pkg/__init__.py": "",
    "pkg/models/__init__.py": "from .unet import UNet\nfrom . import blocks\nfrom ..optim import make\n",
    "pkg/models/unet.py": "class UNet: ...\n",
    "pkg/models/blocks.py": "",
    "pkg/optim.py": "def make(): ...\n",
    "src/lib/__init__.py": "",
    "src/lib/helpers.py": "",
    "nsroot/ns/mod.py": "",
}


@pytest.mark.parametrize(
    "importer, module, level, expected",
    [
        ("scripts/train.py", "utils", 0, "scripts/utils.py"),  # the importer's own folder
        ("scripts/train.py", "misc", 0, "misc.py"),  # the project root
        ("scripts/train.py", "pkg", 0, "pkg/__init__.py"),
        ("scripts/train.py", "pkg.models", 0, "pkg/models/__init__.py"),
        ("scripts/train.py", "pkg.models.unet", 0, "pkg/models/unet.py"),
        ("scripts/train.py", "lib.helpers", 0, "src/lib/helpers.py"),  # src/ layout
        ("pkg/models/__init__.py", "unet", 1, "pkg/models/unet.py"),
        ("pkg/models/__init__.py", "", 1, "pkg/models/__init__.py"),
        ("pkg/models/__init__.py", "optim", 2, "pkg/optim.py"),
        ("pkg/models/unet.py", "", 2, "pkg/__init__.py"),
        ("scripts/train.py", "torch", 0, None),  # third-party: not a project file
        ("scripts/train.py", "os.path", 0, None),
        ("scripts/train.py", "pkg.missing", 0, None),
        ("misc.py", "x", 3, None),  # above the root
        ("scripts/train.py", "nsroot.ns", 0, None),  # a namespace package has no file
        ("scripts/train.py", "nsroot.ns.mod", 0, "nsroot/ns/mod.py"),
    ],
)
def test_resolve_import(importer, module, level, expected):
    project = make(FLAT)
    found = project.resolve_import(P(importer), module, level)
    assert found == (P(expected) if expected else None)


def test_resolve_from_import_finds_submodule_files_only():
    project = make(FLAT)
    train = P("scripts/train.py")
    assert project.resolve_from_import(train, "pkg.models", "unet") == P("pkg/models/unet.py")
    assert project.resolve_from_import(train, "pkg", "optim") == P("pkg/optim.py")
    assert project.resolve_from_import(train, "pkg.models", "UNet") is None  # a name, not a file
    assert project.resolve_from_import(train, "misc", "get_world_size") is None
    assert project.resolve_from_import(train, "nsroot.ns", "mod") == P("nsroot/ns/mod.py")
    init = P("pkg/models/__init__.py")
    assert project.resolve_from_import(init, "", "blocks", 1) == P("pkg/models/blocks.py")
    assert project.resolve_from_import(init, "", "optim", 2) == P("pkg/optim.py")
    assert project.resolve_from_import(train, "torch", "optim") is None


def test_configured_src_and_first_match_wins():
    files = {
        "app/train.py": "",
        "lib/common/__init__.py": "",
        "lib/common/dist.py": "",
        "common/dist.py": "",  # the root comes before configured src folders
    }
    project = make(files, src=["lib"])
    assert project.resolve_import(P("app/train.py"), "common.dist") == P("common/dist.py")
    del files["common/dist.py"]
    project = make(files, src=["lib"])
    assert project.resolve_import(P("app/train.py"), "common.dist") == P("lib/common/dist.py")
    assert make(files).resolve_import(P("app/train.py"), "common.dist") is None


def test_module_is_parsed_once_per_content():
    project = make(FLAT)
    first = project.module(P("pkg/optim.py"))
    assert first is not None and first.text == "def make(): ...\n"
    assert "make" in first.index.functions
    assert project.module(P("pkg/optim.py")) is first
    assert project.parse_count == 1
    # the same content at another path shares the parse
    same = make({"a.py": "x = 1\n", "b.py": "x = 1\n"})
    a, b = same.module(P("a.py")), same.module(P("b.py"))
    assert a is not None and b is not None and a.module is b.module and same.parse_count == 1


def test_unparsable_module_reported_once_and_named():
    project = make({"train.py": "import broken\n", "broken.py": "def f(:\n    pass\n"})
    assert project.module(P("broken.py")) is None
    assert project.module(P("broken.py")) is None
    assert len(project.errors) == 1
    err = project.errors[0]
    assert err.path == P("broken.py") and err.line == 1 and "syntax" in err.message


def test_oversized_module_is_refused_without_parsing(tmp_path, monkeypatch):
    import distlint.analysis.project as project_mod

    monkeypatch.setattr(project_mod, "MAX_MODULE_BYTES", 100)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "big.py").write_text("x = 1\n" * 50)
    project = Project(str(tmp_path))
    assert project.module(str(tmp_path / "big.py")) is None
    assert project.parse_count == 0
    assert "over the 100-byte limit" in project.errors[0].message


def test_cyclic_imports_resolve_without_looping():
    project = make({"a.py": "import b\n", "b.py": "import a\n"})
    seen, todo = set(), [P("a.py")]
    while todo:  # a caller's walk over the import graph terminates
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in ("a", "b"):
            found = project.resolve_import(path, name)
            if found:
                todo.append(found)
    assert seen == {P("a.py"), P("b.py")}


def test_dependencies_and_tracking_carry_memoised_consultations():
    """A lint depends on what it consulted and on what every answer it used consulted when
    it was computed, in this lint or an earlier one; nothing else an earlier lint read."""
    project = make({"a.py": "", "b.py": "", "c.py": "", "d.py": "", "e.py": ""})

    def about_b():
        project.module(P("b.py"))
        project.module(P("d.py"))  # consulted while b's answer was computed
        return 1

    with project.tracking(P("a.py")) as deps_a:
        assert project.answer(("x", P("b.py")), about_b) == 1
        project.module(P("e.py"))  # a's own, after the answer: not the answer's
    assert set(deps_a) == {P("b.py"), P("d.py"), P("e.py")}
    with project.tracking(P("c.py")) as deps_c:
        assert project.answer(("x", P("b.py")), about_b) == 1  # memoised: d comes with it
    assert set(deps_c) == {P("b.py"), P("d.py")}
    assert project.answer_counts["computed"] == 1 and project.answer_counts["memory"] == 1
    with project.tracking(P("c.py")) as deps_c:
        project.module(P("b.py"))  # b's parse alone depends on b alone
    assert set(deps_c) == {P("b.py")}
    assert set(project.dependencies()) == {P("b.py"), P("d.py"), P("e.py")}
    assert all(len(d) == 64 for d in project.dependencies().values())


def test_nested_answers_and_facts_carry_what_they_consulted():
    """An answer computed inside another gives its record to the outer one; the Facts of a
    module handed to an answer keep what it consulted, so a later answer that finds their
    cached properties depends on it too."""
    from distlint.analysis.facts import facts_for

    project = make({"a.py": "", "b.py": "", "c.py": "", "d.py": "", "e.py": ""})

    def inner():
        project.module(P("d.py"))
        return "inner"

    def outer():
        info = project.module(P("b.py"))
        facts_for(info.index, info.path, project)  # b's facts handed to this answer
        project.module(P("e.py"))  # (what b's cached properties may hold)
        return project.answer(("inner",), inner)

    with project.tracking(P("a.py")) as deps:
        assert project.answer(("outer",), outer) == "inner"
    assert {P("b.py"), P("d.py"), P("e.py")} <= set(deps)

    def later():
        info = project.module(P("b.py"))
        facts_for(info.index, info.path, project)
        return 2

    with project.tracking(P("c.py")) as deps:
        project.answer(("later",), later)
    assert set(deps) == {P("b.py"), P("d.py"), P("e.py")}  # e via b's facts


def test_a_cycle_between_answers_is_answered_busy_and_never_clean():
    project = make({"a.py": "", "b.py": ""})
    calls = []

    def ask_a():
        calls.append("a")
        return project.answer(("b",), ask_b, busy="?")

    def ask_b():
        calls.append("b")
        return project.answer(("a",), ask_a, busy="?")

    with project.tracking(P("a.py")):
        assert project.answer(("a",), ask_a, busy="?") == "?"
    assert calls == ["a", "b"]
    assert not project.memo[("a",)].clean and not project.memo[("b",)].clean


def test_overlay_replaces_disk_content_and_refreshes(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "helper.py").write_text("A = 1\n")
    project = Project(str(tmp_path))
    path = str(tmp_path / "helper.py")
    assert project.module(path).text == "A = 1\n"
    before = project.digest(path)
    project.set_overlay(path, "A = 2\n")
    assert project.module(path).text == "A = 2\n"
    assert project.digest(path) != before
    project.set_overlay(path, None)
    assert project.module(path).text == "A = 1\n"


def test_root_discovery_and_shared_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "examples" / "sub").mkdir(parents=True)
    script = tmp_path / "examples" / "sub" / "train.py"
    script.write_text("")
    assert find_root(str(script)) == str(tmp_path)
    config = Config(src=("lib",), root=str(tmp_path))
    first = project_for(str(script), config)
    assert project_for(str(tmp_path / "examples" / "x.py"), config) is first
    assert os.path.join(str(tmp_path), "lib") in first.search_roots
    lonely = tmp_path.parent / f"{tmp_path.name}-bare"
    lonely.mkdir()
    (lonely / "t.py").write_text("")
    if not any(
        os.path.exists(os.path.join(d, m))
        for d in [str(lonely), *map(str, lonely.parents)]
        for m in ("pyproject.toml", "setup.py", "setup.cfg", ".git")
    ):
        assert find_root(str(lonely / "t.py")) == str(lonely)


def test_src_setting_is_validated(tmp_path):
    from distlint.config import ConfigError, load_config_file

    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.distlint]\nsrc = "src"\n')
    with pytest.raises(ConfigError) as exc:
        load_config_file(str(bad))
    assert str(bad) in str(exc.value) and "src" in str(exc.value)
    good = tmp_path / "distlint.toml"
    good.write_text('src = ["src", "lib"]\n')
    assert load_config_file(str(good)).src == ("src", "lib")


def test_root_without_markers_is_the_working_directory_above_the_file(tmp_path, monkeypatch):
    """`distlint check scripts/train.py` run from a checkout without pyproject.toml or .git
    (an unpacked archive): `import utils` resolves from the folder the user runs in."""
    if any(
        os.path.exists(os.path.join(str(d), m))
        for d in [tmp_path, *tmp_path.parents]
        for m in ("pyproject.toml", "setup.py", "setup.cfg", ".git")
    ):
        pytest.skip("a root marker above the temporary folder decides the root")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.py"
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    assert find_root(str(script)) == str(tmp_path)
    monkeypatch.chdir(tmp_path / "scripts")
    assert find_root(str(script)) == str(tmp_path / "scripts")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert find_root(str(script)) == str(tmp_path / "scripts")


TRAINER = """\
import torch
from accelerate import Accelerator


class Trainer:
    def __init__(self, model, learning_rate):
        self.accelerator = Accelerator()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
        self.model, self.optimizer = self.accelerator.prepare(model, self.optimizer)
"""
ENTRY = """\
import torch
from trainer import Trainer

Trainer(torch.nn.Linear(2, 2), 1e-4)
"""


def _trainer_project(tmp_path, setting=""):
    from distlint.analysis.project import forget_projects

    forget_projects()
    (tmp_path / "pyproject.toml").write_text(f"[tool.distlint]\n{setting}")
    (tmp_path / "trainer.py").write_text(TRAINER)
    (tmp_path / "train.py").write_text(ENTRY)
    return str(tmp_path / "train.py"), str(tmp_path / "trainer.py")


def test_imported_module_that_trains_is_reported_once_without_its_fix(tmp_path):
    from distlint.api import LintOptions, lint_paths

    entry, trainer = _trainer_project(tmp_path)
    results = list(lint_paths([entry], LintOptions(select=("DL201",))))
    assert [os.path.abspath(r.path) for r in results] == [entry, trainer]
    assert not results[0].findings and not results[0].followed
    (finding,) = results[1].findings
    assert results[1].followed and finding.line == 8 and finding.fix is None
    # given the whole folder, trainer.py is reported as itself (with its fix), once
    both = list(lint_paths([str(tmp_path)], LintOptions(select=("DL201",))))
    assert sorted(os.path.basename(r.path) for r in both if r.findings) == ["trainer.py"]
    assert all(not r.followed for r in both)
    assert [f.fix is not None for r in both for f in r.findings] == [True]


def test_fix_run_does_not_edit_a_followed_module(tmp_path):
    from distlint.api import LintOptions, lint_paths

    entry, trainer = _trainer_project(tmp_path)
    options = LintOptions(select=("DL201",), fix=True, unsafe_fixes=True)
    results = list(lint_paths([entry], options))
    assert [r.fixed_source for r in results] == [None, None]
    assert (tmp_path / "trainer.py").read_text() == TRAINER


@pytest.mark.parametrize(
    "setting", ['follow-imports = "silent"\n', 'extend-exclude = ["trainer.py"]\n']
)
def test_silent_or_excluded_followed_modules_are_not_reported(tmp_path, setting):
    from distlint.api import LintOptions, lint_paths

    entry, _ = _trainer_project(tmp_path, setting)
    results = list(lint_paths([entry], LintOptions(select=("DL201",))))
    assert [os.path.abspath(r.path) for r in results] == [entry]


def test_follow_imports_setting_is_validated(tmp_path):
    from distlint.config import ConfigError, load_config_file

    bad = tmp_path / "distlint.toml"
    bad.write_text('follow-imports = "skip"\n')
    with pytest.raises(ConfigError) as exc:
        load_config_file(str(bad))
    assert "follow-imports" in str(exc.value) and "silent" in str(exc.value)


def test_imports_resolve_per_folder_shared_by_siblings():
    files = {**FLAT, "scripts/eval.py": "import utils\n"}
    project = make(files)
    assert project.resolve_import(P("scripts/train.py"), "utils") == P("scripts/utils.py")
    assert project.resolve_import(P("scripts/eval.py"), "utils") == P("scripts/utils.py")
    assert project.resolve_import(P("misc.py"), "utils") is None  # another folder: no utils
    assert project.resolve_from_import(P("pkg/models/unet.py"), "", "blocks", 1) == P(
        "pkg/models/blocks.py"
    )
    assert project.resolve_from_import(P("pkg/optim.py"), "", "blocks", 1) is None


CHAIN = {
    "train.py": "from tools import make\nfrom . import cyc\n",
    "tools/__init__.py": "from .factory import make\n",
    "tools/factory.py": "from accelerate import Accelerator as A\nimport cyc\n",
    "cyc.py": "import train\n# Fabric\n",
    "unrelated.py": "Accelerator = 1  # not imported by anyone\n",
}


def test_words_reached_through_imports_re_exports_and_cycles():
    project = make(CHAIN)
    words = frozenset({"Accelerator", "accelerate", "Fabric", "DistributedDataParallel"})
    assert project.words_reached(P("train.py"), words) == {"Accelerator", "accelerate", "Fabric"}
    assert project.words_reached(P("cyc.py"), words) == {"Accelerator", "accelerate", "Fabric"}
    assert project.words_reached(P("unrelated.py"), words) == {"Accelerator"}
    assert project.parse_count == 0  # a line scan: nothing parsed
    # every module read is a dependency of the lint that asked
    assert {P("tools/factory.py"), P("cyc.py")} <= set(project.dependencies())
    # `from . import x`: the package's __init__ (x may be a name defined there) is followed too
    pkg = make(
        {"pkg/__init__.py": "from accelerate import Accelerator\n", "pkg/a.py": "from . import b\n"}
    )
    assert project is not pkg and pkg.words_reached(P("pkg/a.py"), words) == {
        "Accelerator",
        "accelerate",
    }


def test_words_reached_notices_a_module_changed_on_disk(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text("import helpers\n")
    helper = tmp_path / "helpers.py"
    helper.write_text("def make():\n    return None\n")
    project = Project(str(tmp_path))
    words = frozenset({"Accelerator"})
    assert project.words_reached(str(tmp_path / "train.py"), words) == frozenset()
    helper.write_text(
        "from accelerate import Accelerator\n\ndef make():\n    return Accelerator()\n"
    )
    os.utime(helper, ns=(1, 1))  # a distinct mtime even on a coarse clock
    assert project.words_reached(str(tmp_path / "train.py"), words) == {"Accelerator"}


def _facts(project: Project, rel: str):
    from distlint.analysis.facts import facts_for

    info = project.module(P(rel))
    assert info is not None
    return facts_for(info.index, P(rel), project)


def test_mode_reads_no_helper_that_cannot_reach_an_accelerator():
    files = {
        "train.py": "import torch\nfrom helpers import build, other\nmodel = build()\nother()\n",
        "helpers.py": "import torch\nfrom more import other\ndef build():\n    return torch.nn.Linear(2, 2)\n",
        "more.py": "def other():\n    return 1\n",
    }
    project = make(files)
    facts = _facts(project, "train.py")
    assert facts.mode.name == "NONE"
    assert project.parse_count == 1  # train.py only: its helpers were scanned, not parsed


def test_mode_still_follows_an_accelerator_made_through_an_aliased_re_export():
    files = {
        "train.py": "from tools import make\naccelerator = make()\n",
        "tools/__init__.py": "from .factory import make\n",
        "tools/factory.py": "from accelerate import Accelerator as A\n\ndef make():\n    return A()\n",
    }
    project = make(files)
    assert _facts(project, "train.py").mode.name == "ACCELERATE"
    # and a helper that seeds through `import random as r` is still read for DL1xx
    seeded = make(
        {
            "train.py": "import torch\nfrom util import seed_all\nseed_all(0)\ntorch.manual_seed(0)\n",
            "util.py": "import random as r\n\ndef seed_all(s):\n    r.seed(s)\n",
        }
    )
    facts = _facts(seeded, "train.py")
    assert facts.seeding.by_kind  # computed
    from distlint.analysis.facts import Seeds

    assert any(facts.seeding.by_kind[Seeds.PYTHON])


# ------------------------------------------------------------------ in a real tree (issue 32)
def test_a_trainer_module_only_imported_is_not_followed(tmp_path):
    """The follow-imports report covers what the entry reaches: a module that sets up training
    but whose names the entry never uses is imported, not reached."""
    from distlint.api import LintOptions, lint_paths

    entry, trainer = _trainer_project(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nimport trainer\n\nprint(torch.ones(2))\n")
    results = list(lint_paths([entry], LintOptions(select=("DL201",))))
    assert [os.path.abspath(r.path) for r in results] == [entry]
    assert results[0].reached == ()
    assert trainer in dict(results[0].dependencies)  # its words were read: still a dependency
    # the entry calling into it reaches it: reported as before
    (tmp_path / "train.py").write_text(ENTRY)
    results = list(lint_paths([entry], LintOptions(select=("DL201",))))
    assert results[0].reached == (trainer,)
    assert [os.path.abspath(r.path) for r in results] == [entry, trainer]


def _chain(tmp_path, n):
    (tmp_path / "pyproject.toml").write_text("")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(n):
        nxt = f"from pkg.m{i + 1} import step_{i + 1}\n" if i < n - 1 else ""
        call = f"step_{i + 1}(lr)" if i < n - 1 else "lr"
        (pkg / f"m{i}.py").write_text(
            f"import random\n{nxt}\n\ndef step_{i}(lr):\n    return {call}\n"
        )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom accelerate import Accelerator\nfrom pkg.m0 import step_0\n\n"
        "accelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\nseed = step_0(1)\n"
        "torch.manual_seed(seed)\n"
    )  # (a model built before the seeding: DL102 asks whether the helper called in between seeds)


def test_a_run_stats_each_module_once(tmp_path):
    from distlint.analysis.project import _PROJECTS, forget_projects
    from distlint.api import LintOptions, lint_paths

    forget_projects()
    n = 40
    _chain(tmp_path, n)
    files = [str(tmp_path / "train.py")] + [str(tmp_path / "pkg" / f"m{i}.py") for i in range(n)]
    results = list(lint_paths(files, LintOptions(select=("ALL",), jobs=1)))
    assert len(results) == n + 1 and not any(r.errors for r in results)
    (project,) = _PROJECTS.values()
    assert project.stat_count <= n + 2  # every module (and the package) at most once
    # the next run checks them again: a file changed between runs is read again
    before = project.stat_count
    list(lint_paths(files[:1], LintOptions(select=("ALL",), jobs=1)))
    assert before < project.stat_count <= before + n + 2


def test_words_reached_stops_at_the_answer_nearest_first(tmp_path):
    """A search that has its answer reads no further: the modules it never read are not
    dependencies, and the next question resumes where it stopped."""
    _chain(tmp_path, 30)
    (tmp_path / "pkg" / "m0.py").write_text(
        "from accelerate import Accelerator\nfrom pkg.m1 import step_1\n"
    )
    project = Project(str(tmp_path))
    words = frozenset({"Accelerator", "random"})
    train = str(tmp_path / "train.py")
    with project.tracking(train) as deps:
        found = project.words_reached(train, words, lambda w: "Accelerator" in w)
    assert "Accelerator" in found
    assert str(tmp_path / "pkg" / "m5.py") not in deps  # never read: not a dependency
    with project.tracking(train) as deps:
        assert project.words_reached(train, words) == words
    assert str(tmp_path / "pkg" / "m29.py") in deps


def test_tracking_stays_linear_in_what_is_consulted():
    """Each lint records a path once, however often it is asked about, and takes what a
    memoised answer consulted once, however often it uses it."""
    files = {f"m{i}.py": "" for i in range(200)}
    project = make(files)

    def everything():
        for i in range(200):
            project.module(P(f"m{i}.py"))
        return True

    for k in range(5):
        with project.tracking(P(f"m{k}.py")) as deps:
            for _ in range(10):
                project.answer(("all",), everything)
                for i in range(200):
                    project.module(P(f"m{i}.py"))
        assert len(deps) == 199
        assert project._frames == []
    assert project.answer_counts == {"memory": 49, "disk": 0, "computed": 1, "stored": 0}


# ------------------------------------------------------------------ one name's text (issue 32)
def test_outline_reads_definitions_imports_and_module_bindings():
    from distlint.analysis.outline import outline

    text = (
        'NOTE = """\ndef fake():\n    pass\n"""  # a def inside a string is none\n'
        "from .helpers import seed_all as sa, other\n"
        "import torch.optim as O\n"
        "@register(\n    'x')\n"
        "def build(lr=(1,\n        2)):\n"
        "    return O.AdamW([], lr=lr)\n"
        "if FLAG:\n"
        "    class Trainer(Base):\n"
        "        def fit(self):\n"
        "            sa(0)\n"
        "env = make_env()\n"
    )
    found = outline(text)
    assert found is not None
    assert set(found.defs) == {"build", "Trainer"}  # `fit` is inside Trainer; `fake` a string
    ((start, end),) = found.defs["build"]
    assert text[start:end].startswith("@register(") and "O.AdamW" in text[start:end]
    assert "Base" in found.words(*found.headers["Trainer"][0])
    assert [(i.module, i.name, i.level) for i in found.imports["sa"]] == [
        ("helpers", "seed_all", 1)
    ]
    assert [(i.module, i.name) for i in found.imports["O"]] == [("torch.optim", None)]
    assert "env" in found.by_ident and "make_env" not in found.by_ident  # bound, not read
    assert found.attributes("O") == {"AdamW"}
    # a text the outline cannot read with confidence: None (the module is parsed instead)
    assert outline("x = 'unterminated\n") is None
    assert outline("x = f(1,\n") is None


def _seeders():
    from distlint.analysis.common import _SEEDERS

    return _SEEDERS


@pytest.mark.parametrize(
    "helpers, expected",
    [
        # the seeding is two modules away, through a re-export and a called import
        ("from deep import seed_all\n", True),
        # a module-level value the function reads, made by a call into a seeding module
        ("from deep import Env\nENV = Env()\ndef step():\n    return ENV.reset()\n", True),
        # a global assigned by another function of the module
        (
            "from deep import Env\n"
            "def setup():\n    global ENV\n    ENV = Env()\n"
            "def step():\n    return ENV.reset()\n",
            True,
        ),
        # `from deep import *` binds the name
        ("from deep import *\n", True),
        # a module that imports the seeder but whose `step` never calls it
        (
            "from deep import seed_all\nimport torch\ndef step():\n    return torch.zeros(2)\n",
            False,
        ),
    ],
)
def test_name_may_write_follows_what_the_definition_uses(helpers, expected):
    deep = (
        "import random\n\ndef seed_all(s):\n    random.seed(s)\n\n"
        "class Env:\n    def reset(self):\n        random.seed(0)\n"
    )
    project = make({"helpers.py": helpers, "deep.py": deep})
    name = "step" if "def step" in helpers else ("seed_all" if "*" not in helpers else "Env")
    assert project.name_may_write(P("helpers.py"), name, _seeders()) is expected
    assert project.parse_count == 0  # nothing parsed to answer


def test_a_helper_that_cannot_seed_is_not_parsed_for_seeding():
    files = {
        "train.py": (
            "import random\nimport torch\nfrom util import pick, seed_all\n"
            "torch.manual_seed(0)\nseed_all(0)\nx = pick()\nrandom.random()\n"
        ),
        "util.py": (
            "import random\nfrom big import table\n\n"
            "def seed_all(s):\n    random.seed(s)\n\n"
            "def pick():\n    return table()\n"
        ),
        "big.py": "def table():\n    return [1, 2]\n",
    }
    project = make(files)
    from distlint.analysis.facts import Seeds

    facts = _facts(project, "train.py")
    assert facts.seeding.by_kind[Seeds.PYTHON]  # `seed_all` seeds python's generator
    assert project.parse_count == 2  # train.py and util.py; big.py's `table` cannot seed


def test_loaders_parse_no_helper_module_for_a_function_it_defines():
    # `make_loader()` is a function of a module that spells DataLoader: asking whether the call
    # makes a DataLoader subclass reads the module's outline, never parses it
    files = {
        "train.py": "from data import make_loader, Infinite\nloader = make_loader(8)\nother = Infinite([1])\n",
        "data.py": (
            "from torch.utils.data import DataLoader\n\n"
            "class Infinite(DataLoader):\n    pass\n\n"
            "def make_loader(bs):\n    return DataLoader(range(8), batch_size=bs)\n"
        ),
    }
    project = make(files)
    facts = _facts(project, "train.py")
    assert [facts.index.module.code_for_node(c.func) for c in facts.data.loaders] == ["Infinite"]
    assert project.parse_count == 2  # train.py, and data.py for the class only
    files["train.py"] = "from data import make_loader\nloader = make_loader(8)\n"
    project = make(files)
    assert _facts(project, "train.py").data.loaders == []
    assert project.parse_count == 1  # train.py only
