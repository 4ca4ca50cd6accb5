"""The one entry point shared by the CLI, the language server, pre-commit and the tests.

- :func:`lint_source` lints (and optionally fixes) a source text as if it were a given path.
- :func:`lint_file` does the same for a file on disk, and can write the fixes back atomically.
- :func:`lint_paths` walks files and directories and yields one :class:`FileResult` per file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, TypeVar

from distlint import collector
from distlint.config import Config, ConfigError, config_file_problem, resolve_config
from distlint.discovery import SOURCE_SUFFIXES, iter_source_files
from distlint.edits import decode, merged
from distlint.files import READ_LIMIT, read_source, read_stable, read_stream
from distlint.model import Applicability, FileError, FileResult, Finding, RuleInfo

if TYPE_CHECKING:  # pragma: no cover
    from distlint.rule import Rule

K = TypeVar("K")


def _lint_source(
    source: str | bytes,
    path: str,
    *args: Any,
    project: Any = None,
    dependencies: bool = True,
    **kwargs: Any,
) -> FileResult:
    # The engine (LibCST, the rules) loads on first use: a run answered from the cache never needs it.
    from distlint.runner import lint_source

    collector.startup_over()
    if project is None:
        return lint_source(source, path, *args, **kwargs)
    with project.tracking(path, digests=dependencies) as deps:
        result = lint_source(source, path, *args, project=project, **kwargs)
    # Modules and config files this file reached that could not be read or parsed: reported
    # once per run, by the first file that needs them, unless they are linted themselves.
    broken = project.report_errors(deps, exclude=path)
    return result._replace(
        errors=result.errors + tuple(broken),
        dependencies=tuple(sorted(deps.items())) if dependencies else (),
        reached=project.reached,
    )


def lint_document(
    text: str,
    path: str,
    config: Config,
    open_documents: Mapping[str, str | None] = {},
    document: Any = None,
) -> FileResult:
    """Lint an editor buffer as file ``path``: the other open buffers (path -> text; None for a
    closed one) stand in for their files on disk when this file's analysis reaches them.
    ``document``: the buffer's :class:`distlint.incremental.Document` (its last parse), so an
    edit re-parses only the statements it touched."""
    project = _answering(path, config)  # a check run's answers spare the first lint parses
    for other, other_text in open_documents.items():
        if os.path.abspath(other) != os.path.abspath(path):
            project.set_overlay(other, other_text)
    if document is not None and not path.endswith(".ipynb"):
        return _lint_source(text, path, config, project=project, document=document)
    return lint_source(text, path, config, project=project)


def dependents(changed: str, results: Mapping[K, FileResult]) -> list[K]:
    """The keys of ``results`` whose lint reached file ``changed`` (to lint them again)."""
    target = os.path.normpath(os.path.abspath(changed))
    return [key for key, r in results.items() if any(p == target for p, _ in r.dependencies)]


def project_for(path: str, config: Config) -> Any:
    """The project analysis shared by every file of ``path``'s project in this process."""
    from distlint.analysis.project import project_for as shared

    return shared(path, config)


def _answering(path: str, config: Config, store: bool = True) -> Any:
    """:func:`project_for`, reading and writing its answers about modules in the cache
    folder's answer store (see :class:`distlint.cache.AnswerStore`); ``store`` False
    (``--no-cache``): in memory only."""
    project = project_for(path, config)
    if store:
        from distlint.cache import answer_store

        project.answers = answer_store(config, project.root, project.search_roots)
    else:
        project.answers = None
    return project


__all__ = [
    "LintOptions",
    "lint_source",
    "fix_source",
    "config_for",
    "lint_file",
    "lint_paths",
    "lint_text",
    "read_source",
    "read_stable",
    "READ_LIMIT",
    "read_stream",
    "SOURCE_SUFFIXES",
    "Finding",
    "FileResult",
    "Config",
    "ConfigError",
    "config_file_problem",
    "decode",
    "merged",
    "all_rules",
    "lookup_rule",
    "rule_selector",
    "rule_suggestion",
    "rule_metadata",
    "clean_cache",
    "forget_config_files",
]


