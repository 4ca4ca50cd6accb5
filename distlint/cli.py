"""The ``distlint`` command: a thin click layer over :mod:`distlint.api`."""

from __future__ import annotations

import errno
import os
import stat
import sys
import time

if sys.argv[1:2] == ["lsp"]:
    # `distlint lsp`: start the lint worker before the rest of the command line is even
    # imported; it loads LibCST and the rules while this process loads pygls (distlint.lsp_start).
    from distlint.lsp_worker import Worker as _Worker

    _started = _Worker(fork=True)  # (this process is one thread, with nothing else imported)
    _started.start()
    _EARLY_WORKER: _Worker | None = _started
else:
    _EARLY_WORKER = None

from collections.abc import Sequence
from typing import Any, NamedTuple, TextIO

import click

from distlint import __version__, collector
from distlint.api import (
    SOURCE_SUFFIXES,
    ConfigError,
    LintOptions,
    config_file_problem,
    config_for,
    lint_paths,
    lint_text,
    read_stream,
)
from distlint.escape import printable
from distlint.model import FileError, FileResult, Finding
from distlint.reporting import FORMATS, FORMATS_WITH_RULES, ReportContext, renderer

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
TEXT_FORMATS = ("text", "concise", "full")


def _color(output_file: str | None, stream: TextIO) -> bool:
    """ANSI colours: only for a report written to a terminal, never with NO_COLOR set (to
    anything but the empty string, https://no-color.org); FORCE_COLOR asks for them anyway."""
    if output_file is not None or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _split_codes(values: Sequence[str], option: str) -> tuple[str, ...] | None:
    """The codes or prefixes an option's comma-separated values name (a rule's name becomes
    its code); an empty, blank or unknown one is a usage error naming the option."""
    if not values:
        return None
    from distlint.api import rule_selector

    out: list[str] = []
    for value in values:
        for part in value.split(","):
            try:
                out.append(rule_selector(part))
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint=option) from None
    return tuple(out)


