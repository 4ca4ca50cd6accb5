"""The layers of DESIGN.md as a contract: which part of distlint may import which.

Every ``import`` of a distlint module (at the top, inside a function, or for type checking
only) is read from the source with ``ast`` and checked against the arrows below; any other
arrow fails, as does an import cycle among the imports that run (an import under ``if
TYPE_CHECKING:`` only names a type: a provider may name the facade that holds it). A new module
must be placed in a group here.

The data path runs upwards: text and records at the bottom, the parse, the analysis (which
imports nothing above it), fix plans, the rules, the engine (runner), the api, and on top the
front ends (the command line, the flake8 plugin, the language server), which talk to the api.
Reporters render what they are given (rule metadata included) and import no rule. Nothing on
the lint path (check, fix, the language server) imports ``verify``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# group -> the modules in it (a name covers its submodules)
GROUPS: dict[str, tuple[str, ...]] = {
    # plain records and process-level helpers that know nothing of distlint's other parts
    "foundation": (
        "distlint",  # the package itself (__version__): this name alone, not its submodules
        "distlint.model",
        "distlint.files",  # reading files and streams within bounds
        "distlint.escape",  # outside text made safe to print
        "distlint.collector",
        "distlint.incremental",
        "distlint.parallel",
        "distlint._libcst_compat",  # what is borrowed from LibCST's private modules
    ),
    # pure text: positions in a text, edits, noqa comments (no LibCST)
    "text": ("distlint.edits", "distlint.noqa"),
    # configuration and file discovery
    "settings": ("distlint.config", "distlint.discovery"),
    # text -> tree: the guard, the parse, positions of nodes
    "tree": ("distlint.guard", "distlint.parse", "distlint.positions"),
    # what rules ask: index, flow, project, facts and their providers, knowledge
    "analysis": ("distlint.analysis",),
    # fix plans -> text edits
    "fixes": ("distlint.fixes",),
    "rule": ("distlint.rule",),
    "rules": ("distlint.rules",),
    "registry": ("distlint.registry",),
    # one file linted (and fixed); notebooks; the result cache
    "engine": ("distlint.runner", "distlint.notebook", "distlint.cache"),
    "api": ("distlint.api",),
    # renderers: render what they are given
    "reporting": ("distlint.reporting",),
    # the language server: talks to the api
    "server": ("distlint.lsp", "distlint.lsp_start", "distlint.lsp_worker"),
    # the command line and the plugins of other tools
    "fronts": (
        "distlint.cli",
        "distlint.__main__",
        "distlint.flake8_plugin",
        "distlint.progress",  # the command line's progress line on a terminal
        "distlint.install_hint",  # how to install an extra, said by the command line
    ),
    # runs the user's code: never imported on the lint path
    "verify": ("distlint.verify", "distlint.verify_options"),
}

BELOW_ANALYSIS = {"foundation", "tree"}
BELOW_ENGINE = {
    "foundation",
    "text",
    "settings",
    "tree",
    "analysis",
    "fixes",
    "rule",
    "rules",
    "registry",
}
MAY_IMPORT: dict[str, set[str] | None] = {
    "foundation": set(),
    "text": {"foundation"},
    "settings": {"foundation", "text"},
    "tree": {"foundation", "text", "settings"},
    "analysis": BELOW_ANALYSIS,
    "fixes": {"foundation", "text", "tree", "analysis"},
    "rule": {"foundation", "analysis", "fixes"},
    "rules": {"foundation", "text", "analysis", "fixes", "rule"},
    "registry": {"rule", "rules"},
    "engine": BELOW_ENGINE,
    "api": BELOW_ENGINE | {"engine"},
    "reporting": {"foundation", "text"},
    "server": {"foundation", "api"},
    "fronts": {"foundation", "api", "reporting", "server", "verify"},
    "verify": None,  # not on the lint path: unchecked (it may use anything)
}

# Arrows the groups above do not allow, each with the reason it stays.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("distlint.config", "distlint.registry"): (
        "a configuration is validated against the rule set when it is read: unknown codes, "
        "rule names and rule options are errors naming the file (a lazy import)"
    ),
    ("distlint.cli", "distlint.lsp_worker"): (
        "`distlint lsp` starts the lint worker before click and the rest of the command line "
        "are imported: the worker loads LibCST while the server loads pygls (first diagnostics)"
    ),
}

# Where the lint path starts: none of these may reach distlint.verify, directly or not.
LINT_ENTRIES = (
    "distlint.api",
    "distlint.runner",
    "distlint.lsp",
    "distlint.lsp_start",
    "distlint.lsp_worker",
    "distlint.flake8_plugin",
)


def _modules() -> dict[str, Path]:
    found = {}
    for base, package in ((ROOT / "distlint", "distlint"), (ROOT / "rules", "distlint.rules")):
        for path in sorted(base.rglob("*.py")):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _targets(module: str, is_package: bool, node: ast.AST, known: Mapping[str, Path]) -> set[str]:
    """The distlint modules ``node`` (an import statement of ``module``) imports."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")[: len(module.split(".")) - node.level + is_package]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{alias.name}" for alias in node.names]
    out = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import statements under ``if TYPE_CHECKING:`` (never executed)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def import_graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """module -> the distlint modules it imports (anywhere in its source; ``runtime_only``:
    leaving out the imports under ``if TYPE_CHECKING:``)."""
    known = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skipped = _type_checking_only(tree) if runtime_only else set()
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                edges |= _targets(module, is_package, node, known)
        graph[module] = edges
    return graph