class LintOptions(NamedTuple):
    """Command-line level choices that override the configuration file."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    unsafe_fixes: bool | None = None
    fix: bool = False
    write: bool = True  # with fix: write fixed files back (False for --diff / stdin)
    ignore_noqa: bool = False
    config_path: str | None = None
    isolated: bool = False
    debug: bool = False
    cache: bool = False  # reuse results from .distlint_cache (the CLI's default; --no-cache)
    jobs: int | None = None  # processes for many files; None: one per available core
    keep_source: bool = False  # results carry the decoded text (for --diff)
    # results carry what each file's analysis consulted, with digests (FileResult.dependencies:
    # the cache's keys, the editor's dependents); a report that keeps no cache needs none
    dependencies: bool = True
    add_noqa: bool = False  # write a noqa directive naming each finding's code (--add-noqa)

    def apply_to(self, config: Config) -> Config:
        changes: dict[str, Any] = {}
        if self.select is not None:
            changes["select"] = tuple(self.select)
        if self.ignore is not None:
            changes["ignore"] = tuple(config.ignore) + tuple(self.ignore)
        if self.extend_select is not None:
            changes["extend_select"] = tuple(config.extend_select) + tuple(self.extend_select)
        if self.unsafe_fixes is not None:
            changes["unsafe_fixes"] = self.unsafe_fixes
        return config._replace(**changes) if changes else config


def config_for(path: str, options: LintOptions = LintOptions()) -> Config:
    base = resolve_config(path, options.config_path, options.isolated)
    return options.apply_to(base)


def lint_source(
    source: str | bytes,
    path: str = "<stdin>",
    config: Config | None = None,
    *,
    fix: bool = False,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
    debug: bool = False,
    prior: FileResult | None = None,
    project: Any = None,
    dependencies: bool = True,
) -> FileResult:
    """Lint ``source`` as the file ``path``; see :func:`distlint.runner.lint_source`.

    ``prior`` (with ``fix``): a result of linting this same text with the same settings, whose
    edits the first fix round applies without linting again (the cache's, the server's).
    ``project`` (a :class:`distlint.analysis.project.Project`, e.g. :func:`project_for`): follow
    the file's imports and config files; None: the file alone. ``dependencies`` False: the
    result's ``dependencies`` stay empty (a caller keeping no cache need not pay for them)."""
    if path.endswith(".ipynb"):
        from distlint import notebook

        return notebook.lint_notebook_source(
            source,
            path,
            config or Config(),
            fix=fix,
            unsafe_fixes=unsafe_fixes,
            ignore_noqa=ignore_noqa,
            debug=debug,
        )
    return _lint_source(
        source,
        path,
        config,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        ignore_noqa=ignore_noqa,
        debug=debug,
        prior=prior,
        project=project,
        dependencies=dependencies,
    )


def fix_source(
    source: str,
    path: str = "<stdin>",
    config: Config | None = None,
    *,
    unsafe_fixes: bool | None = None,
    ignore_noqa: bool = False,
    prior: FileResult | None = None,
    project: Any = None,
) -> str:
    """The text ``source`` with every safe fix applied (unsafe ones too with ``unsafe_fixes``,
    default the config's ``unsafe-fixes``), exactly as ``distlint fix`` computes it. ``prior``:
    a lint result of this same text and configuration (the language server's), so the first
    round applies its edits without linting again. Returns ``source`` unchanged when nothing
    applies or the text does not parse.
    """
    if path.endswith(".ipynb"):
        raise ValueError("fix_source works on Python source; notebooks go through lint_source")
    result = _lint_source(
        source,
        path,
        config,
        fix=True,
        unsafe_fixes=unsafe_fixes,
        ignore_noqa=ignore_noqa,
        prior=prior,
        project=project,
    )
    return result.fixed_source if result.fixed_source is not None else source


