"""Values a script reads from configuration files: ``cfg.optimizer.lr`` -> ``configs/train.yaml``.

:func:`config_value` answers, for an expression of a module, which configuration value it reads
when it reads one: the object it is read from was built by a configuration load, and the key path
exists in that file. Loads recognised (by qualified name, any import form):

- ``OmegaConf.load(path)``, ``yaml.safe_load(f)`` / ``yaml.load`` / ``yaml.full_load``,
  ``json.load(f)`` / ``json.loads(text)``, ``tomllib.load(f)`` / ``tomli`` / ``toml.load``, where
  ``f`` is ``open(path)`` (also through ``with ... as f``) or ``Path(path).open()`` / ``.read_text()``,
  and ``path`` is a literal, a constant, ``os.path.join`` / ``Path`` ``/`` of literals and
  ``__file__``'s folder, or an argparse argument's default (``--config configs/train.yaml``);
- the task function of ``@hydra.main(config_path=..., config_name=...)`` and
  ``hydra.compose(config_name=...)`` under ``initialize(config_path=...)``, composed from the
  defaults list (see :func:`distlint.analysis.configfiles.compose_hydra`);
- pass-through wrappers (``OmegaConf.create`` / ``to_container`` / ``merge``, ``dict``,
  ``EasyDict``, ``SimpleNamespace(**cfg)``, ``copy.deepcopy``), sub-configs
  (``opt_cfg = cfg.optimizer``; ``cfg.get("lr")``; ``OmegaConf.select(cfg, "optimizer.lr")``), and
  ``self.cfg = cfg`` / parameters of in-file callers;
- argparse: ``args.lr`` from ``parser.parse_args()`` is the value of a config file that overrides
  the parser's defaults (``parser.set_defaults(**yaml.safe_load(...))``,
  ``args.__dict__.update(cfg)``, ``vars(args).update(cfg)``, ``for k, v in cfg.items():
  setattr(args, k, v)``), else the ``default=`` of its ``add_argument`` (kind ``argparse``).

:func:`config_component` reads ``instantiate(cfg.optimizer, ...)`` (hydra's ``_target_``,
torchtune's ``_component_``): the class it builds and its keyword arguments from the file.
Nothing is executed; a path that cannot be known statically yields None.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import libcst as cst

from distlint.analysis import knowledge as K
from distlint.analysis.configfiles import (
    ConfigFileError,
    Entry,
    compose_hydra,
    kind_of,
    merge,
    omegaconf_scalar,
)
from distlint.analysis.index import Index, dotted_name, string_value


class ConfigValue(NamedTuple):
    value: Any
    file: str
    line: int | None
    key: str
    text: str | None = None  # the value as written (`3e-4`), when the format keeps it
    kind: str = "file"  # file | argparse (an add_argument default in the script itself)

    def describe(self, root: str | None = None) -> str:
        """``configs/train.yaml: optimizer.lr = 3e-4`` (the file relative to ``root``)."""
        where = self.file
        if root:
            rel = os.path.relpath(self.file, root)
            if not rel.startswith(".."):
                where = rel.replace(os.sep, "/")
        if self.line is not None:
            where += f":{self.line}"
        shown = self.text if self.text is not None else repr(self.value)
        if self.kind == "argparse":
            return f"{where}: default of {self.key} = {shown}"
        return f"{where}: {self.key} = {shown}"


class Component(NamedTuple):
    """``instantiate(cfg.optimizer, ...)``: what the config node builds."""

    target: str  # qualified name from `_target_` / `_component_`
    node: ConfigValue  # the config mapping itself (value: plain dict)
    kwargs: dict[str, ConfigValue]
    partial: bool = False  # hydra `_partial_: true`: a factory, called later


_LOADS_PATH = {"omegaconf.OmegaConf.load": "omegaconf", "toml.load": "toml"}
_LOADS_STREAM = {
    "yaml.safe_load": "yaml",
    "yaml.load": "yaml",
    "yaml.full_load": "yaml",
    "yaml.unsafe_load": "yaml",
    "json.load": "json",
    "json.loads": "json",
    "tomllib.load": "toml",
    "tomllib.loads": "toml",
    "tomli.load": "toml",
    "tomli.loads": "toml",
    "toml.loads": "toml",
}
_PASS_THROUGH = frozenset(
    {
        "omegaconf.OmegaConf.create",
        "omegaconf.OmegaConf.to_container",
        "omegaconf.OmegaConf.to_object",
        "omegaconf.OmegaConf.structured",
        "omegaconf.DictConfig",
        "omegaconf.dictconfig.DictConfig",
        "dict",
        "easydict.EasyDict",
        "types.SimpleNamespace",
        "argparse.Namespace",
        "box.Box",
        "ml_collections.ConfigDict",
        "copy.deepcopy",
        "copy.copy",
        "float",
        "int",
    }
)
_INSTANTIATE = K.CONFIG_INSTANTIATE
_HYDRA_MAIN = "hydra.main"
_HYDRA_COMPOSE = ("hydra.compose", "hydra.experimental.compose")
_HYDRA_INIT = ("hydra.initialize", "hydra.experimental.initialize")
_MAX_DEPTH = 12

# Calls whose result is the path their one argument names.
_PATH_KEEPING_CALLS = (
    "os.path.abspath",
    "os.path.realpath",
    "os.path.normpath",
    "os.path.expanduser",
    "str",
    "os.fspath",
    "pathlib.Path",
    "pathlib.PurePath",
)


class _Here:
    """The linted module, in the shape of a ModuleInfo (for its own helper functions)."""

    __slots__ = ("index", "path")

    def __init__(self, index: Index, path: str) -> None:
        self.index = index
        self.path = path


class _Located(NamedTuple):
    """An expression's value is the config ``root`` at ``keys``, read by a ``flavor`` loader."""

    root: Entry | None  # None: an argparse namespace
    keys: tuple[Any, ...] = ()
    flavor: str = "yaml"
    parser: cst.Call | None = None  # for argparse namespaces