def _common_options(f):
    options = [
        # readable=False: an unreadable file is reported as one error line and the others are
        # still linted (click's own check would stop the whole run with a usage error)
        click.argument("paths", nargs=-1, type=click.Path(readable=False)),
        click.option(
            "--select",
            multiple=True,
            metavar="CODES",
            help="Only these rule codes, prefixes or names (DL1, DL101, seed-only-torch, ALL); "
            "comma-separated or repeated.",
        ),
        click.option(
            "--ignore",
            multiple=True,
            metavar="CODES",
            help="Skip these rule codes, prefixes or names.",
        ),
        click.option(
            "--extend-select",
            multiple=True,
            metavar="CODES",
            help="Add these codes, prefixes or names to the selection.",
        ),
        click.option(
            "--unsafe-fixes/--no-unsafe-fixes",
            default=None,
            help="Also apply (and count as fixable) unsafe fixes.",
        ),
        click.option(
            "--diff", is_flag=True, help="Print the diff of the fixes instead of writing them."
        ),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option(
            "--statistics",
            is_flag=True,
            help="Print the number of findings per rule instead of the findings.",
        ),
        click.option(
            "--format",
            "--output-format",
            "fmt",
            type=click.Choice(FORMATS),
            default="text",
            show_default=True,
            help="Output format: `text` (or `concise`) one line per finding; `full` also the "
            "source lines, a caret under the range and the fix as a diff.",
        ),
        click.option(
            "--output-file",
            "-o",
            type=click.Path(dir_okay=False, writable=True),
            help="Write the report to this file.",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(),
            help="Use this configuration file (pyproject.toml or distlint.toml).",
        ),
        click.option("--isolated", is_flag=True, help="Ignore all configuration files."),
        click.option(
            "--ignore-noqa",
            is_flag=True,
            help="Report findings even where `# noqa` suppresses them.",
        ),
        click.option(
            "--stdin-filename",
            metavar="PATH",
            help="The path to lint stdin as (with `-` as the path).",
        ),
        click.option(
            "--force-exclude",
            is_flag=True,
            help="Apply exclude / extend-exclude to files named on the command line too (for pre-commit).",
        ),
        click.option("--debug", is_flag=True, help="Show tracebacks of internal errors."),
        click.option(
            "--quiet",
            "-q",
            is_flag=True,
            help=(
                "Print no findings: only errors and how many fixes were applied (the fix hook);"
                " a report asked with --output-file is still written."
            ),
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Lint every file again instead of reusing results from .distlint_cache.",
        ),
        click.option(
            "--jobs",
            "-j",
            type=click.IntRange(min=0),
            default=None,
            metavar="N",
            help="Processes for many files [default: one per CPU; 1: no pool].",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distlint")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Find (and fix) what makes a training script give different results on 1 GPU, N GPUs
    and TPU pods: partial seeding, per-device batch sizes taken as global, unscaled learning
    rates. `check`, `fix` and `lsp` only read your code; only `verify` runs it."""
    if ctx.invoked_subcommand not in ("check", "fix", "lsp"):
        collector.startup_over()  # the lints resume it once their engine is loaded


def _verify_options(f):
    from distlint.verify_options import verify_options

    return verify_options(f)


@main.command(context_settings={"ignore_unknown_options": False})
@_common_options
@click.option("--fix", is_flag=True, help="Apply safe fixes (and unsafe ones with --unsafe-fixes).")
@click.option(
    "--add-noqa",
    is_flag=True,
    help="Add `# noqa: CODE` comments that suppress every current finding.",
)
@click.option(
    "--verify",
    "verify",
    is_flag=True,
    help="Also RUN the script on 1 and N processes and compare (executes your code).",
)
@_verify_options
@click.pass_context
def check(ctx: click.Context, **kwargs) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
    ctx.exit(_run(fix=kwargs.pop("fix"), **kwargs))


@main.command()
@_common_options
@click.pass_context
def fix(ctx: click.Context, **kwargs) -> None:
    """Apply fixes to PATHS (same as `check --fix`)."""
    ctx.exit(_run(fix=True, **kwargs))


def _run(
    paths: tuple[str, ...],
    fix: bool,
    select,
    ignore,
    extend_select,
    unsafe_fixes,
    diff,
    exit_zero,
    statistics,
    fmt,
    output_file,
    config_path,
    isolated,
    ignore_noqa,
    stdin_filename,
    debug,
    no_cache: bool = False,
    jobs: int | None = None,
    verify: bool = False,
    add_noqa: bool = False,
    force_exclude: bool = False,
    quiet: bool = False,
    **verify_kwargs,
) -> int:
    options = LintOptions(
        select=_split_codes(select, "--select"),
        ignore=_split_codes(ignore, "--ignore"),
        extend_select=_split_codes(extend_select, "--extend-select"),
        unsafe_fixes=unsafe_fixes,
        fix=fix or diff,
        write=not diff,
        ignore_noqa=ignore_noqa,
        config_path=config_path,
        isolated=isolated,
        debug=debug,
        cache=not no_cache,
        jobs=jobs,
        keep_source=diff or fmt == "full",
        dependencies=not no_cache,  # (the report keeps none: see _kept_for_report)
    )
    problem = config_file_problem(config_path) if config_path is not None else None
    if problem is not None:  # missing, a directory, a FIFO...
        click.echo(f"error: {problem}", err=True)
        return EXIT_ERROR
    if verify:
        return _run_verify(paths, options, fmt, verify_kwargs)
    if output_file:
        _refuse_input_as_output(output_file, paths, stdin_filename)
        # opened before any file is fixed: nothing is written when the report cannot be
        output_file = _open_output(output_file)
        if output_file is None:
            return EXIT_ERROR
    report = _Report(fmt, output_file, exit_zero, diff, statistics, quiet)
    if list(paths) == ["-"] or (stdin_filename is not None and not paths):
        return _run_stdin_named(stdin_filename, options, report, force_exclude)
    return _run_paths(paths, options, report, fix, unsafe_fixes, force_exclude, add_noqa)


def _run_paths(
    paths: tuple[str, ...],
    options: LintOptions,
    report: _Report,
    fix: bool,
    unsafe_fixes: bool | None,
    force_exclude: bool,
    add_noqa: bool,
) -> int:
    """``check`` / ``fix`` of the files and folders ``paths`` (the current folder when none)."""
    diff, fmt = report.diff, report.fmt
    if force_exclude and paths:
        paths = tuple(p for p in paths if not _excluded(p, options))
        if not paths:
            # every named file is excluded: nothing to lint (not "lint the cwd")
            click.echo("warning: No Python files found", err=True)
            return EXIT_CLEAN
    if add_noqa:
        if fix or diff:
            raise click.UsageError("--add-noqa cannot be combined with --fix or --diff")
        return _run_add_noqa(paths, options)
    results, diffs = _lint_all(paths, options, fmt, diff)
    if not results:
        click.echo("warning: No Python files found", err=True)
    context = ReportContext(
        fix_mode=fix,
        unsafe_fixes=_unsafe_fixes(unsafe_fixes, paths, options),
        show_statistics=report.statistics,
        diff=diff,
        color=_color(
            report.output_file, sys.stderr if diff and fmt in TEXT_FORMATS else sys.stdout
        ),
    )
    if not report.show(results, diffs, context):
        return EXIT_ERROR
    return _exit_code(results, report.exit_zero, diff_changed=bool(diffs) and diff)


class _Report(NamedTuple):
    """How ``check`` / ``fix`` report: the format and where it goes, and the flags that
    change what is shown and the exit code."""

    fmt: str
    output_file: Any
    exit_zero: bool
    diff: bool
    statistics: bool
    quiet: bool

    def show(self, results: list[FileResult], diffs: list[str], context: ReportContext) -> bool:
        """Print the diffs (--diff), then the report; False when it could not be written."""
        fmt, output_file = self.fmt, self.output_file
        if self.diff:
            sys.stdout.write("".join(diffs))
            if self.quiet:  # quiet silences the terminal: a report asked into a file is written
                return output_file is None or _emit(results, fmt, output_file, context)
            if fmt in TEXT_FORMATS:  # the diff has stdout: the report goes to stderr
                return _emit(results, fmt, output_file, context, stream=sys.stderr)
            return _emit(results, fmt, output_file, context)
        if self.quiet:
            fixed = sum(r.fixes_applied for r in results)
            if fixed:
                changed = sum(1 for r in results if r.fixes_applied)
                click.echo(
                    f"Fixed {fixed} finding{'s' if fixed != 1 else ''} "
                    f"in {changed} file{'s' if changed != 1 else ''}."
                )
            return output_file is None or _emit(results, fmt, output_file, context)
        return _emit(results, fmt, output_file, context)


def _lint_all(
    paths: tuple[str, ...], options: LintOptions, fmt: str, diff: bool
) -> tuple[list[FileResult], list[str]]:
    """Lint ``paths`` (the current folder when none), printing each file's errors (and a
    progress line on a terminal): the results, slimmed for the report, and the --diff hunks."""
    from distlint.progress import Progress

    results: list[FileResult] = []
    diffs: list[str] = []
    progress = Progress.for_terminal(sys.stderr)
    on_total = progress.set_total if progress is not None else None
    for result in lint_paths(list(paths) or ["."], options, on_total):
        if progress is not None and result.errors:
            progress.clear()  # an error line never shares the progress line
        for error in result.errors:
            click.echo(printable(str(error)), err=True)
        if progress is not None:
            progress.advance()
        if diff and result.fixed_source is not None:
            diffs.append(_unified_diff(result, result.source_text or ""))
        results.append(_kept_for_report(result, fmt))
    if progress is not None:
        progress.clear()
    return results, diffs


def _kept_for_report(result: FileResult, fmt: str) -> FileResult:
    """``result`` without the texts the report does not need: findings, not the text of every
    fixed file, are kept across a large tree (`full` keeps the text the remaining findings
    point into: the fixed text after a fix), nor what its analysis consulted (the modules it
    depended on and reached: hundreds of paths and digests a file, across a large tree)."""
    if result.dependencies or result.reached:
        result = result._replace(dependencies=(), reached=())
    if result.fixed_source is None and result.source_text is None:
        return result
    shown = None
    if fmt == "full" and result.findings:
        shown = result.fixed_source if result.fixed_source is not None else result.source_text
    return result._replace(fixed_source=None, fixed_bytes=None, source_text=shown)


def _run_stdin_named(
    stdin_filename: str | None, options: LintOptions, report: _Report, force_exclude: bool
) -> int:
    """Lint standard input as ``stdin_filename``; with --force-exclude and that name
    excluded, pass it through untouched (ruff's behaviour) and lint nothing."""
    if force_exclude and stdin_filename and _excluded(stdin_filename, options, named=True):
        if options.fix and not report.diff:
            data = _read_stdin(stdin_filename)
            if data is None:
                return EXIT_ERROR
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        return EXIT_CLEAN
    return _run_stdin(stdin_filename or "<stdin>", options, report)


def _run_stdin(path: str, options: LintOptions, report: _Report) -> int:
    data = _read_stdin(path)
    if data is None:
        return EXIT_ERROR
    try:
        config = config_for(path if path != "<stdin>" else os.getcwd(), options)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_ERROR
    result = lint_text(data, path, config, options)
    for error in result.errors:
        click.echo(printable(str(error)), err=True)
    if options.fix and not report.diff:
        return _write_fixed_stdin(data, result, report.exit_zero)
    if report.diff:
        if result.fixed_source is not None:
            from distlint.api import decode

            sys.stdout.write(_unified_diff(result, decode(data)[0]))
        return _exit_code([result], report.exit_zero, diff_changed=result.fixed_source is not None)
    if report.fmt == "full" and result.findings and result.source_text is None:
        from distlint.api import decode

        try:
            result = result._replace(source_text=decode(data)[0])
        except (SyntaxError, UnicodeError, LookupError):
            pass
    context = ReportContext(
        fix_mode=options.fix,
        unsafe_fixes=config.unsafe_fixes,
        show_statistics=report.statistics,
        diff=report.diff,
        color=_color(report.output_file, sys.stdout),
    )
    if not _emit([result], report.fmt, report.output_file, context):
        return EXIT_ERROR
    return _exit_code([result], report.exit_zero)


def _write_fixed_stdin(data: bytes, result: FileResult, exit_zero: bool) -> int:
    """`distlint fix -`: the fixed source on stdout and nothing else (editors pipe through
    it); the input unchanged when it could not be fixed."""
    out = result.fixed_bytes if result.fixed_bytes is not None else data
    if result.errors and result.fixed_bytes is None:
        out = data
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if result.errors:
        return EXIT_ERROR
    return EXIT_CLEAN if exit_zero or not result.findings else EXIT_FINDINGS


def _read_stdin(path: str) -> bytes | None:
    """The bytes on standard input, read in chunks up to the read limit; None (the reason
    printed as one line naming ``path``) when stdin is closed, unreadable or over the limit."""
    read = read_stream(getattr(sys.stdin, "buffer", None), path)
    if isinstance(read, FileError):
        click.echo(str(read), err=True)
        return None
    return read


def _excluded(path: str, options: LintOptions, named: bool = False) -> bool:
    """--force-exclude: is a file named on the command line excluded by the configuration?
    (``named``: a --stdin-filename, which need not exist.)"""
    if not named and not os.path.isfile(path):
        return False
    try:
        return config_for(path, options).is_excluded(path)
    except ConfigError:
        return False  # reported when the file is linted


def _refuse_input_as_output(output_file: str, paths: Sequence[str], stdin_filename) -> None:
    """-o naming a file the run lints (or fixes) would replace it with the report: a usage
    error, before anything is read."""
    target = os.path.realpath(output_file)
    if not os.path.isfile(target):
        return
    named = [p for p in paths if p != "-"] or ([] if "-" in paths or stdin_filename else ["."])
    for path in named:
        real = os.path.realpath(path)
        inside = os.path.isdir(real) and target.startswith(real.rstrip(os.sep) + os.sep)
        if real == target or (inside and target.endswith(SOURCE_SUFFIXES)):
            raise click.UsageError(
                f"--output-file {output_file} is a file this run lints: the report would replace it"
            )


_FIFO_WAIT_TRIES = 30  # tenths of a second an --output-file FIFO may wait for its reader


def _open_output(output_file: str) -> TextIO | None:
    """The report's stream. -o into a missing directory creates it, as ruff does. A FIFO is
    opened without blocking: with no reader, an error instead of waiting for one forever.
    None (the reason printed) when it cannot be opened."""
    directory = os.path.dirname(os.path.abspath(output_file))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        click.echo(
            f"error: cannot create the directory of --output-file {output_file}: "
            f"{exc.strerror or exc}",
            err=True,
        )
        return None
    if os.path.isdir(output_file):
        click.echo(f"error: --output-file {output_file} is a directory", err=True)
        return None
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    for attempt in range(_FIFO_WAIT_TRIES + 1):
        try:
            fd = os.open(output_file, flags, 0o666)
            break
        except OSError as exc:
            if exc.errno == errno.ENXIO and attempt < _FIFO_WAIT_TRIES:
                time.sleep(0.1)  # a reader started just after us (`distlint -o f & cat f`)
                continue
            reason = "a FIFO with no reader" if exc.errno == errno.ENXIO else exc.strerror or exc
            click.echo(f"error: cannot open --output-file {output_file}: {reason}", err=True)
            return None
    import fcntl

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.ftruncate(fd, 0)
    handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    handle.buffer.raw.name = output_file  # type: ignore[attr-defined]  # (messages name it)
    return handle


def _unsafe_fixes(flag: bool | None, paths: Sequence[str], options: LintOptions) -> bool:
    """Whether unsafe fixes count as fixable (`[*]`): the flag, else the configuration's
    `unsafe-fixes` (of the first path's configuration: the one of the run, in practice)."""
    if flag is not None:
        return flag
    try:
        return config_for(paths[0] if paths else os.getcwd(), options).unsafe_fixes
    except ConfigError:
        return False


def _run_add_noqa(paths: tuple[str, ...], options: LintOptions) -> int:
    """Write `# noqa: CODE` for every current finding; exit 0 unless a file could not be handled."""
    added = 0
    failed = False
    for result in lint_paths(list(paths) or ["."], options._replace(add_noqa=True)):
        for error in result.errors:
            click.echo(printable(str(error)), err=True)
            failed = True
        added += result.noqa_added
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return EXIT_ERROR if failed else EXIT_CLEAN


def _unified_diff(result: FileResult, before: str) -> str:
    """The diff of ``result``'s fix against ``before``, the text it was computed from."""
    import difflib  # only diffs need it

    after = result.fixed_source or ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=printable(f"a/{result.path}"),
        tofile=printable(f"b/{result.path}"),
    )
    # a line that ends in a lone CR (old Mac line endings) would be drawn over by the next
    # one on a terminal: shown ending in a newline, like every other line of the diff
    return "".join(line[:-1] + "\n" if line.endswith("\r") else line for line in lines)


def _emit(
    results,
    fmt: str,
    output_file: TextIO | None,
    context: ReportContext,
    stream: TextIO | None = None,
) -> bool:
    """Render the report; False (the reason printed) when --output-file cannot take it."""
    render = renderer(fmt)
    if fmt in FORMATS_WITH_RULES:
        from distlint.api import rule_metadata  # loads the rules: only the formats that list them

        context = context._replace(rules=rule_metadata())
    if output_file is None:
        render(results, stream or sys.stdout, context)
        return True
    try:
        with output_file:
            render(results, output_file, context)
        return True
    except OSError as exc:  # a full disk, /dev/full, a reader that went away
        message = f"cannot write --output-file {output_file.name}: {exc.strerror or exc}"
        click.echo(f"error: {message}", err=True)
        return False


def _exit_code(results: Sequence[FileResult], exit_zero: bool, diff_changed: bool = False) -> int:
    if any(r.errors for r in results):
        return EXIT_ERROR
    if exit_zero:
        return EXIT_CLEAN
    if diff_changed or any(r.findings for r in results):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _run_verify(paths: tuple[str, ...], options: LintOptions, fmt: str, verify_kwargs) -> int:
    from distlint.verify.cli import run_verify_command  # imported only when asked to run code

    if not paths:
        raise click.UsageError(
            "--verify needs the training script: distlint check --verify train.py [-- args]"
        )
    script, script_args = paths[0], tuple(paths[1:])
    if os.path.isdir(script):
        raise click.UsageError(
            f"--verify runs one training script; {script} is a directory", ctx=None
        )
    # A second path before `--` is a second script, not an argument of the first one.
    if script_args and "--" not in sys.argv[1:] and not script_args[0].startswith("-"):
        if os.path.exists(script_args[0]):
            raise click.UsageError(
                f"--verify runs one training script, got a second path {script_args[0]}; "
                "pass arguments of the script after `--`"
            )
    static: list[Finding] = []
    for result in lint_paths(
        [script],
        LintOptions(
            select=options.select,
            ignore=options.ignore,
            extend_select=options.extend_select,
            config_path=options.config_path,
            isolated=options.isolated,
        ),
    ):
        static.extend(result.findings)
        for error in result.errors:
            click.echo(printable(str(error)), err=True)
    return run_verify_command(script, script_args, fmt, static, **verify_kwargs)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path())
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@_verify_options
@click.pass_context
def verify(
    ctx: click.Context, script: str, script_args: tuple[str, ...], fmt: str, **verify_kwargs
) -> None:
    """RUN SCRIPT on 1 and N processes and compare the runs (executes your code).

    Arguments after `--` are passed to the script."""
    ctx.exit(_run_verify((script,) + tuple(script_args), LintOptions(), fmt, verify_kwargs))


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def rules_cmd(fmt: str) -> None:
    """List all rules."""
    from distlint.api import all_rules

    rules = all_rules()
    if fmt == "json":
        import json

        click.echo(
            json.dumps(
                [
                    {
                        "code": r.CODE,
                        "name": r.NAME,
                        "fix": r.FIX_SAFETY.value if r.FIX_SAFETY else None,
                        "default": r.DEFAULT_ENABLED,
                        "summary": r.summary(),
                    }
                    for r in rules
                ],
                indent=2,
            )
        )
        return
    for r in rules:
        fixable = f"fix: {r.FIX_SAFETY.value:<6}" if r.FIX_SAFETY else "fix: -     "
        opt_in = "" if r.DEFAULT_ENABLED else " (opt-in)"
        click.echo(f"{r.CODE}  {r.NAME:<32} {fixable}  {r.summary()}{opt_in}")