def apply_fix(source: str, finding: Finding) -> str:
    """``source`` with ``finding``'s own fix applied (its edits only, nothing re-linted)."""
    from distlint.edits import apply_fixes

    if finding.fix is None:
        return source
    return apply_fixes(source, [finding.fix])[0]


def lint_file(
    path: str, config: Config | None = None, options: LintOptions = LintOptions()
) -> FileResult:
    """Lint one file; with ``options.fix`` and ``options.write``, write the fixed file back.

    Never raises: an unexpected problem becomes one error line naming the file (the traceback
    with ``--debug``), and the other files go on.
    """
    return _guarded(path, options, lambda: _lint_file(path, config, options, cache=options.cache))


def lint_text(
    data: bytes, path: str, config: Config, options: LintOptions = LintOptions()
) -> FileResult:
    """Lint (with ``options.fix``: fix, never writing) the bytes ``data`` read from standard
    input as the file ``path``. Never raises, as :func:`lint_file`."""
    return _guarded(path, options, lambda: _lint_as_asked(data, path, config, options))


def _lint_as_asked(
    data: bytes, path: str, config: Config, options: LintOptions, **more: Any
) -> FileResult:
    """:func:`lint_source` with the choices of ``options`` (and ``more`` keywords)."""
    return lint_source(
        data,
        path,
        config,
        fix=options.fix,
        unsafe_fixes=options.unsafe_fixes,
        ignore_noqa=options.ignore_noqa,
        debug=options.debug,
        **more,
    )


def _guarded(path: str, options: LintOptions, lint: Callable[[], FileResult]) -> FileResult:
    """``lint()``, an unexpected problem turned into one error line naming the file (the
    traceback with ``--debug``), so the other files go on."""
    try:
        return lint()
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "source is too deeply nested to analyse"),))
    except Exception as exc:
        import traceback

        detail = (
            traceback.format_exc(limit=-40) if options.debug else f"{type(exc).__name__}: {exc}"
        )
        return FileResult(
            path,
            errors=(FileError(path, f"internal error: {detail} (--debug shows the traceback)"),),
        )


def _lint_file(
    path: str, config: Config | None, options: LintOptions, cache: bool = False
) -> FileResult:
    if config is None:
        try:
            config = config_for(path, options)
        except ConfigError as exc:
            return FileResult(path, errors=(FileError(path, str(exc)),))
    read = read_stable(path, _read_limit(config))
    if isinstance(read, FileError):
        return FileResult(path, errors=(read,))
    data, state = read
    store = key = None
    prior = None
    if cache:
        store, key = _cache_entry(path, data, config, options)
        prior = store.get(key, path)
        if prior is None and _fixes_without_writing(path, options):
            prior = _unfixed(path, data, config, options, state)
            if prior is not None:
                store.put(key, prior)
        if prior is not None and not (options.fix and _fix_wanted(prior, config, options)):
            return _finish(path, data, state, prior, config, options)
    result = _lint_data(path, data, config, options, prior, state)
    if store is not None and key is not None and not result.errors:
        _remember(store, key, path, result, prior is not None, config, options)
    return _finish(path, data, state, result, config, options)


def _fixes_without_writing(path: str, options: LintOptions) -> bool:
    """A fix run that writes nothing (``--diff``) of a Python file (a notebook's lint does not
    start from a prior result)."""
    return options.fix and not options.write and not path.endswith(".ipynb")


def _unfixed(
    path: str, data: bytes, config: Config, options: LintOptions, state: os.stat_result
) -> FileResult | None:
    """The lint of the file as it is, for a fix that writes nothing (``--diff``) to start from
    and the cache to keep: the file's bytes are the same next time, so the next such run finds
    it and parses only to verify the fixed text. None when it holds errors (never cached: the
    fix lints the file itself)."""
    result = _lint_data(path, data, config, options._replace(fix=False), None, state)
    return None if result.errors else result


