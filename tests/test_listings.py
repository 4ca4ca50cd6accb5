"""Import resolution on disk answers from one listing per folder, not one stat per candidate."""

from __future__ import annotations

import os

from distlint.analysis.project import Project


def _tree(root) -> None:
    pkg = root / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name in ("a", "b", "c", "d"):
        (pkg / f"{name}.py").write_text(f"def {name}(): ...\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "e.py").write_text("def e(): ...\n")
    (root / "train.py").write_text("import pkg\n")


def test_imports_resolve_from_folder_listings_without_a_stat_each(tmp_path, monkeypatch):
    _tree(tmp_path)
    project = Project(str(tmp_path))
    train = str(tmp_path / "train.py")
    calls: list[str] = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: calls.append(str(p)) or real(p, *a, **k))
    asked = [("pkg", n) for n in ("a", "b", "c", "d", "sub", "missing", "torch")]
    found = [project.resolve_from_import(train, m, n) for m, n in asked]
    found += [project.resolve_import(train, m) for m in ("pkg.sub.e", "torch", "numpy.random")]
    monkeypatch.undo()
    pkg = os.path.join(str(tmp_path), "pkg")
    assert found == [
        *(os.path.join(pkg, f"{n}.py") for n in "abcd"),
        os.path.join(pkg, "sub", "__init__.py"),
        None,
        None,
        os.path.join(pkg, "sub", "e.py"),
        None,
        None,
    ]
    assert calls == []  # (before: a stat for every candidate `x/__init__.py`, `x.py`, `x/`)


def test_a_module_that_appears_resolves_after_refresh(tmp_path):
    _tree(tmp_path)
    project = Project(str(tmp_path))
    train = str(tmp_path / "train.py")
    assert project.resolve_from_import(train, "pkg", "late") is None
    late = tmp_path / "pkg" / "late.py"
    late.write_text("def late(): ...\n")
    assert project.resolve_from_import(train, "pkg", "late") is None  # listed once
    project.refresh(str(late))  # what an editor or the next run is told
    assert project.resolve_from_import(train, "pkg", "late") == str(late)


def test_a_run_lists_a_folder_again_for_what_it_has_not_asked(tmp_path):
    # a long-lived process (the language server): a module created since the last run and
    # never asked for is found by the next run, as a stat of it would have
    _tree(tmp_path)
    project = Project(str(tmp_path))
    train = str(tmp_path / "train.py")
    assert project.resolve_from_import(train, "pkg", "a") is not None  # pkg/ listed
    (tmp_path / "pkg" / "new.py").write_text("def new(): ...\n")
    project.begin_run()
    assert project.resolve_from_import(train, "pkg", "new") == str(tmp_path / "pkg" / "new.py")