@main.command("rule")
@click.argument("code")
def rule_cmd(code: str) -> None:
    """Print the documentation of rule CODE (or its name)."""
    from distlint.api import lookup_rule

    try:
        rule = lookup_rule(code)
    except KeyError:
        from distlint.api import rule_suggestion

        raise click.BadParameter(
            f"no rule {code!r}{rule_suggestion(code)} (see `distlint rules`)", param_hint="CODE"
        ) from None
    click.echo(rule.docs(), nl=False)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
def clean(paths: tuple[str, ...]) -> None:
    """Remove the result cache (.distlint_cache) of the project of PATHS (default: here)."""
    from distlint.api import clean_cache as remove_cache

    roots = []
    for path in paths or (".",):
        try:
            roots.append(config_for(path).root or os.getcwd())
        except ConfigError:
            roots.append(os.getcwd())
    for root in dict.fromkeys(os.path.abspath(r) for r in roots):
        removed = remove_cache(root)
        if removed:
            click.echo(f"removed {removed}")


@main.command()
def lsp() -> None:
    """Start the language server over stdio (needs the `lsp` extra)."""
    import importlib.util

    missing = [m for m in ("pygls", "lsprotocol") if importlib.util.find_spec(m) is None]
    if missing:
        from distlint.install_hint import extra_install_command

        click.echo(
            "error: the language server needs the lsp extra: "
            f"{extra_install_command('lsp')} (missing: {', '.join(missing)})",
            err=True,
        )
        sys.exit(EXIT_ERROR)
    from distlint.lsp_start import serve
    from distlint.lsp_worker import Worker

    collector.startup_over()  # pygls is loaded: the server's long life starts here
    worker = _EARLY_WORKER or Worker()
    worker.start()  # it imports LibCST and the rules while this process imports pygls
    serve(worker, _load_server)


def _load_server():
    """The pygls server, imported while the first diagnostics go out (distlint.lsp_start)."""
    from distlint import lsp

    return lsp


if __name__ == "__main__":  # pragma: no cover
    main()