def group_of(module: str) -> str | None:
    best = None
    for group, prefixes in GROUPS.items():
        for prefix in prefixes:
            if module == prefix or (prefix != "distlint" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > len(best[1]):
                    best = (group, prefix)
    return best[0] if best else None


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every arrow of ``graph`` that the contract does not allow."""
    out = []
    for module, targets in sorted(graph.items()):
        source = group_of(module)
        allowed = MAY_IMPORT.get(source) if source else set()
        if allowed is None:
            continue
        for target in sorted(targets):
            into = group_of(target)
            if into == source:
                continue  # within a group: only cycles are wrong (see test_no_import_cycles)
            if into in allowed or (module, target) in EXCEPTIONS:
                continue
            out.append(f"{module} ({source}) imports {target} ({into})")
    return out


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_module_has_a_layer(graph):
    unplaced = [m for m in sorted(graph) if group_of(m) is None]
    assert not unplaced, f"place these modules in GROUPS of tests/test_layers.py: {unplaced}"


def test_imports_follow_the_layers(graph):
    assert violations(graph) == []


def test_no_import_cycles():
    assert cycles(import_graph(runtime_only=True)) == []


def test_the_lint_path_never_reaches_verify(graph):
    for entry in LINT_ENTRIES:
        reached = sorted(m for m in reachable(graph, entry) if group_of(m) == "verify")
        assert reached == [], f"{entry} reaches {reached}"


def test_analysis_imports_nothing_above_it(graph):
    above = {
        f"{m} -> {t}"
        for m, targets in graph.items()
        if group_of(m) == "analysis"
        for t in targets
        if group_of(t) not in BELOW_ANALYSIS | {"analysis"}
    }
    assert above == set()


def test_every_exception_is_still_needed(graph):
    """A named exception whose import is gone is removed, so the contract stays exact."""
    stale = [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], set())]
    assert stale == []


def test_the_contract_catches_what_it_forbids():
    """The checks fail on a graph that breaks them (an upward import, a cycle, verify on the
    lint path), so a green run means something."""
    bad = {
        "distlint.analysis.facts": {"distlint.runner"},  # analysis importing the engine
        "distlint.runner": {"distlint.analysis.facts"},
        "distlint.reporting.sarif_format": {"distlint.registry"},  # a renderer loading rules
        "distlint.api": {"distlint.verify.core"},
        "distlint.verify.core": set(),
    }
    assert violations(bad) == [
        "distlint.analysis.facts (analysis) imports distlint.runner (engine)",
        "distlint.api (api) imports distlint.verify.core (verify)",
        "distlint.reporting.sarif_format (reporting) imports distlint.registry (registry)",
    ]
    assert cycles(bad) == [["distlint.analysis.facts", "distlint.runner"]]
    assert "distlint.verify.core" in reachable(bad, "distlint.api")
