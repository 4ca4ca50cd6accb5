"""What a project keeps of the modules it follows: parses let go between lints (bounded by the
text of the modules kept), plain data that outlives them, importers not parsed for a function
they never spell."""

from __future__ import annotations

import pickle

import pytest
from helpers import FIXTURES

from distlint import api
from distlint.analysis import project as project_mod
from distlint.analysis.facts import facts_for
from distlint.analysis.project import Project, _spelled, forget_projects
from distlint.analysis.records import Made, MethodsOf, Mode

ENV = (
    "import torch.distributed as dist\n\n"
    "class DistEnv:\n    def size(self):\n        return dist.get_world_size()\n\n"
    "    def rank(self):\n        return dist.get_rank()\n"
)


def test_a_class_summary_names_its_methods_and_they_are_answered_after_its_parse_went():
    project = Project.from_sources(
        "/proj", {"env.py": ENV, "train.py": "from env import DistEnv\n"}
    )
    with project.tracking("/proj/train.py"):
        info = project.module("/proj/train.py")
        assert info is not None
        facts = facts_for(info.index, info.path, project)
        summary = facts._facts_of("/proj/env.py").summary_of("DistEnv")
    assert summary.method == MethodsOf("/proj/env.py", "DistEnv")
    # plain data: no tree, no closure over the module's analysis
    assert pickle.loads(pickle.dumps(summary.method)) == summary.method
    parsed = project.parse_count
    project._let_go(0)  # (what a lint does between files when over its budget)
    assert not project._kept
    with project.tracking("/proj/train.py"):
        info = project.module("/proj/train.py")  # (its facts went with its parse: asked again)
        assert info is not None
        facts = facts_for(info.index, info.path, project)
        size = facts.summaries._methods_summary(summary.method, "size")
        rank = facts.summaries._methods_summary(summary.method, "rank")
    assert size is not None and Made.PROCESS_COUNT in size.makes
    assert rank is not None and Made.PROCESS_COUNT not in rank.makes
    assert facts.summaries._methods_summary(summary.method, "missing") is None
    assert project.parse_count == parsed + 2  # train.py and env.py parsed again, once each


@pytest.mark.parametrize(
    "name",
    ["trainer_class_module", "accelerate_eval_helper_module", "accelerate_trainer_module_bypass"],
)
def test_letting_parses_go_between_lints_changes_no_finding(name, monkeypatch):
    folder = FIXTURES / "projects" / name
    files = sorted(str(p) for p in folder.rglob("*.py"))
    options = api.LintOptions(select=("ALL",), jobs=1)

    def run() -> tuple[list, Project]:
        forget_projects()
        results = list(api.lint_paths(files, options))
        (shared,) = project_mod._PROJECTS.values()
        return [(r.path, r.findings, r.errors) for r in results], shared

    try:
        kept_all, whole = run()
        monkeypatch.setattr(project_mod, "KEEP_PARSED_CHARS", 0)
        monkeypatch.setattr(project_mod, "KEEP_BYTES", 0)  # one module's bytes at a time
        kept_none, bounded = run()
    finally:
        forget_projects()
    assert kept_none == kept_all
    assert any(findings for _, findings, _ in kept_all)  # (the projects report something)
    # between lints nothing stays parsed; the bytes of one module are kept, the others read
    # again when asked
    assert not bounded._kept and whole._kept
    assert len(bounded._held) <= 1 and not whole._away
    assert not any(info is not None for info in bounded._modules.values())


@pytest.mark.parametrize(
    "data",
    [
        b"import torch\nseed = 1\n",
        b"\xe2seed\xff x = 'caf\xc3\xa9' \xc3",  # invalid UTF-8 around an ASCII word
        b"",
        b"\xff\xfe",
    ],
)
def test_words_are_found_in_the_bytes_as_in_the_decoded_text(data):
    words = frozenset({"seed", "torch", "café", "x", "import torch"})
    text = data.decode("utf-8", "replace")
    assert _spelled(words, data) == frozenset(w for w in words if w in text)


