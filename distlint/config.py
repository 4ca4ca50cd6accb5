"""Configuration: ``[tool.distlint]`` in pyproject.toml or a ``distlint.toml``.

Discovery: the nearest ``pyproject.toml`` with a ``[tool.distlint]`` table (or a ``distlint.toml``)
in the linted file's directory or above. Command-line options override the file. ``--config``
names a file; ``--isolated`` ignores every file. Parsing uses ``tomllib`` only: nothing from the
user's project is ever executed.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from distlint.files import not_regular, read_stable
from distlint.model import FileError


class ConfigError(Exception):
    """A configuration problem: reported with the file and key, exit status 2."""

    def __init__(self, message: str, path: str | None = None, key: str | None = None):
        self.path = path
        self.key = key
        where = path or "<command line>"
        if key:
            where += f": [tool.distlint] {key}"
        super().__init__(f"{where}: {message}")


DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".env",
    "env",
    "__pycache__",
    "build",
    "dist",
    "site-packages",
    "node_modules",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".distlint_cache",
    ".eggs",
    "*.egg-info",
    ".ipynb_checkpoints",
)


# Bytes of one file that distlint parses: LibCST needs ~650 MB of memory and ~13 s per MiB of
# ordinary code (a 1 MB one-line list: 30 s), so bigger files are refused with an error
# (`max-file-size`; 0: no budget). The largest hand-written modules of big projects
# (transformers' trainer.py, modeling_utils.py) are 250-350 KB.
DEFAULT_MAX_FILE_SIZE = 512 << 10


class Config(NamedTuple):
    select: tuple[str, ...] = ()  # empty: every default-enabled rule
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    rule_options: tuple[
        tuple[str, tuple[tuple[str, Any], ...]], ...
    ] = ()  # (CODE, ((key, value), ...))
    # First-party source folders for import resolution (ruff's `src`), relative to `root`.
    src: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; 0: no budget
    # "normal": a run also reports the findings of the project modules its files import that
    # set up distributed training themselves (a Trainer class in trainer.py), as mypy does;
    # "silent": they inform the analysis but only the files given are reported.
    follow_imports: str = "normal"
    root: str | None = None  # directory of the config file: patterns are relative to it
    source: str | None = None  # path of the config file

    # ------------------------------------------------------------ rule selection
    def enabled_codes(
        self, all_codes: Mapping[str, bool], path: str | None = None
    ) -> frozenset[str]:
        """Codes to run on ``path``. ``all_codes`` maps each code to whether it is on by default."""
        if self.select:
            chosen = {c for c in all_codes if _matches(c, self.select)}
        else:
            chosen = {c for c, default in all_codes.items() if default}
        chosen |= {c for c in all_codes if _matches(c, self.extend_select, explicit_only=False)}
        chosen -= {c for c in chosen if _matches(c, self.ignore)}
        if path is not None and self.per_file_ignores:
            rel = self.relative(path)
            for pattern, codes in self.per_file_ignores:
                if _glob_match(rel, pattern):
                    chosen -= {c for c in chosen if _matches(c, codes)}
        return frozenset(chosen)

    def options_for(self, code: str) -> dict[str, Any]:
        for c, items in self.rule_options:
            if c == code:
                return dict(items)
        return {}

    def applicability_override(self, code: str) -> str | None:
        if _matches(code, self.extend_unsafe_fixes):
            return "unsafe"
        if _matches(code, self.extend_safe_fixes):
            return "safe"
        return None

    # ------------------------------------------------------------ paths
    def relative(self, path: str) -> str:
        if self.root is not None:
            # the cheap way first; realpath only when links put the file outside the root
            for resolve in (os.path.abspath, os.path.realpath):
                rel = os.path.relpath(resolve(path), resolve(self.root))
                if not rel.startswith(".."):
                    return PurePosixPath(Path(rel)).as_posix()
        return PurePosixPath(Path(path)).as_posix()

    def is_excluded(self, path: str) -> bool:
        """True when ``path`` (a file or directory) matches exclude / extend-exclude."""
        return _exclusion_matcher(self.exclude + self.extend_exclude)(
            self.relative(path), os.path.basename(os.path.normpath(path))
        )

    def with_overrides(self, **changes: Any) -> Config:
        return self._replace(**{k: v for k, v in changes.items() if v is not None})


def _matches(code: str, selectors: Iterable[str], explicit_only: bool = False) -> bool:
    for sel in selectors:
        sel = sel.strip().upper()
        if sel == "ALL" or code.startswith(sel):
            return True
    return False


def _glob_match(rel: str, pattern: str) -> bool:
    return _exclusion_matcher((pattern,))(rel, rel.rsplit("/", 1)[-1])


@lru_cache(maxsize=64)
def _exclusion_matcher(patterns: tuple[str, ...]) -> Callable[[str, str], bool]:
    """One compiled test for a list of glob patterns (directory walks ask it for every entry).

    A pattern matches the path relative to the configuration root; one without a slash also
    matches any single path component (``build``, ``*.egg-info``); one with a slash also matches
    everything below it (``legacy/`` excludes ``legacy/a/b.py``).
    """
    stripped = [p.rstrip("/") for p in patterns]
    whole = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in stripped) or "(?!)")
    component = re.compile(
        "|".join(f"(?:{fnmatch.translate(p)})" for p in stripped if "/" not in p) or "(?!)"
    )
    prefixes = tuple(p + "/" for p in stripped if "/" in p)

    def matches(rel: str, name: str) -> bool:
        if whole.match(rel) or component.match(name):
            return True
        if prefixes and rel.startswith(prefixes):
            return True
        return any(component.match(part) for part in rel.split("/")[:-1])

    return matches


# ------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------

_LIST_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "extend-safe-fixes",
    "extend-unsafe-fixes",
    "src",
}
_KNOWN_KEYS = _LIST_KEYS | {"per-file-ignores", "unsafe-fixes", "max-file-size", "follow-imports"}
FOLLOW_IMPORTS = ("normal", "silent")


def find_config_file(start: str) -> Path | None:
    """The nearest distlint.toml, or pyproject.toml with [tool.distlint], at or above ``start``."""
    here = Path(os.path.realpath(start))  # realpath: no exception on symlink loops
    if not here.is_dir():
        here = here.parent
    return _find_from_dir(str(here))


# A configuration file is small; more than this is not a configuration (and is not read).
MAX_CONFIG_SIZE = 16 << 20


def config_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be a configuration file (missing, a directory, a FIFO...), or None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"configuration file {path} not found"
    except OSError as exc:
        return f"configuration file {path}: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"configuration file {path} is a directory, not a file"
    return f"configuration file {path} {not_regular(path, mode).message}"


def _read_config(path: Path) -> bytes:
    """The bytes of a configuration file; raises ConfigError. Never blocks on a FIFO."""
    read = read_stable(str(path), MAX_CONFIG_SIZE)
    if isinstance(read, FileError):
        raise ConfigError(read.message, str(path))
    return read[0]


def _parse_toml(raw: bytes, path: Path) -> dict[str, Any]:
    """TOML from bytes; raises ConfigError naming the file for bad UTF-8, bad TOML, deep nesting."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"not UTF-8 (TOML must be): byte {raw[exc.start]:#04x} at line {line}", str(path)
        ) from None
    if sys.version_info >= (3, 11):  # imported here: a run without a TOML file never needs it
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", str(path)) from None
    except RecursionError:
        raise ConfigError("invalid TOML: nested too deeply to read", str(path)) from None