def _remember(
    store: Any,
    key: str,
    path: str,
    result: FileResult,
    from_prior: bool,
    config: Config,
    options: LintOptions,
) -> None:
    """Keep ``result`` in the cache: under the file's bytes (``key``) when nothing was fixed
    (``from_prior``: it came from there), under the fixed bytes once they are written."""
    if result.fixed_bytes is None and not from_prior:
        store.put(key, result)  # nothing was fixed: the result is the file's
    elif result.fixed_bytes is not None and options.write and result.fixes_applied:
        # the file now holds the fixed bytes and the result is theirs: the next run is warm
        fixed_store, fixed_key = _cache_entry(path, result.fixed_bytes, config, options)
        fixed_store.put(fixed_key, result)


def _finish(
    path: str,
    data: bytes,
    state: os.stat_result,
    result: FileResult,
    config: Config,
    options: LintOptions,
) -> FileResult:
    """What a result needs once the file is linted: the source text it was computed on (for
    --diff), and `# noqa` comments written (--add-noqa)."""
    needs_text = options.keep_source or options.add_noqa
    if needs_text and result.source_text is None:
        try:
            result = result._replace(source_text=decode(data)[0])
        except (SyntaxError, UnicodeError, LookupError):
            pass
    if options.add_noqa and result.findings:
        if path.endswith(".ipynb"):
            result = _write_notebook_noqa(path, data, state, result)
        else:
            result = _write_noqa(path, data, state, result)
    return result


def _write_notebook_noqa(
    path: str, data: bytes, state: os.stat_result, result: FileResult
) -> FileResult:
    """`# noqa` comments go into the notebook's code cells (:mod:`distlint.notebook`)."""
    from distlint import notebook
    from distlint.fixes import FileChanged, write_atomic

    try:
        new_data, count = notebook.add_noqa(data, result.findings)
        if count:
            write_atomic(path, new_data, expected=state)
        return result._replace(noqa_added=count)
    except FileChanged:
        message = "file changed on disk while noqa comments were added; not written"
    except OSError as exc:
        message = f"cannot add noqa comments: {exc.strerror or exc}"
    except (SyntaxError, UnicodeError, ValueError) as exc:
        message = f"cannot add noqa comments: {exc}"
    return result._replace(errors=result.errors + (FileError(path, message),))


def _write_noqa(path: str, data: bytes, state: os.stat_result, result: FileResult) -> FileResult:
    from distlint.fixes import FileChanged, write_atomic
    from distlint.noqa import add_noqa

    try:
        text, encoding = decode(data)
        new_text, count = add_noqa(text, result.findings)
        if count:
            write_atomic(path, new_text.encode(encoding), expected=state)
        return result._replace(noqa_added=count)
    except FileChanged:
        message = "file changed on disk while noqa comments were added; not written"
    except OSError as exc:
        message = f"cannot add noqa comments: {exc.strerror or exc}"
    except (SyntaxError, UnicodeError) as exc:
        message = f"cannot add noqa comments: {exc}"
    return result._replace(errors=result.errors + (FileError(path, message),))