def config_value(
    facts_or_index: Any, node: cst.CSTNode, project: Any, path: str | None
) -> ConfigValue | None:
    """The :class:`ConfigValue` ``node`` reads, when it reads a value of a configuration file
    (or an argparse default); None otherwise. Memoised per node in ``project.memo``."""
    index: Index = getattr(facts_or_index, "index", facts_or_index)
    memo = project.memo if project is not None else None
    key = ("configsource.value", id(index), id(node))
    if memo is not None and key in memo and memo[key][0] is node:
        known: ConfigValue | None = memo[key][1]
        _replay(project, memo[key][2])  # what it consulted (config files, modules) counts
        return known
    resolver = _Resolver(index, project, path)
    result: ConfigValue | None
    result, deps = _remembered(project, lambda: resolver.value(node))
    if memo is not None:
        memo[key] = (node, result, deps)
    return result


def _remembered(project: Any, compute: Callable[[], Any]) -> tuple[Any, Any]:
    """``compute()`` and what it consulted (a project that records it: see Project.remember)."""
    remember = getattr(project, "remember", None)
    return remember(compute) if remember is not None else (compute(), None)


def _replay(project: Any, deps: Any) -> None:
    if deps is not None:
        project.replay(deps)


def config_component(
    facts_or_index: Any, call: cst.Call, project: Any, path: str | None, any_callee: bool = False
) -> Component | None:
    """For ``instantiate(cfg.x, ...)``: the :class:`Component` the config node describes
    (``any_callee``: the caller knows the callee instantiates config nodes)."""
    index: Index = getattr(facts_or_index, "index", facts_or_index)
    if not isinstance(call, cst.Call) or (
        not any_callee and _qual(index, call.func) not in _INSTANTIATE
    ):
        return None
    arg = Index.argument(call, "config", 0)
    if arg is None:
        return None
    resolver = _Resolver(index, project, path)
    for loc in resolver.locate(arg.value, 0, set()):
        component = _component_at(resolver, loc)
        if component is not None:
            return component
    return None


def _component_at(resolver: _Resolver, loc: _Located) -> Component | None:
    """The component a located config table describes (`_target_:` or `_component_:`)."""
    if loc.root is None:
        return None
    entry = loc.root.find(loc.keys)
    if entry is None or not entry.is_mapping:
        return None
    target_entry = entry.get("_target_") or entry.get("_component_")
    if target_entry is None or not isinstance(target_entry.value, str):
        return None
    dotted = ".".join(str(k) for k in loc.keys)
    kwargs = {}
    for name, sub in entry.value.items():
        if isinstance(name, str) and not (name.startswith("_") and name.endswith("_")):
            kwargs[name] = resolver.to_value(loc.root, sub, f"{dotted}.{name}", loc.flavor)
    partial = entry.get("_partial_")
    return Component(
        target_entry.value,
        resolver.to_value(loc.root, entry, dotted, loc.flavor),
        kwargs,
        bool(partial is not None and partial.value is True),
    )