def test_cache_entries_read_share_their_dependency_pairs(tmp_path):
    from distlint.cache import Cache
    from distlint.model import FileResult

    utils = tmp_path / "utils.py"
    utils.write_text("x = 1\n")
    digest = Cache(str(tmp_path)).digest_now(str(utils))
    pair = (str(utils), digest)
    writer = Cache(str(tmp_path))
    for name in ("a", "b"):
        writer.put(
            f"{name * 32}/{'0' * 64}", FileResult(name, dependencies=(pair,), reached=(pair[0],))
        )
    reader = Cache(str(tmp_path))
    a = reader.get(f"{'a' * 32}/{'0' * 64}", "/proj/a.py")
    b = reader.get(f"{'b' * 32}/{'0' * 64}", "/proj/b.py")
    assert a is not None and b is not None
    assert a.dependencies == (pair,)
    assert a.dependencies[0] is b.dependencies[0]  # held once across a warm run's results
    assert a.reached == (pair[0],) and a.reached[0] is b.reached[0]


def test_importers_that_never_spell_a_helper_function_are_not_parsed_for_its_loader():
    """A loop over a parameter of a helper's function takes what the run's importers pass for
    it; an importer whose text never writes the function's name cannot call it, so it is read
    (a dependency of the answer) but not parsed."""
    from distlint.analysis.project import lint_run
    from distlint.analysis.records import Origin

    helper = "def evaluate(model, loader):\n    for batch in loader:\n        model(batch)\n\n"
    helper += "def other():\n    return 1\n"
    caller = (
        "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
        "from evaluation import evaluate\n\naccelerator = Accelerator()\n"
        "model, loader = accelerator.prepare(model, DataLoader(data))\nevaluate(model, loader)\n"
    )
    bystander = "import evaluation\n\nevaluation.other()\n"
    sources = {"evaluation.py": helper, "train.py": caller}
    sources.update({f"job{i}.py": f"{bystander}# job {i}\n" for i in range(5)})
    forget_projects()
    try:
        project = Project.from_sources("/proj", sources)
        lint_run([f"/proj/{name}" for name in sources])
        with project.tracking("/proj/evaluation.py") as deps:
            info = project.module("/proj/evaluation.py")
            assert info is not None
            facts = facts_for(info.index, info.path, project)
            loops = facts.loops
            loop = facts.index.loops[0]
            assert loops.loader_origins(loops.iterated(loop)) == [Origin.SHARDED]
            assert [c.path for c in loops.callers_of_loader(loop)] == ["/proj/train.py"]
        assert project.parse_count == 2  # evaluation.py and train.py, no bystander
        assert {f"/proj/job{i}.py" for i in range(5)} <= set(deps)  # read: still dependencies
    finally:
        forget_projects()


def test_spells_reads_the_text_again_after_it_changed_on_disk(tmp_path):
    helper = tmp_path / "helper.py"
    helper.write_text("def evaluate(loader):\n    pass\n")
    project = Project(str(tmp_path))
    with project.tracking(str(tmp_path / "train.py")):
        assert project.spells(str(helper), "evaluate")
        assert not project.spells(str(helper), "validate")
    helper.write_text("def validate(loader):\n    pass\n\n# a longer text, another size\n")
    with project.tracking(str(tmp_path / "train.py")) as deps:
        assert project.spells(str(helper), "validate")
    assert str(helper) in deps


def test_a_parse_let_go_is_freed_at_once_without_the_cyclic_collector():
    """Letting a module's parse go breaks the cycles of its analysis (its facts and index,
    its scopes and their bindings): reference counting frees the tree then, so the run
    needs no full collection, which walks everything alive."""
    import gc
    import weakref

    project = Project.from_sources(
        "/proj", {"env.py": ENV, "train.py": "from env import DistEnv\n\nDistEnv().size()\n"}
    )
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with project.tracking("/proj/train.py"):
            info = project.module("/proj/train.py")
            assert info is not None
            facts = facts_for(info.index, info.path, project)
            assert facts.summary_of("DistEnv") is not None  # env.py parsed and analysed
            env = project.module("/proj/env.py")
            assert env is not None
            env_facts = facts_for(env.index, env.path, project)
            assert env_facts.processes is not None  # (a provider: its own cycle)
            held = [weakref.ref(x) for x in (info.index, env.index, facts, env_facts)]
        del info, facts, env, env_facts
        project._let_go(0)
        assert [r() for r in held] == [None] * 4  # (an index holds its tree)
        assert not any(type(k) is tuple and k[0] == "facts" for k in project.memo)
    finally:
        if was_enabled:
            gc.enable()