def _lint_data(
    path: str,
    data: bytes,
    config: Config,
    options: LintOptions,
    prior: FileResult | None = None,
    state: os.stat_result | None = None,
) -> FileResult:
    result = _lint_as_asked(
        data,
        path,
        config,
        options,
        prior=prior,
        project=None if path.endswith(".ipynb") else _answering(path, config, options.cache),
        dependencies=options.dependencies or options.cache,
    )
    if options.fix and options.write and result.fixed_bytes is not None:
        from distlint.fixes import FileChanged, NotWritten, write_atomic

        problem = None
        try:
            if read_source(path, None) != data:  # (replaced by a FIFO: changed, no hang)
                raise FileChanged(path)
            write_atomic(path, result.fixed_bytes, expected=state)
        except FileChanged:
            problem = "file changed on disk while it was being fixed; not written"
        except NotWritten as exc:
            problem = f"{exc.strerror}: fixes not written (make it writable to fix it)"
        except FileNotFoundError:
            problem = "file vanished before the fix was written"
        except PermissionError:
            problem = "permission denied: fixes not written"
        except OSError as exc:
            problem = f"cannot write fixes: {exc.strerror or exc}"
        if problem is not None:
            return _on_disk(path, data, config, options, result, problem)
    return result


def _on_disk(
    path: str,
    data: bytes,
    config: Config,
    options: LintOptions,
    result: FileResult,
    problem: str,
) -> FileResult:
    """A fix that could not be written: report the findings of what is still on disk (the
    unfixed text), not those of the text that was never written."""
    before = lint_source(
        data,
        path,
        config,
        ignore_noqa=options.ignore_noqa,
        debug=options.debug,
    )
    return before._replace(
        errors=tuple(dict.fromkeys(before.errors + result.errors)) + (FileError(path, problem),),
        source_text=result.source_text,
    )


def _read_limit(config: Config) -> int | None:
    return max(READ_LIMIT, config.max_file_size) if config.max_file_size else None


def lint_paths(
    paths: Sequence[str],
    options: LintOptions = LintOptions(),
    on_total: Callable[[int], None] | None = None,
) -> Iterator[FileResult]:
    """Lint every Python file under ``paths``, one result per file, in a stable order.

    With ``options.cache``, files whose results are cached are answered from the cache; the
    others are linted on a process pool when there are many of them (``options.jobs``).
    ``on_total`` is told how many files were found, before the first result (for progress).
    """
    from distlint.analysis.project import lint_run

    items = list(iter_source_files(paths, lambda p: config_for(p, options)))
    # a module of this run (linted now or answered from the cache) reports its own errors, not
    # its importers, and its calls count for the modules it imports (declared before the cache
    # is asked: a result that depended on its importers holds only for the same ones); each
    # file is checked against the disk once in a run
    lint_run([item for item in items if isinstance(item, str)])
    slots: list[FileResult | str] = []  # a ready result, or a path still to lint
    checked: dict[tuple[str, str], bool] = {}  # (the dependencies of the entries read, once)
    for item in items:
        if isinstance(item, FileError):
            slots.append(FileResult(item.path, errors=(item,)))
        else:
            hit = _cached_result(item, options, checked) if options.cache else None
            slots.append(hit if hit is not None else item)
    if on_total is not None:
        on_total(len(slots))
    todo = [slot for slot in slots if isinstance(slot, str)]
    if todo:
        # Load LibCST and the rules here, once: forked pool workers inherit them instead of
        # each importing them again.
        from distlint.registry import all_rules
        from distlint.runner import lint_source  # noqa: F401

        all_rules()
        collector.startup_over()  # before the pool forks: its workers share what is frozen
        collector.many_files(len(todo))  # (the workers keep what it sets too)
    linted = _linted(todo, options)
    given = {os.path.normpath(os.path.abspath(s if isinstance(s, str) else s.path)) for s in slots}
    followed: dict[str, None] = {}
    slots.reverse()
    while slots:  # (a result is not held here once it is handed on)
        slot = slots.pop()
        result = next(linted) if isinstance(slot, str) else slot
        for dep in result.reached:  # modules a fact of the file flowed through
            if dep.endswith(".py") and dep not in given:
                followed[dep] = None
        yield result
    yield from _followed_results(followed, options)