def _argparse_dest(call: cst.Call) -> tuple[str | None, list[str]]:
    """The attribute an `add_argument` call stores into (as argparse picks it: `dest=`, else the
    first long option, else the first short one, else the positional name), and the option
    strings of the kind it was picked from."""
    found_names = [string_value(a.value) for a in call.args if a.keyword is None]
    names = [n for n in found_names if n]
    dest_arg = Index.argument(call, "dest")
    explicit = string_value(dest_arg.value) if dest_arg is not None else None
    longs = [n for n in names if n.startswith("--")]
    shorts = [n for n in names if n.startswith("-") and not n.startswith("--")]
    plain = [n for n in names if not n.startswith("-")]
    chosen = explicit or (
        longs[0][2:] if longs else shorts[0][1:] if shorts else plain[0] if plain else None
    )
    return chosen, longs or shorts or plain


def _updated_namespace(index: Index, receiver: cst.BaseExpression) -> cst.BaseExpression | None:
    """`args` in `args.__dict__.update(...)` or `vars(args).update(...)`."""
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "__dict__":
        return receiver.value
    if isinstance(receiver, cst.Call) and _qual(index, receiver.func) == "vars":
        return receiver.args[0].value if receiver.args else None
    return None


class _Resolver:
    def __init__(self, index: Index, project: Any, path: str | None) -> None:
        self.index = index
        self.project = project
        self.path = os.path.abspath(path) if path and not path.startswith("<") else None
        self._busy: set[cst.Call] = set()
        self._active: set[tuple[str, str]] = set()  # project functions being followed

    # ------------------------------------------------------------------ answers
    def value(self, node: cst.CSTNode) -> ConfigValue | None:
        for loc in self.locate(node, 0, set()):
            if loc.root is None:
                found = self._argparse_value(loc)
                if found is not None:
                    return found
                continue
            entry = loc.root.find(loc.keys)
            if entry is not None:
                dotted = ".".join(str(k) for k in loc.keys)
                return self.to_value(loc.root, entry, dotted, loc.flavor)
        return None

    def to_value(self, root: Entry, entry: Entry, key: str, flavor: str) -> ConfigValue:
        entry = self._interpolated(root, entry, 0)
        if entry.is_mapping or isinstance(entry.value, list):
            value: Any = entry.plain()
        elif flavor == "omegaconf":
            value = omegaconf_scalar(entry)
        else:
            value = entry.value
        return ConfigValue(value, entry.file, entry.line, key, entry.text)

    def _interpolated(self, root: Entry, entry: Entry, depth: int) -> Entry:
        """``${optimizer.lr}`` (OmegaConf interpolation of another key) -> that key's entry."""
        value = entry.value
        if (
            depth < 8
            and isinstance(value, str)
            and value.startswith("${")
            and value.endswith("}")
            and ":" not in value
        ):
            target = root.find(value[2:-1].split("."))
            if target is not None:
                return self._interpolated(root, target, depth + 1)
        return entry

    # ------------------------------------------------------------------ locating
    def locate(self, node: cst.CSTNode, depth: int, seen: set[int]) -> list[_Located]:
        if depth > _MAX_DEPTH or id(node) in seen:
            return []
        seen = seen | {id(node)}
        index = self.index
        if isinstance(node, cst.Name):
            hydra = self._hydra_param(node)
            if hydra is not None:
                return [hydra]
            return self._via_values(node, depth, seen)
        if isinstance(node, cst.Attribute):
            own = index.attribute_assignments(node)
            if own:
                return self._via_values(node, depth, seen)
            return [
                _Located(loc.root, (*loc.keys, node.attr.value), loc.flavor, loc.parser)
                for loc in self.locate(node.value, depth + 1, seen)
            ]
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            element = node.slice[0].slice
            if not isinstance(element, cst.Index):
                return []
            key = self._key(element.value)
            if key is None:
                return []
            if index.attribute_assignments(node):
                return self._via_values(node, depth, seen)
            return [
                _Located(loc.root, (*loc.keys, key), loc.flavor, loc.parser)
                for loc in self.locate(node.value, depth + 1, seen)
                if loc.root is not None
            ]
        if isinstance(node, cst.Call):
            return self._call(node, depth, seen)
        return []

    def _key(self, node: cst.BaseExpression) -> str | int | None:
        s = string_value(node)
        if s is not None:
            return s
        if isinstance(node, cst.Integer):
            return int(node.value.replace("_", ""), 0)
        return None

    def _via_values(self, node: cst.CSTNode, depth: int, seen: set[int]) -> list[_Located]:
        out: list[_Located] = []
        for value in self.index.values_of(node):
            if value is not None:
                out.extend(self.locate(value, depth + 1, seen))
        # `args, _ = parser.parse_known_args()`: the unpacked first element
        if isinstance(node, cst.Name):
            for b in self.index.bindings_of(node):
                if b.op == "unpack" and isinstance(b.node, cst.Assign):
                    value = b.node.value
                    if isinstance(value, cst.Call) and self._is_parse_args(value):
                        out.extend(self.locate(value, depth + 1, seen))
        return out

    def _call(self, call: cst.Call, depth: int, seen: set[int]) -> list[_Located]:
        q = _qual(self.index, call.func)
        if q in _LOADS_PATH or q in _LOADS_STREAM:
            return self._loaded(call, q, depth, seen)
        if q in _PASS_THROUGH:
            for arg in call.args:
                if arg.keyword is None or arg.star == "**":
                    return self.locate(arg.value, depth + 1, seen)
            return []
        if q == "omegaconf.OmegaConf.merge":
            return self._merged(call, depth, seen)
        if q == "omegaconf.OmegaConf.select" and len(call.args) >= 2:
            return self._selected(call, depth, seen)
        if q in _HYDRA_COMPOSE:
            return self._hydra_compose(call)
        imported = self._project_function(call.func)
        if imported is not None:
            return self._returns_of(imported, depth)
        if isinstance(call.func, cst.Attribute):
            return self._method_call(call, call.func, depth, seen)
        return []

    def _loaded(self, call: cst.Call, q: str | None, depth: int, seen: set[int]) -> list[_Located]:
        """`yaml.safe_load(open(path))`, `OmegaConf.load(path)`, ...: the file's top table."""
        first = call.args[0].value if call.args else None
        if first is None:
            return []
        target = self.path_of(first, q in _LOADS_STREAM, depth, seen)
        if target is None:
            return []
        flavor = "omegaconf" if q == "omegaconf.OmegaConf.load" else "yaml"
        root = self._load(target)
        return [] if root is None else [_Located(root, (), flavor)]

    def _merged(self, call: cst.Call, depth: int, seen: set[int]) -> list[_Located]:
        """`OmegaConf.merge(a, b, ...)`: the tables merged left to right."""
        merged: Entry | None = None
        for arg in call.args:
            for loc in self.locate(arg.value, depth + 1, seen):
                if loc.root is not None and not loc.keys:
                    merged = merge(merged, loc.root)
                    break
        return [] if merged is None else [_Located(merged, (), "omegaconf")]

    def _selected(self, call: cst.Call, depth: int, seen: set[int]) -> list[_Located]:
        """`OmegaConf.select(cfg, "a.b")`: the dotted key under what `cfg` is."""
        key = string_value(call.args[1].value)
        if key is None:
            return []
        parts = tuple(key.split("."))
        return [
            _Located(loc.root, (*loc.keys, *parts), loc.flavor)
            for loc in self.locate(call.args[0].value, depth + 1, seen)
            if loc.root is not None
        ]

    def _method_call(
        self, call: cst.Call, func: cst.Attribute, depth: int, seen: set[int]
    ) -> list[_Located]:
        """`cfg.get("key")` and `parser.parse_args()`."""
        if func.attr.value == "get" and call.args:
            key = self._key(call.args[0].value)
            if key is not None:
                return [
                    _Located(loc.root, (*loc.keys, key), loc.flavor, loc.parser)
                    for loc in self.locate(func.value, depth + 1, seen)
                ]
        if self._is_parse_args(call):
            parser = self._parser_call(func.value)
            if parser is not None:
                return [_Located(None, (), "argparse", parser)]
        return []

    # ------------------------------------------------------------------ other modules
    def _project_function(self, func: cst.BaseExpression) -> tuple[Any, cst.FunctionDef] | None:
        """``load_config`` defined in this module or imported from a project module (``from
        config import load_config``, ``import config`` + ``config.load_config``): (its
        ModuleInfo, or this module's, and its FunctionDef)."""
        project, index = self.project, self.index
        here = index.local_function(func)
        if isinstance(here, cst.FunctionDef):
            return _Here(index, self.path or "<stdin>"), here
        if project is None or self.path is None:
            return None
        if isinstance(func, cst.Name):
            base, attr = func, None
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            base, attr = func.value, func.attr.value
        else:
            return None
        for stmt in self._imports_binding(base):
            target, name = self._import_target(project, stmt, base, attr)
            if target is None or name is None:
                continue
            info = project.module(target)
            if info is None:
                return None
            for fn in info.index.functions.get(name, ())[-1:]:
                return info, fn
        return None

    def _imports_binding(self, base: cst.Name) -> list[cst.CSTNode]:
        index = self.index
        statements = [b.node for b in index.bindings_of(base) if b.op == "import"]
        if not statements:  # an index that does not bind relative imports: read them here
            statements = [
                sub
                for sub in _walk_imports(index.module)
                if isinstance(sub, cst.ImportFrom) and sub.relative
            ]
        return statements

    def _import_target(
        self, project: Any, stmt: cst.CSTNode, base: cst.Name, attr: str | None
    ) -> tuple[Any, str | None]:
        """The project module an import statement binds `base` to, and the function's name there
        (`from config import load_config`, `from pkg import config` + `config.load_config`,
        `import config` + `config.load_config`); None for the module when it binds no such."""
        if isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
            return self._from_import_target(project, stmt, stmt.names, base, attr)
        if isinstance(stmt, cst.Import) and attr is not None:
            return self._plain_import_target(project, stmt, base, attr)
        return None, base.value

    def _from_import_target(
        self,
        project: Any,
        stmt: cst.ImportFrom,
        names: Sequence[cst.ImportAlias],
        base: cst.Name,
        attr: str | None,
    ) -> tuple[Any, str | None]:
        assert self.path is not None
        target = None
        name: str | None = base.value
        module = (dotted_name(stmt.module) or "") if stmt.module is not None else ""
        level = len(stmt.relative)
        for alias in names:
            imported = dotted_name(alias.name) or ""
            local = (dotted_name(alias.asname.name) or "") if alias.asname else imported
            if local != base.value:
                continue
            name = imported
            sub = project.resolve_from_import(self.path, module, imported, level)
            if sub is not None and attr is not None:  # `from pkg import config`
                target, name = sub, attr
            elif attr is None:
                target = project.resolve_import(self.path, module, level)
        return target, name

    def _plain_import_target(
        self, project: Any, stmt: cst.Import, base: cst.Name, attr: str
    ) -> tuple[Any, str | None]:
        assert self.path is not None
        target = None
        name: str | None = base.value
        for alias in stmt.names:
            full = dotted_name(alias.name) or ""
            local = (dotted_name(alias.asname.name) or "") if alias.asname else full.split(".")[0]
            if local == base.value and (alias.asname is not None or "." not in full):
                target, name = project.resolve_import(self.path, full, 0), attr
        return target, name

    def _returns_of(self, found: tuple[Any, cst.FunctionDef], depth: int) -> list[_Located]:
        info, fn = found
        key = (info.path, fn.name.value)
        if key in self._active or depth > _MAX_DEPTH:
            return []
        child = _Resolver(info.index, self.project, info.path)
        child._active = self._active | {key}
        out: list[_Located] = []
        for ret in info.index.returns.get(fn, ()):
            if ret.value is not None:
                out.extend(child.locate(ret.value, depth + 1, set()))
        return out

    # ------------------------------------------------------------------ paths
    def path_of(
        self, node: cst.BaseExpression, stream: bool, depth: int, seen: set[int]
    ) -> str | None:
        """The file a load reads: ``node`` is a path (``stream`` False) or a stream / text."""
        text = None if stream else self._path_text(node, depth)
        if text is None:
            opened = self._opened(node, depth)
            text = self._path_text(opened, depth) if opened is not None else None
        return None if text is None else self._existing(text)

    def _opened(self, node: cst.BaseExpression, depth: int) -> cst.BaseExpression | None:
        """For ``open(p)``, ``Path(p).open()``, ``Path(p).read_text()``, ``f.read()``, a name
        bound to one (``with open(p) as f``): the path expression ``p``."""
        if depth > _MAX_DEPTH:
            return None
        index = self.index
        if isinstance(node, cst.Name):
            for value in index.values_of(node):
                if isinstance(value, cst.BaseExpression):
                    found = self._opened(value, depth + 1)
                    if found is not None:
                        return found
            return None
        if not isinstance(node, cst.Call):
            return None
        q = _qual(index, node.func)
        if q in ("open", "io.open", "codecs.open") and node.args:
            return node.args[0].value
        if isinstance(node.func, cst.Attribute):
            attr = node.func.attr.value
            if attr in ("open", "read_text", "read_bytes"):
                return node.func.value
            if attr == "read":
                return self._opened(node.func.value, depth + 1)
        return None

    def _path_text(self, node: cst.BaseExpression, depth: int) -> str | None:
        """The text of a path expression when it has one value: a string, `__file__`, `+`/`/`
        joins, `.parent`, argparse defaults, and the `os.path`/`pathlib` calls that keep it."""
        if depth > _MAX_DEPTH:
            return None
        s = string_value(node)
        if s is not None:
            return s
        if isinstance(node, cst.Name):
            return self._name_path_text(node, depth)
        if isinstance(node, cst.BinaryOperation):
            return self._joined_path_text(node, depth)
        if isinstance(node, cst.Attribute):
            return self._attribute_path_text(node, depth)
        if isinstance(node, cst.Call):
            return self._call_path_text(node, depth)
        return None

    def _name_path_text(self, node: cst.Name, depth: int) -> str | None:
        if node.value == "__file__":
            return self.path
        values = [v for v in self.index.values_of(node) if isinstance(v, cst.BaseExpression)]
        texts = {self._path_text(v, depth + 1) for v in values}
        if len(texts) == 1:
            return texts.pop()
        return None

    def _joined_path_text(self, node: cst.BinaryOperation, depth: int) -> str | None:
        """`a + b` (string concatenation) and `a / b` (a `pathlib` join)."""
        if not isinstance(node.operator, (cst.Add, cst.Divide)):
            return None
        left = self._path_text(node.left, depth + 1)
        right = self._path_text(node.right, depth + 1)
        if left is None or right is None:
            return None
        return left + right if isinstance(node.operator, cst.Add) else os.path.join(left, right)

    def _attribute_path_text(self, node: cst.Attribute, depth: int) -> str | None:
        if node.attr.value == "parent":
            inner = self._path_text(node.value, depth + 1)
            return os.path.dirname(inner) if inner is not None else None
        # `args.config` with an argparse default
        for loc in self.locate(node, depth + 1, set()):
            if loc.root is None and loc.keys:
                found = self._argparse_value(loc)
                if found is not None and isinstance(found.value, str):
                    return found.value
        return None

    def _call_path_text(self, node: cst.Call, depth: int) -> str | None:
        q = _qual(self.index, node.func)
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if q == "os.path.join" and args:
            parts = [self._path_text(a, depth + 1) for a in args]
            return None if any(p is None for p in parts) else os.path.join(*parts)  # type: ignore[arg-type]
        if q == "os.path.dirname" and len(args) == 1:
            inner = self._path_text(args[0], depth + 1)
            return os.path.dirname(inner) if inner is not None else None
        if q in _PATH_KEEPING_CALLS and len(args) == 1:
            return self._path_text(args[0], depth + 1)
        if isinstance(node.func, cst.Attribute):
            return self._method_path_text(node.func, args, depth)
        return None

    def _method_path_text(
        self, func: cst.Attribute, args: list[cst.BaseExpression], depth: int
    ) -> str | None:
        """`path.resolve()`, `.absolute()`, `.expanduser()` and `.joinpath(...)`."""
        if func.attr.value in ("resolve", "absolute", "expanduser"):
            return self._path_text(func.value, depth + 1)
        if func.attr.value == "joinpath":
            base = self._path_text(func.value, depth + 1)
            parts = [self._path_text(a, depth + 1) for a in args]
            if base is None or any(p is None for p in parts):
                return None
            return os.path.join(base, *parts)  # type: ignore[arg-type]
        return None

    def _existing(self, text: str) -> str | None:
        """A path as the script names it, found in the project: absolute, else relative to the
        script's folder, then to the project root (where runs usually start)."""
        project = self.project
        if project is None:
            return None
        if os.path.isabs(text):
            candidates = [text]
        else:
            bases = [os.path.dirname(self.path)] if self.path else []
            bases.append(project.root)
            candidates = [os.path.join(b, text) for b in bases]
        for c in candidates:
            full = os.path.normpath(c)
            if kind_of(full) is not None and project.is_file(full):
                return full
        return None

    def _load(self, target: str) -> Entry | None:
        try:
            doc = self.project.config_file(target)
        except ConfigFileError:  # pragma: no cover - config_file records errors itself
            return None
        return None if doc is None else doc.root

    # ------------------------------------------------------------------ hydra
    def _hydra_param(self, node: cst.Name) -> _Located | None:
        """The first parameter of a ``@hydra.main`` task function: the composed config."""
        index = self.index
        for b in index.bindings_of(node):
            if b.op != "param":
                continue
            up = index.parent(b.node)
            fn = index.parent(up) if up is not None else None
            if not isinstance(fn, cst.FunctionDef):
                continue
            params = list(fn.params.posonly_params) + list(fn.params.params)
            if not params or params[0] is not b.node:
                continue
            for dec in fn.decorators:
                call = dec.decorator
                if isinstance(call, cst.Call) and _qual(index, call.func) == _HYDRA_MAIN:
                    name_arg = Index.argument(call, "config_name", 1)
                    if name_arg is not None:
                        root: _Located | None = self._hydra_root_from(call, name_arg.value)
                        return root
        return None

    def _hydra_compose(self, call: cst.Call) -> list[_Located]:
        index = self.index
        name_arg = Index.argument(call, "config_name", 0)
        if name_arg is None:
            return []
        for init in index.calls_to(*_HYDRA_INIT):
            loc = self._hydra_root_from(init, name_arg.value)
            if loc is not None:
                return [loc]
        return []

    def _hydra_root_from(
        self, path_call: cst.Call, name_node: cst.BaseExpression
    ) -> _Located | None:
        if self.project is None or self.path is None:
            return None
        path_arg = Index.argument(path_call, "config_path", 0)
        name = self._path_text(name_node, 0)
        if name is None:
            return None
        rel = self._path_text(path_arg.value, 0) if path_arg is not None else None
        if path_arg is not None and rel is None:
            return None
        config_dir = os.path.normpath(os.path.join(os.path.dirname(self.path), rel or "."))
        root = compose_hydra(self.project, config_dir, name)
        return None if root is None else _Located(root, (), "omegaconf")

    # ------------------------------------------------------------------ argparse
    def _is_parse_args(self, call: cst.Call) -> bool:
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in (
            "parse_args",
            "parse_known_args",
        )

    def _parser_call(self, receiver: cst.BaseExpression) -> cst.Call | None:
        index = self.index
        for value in [receiver, *index.values_of(receiver)]:
            if isinstance(value, cst.Call) and _qual(index, value.func) == (
                "argparse.ArgumentParser"
            ):
                return value
        return None

    def _argparse_value(self, loc: _Located) -> ConfigValue | None:
        if not loc.keys or loc.parser is None:
            return None
        dest = loc.keys[0]
        rest = loc.keys[1:]
        # The override files' own paths (`args.config`) come from the defaults: no re-entry.
        overrides = [] if loc.parser in self._busy else self._memo("overrides", loc.parser)
        for root, flavor in reversed(overrides):
            entry = root.find((dest, *rest))
            if entry is not None:
                key = ".".join(str(k) for k in (dest, *rest))
                return self.to_value(root, entry, key, flavor)
        if rest:
            return None
        for call in self._memo("arguments", loc.parser):
            chosen, labels = _argparse_dest(call)
            if chosen is None or chosen.replace("-", "_") != dest:
                continue
            return self._argument_default(call, (labels or [dest])[0])
        return None

    def _argument_default(self, call: cst.Call, label: str) -> ConfigValue | None:
        """The default of an `add_argument` call, converted by its `type=float`/`int`."""
        default = Index.argument(call, "default")
        if default is None:
            return None
        value = self._literal(default.value)
        if value is _UNKNOWN:
            return None
        type_arg = Index.argument(call, "type")
        if isinstance(value, str) and type_arg is not None:
            q = _qual(self.index, type_arg.value)
            try:
                value = {"float": float, "int": int}[q](value) if q in ("float", "int") else value
            except ValueError:
                pass
        text = self.index.module.code_for_node(default.value).strip()
        return ConfigValue(value, self.path or "<stdin>", self._line(call), label, text, "argparse")

    def _memo(self, what: str, parser: cst.Call) -> list[Any]:
        """Per-parser answers, once per module (``project.memo``; keyed by node identity)."""
        compute = self._argparse_overrides if what == "overrides" else self._add_argument_calls
        memo = self.project.memo if self.project is not None else None
        if memo is None:
            return compute(parser)
        key = ("configsource.argparse", what, id(self.index), id(parser))
        found = memo.get(key)
        if found is None or found[0] is not parser:
            found = memo[key] = (parser, *_remembered(self.project, lambda: compute(parser)))
        else:
            _replay(self.project, found[2])
        answers: list[Any] = found[1]
        return answers

    def _argparse_overrides(self, parser: cst.Call) -> list[tuple[Entry, str]]:
        """Config files whose keys override the parser's defaults, in source order."""
        index = self.index
        found: list[tuple[int, Entry, str]] = []
        self._busy.add(parser)
        try:

            def roots(expr: cst.BaseExpression) -> list[tuple[Entry, str]]:
                return [
                    (loc.root.find(loc.keys), loc.flavor)  # type: ignore[misc]
                    for loc in self.locate(expr, 1, set())
                    if loc.root is not None and loc.root.find(loc.keys) is not None
                ]

            for call in index.calls:
                source = self._override_source(call, parser)
                if source is not None:
                    for root, flavor in roots(source):
                        found.append((index.order(call), root, flavor))
        finally:
            self._busy.discard(parser)
        found.sort(key=lambda item: item[0])
        return [(root, flavor) for _, root, flavor in found]

    def _override_source(self, call: cst.Call, parser: cst.Call) -> cst.BaseExpression | None:
        """What a call copies over the parser's defaults: `parser.set_defaults(**cfg)`,
        `vars(args).update(cfg)` / `args.__dict__.update(cfg)`, or a `for k, v in cfg.items():
        setattr(args, k, v)` loop."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        attr = func.attr.value
        if attr == "set_defaults" and self._parser_call(func.value) is parser:
            return next((a.value for a in call.args if a.star == "**"), None)
        if attr == "update" and call.args:
            ns = _updated_namespace(self.index, func.value)
            if ns is not None and self._is_namespace_of(ns, parser):
                return call.args[0].value
            return None
        if attr == "items" and not call.args:
            loop = self.index.parent(call)
            if isinstance(loop, cst.For) and loop.iter is call and self._setattr_loop(loop, parser):
                return func.value
        return None

    def _is_namespace_of(self, ns: cst.BaseExpression, parser: cst.Call) -> bool:
        return any(
            loc.root is None and loc.parser is parser and not loc.keys
            for loc in self.locate(ns, 1, set())
        )

    def _setattr_loop(self, loop: cst.For, parser: cst.Call) -> bool:
        for sub in _walk_calls(loop.body):
            if _qual(self.index, sub.func) == "setattr" and sub.args:
                if self._is_namespace_of(sub.args[0].value, parser):
                    return True
        return False

    def _add_argument_calls(self, parser: cst.Call) -> list[cst.Call]:
        index = self.index
        parsers = [c for c in index.calls if _qual(index, c.func) == "argparse.ArgumentParser"]
        out = []
        for call in index.calls:
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
                continue
            if len(parsers) == 1 or self._receiver_is(func.value, parser):
                out.append(call)
        return out

    def _receiver_is(self, receiver: cst.BaseExpression, parser: cst.Call) -> bool:
        def pred(node: cst.CSTNode, _q: str | None) -> bool:
            return node is parser

        return self.index.reaches(receiver, pred, depth=4)

    def _literal(self, node: cst.BaseExpression) -> Any:
        try:
            return ast.literal_eval(self.index.module.code_for_node(node).strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        value = self.index.constant_value(node)
        return _UNKNOWN if value is None else value

    def _line(self, node: cst.CSTNode) -> int | None:
        from distlint.positions import positions_of

        pos = positions_of(self.index.module, [node], self.index.source_map).get(node)
        return pos.start.line if pos is not None else None


_UNKNOWN = object()
_BUILTINS = frozenset({"open", "dict", "float", "int", "str", "vars", "setattr"})


def _qual(index: Index, node: cst.CSTNode) -> str | None:
    """The qualified name, with unshadowed builtins (``open``, ``dict``) by their own name."""
    q = index.qualname(node)
    if q is None and isinstance(node, cst.Name) and node.value in _BUILTINS:
        if not index.bindings_of(node):
            return node.value
    return q


def _walk_imports(module: cst.Module) -> Iterator[cst.Import | cst.ImportFrom]:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small


def _walk_calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    from distlint.analysis.index import walk

    for sub in walk(node):
        if isinstance(sub, cst.Call):
            yield sub
