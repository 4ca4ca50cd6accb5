"""How many lint passes each command costs (issue #12).

A pass is a LibCST parse ("parse") or a run of the rules over a module ("rules"), counted by
:data:`distlint.runner.PASSES`. A finding carries its fix as text edits, so nothing downstream of
the lint (renderers, the fixer on a warm cache, the language server's code actions) lints again.
"""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner
from helpers import FIXTURES

from distlint import cache as cache_mod
from distlint import runner
from distlint.cli import main

# Three findings, two fixable (unsafe): the issue's own measure.
DL201 = FIXTURES / "DL201" / "bad.py"
# A safe fix (set_seed from accelerate) fixed in one round.
DL101 = FIXTURES / "DL101" / "bad.py"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copy(DL201, tmp_path / "bad.py")
    monkeypatch.chdir(tmp_path)
    cache_mod._CACHES.clear()
    yield tmp_path
    cache_mod._CACHES.clear()


def passes(*args: str) -> dict[str, int]:
    runner.PASSES.clear()
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return {"parse": runner.PASSES["parse"], "rules": runner.PASSES["rules"]}


ONE = {"parse": 1, "rules": 1}
NONE = {"parse": 0, "rules": 0}


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif", "junit"])
def test_check_is_one_pass_cold_and_none_warm(project, fmt):
    assert passes("check", "--format", fmt, "bad.py") == ONE
    assert passes("check", "--format", fmt, "bad.py") == NONE


def test_sarif_under_ignore_noqa_is_one_pass(project):
    assert passes("check", "--format", "sarif", "--ignore-noqa", "--no-cache", "bad.py") == ONE


def test_fix_on_a_warm_cache_parses_only_to_verify(project):
    assert passes("check", "bad.py") == ONE
    before = (project / "bad.py").read_text()
    # the fixes are unsafe: `check` (without --unsafe-fixes) warmed the entry fix uses
    assert passes("fix", "--unsafe-fixes", "bad.py") == ONE  # the verifying lint only
    assert (project / "bad.py").read_text() != before
    # the verified result is cached under the fixed file's bytes: the next check is warm
    assert passes("check", "bad.py") == NONE


def test_fix_diff_on_a_warm_cache_parses_only_to_verify(project):
    """`fix --diff` writes nothing, so the next one finds the same bytes: the first leaves the
    file's lint in the cache, and the next parses only the fixed text, to verify it (#32)."""
    before = (project / "bad.py").read_text()
    no_cache = CliRunner().invoke(main, ["fix", "--diff", "--unsafe-fixes", "--no-cache", "bad.py"])
    # cold: the file's lint, then the verifying pass (as without the cache)
    assert passes("fix", "--diff", "--unsafe-fixes", "bad.py") == {"parse": 2, "rules": 2}
    assert passes("fix", "--diff", "--unsafe-fixes", "bad.py") == ONE
    assert passes("check", "--diff", "--unsafe-fixes", "bad.py") == ONE
    warm = CliRunner().invoke(main, ["fix", "--diff", "--unsafe-fixes", "bad.py"])
    assert warm.output == no_cache.output and "+++" in warm.output
    assert (warm.exit_code, (project / "bad.py").read_text()) == (no_cache.exit_code, before)


def test_fix_cold_is_the_lint_plus_one_verifying_pass(project):
    assert passes("fix", "--unsafe-fixes", "--no-cache", "bad.py") == {"parse": 2, "rules": 2}


def test_diff_and_add_noqa_do_not_lint_again(project):
    assert passes("check", "--diff", "--unsafe-fixes", "--no-cache", "bad.py") == {
        "parse": 2,
        "rules": 2,
    }
    assert passes("check", "--add-noqa", "--no-cache", "bad.py") == ONE
    assert "# noqa: DL201" in (project / "bad.py").read_text()


def _server(root, text):
    lsp = pytest.importorskip("lsprotocol.types")
    pytest.importorskip("pygls")
    from lsp_hooks import hooked_worker  # a worker that also counts its lint passes

    from distlint.lsp import create_server

    server = create_server(hooked_worker())
    init = server.protocol.lsp_initialize(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri())
    )
    try:
        handler, args, _ = next(init)
        handler(*args)
        next(init)
    except StopIteration:
        pass
    path = root / "train.py"
    path.write_text(text)
    uri = path.as_uri()
    server.workspace.put_text_document(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
    )
    return server, uri, lsp


def test_language_server_code_actions_lint_no_more(tmp_path):
    server, uri, lsp = _server(tmp_path, DL101.read_text())
    # the server lints in its worker process: the passes are counted there
    server.worker.call("passes", True)
    entry = server.lint(uri)
    assert server.worker.call("passes") == ONE and entry.result.findings
    whole = lsp.Range(
        start=lsp.Position(line=0, character=0), end=lsp.Position(line=10**6, character=0)
    )

    def actions(kind):
        server.worker.call("passes", True)
        params = lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=whole,
            context=lsp.CodeActionContext(diagnostics=[], only=[kind]),
        )
        found = server.code_actions(params)
        counts = server.worker.call("passes")
        return found, {"parse": counts.get("parse", 0), "rules": counts.get("rules", 0)}

    quick, cost = actions(lsp.CodeActionKind.QuickFix)
    titles = [a.title for a in quick]
    assert any("set_seed" in t for t in titles) and any("noqa" in t for t in titles)
    assert cost == NONE  # quick fixes and noqa-comment actions come from the finding's edits
    from distlint.lsp import FIX_ALL_KIND

    fix_all, cost = actions(FIX_ALL_KIND)
    assert [a.title for a in fix_all] == ["distlint: fix all"]
    assert cost == ONE  # the edits applied, then one verifying lint
    again, cost = actions(FIX_ALL_KIND)
    assert cost == NONE  # the same buffer: nothing new