def _linted(todo: list[str], options: LintOptions) -> Iterator[FileResult]:
    """The results of linting ``todo``, in its order: on a process pool, or in this process
    each file parsed once (see :func:`_sharing_parses`)."""
    from distlint.parallel import ordered_map, worker_count

    lint = partial(lint_file, config=None, options=options)
    if worker_count(len(todo), options.jobs) == 1 and not (options.fix and options.write):
        return _sharing_parses(lint, todo)
    return ordered_map(lint, todo, options.jobs, _worker_died)


def _sharing_parses(lint: Callable[[str], FileResult], todo: list[str]) -> Iterator[FileResult]:
    """``map(lint, todo)`` in this process, each file parsed once: a file of ``todo`` that the
    project parsed for an importer (a module a fact flowed through) is linted next, while the
    project still holds that parse (see KEEP_PARSED_CHARS), instead of parsed again at its
    turn. Results come in ``todo``'s order; a file linted ahead of its turn claims the errors of
    other modules it reports only then (see `deferring_reports`), so the output is the same
    whatever order the files are linted in. (A run that writes fixes keeps the order: a file
    written early would change what the files before it read.)"""
    from distlint.analysis.project import claim_reports, deferring_reports, held_parses

    turn = {os.path.normpath(os.path.abspath(path)): i for i, path in enumerate(todo)}
    results: dict[int, FileResult] = {}
    deferred: Any = {}
    for i, path in enumerate(todo):
        if i in results:  # linted ahead of its turn
            result = results.pop(i)
            taken = claim_reports(deferred, path)
            if taken:
                kept = tuple(e for e in result.errors if (e.path, e.message) not in taken)
                result = result._replace(errors=kept)
            yield result
            continue
        yield lint(path)  # every file before it handed on: it claims its errors itself
        while True:
            ahead = [turn[p] for p in held_parses() if turn.get(p, -1) > i]
            ahead = [j for j in ahead if j not in results]
            if not ahead:
                break
            with deferring_reports(deferred):
                results[ahead[0]] = lint(todo[ahead[0]])


def _followed_results(paths: Mapping[str, None], options: LintOptions) -> Iterator[FileResult]:
    """The findings of project modules the run's files reach that are not in the run
    themselves, when such a module sets up distributed training on its own (a Trainer class
    creating the Accelerator): the hazards there belong to the script that uses it. Reached:
    a fact of the linted file flowed through the module (it calls or reads a name from it,
    directly or through others), not merely imported somewhere in the import closure.
    Check only (never fixed from here: fix that file to apply its fixes); their errors are
    already reported by their importers."""
    check_only = options._replace(fix=False, add_noqa=False, keep_source=False)
    for path in sorted(paths):
        try:
            config = config_for(path, options)
        except ConfigError:
            continue
        if config.follow_imports != "normal" or config.is_excluded(path):
            continue
        if not _sets_up_training(path, config, options):
            continue
        shown = os.path.relpath(path)
        result = lint_file(path if shown.startswith(os.pardir) else shown, config, check_only)
        if result.findings:
            # fixes are applied when that file itself is fixed, not from its importer's run
            findings = tuple(f._replace(fix=None, suppression=None) for f in result.findings)
            yield result._replace(findings=findings, errors=(), followed=True)


def _sets_up_training(path: str, config: Config, options: LintOptions) -> bool:
    """Does the module set up data-parallel training itself? Answered once per content (and
    per content of what the answer consulted) with the cache: a warm run parses nothing."""
    from distlint.analysis.facts import facts_for
    from distlint.analysis.knowledge import TRAINING_SETUP_WORDS

    project = _answering(path, config, options.cache)
    data = project.read_bytes(path)
    # what such a module must spell out, checked before parsing it
    if data is None or not any(word in data for word in TRAINING_SETUP_WORDS):
        return False
    store = key = None
    if options.cache:
        store, key = _cache_entry(path, data, config, options)
        known = store.get_flag(key)
        if known is not None:
            return bool(known)
    with project.tracking(path, digests=options.cache) as deps:
        info = project.module(path)
        trains = info is not None and bool(
            facts_for(info.index, info.path, project).trains_data_parallel
        )
    if store is not None and key is not None and not project.report_errors(deps, exclude=path):
        store.put_flag(key, trains, [(path, _sha256(data)), *deps.items()])
    return trains


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _worker_died(path: str, reason: str) -> FileResult:
    """The result of a file whose worker process died twice (alone the second time)."""
    hint = " (out of memory?)" if "SIGKILL" in reason else ""
    message = f"the process linting this file died: {reason}{hint}; not linted"
    return FileResult(path, errors=(FileError(path, message),))