def test_the_callers_of_a_helper_loop_outlive_their_parses():
    """A helper's loop over a parameter keeps which files of the run pass it a loader (as
    paths): asked again after their parses were let go, the callers are parsed again."""
    from distlint.analysis.project import lint_run

    helper = "def evaluate(model, loader):\n    for batch in loader:\n        model(batch)\n"
    caller = (
        "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
        "from evaluation import evaluate\n\naccelerator = Accelerator()\n"
        "model, loader = accelerator.prepare(model, DataLoader(data))\nevaluate(model, loader)\n"
    )
    sources = {"evaluation.py": helper, "train.py": caller}
    forget_projects()
    try:
        project = Project.from_sources("/proj", sources)
        lint_run([f"/proj/{name}" for name in sources])
        with project.tracking("/proj/evaluation.py"):
            info = project.module("/proj/evaluation.py")
            assert info is not None
            facts = facts_for(info.index, info.path, project)
            loop = facts.index.loops[0]
            assert [c.path for c in facts.loops.callers_of_loader(loop)] == ["/proj/train.py"]
        project.module("/proj/evaluation.py")  # used last: kept
        project._let_go(len(helper))  # train.py's parse goes
        assert "/proj/train.py" not in project._modules
        with project.tracking("/proj/evaluation.py"):
            callers = facts.loops.callers_of_loader(loop)
            assert [c.path for c in callers] == ["/proj/train.py"]
            assert [c.mode for c in callers] == [Mode.ACCELERATE]
    finally:
        forget_projects()


def test_a_long_lived_project_stays_bounded_over_many_lints(monkeypatch):
    """An editor's server reuses one Project all day: linting the same files again (the
    script edited every other time) must not grow what the project holds, nor the objects
    alive."""
    import gc

    folder = (FIXTURES / "projects" / "ddp_helper_optimizer_caller_unscaled").resolve()
    script = str(folder / "train.py")
    files = [
        script,
        str(folder / "utils" / "torch_utils.py"),
        str(folder / "utils" / "dataloaders.py"),
    ]
    texts = {f: open(f, encoding="utf-8").read() for f in files}
    monkeypatch.setattr(project_mod, "KEEP_PARSED_CHARS", len(texts[files[-1]]))  # let go too
    forget_projects()
    try:
        config = api.config_for(script, api.LintOptions())
        project = api.project_for(script, config)

        def lint_all(round_: int) -> list:
            found = []
            for f in files:
                text = texts[f] + ("\n# edited\n" if round_ % 2 and f == script else "")
                if f == script:
                    project.set_overlay(f, text)  # (an open buffer)
                found.append(api.lint_source(text, f, config, project=project).findings)
            return found

        def held() -> dict[str, int]:
            return {k: len(v) for k, v in vars(project).items() if hasattr(v, "__len__")}

        rounds = [lint_all(0), lint_all(1)]
        assert any(rounds[0])  # (the helpers are followed: a finding through them)
        for i in range(2, 20):
            assert lint_all(i) == rounds[i % 2]
        gc.collect()
        early, objects = held(), len(gc.get_objects())
        for i in range(20, 200):
            assert lint_all(i) == rounds[i % 2]
        gc.collect()
        assert {k: n for k, n in held().items() if n > early[k]} == {}
        assert len(gc.get_objects()) <= objects * 1.02
    finally:
        forget_projects()


def test_module_bytes_let_go_are_read_again_and_a_change_meanwhile_is_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(project_mod, "KEEP_BYTES", 30)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text(f"import {name}_dep  # {name * 10}\n")
    project = Project(str(tmp_path))
    a, b, c = (str(tmp_path / f"{name}.py") for name in ("a", "b", "c"))
    first = project.read_bytes(a)
    digest = project.digest(a)
    project.read_bytes(b)
    project.read_bytes(c)
    assert set(project._held) == {c} and project._away == {a, b}  # 30 bytes: one file
    assert project.digest(a) == digest  # known without its bytes
    assert project.read_bytes(a) == first and project.reread_count == 1
    assert a in project._held and b in project._away
    # changed on disk while its bytes were away: read as it is now, its analysis forgotten
    with project.tracking(a):
        assert project.module(b) is not None
    (tmp_path / "b.py").write_text("import changed\n")
    project.read_bytes(c)  # (b's bytes go again)
    assert b in project._away
    assert project.read_bytes(b) == b"import changed\n"
    assert project.digest(b) != digest and b in project._held
    assert b not in project._modules  # its parse was of the old text
