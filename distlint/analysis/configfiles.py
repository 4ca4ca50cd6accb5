"""Configuration files a training script reads: YAML, JSON and TOML, and hydra's composition.

Every file is parsed by a real library, never by hand: YAML by PyYAML (the optional extra
``distlint[yaml]``; without it the file is reported once as not read), TOML by ``tomllib`` /
``tomli``, JSON by ``json``. Each value keeps where it came from: the file, and the line where
the library gives it (YAML's node marks: ``optimizer.lr`` has a line; ``json`` and ``tomllib``
give none). Nothing is ever executed: YAML goes through PyYAML's safe loader only.

Hydra: :func:`compose_hydra` builds what ``@hydra.main(config_path=..., config_name=...)``
hands the task function from the files alone: the primary config's defaults list (config
groups, ``group@package: option``, ``_self_``, ``override group: option``, nested defaults of
group files, ``# @package`` headers), without command-line overrides (they are not in the code).
"""

from __future__ import annotations

import enum
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

YAML_MISSING = "YAML config not read: PyYAML is not installed (pip install 'distlint[yaml]')"
YAML_SUFFIXES = (".yaml", ".yml")
# Bounds on what one file may cost, whatever its size: values nested deeper than MAX_DEPTH
# (no configuration is), and YAML aliases that repeat more than MAX_ALIAS_VALUES values in all
# (a 600-byte "billion laughs" file expands to hundreds of millions of them).
MAX_DEPTH = 100
MAX_ALIAS_VALUES = 100_000