def _cache_entry(path: str, data: bytes, config: Config, options: LintOptions) -> tuple[Any, str]:
    from distlint.cache import cache_for, cache_key

    key = cache_key(data, path, config, ignore_noqa=options.ignore_noqa, debug=options.debug)
    return cache_for(config), key


def _fix_wanted(result: FileResult, config: Config, options: LintOptions) -> bool:
    unsafe = options.unsafe_fixes if options.unsafe_fixes is not None else config.unsafe_fixes
    return any(
        f.fix is not None and (f.fix.applicability is Applicability.SAFE or unsafe)
        for f in result.findings
    )


def _run_dependency(dep: str, config: Config) -> str | None:
    """The digest now of a cached result's dependency that is not a file: the files of this run
    importing a module (see ``Project.run_importers``); None for a file."""
    # (loaded already: lint_paths declared the run with it)
    from distlint.analysis.project import RUN_IMPORTERS

    if not dep.endswith(RUN_IMPORTERS):
        return None
    module = dep[: -len(RUN_IMPORTERS)]
    return str(project_for(module, config).importers_digest(module))


def _cached_result(
    path: str, options: LintOptions, checked: dict[tuple[str, str], bool] | None = None
) -> FileResult | None:
    try:
        config = config_for(path, options)
    except ConfigError:
        return None
    read = read_stable(path, _read_limit(config))
    if isinstance(read, FileError):
        return None
    data, state = read
    cache, key = _cache_entry(path, data, config, options)
    result = cache.get(key, path, partial(_run_dependency, config=config), checked)
    if result is None or (options.fix and _fix_wanted(result, config, options)):
        return None  # a fix run starts from the cached edits in its worker (see _lint_file)
    if options.add_noqa and result.findings:
        return None  # written by the worker
    return _finish(path, data, state, result, config, options)


# ------------------------------------------------------------------------------------------
# For the command line and the language server (they talk to this module only)
# ------------------------------------------------------------------------------------------


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, in code order (see :mod:`distlint.registry`)."""
    from distlint.registry import all_rules as found

    return found()


def lookup_rule(code_or_name: str) -> type[Rule]:
    """The rule class with this code or name; KeyError when there is none."""
    from distlint.registry import lookup

    return lookup(code_or_name)


def rule_selector(text: str) -> str:
    """The code or prefix a selector names (a rule's name becomes its code); ValueError with a
    one-line reason and the closest code or name for an empty, blank or unknown one."""
    from distlint.registry import normalise_selector

    return normalise_selector(text)


def rule_suggestion(text: str) -> str:
    """`` (did you mean X?)`` for the code or name closest to ``text``, or ``""``."""
    from distlint.registry import suggestion

    return suggestion(text)


def rule_metadata() -> tuple[RuleInfo, ...]:
    """What reports say about every rule (``ReportContext.rules`` of the formats that list
    them); loads the rules."""
    return tuple(rule.info() for rule in all_rules())


def clean_cache(root: str) -> Any:
    """Remove the result cache of the project at ``root``; what was removed, if anything."""
    from distlint.cache import clean

    return clean(root)


def forget_config_files() -> None:
    """Read configuration files again on the next lint (an editor saw one change)."""
    from distlint import config as config_mod

    for name in ("_find_from_dir", "load_config_file"):
        cached = getattr(config_mod, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()