@lru_cache(maxsize=256)
def _find_from_dir(directory: str) -> Path | None:
    here = Path(directory)
    for candidate in (here / "distlint.toml", here / ".distlint.toml"):
        if os.path.exists(candidate) and not os.path.isdir(candidate):
            return candidate  # a FIFO or unreadable one is reported when it is loaded
    pyproject = here / "pyproject.toml"
    if os.path.lexists(pyproject):
        # An existing pyproject.toml that cannot be read, decoded or parsed is never skipped
        # silently (the run would use the defaults): loading it reports the problem, exit 2. A
        # broken one that does not mention distlint belongs to other tools and is passed over.
        try:
            raw = _read_config(pyproject)
        except ConfigError:
            if not os.path.exists(pyproject):
                raw = b""  # a broken symbolic link: nothing there
            else:
                return pyproject
        if b"distlint" not in raw:
            # no table of ours can be in it (short of a key spelled with \u escapes), broken or
            # not: not parsed (parsing imports tomllib, a tenth of a cold start's own work)
            data = {}
        else:
            try:
                data = _parse_toml(raw, pyproject)
            except ConfigError:
                return pyproject
        if isinstance(data.get("tool"), dict) and "distlint" in data["tool"]:
            return pyproject
    if here.parent == here:
        return None
    return _find_from_dir(str(here.parent))


@lru_cache(maxsize=64)
def load_config_file(path: str) -> Config:
    """Parse and validate one configuration file. Raises ConfigError."""
    p = Path(path)
    data = _parse_toml(_read_config(p), p)
    tool = data.get("tool", {})
    if not isinstance(tool, dict):  # `tool = 1`: no [tool.distlint] table can be in it
        raise ConfigError(f"`tool` must be a table, got {_show(tool)}", str(p))
    if p.name == "pyproject.toml":
        table = tool.get("distlint", {})
    else:
        table = tool.get("distlint", data)
    if not isinstance(table, dict):
        raise ConfigError("expected a table", str(p), "tool.distlint")
    return config_from_table(table, str(p), str(p.resolve().parent))