class ConfigFileError(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class Entry:
    """One value of a configuration: a mapping (dict of entries), a list of entries or a
    scalar, with the file and line it comes from (line None where the format gives none)."""

    __slots__ = ("value", "file", "line", "text")

    def __init__(
        self,
        value: Any,
        file: str,
        line: int | None = None,
        text: str | None = None,  # a YAML scalar's source text (`3e-4`, not 0.0003)
    ) -> None:
        self.value = value
        self.file = file
        self.line = line
        self.text = text

    def __repr__(self) -> str:
        return f"Entry({self.value!r}, {self.file!r}, line={self.line})"

    def get(self, key: str | int) -> Entry | None:
        if isinstance(self.value, dict):
            found = self.value.get(key)
            if found is None and isinstance(key, int):
                found = self.value.get(str(key))
            return found
        if isinstance(self.value, list) and isinstance(key, int) and -len(self.value) <= key:
            return self.value[key] if key < len(self.value) else None
        return None

    def find(self, keys: Iterable[str | int]) -> Entry | None:
        node: Entry | None = self
        for key in keys:
            if node is None:
                return None
            node = node.get(key)
        return node

    def plain(self) -> Any:
        """The value as plain Python data (dicts, lists, scalars)."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value

    @property
    def is_mapping(self) -> bool:
        return isinstance(self.value, dict)


class ConfigDoc(NamedTuple):
    path: str
    kind: str  # yaml | json | toml
    root: Entry
    package: str | None = None  # hydra's `# @package` header, when present


def kind_of(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith(YAML_SUFFIXES):
        return "yaml"
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".toml"):
        return "toml"
    return None


def parse(path: str, data: bytes) -> ConfigDoc:
    """Parse one configuration file. Raises :class:`ConfigFileError` (message, line)."""
    kind = kind_of(path)
    if kind is None:
        raise ConfigFileError("not a YAML, JSON or TOML file: not read")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"not UTF-8 text: {exc.reason}") from None
    if kind == "yaml":
        return ConfigDoc(path, kind, _parse_yaml(path, text), _package_header(text))
    if kind == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigFileError(f"invalid JSON: {exc.msg}", exc.lineno) from None
        except RecursionError:
            raise ConfigFileError(_too_deep("JSON")) from None
        return ConfigDoc(path, kind, _from_plain(value, path, "JSON"))
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = re.search(r"line (\d+)", message)
        raise ConfigFileError(f"invalid TOML: {message}", int(m.group(1)) if m else None) from None
    except RecursionError:
        raise ConfigFileError(_too_deep("TOML")) from None
    return ConfigDoc(path, kind, _from_plain(value, path, "TOML"))


def _too_deep(kind: str) -> str:
    return f"{kind} nested more than {MAX_DEPTH} levels deep: not read"


def _from_plain(value: Any, path: str, kind: str, depth: int = 0) -> Entry:
    if depth > MAX_DEPTH:
        raise ConfigFileError(_too_deep(kind))
    if isinstance(value, dict):
        return Entry({k: _from_plain(v, path, kind, depth + 1) for k, v in value.items()}, path)
    if isinstance(value, list):
        return Entry([_from_plain(v, path, kind, depth + 1) for v in value], path)
    return Entry(value, path)


def _parse_yaml(path: str, text: str) -> Entry:
    try:
        import yaml
    except ImportError:
        raise ConfigFileError(YAML_MISSING) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_node() if loader.check_node() else None
        if node is None:
            return Entry({}, path, 1)
        _check_aliases(loader, node)
        return _convert(loader, node, path, set())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigFileError(f"invalid YAML: {problem}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise ConfigFileError(_too_deep("YAML")) from None
    finally:
        loader.dispose()


def _check_aliases(loader: Any, root: Any) -> None:
    """Refuse a document whose aliases expand to more than MAX_ALIAS_VALUES repeated values
    (or that nests deeper than MAX_DEPTH), from the composed node graph, before any value is
    built: each node's expanded size is counted once (memoised), so a bomb costs its size.
    Merge keys are resolved here (``<<: *defaults``), as the conversion sees them."""
    import yaml

    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:  # a recursive alias: converted as a null
            return 1
        if depth > MAX_DEPTH:
            raise ConfigFileError(_too_deep("YAML"), node.start_mark.line + 1)
        total = 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            active.add(key)
            if isinstance(node, yaml.MappingNode):
                loader.flatten_mapping(node)
                children = [v for _, v in node.value]
            else:
                children = node.value
            for child in children:
                total += size(child, depth + 1)
            active.discard(key)
        sizes[key] = total
        return total

    expanded = size(root, 0)
    if expanded - len(sizes) > MAX_ALIAS_VALUES:
        raise ConfigFileError(
            f"YAML aliases expand to {expanded:,} values, over the limit of "
            f"{MAX_ALIAS_VALUES:,} repeated ones: not read"
        )


def _convert(loader: Any, node: Any, path: str, active: set[int]) -> Entry:
    import yaml

    line = node.start_mark.line + 1
    if id(node) in active:  # a recursive alias: stop rather than loop
        return Entry(None, path, line)
    if isinstance(node, yaml.MappingNode):
        active.add(id(node))
        try:
            loader.flatten_mapping(node)  # merge keys (`<<: *defaults`)
            out: dict[Any, Entry] = {}
            for key_node, value_node in node.value:
                key = _scalar(loader, key_node)
                try:
                    hash(key)
                except TypeError:
                    continue
                out[key] = _convert(loader, value_node, path, active)
            return Entry(out, path, line)
        finally:
            active.discard(id(node))
    if isinstance(node, yaml.SequenceNode):
        active.add(id(node))
        try:
            return Entry([_convert(loader, v, path, active) for v in node.value], path, line)
        finally:
            active.discard(id(node))
    return Entry(_scalar(loader, node), path, line, node.value)


def _scalar(loader: Any, node: Any) -> Any:
    import yaml

    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError:  # an application tag: keep the text
        return node.value


_PACKAGE_RE = re.compile(r"#\s*@package\s+(\S+)")


def _package_header(text: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return None
        m = _PACKAGE_RE.match(stripped)
        if m:
            return m.group(1)
    return None


# YAML 1.2 floats (`3e-4`), which OmegaConf and hydra read as floats and PyYAML (YAML 1.1,
# which wants a dot: `3.0e-4`) as strings.
_FLOAT_12 = re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)$|^[-+]?\d[\d_]*\.\d*$")


def omegaconf_scalar(entry: Entry) -> Any:
    """The value OmegaConf / hydra give a YAML scalar (``3e-4`` is a float there)."""
    value = entry.value
    if isinstance(value, str) and entry.text is not None and _FLOAT_12.match(value.strip()):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            return value
    return value


# --------------------------------------------------------------------------------- merging
def merge(base: Entry | None, top: Entry | None) -> Entry | None:
    """``top`` over ``base``: mappings merge key by key, anything else is replaced."""
    if base is None:
        return top
    if top is None:
        return base
    if isinstance(base.value, dict) and isinstance(top.value, dict):
        out = dict(base.value)
        for key, value in top.value.items():
            out[key] = merge(out.get(key), value)
        return Entry(out, top.file, top.line)
    return top


def at_package(package: str, entry: Entry) -> Entry:
    """``entry`` placed under the dotted ``package`` (``""``: the root)."""
    for part in reversed([p for p in package.split(".") if p]):
        entry = Entry({part: entry}, entry.file, entry.line)
    return entry


# --------------------------------------------------------------------------------- hydra
class _Entries(enum.Enum):
    """What an item of a defaults list brings in."""

    SELF = "self"  # `_self_`: the config's own keys
    GROUP = "group"  # `db: mysql`: an option of a config group
    CONFIG = "config"  # `other`: another config of the same group


class _Default(NamedTuple):
    kind: _Entries
    group: str = ""  # for group: `optimizer`, `/db`, `server/db`
    option: Any = None  # str, list of str (multi-select), or None (`group: null`)
    package: str | None = None
    override: bool = False
    optional: bool = False


def _defaults(entry: Entry | None) -> list[_Default]:
    out: list[_Default] = []
    if entry is None or not isinstance(entry.value, list):
        return out
    for item in entry.value:
        value = item.value
        if isinstance(value, str):
            if value == "_self_":
                out.append(_Default(_Entries.SELF))
            else:
                name, _, package = value.partition("@")
                out.append(_Default(_Entries.CONFIG, option=name, package=package or None))
        elif isinstance(value, dict) and len(value) == 1:
            ((key, option_entry),) = value.items()
            key = str(key)
            override = key.startswith("override ")
            optional = key.startswith("optional ")
            key = key.split(" ", 1)[1].strip() if (override or optional) else key
            group, _, package = key.partition("@")
            out.append(
                _Default(
                    _Entries.GROUP,
                    group,
                    option_entry.plain(),
                    package or None,
                    override=override,
                    optional=optional,
                )
            )
    return out


def compose_hydra(project: Any, config_dir: str, config_name: str) -> Entry | None:
    """The configuration ``@hydra.main(config_path=config_dir, config_name=config_name)``
    composes by default, from the files alone; None when the primary file is missing."""
    overrides: dict[str, Any] = {}
    primary = _hydra_file(project, config_dir, "", config_name)
    if primary is None:
        return None
    for d in _defaults(primary.root.get("defaults")):
        if d.kind is _Entries.GROUP and d.override:
            overrides[d.group.lstrip("/")] = d.option
    return _Composer(project, config_dir, overrides).compose("", primary, "", set())


def _hydra_file(project: Any, config_dir: str, group: str, name: str) -> ConfigDoc | None:
    base = os.path.join(config_dir, *[p for p in group.split("/") if p])
    stem = os.path.join(base, *name.split("/"))
    if stem.lower().endswith(YAML_SUFFIXES):
        found: ConfigDoc | None = project.config_file(stem)
        return found
    for suffix in YAML_SUFFIXES:
        if project.is_file(os.path.normpath(stem + suffix)):
            found = project.config_file(stem + suffix)
            return found
    return None


class _Composer:
    """Hydra's defaults-list composition over the project's config files, with the group
    options the primary config overrides."""

    def __init__(self, project: Any, config_dir: str, overrides: dict[str, Any]) -> None:
        self.project = project
        self.config_dir = config_dir
        self.overrides = overrides

    def compose(self, group: str, doc: ConfigDoc, package: str, seen: set[str]) -> Entry | None:
        if doc.path in seen:
            return None  # a config that includes itself: composed once
        seen = seen | {doc.path}
        if doc.package is not None:
            package = "" if doc.package == "_global_" else doc.package.replace("_group_", group)
        body = doc.root
        if isinstance(body.value, dict) and "defaults" in body.value:
            body = Entry(
                {k: v for k, v in body.value.items() if k != "defaults"}, body.file, body.line
            )
        items = _defaults(doc.root.get("defaults"))
        if not any(d.kind is _Entries.SELF for d in items):
            items.append(_Default(_Entries.SELF))  # hydra >= 1.1: the config's own keys come last
        result: Entry | None = None
        for d in items:
            if d.kind is _Entries.SELF:
                result = merge(result, at_package(package, body) if body.value else None)
            elif d.kind is _Entries.CONFIG:
                result = merge(result, self._config(group, d, package, seen))
            elif not d.override:
                for entry in self._group(group, d, package, seen):
                    result = merge(result, entry)
        return result if result is not None else Entry({}, doc.path, 1)

    def _config(self, group: str, d: _Default, package: str, seen: set[str]) -> Entry | None:
        """`- other` (or `- other@pkg`): another config of the same group, merged in."""
        child = _hydra_file(self.project, self.config_dir, group, str(d.option))
        if child is None:
            return None
        return self.compose(group, child, d.package if d.package is not None else package, seen)

    def _group(self, group: str, d: _Default, package: str, seen: set[str]) -> list[Entry | None]:
        """`- db: mysql` (a list: several options; overridden by the primary config): the
        chosen options of a config group, each under its package."""
        absolute = d.group.startswith("/")
        child_group = (
            d.group.lstrip("/") if absolute else "/".join(p for p in (group, d.group) if p)
        )
        option = self.overrides.get(child_group, d.option)
        out: list[Entry | None] = []
        for opt in option if isinstance(option, list) else [option]:
            if opt is None or opt == "null" or not isinstance(opt, str):
                continue
            child = _hydra_file(self.project, self.config_dir, child_group, opt)
            if child is not None:
                pkg = _group_package(d, package, child_group)
                out.append(self.compose(child_group, child, pkg, seen))
        return out


def _group_package(d: _Default, package: str, child_group: str) -> str:
    """Where a group option's keys go: `@_global_` the root, `@pkg` (`_here_`: none) below the
    containing config's package, else the group's own path."""
    if d.package == "_global_":
        return ""
    if d.package is not None:  # relative to the containing config's package
        own = "" if d.package == "_here_" else d.package
        return ".".join(p for p in (package, own) if p)
    return child_group.replace("/", ".")


def iter_leaves(
    entry: Entry, prefix: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], Entry]]:
    """(key path, entry) of every scalar below ``entry``."""
    if isinstance(entry.value, dict):
        for k, v in entry.value.items():
            yield from iter_leaves(v, (*prefix, k))
    elif isinstance(entry.value, list):
        for i, v in enumerate(entry.value):
            yield from iter_leaves(v, (*prefix, i))
    else:
        yield prefix, entry