def config_from_table(
    table: Mapping[str, Any], source: str | None = None, root: str | None = None
) -> Config:
    from distlint.registry import all_rules

    rules = all_rules()
    by_key = {}
    for r in rules:
        by_key[r.CODE] = r
        by_key[r.NAME] = r
    values: dict[str, Any] = {}
    rule_options: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if key in _LIST_KEYS:
            values[key.replace("-", "_")] = _string_list(key, value, source)
        elif key in _SETTING_READERS:
            values[key.replace("-", "_")] = _SETTING_READERS[key](key, value, source)
        elif key in by_key:
            _read_rule_table(by_key[key], key, value, source, rule_options)
        else:
            _read_bare_option(rules, key, value, source, rule_options)
    if "exclude" in values:
        values["exclude"] = tuple(values["exclude"])
    values["rule_options"] = tuple(
        (code, tuple(sorted(opts.items()))) for code, opts in sorted(rule_options.items())
    )
    return Config(root=root, source=source, **values)


_SELECTOR_LISTS = ("select", "ignore", "extend-select", "extend-safe-fixes", "extend-unsafe-fixes")


def _string_list(key: str, value: Any, source: str | None) -> tuple[str, ...]:
    """A list-of-strings key (`select`, `src`, ...), its selectors checked."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"expected a list of strings, got {_show(value)}", source, key)
    if key in _SELECTOR_LISTS:
        value = [_check_selector(v, source, key) for v in value]
    if key == "src" and any(not v.strip() or "\0" in v for v in value):
        raise ConfigError(f"expected folder paths, got {value!r}", source, key)
    return tuple(value)


def _unsafe_fixes(key: str, value: Any, source: str | None) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"expected true or false, got {_show(value)}", source, key)
    return value


def _follow_imports(key: str, value: Any, source: str | None) -> Any:
    if value not in FOLLOW_IMPORTS:
        raise ConfigError(f'expected "normal" or "silent", got {_show(value)}', source, key)
    return value


def _max_file_size(key: str, value: Any, source: str | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"expected a number of bytes (0 for no budget), got {_show(value)}", source, key
        )
    return value


def _per_file_ignores(
    key: str, value: Any, source: str | None
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError("expected a table of glob = [codes]", source, key)
    items = []
    for pattern, sel in value.items():
        if not isinstance(sel, list) or not all(isinstance(v, str) for v in sel):
            raise ConfigError(
                f"expected a list of codes for {pattern!r}, got {_show(sel)}", source, key
            )
        where = f"{key}.{pattern!r}"
        items.append((pattern, tuple(_check_selector(v, source, where) for v in sel)))
    return tuple(items)


# The scalar and table keys: each reader checks its value and returns what `Config` holds.
_SETTING_READERS: dict[str, Callable[[str, Any, str | None], Any]] = {
    "unsafe-fixes": _unsafe_fixes,
    "follow-imports": _follow_imports,
    "max-file-size": _max_file_size,
    "per-file-ignores": _per_file_ignores,
}


def _read_rule_table(
    rule: Any, key: str, value: Any, source: str | None, rule_options: dict[str, dict[str, Any]]
) -> None:
    """A `[tool.distlint.DL201]` (or by name) table of one rule's options."""
    if not isinstance(value, dict):
        raise ConfigError("expected a table of rule options", source, key)
    for opt_name, opt_value in value.items():
        opt = rule.OPTIONS.get(opt_name)
        if opt is None:
            known = ", ".join(rule.OPTIONS) or "none"
            raise ConfigError(
                f"unknown option {opt_name!r} for {rule.CODE} (known: {known})",
                source,
                f"{key}.{opt_name}",
            )
        problem = opt.validate(opt_value)
        if problem:
            raise ConfigError(problem, source, f"{key}.{opt_name}")
        rule_options.setdefault(rule.CODE, {})[opt_name] = opt_value


def _read_bare_option(
    rules: Any, key: str, value: Any, source: str | None, rule_options: dict[str, dict[str, Any]]
) -> None:
    """A top-level key that names one rule's option; anything else is an unknown key."""
    option_owner = [r for r in rules if key in r.OPTIONS]
    if len(option_owner) == 1:
        rule = option_owner[0]
        problem = rule.OPTIONS[key].validate(value)
        if problem:
            raise ConfigError(problem, source, key)
        rule_options.setdefault(rule.CODE, {})[key] = value
        return
    keys = sorted(_KNOWN_KEYS | {o for r in rules for o in r.OPTIONS})
    raise ConfigError(f"unknown key {key!r} (known keys: {', '.join(keys)})", source, key)


def _show(value: Any) -> str:
    """A value in a message: its repr, cut short (a 3,000-deep array must not fill the screen)."""
    import reprlib

    return reprlib.repr(value)


def _check_selector(sel: str, source: str | None, key: str) -> str:
    """The code or prefix ``sel`` names (a rule's name becomes its code); an empty, blank or
    unknown one is an error naming the file and the key."""
    from distlint.registry import normalise_selector

    try:
        return normalise_selector(sel)
    except ValueError as exc:
        raise ConfigError(str(exc), source, key) from None


def resolve_config(path: str, explicit: str | None = None, isolated: bool = False) -> Config:
    """The configuration that applies to ``path``."""
    if isolated:
        return Config(root=os.getcwd())
    if explicit is not None:
        return load_config_file(str(Path(explicit).resolve()))
    found = find_config_file(path)
    if found is None:
        return Config(root=os.getcwd())
    return load_config_file(str(found))
