"""One pass over a LibCST tree that gives rules what they need to understand a script.

LibCST's ScopeProvider + QualifiedNameProvider resolve every name of every file; on a corpus of
real torch code that costs ~10x the parse itself. Training-script rules need much less: which
imported name an expression refers to, what values a name or attribute was assigned, and which
statement / function / class a node sits in. `Index` collects exactly that in a single iterative
walk that skips whitespace and punctuation nodes, then answers queries lazily.

Vocabulary:
- *qualified name*: the dotted import path an expression refers to, canonicalised
  (`T.manual_seed` with `import torch as T` -> ``torch.manual_seed``). A call appends ``()``:
  ``accelerator`` bound by ``accelerator = Accelerator()`` resolves to ``accelerate.Accelerator()``
  and ``accelerator.num_processes`` to ``accelerate.Accelerator().num_processes``.
- *assignment*: one place a name (or a dotted target such as ``args.lr`` / ``self.lr`` /
  ``config["lr"]``) receives a value, with its statement and its position in source order.
"""

from __future__ import annotations

import dataclasses
import enum
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

if TYPE_CHECKING:
    from distlint.analysis.flow import Flow
    from distlint.positions import SourceMap

import libcst as cst

# --------------------------------------------------------------------------------------------
# Fast child iteration
# --------------------------------------------------------------------------------------------

# Fields that only ever hold whitespace, punctuation or comments: never worth walking.
_SKIP_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "colon",
        "equal",
        "dot",
        "header",
        "footer",
        "leading_lines",
        "lines_after_decorators",
        "newline",
        "operator",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "star",
        "arrow",
        "asynchronous",
        "whitespace",
        "first_line",
        "empty_lines",
        "trailing_whitespace",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(tp: type) -> tuple[str, ...]:
    names = _FIELDS.get(tp)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(tp)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[tp] = names
    return names


_NODE_TYPES: dict[type, bool] = {}  # type -> is it a CST node (CSTNode is an ABC: slow isinstance)


def _is_node_type(tp: type) -> bool:
    known = _NODE_TYPES.get(tp)
    if known is None:
        known = _NODE_TYPES[tp] = issubclass(tp, cst.CSTNode)
    return known


_REVERSED_FIELDS: dict[type, tuple[str, ...]] = {}


def _reversed_fields(tp: type) -> tuple[str, ...]:
    """:func:`_fields_of`, last first (the index's walk pushes children on a stack)."""
    names = _REVERSED_FIELDS[tp] = tuple(reversed(_fields_of(tp)))
    return names


def child_list(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Child nodes that carry meaning, in source order (no whitespace/punctuation)."""
    out: list[cst.CSTNode] = []
    node_types = _NODE_TYPES
    for name in _FIELDS.get(type(node)) or _fields_of(type(node)):
        value = getattr(node, name)
        tp = type(value)
        if tp is tuple or tp is list:
            for item in value:
                known = node_types.get(type(item))
                if known or (known is None and _is_node_type(type(item))):
                    out.append(item)
        else:
            known = node_types.get(tp)
            if known or (known is None and _is_node_type(tp)):
                out.append(value)
    return out


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Child nodes that carry meaning, in source order (no whitespace/punctuation)."""
    return iter(child_list(node))


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk of ``node`` and its meaningful descendants (iterative: no recursion limit)."""
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        current = pop()
        yield current
        children = child_list(current)
        children.reverse()
        extend(children)


# --------------------------------------------------------------------------------------------
# Canonical names
# --------------------------------------------------------------------------------------------

# Re-exports and legacy paths that mean the same object. Longest prefix wins.
CANONICAL_PREFIXES: dict[str, str] = {
    "accelerate.accelerator.Accelerator": "accelerate.Accelerator",
    "accelerate.state.PartialState": "accelerate.PartialState",
    "accelerate.state.AcceleratorState": "accelerate.AcceleratorState",
    "accelerate.utils.random.set_seed": "accelerate.utils.set_seed",
    "accelerate.utils.dataclasses.DataLoaderConfiguration": "accelerate.utils.DataLoaderConfiguration",
    "accelerate.DataLoaderConfiguration": "accelerate.utils.DataLoaderConfiguration",
    "torch.random.manual_seed": "torch.manual_seed",
    "torch.random.seed": "torch.seed",
    "transformers.trainer_utils.set_seed": "transformers.set_seed",
    "transformers.optimization.AdamW": "transformers.AdamW",
    "transformers.optimization.get_scheduler": "transformers.get_scheduler",
    "lightning.pytorch.seed_everything": "lightning.seed_everything",
    "lightning.fabric.utilities.seed.seed_everything": "lightning.seed_everything",
    "lightning.fabric.seed_everything": "lightning.seed_everything",
    "lightning_fabric.utilities.seed.seed_everything": "lightning.seed_everything",
    "lightning_fabric.seed_everything": "lightning.seed_everything",
    "pytorch_lightning.seed_everything": "lightning.seed_everything",
    "pytorch_lightning.utilities.seed.seed_everything": "lightning.seed_everything",
    "lightning.fabric.Fabric": "lightning.Fabric",
    "lightning_fabric.Fabric": "lightning.Fabric",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "numpy.random.mtrand": "numpy.random",
}


_PREFIXES_LONGEST_FIRST: list[str] = []
# the prefixes, longest first, by their first name (`torch` of `torch.random.seed`): a
# qualified name can start with a prefix only where it starts with that name
_PREFIXES_BY_ROOT: dict[str, list[str]] = {}


def _root(name: str) -> str:
    """The first name of a qualified name (`torch` of `torch.cuda.x()`, `f` of `f().x`)."""
    return name.partition(".")[0].partition("(")[0].partition("[")[0]


def canonical(qualname: str) -> str:
    if len(_PREFIXES_LONGEST_FIRST) != len(CANONICAL_PREFIXES):
        _PREFIXES_LONGEST_FIRST[:] = sorted(CANONICAL_PREFIXES, key=len, reverse=True)
        _PREFIXES_BY_ROOT.clear()
        for prefix in _PREFIXES_LONGEST_FIRST:
            _PREFIXES_BY_ROOT.setdefault(_root(prefix), []).append(prefix)
    for prefix in _PREFIXES_BY_ROOT.get(_root(qualname), ()):
        if not qualname.startswith(prefix):
            continue
        if (
            qualname == prefix
            or qualname.startswith(prefix + ".")
            or qualname.startswith(prefix + "(")
        ):
            return CANONICAL_PREFIXES[prefix] + qualname[len(prefix) :]
    return qualname


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-f) string literal, else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed escapes
            return None
        return value if isinstance(value, str) else None
    return None


def target_key(node: cst.BaseExpression) -> str | None:
    """Key for an assignable place: ``lr``, ``args.lr``, ``self.lr``, ``config[lr]``, ``cfg.opt.lr``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = target_key(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        element = node.slice[0].slice
        if isinstance(element, cst.Index):
            key = string_value(element.value)
            if key is None and isinstance(element.value, cst.Integer):
                key = element.value.value
            base = target_key(node.value)
            if key is not None and base is not None:
                return f"{base}[{key}]"
    return None


# --------------------------------------------------------------------------------------------
# Scopes and bindings
# --------------------------------------------------------------------------------------------


class Tag(str, enum.Enum):
    """A tag that is also its string: equal to it, hashed, printed and formatted as its value,
    so code that still compares strings (`a.op is Op.PARAM`) keeps its answers."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class ScopeKind(Tag):
    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"
    LAMBDA = "lambda"
    COMPREHENSION = "comprehension"


class Op(Tag):
    """How an :class:`Assignment` binds its key."""

    ASSIGN = "="
    MULTIPLY = "*="
    DIVIDE = "/="
    FLOOR_DIVIDE = "//="
    ADD = "+="
    SUBTRACT = "-="
    POWER = "**="
    OTHER_AUGMENTED = "op="  # `%=`, `@=`, `|=`, ...
    UNPACK = "unpack"  # a target of tuple unpacking whose value is not known element-wise
    PARAM = "param"
    FOR = "for"
    WITH = "with"
    IMPORT = "import"
    DEF = "def"
    CLASS = "class"
    EXCEPT = "except"


class Assignment:
    """One place where a name / dotted target receives a value."""

    __slots__ = ("key", "value", "node", "order", "op", "scope", "qualname", "target", "record")

    def __init__(
        self,
        key: str,
        value: cst.BaseExpression | None,  # None: unknown (parameter, for target, unpacking)
        node: cst.CSTNode,  # the statement (or Param / For / With item) that binds it
        order: int,
        op: Op = Op.ASSIGN,
        scope: Scope | None = None,
        qualname: str | None = None,  # for imports
        target: cst.CSTNode | None = None,  # the target expression node, when there is one
        record: ImportRecord | None = None,  # for imports: how it was written
    ) -> None:
        self.key = key
        self.value = value
        self.node = node
        self.order = order
        self.op = op
        self.scope = scope
        self.qualname = qualname
        self.target = target
        self.record = record

    def __repr__(self) -> str:
        return f"Assignment({self.key!r}, op={self.op!r}, order={self.order})"


class ImportRecord(NamedTuple):
    """How an import binding was written: ``from <level dots><module> import <name>`` or
    ``import <module>`` (name None), so a project can resolve it to a file."""

    module: str
    name: str | None
    level: int = 0


class Scope:
    __slots__ = ("kind", "node", "parent", "name", "bindings", "globals", "nonlocals", "orders")

    def __init__(
        self,
        kind: ScopeKind,
        node: cst.CSTNode,
        parent: Scope | None,
        name: str = "",
    ) -> None:
        self.kind = kind
        self.node = node
        self.parent = parent
        self.name = name
        self.bindings: dict[str, list[Assignment]] = {}
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.orders: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"Scope({self.kind!r}, name={self.name!r})"

    def release(self) -> None:
        """Break the cycles of this scope: its bindings point back at it."""
        self.bindings = {}
        self.orders = {}
        self.parent = None

    def add(self, assignment: Assignment) -> None:
        assignment.scope = self
        self.bindings.setdefault(assignment.key, []).append(assignment)
        self.orders.setdefault(assignment.key, []).append(assignment.order)

    def renumbered(self) -> None:
        """``orders`` again from the bindings (their numbers or order changed: an edit's
        index, see distlint.analysis.reindex)."""
        self.orders = {key: [a.order for a in found] for key, found in self.bindings.items()}

    @property
    def enclosing_class(self) -> Scope | None:
        """For a method scope: the class scope it is defined in."""
        if (
            self.kind is ScopeKind.FUNCTION
            and self.parent is not None
            and self.parent.kind is ScopeKind.CLASS
        ):
            return self.parent
        return None


_FUNCTION_NODES = (cst.FunctionDef, cst.Lambda)
_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})  # (calls_run_by)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_STATEMENT_TYPES: dict[type, bool] = {}


def _is_statement(tp: type) -> bool:
    """``issubclass(tp, _STATEMENTS)``, remembered per type (an isinstance check against
    LibCST's abstract classes is a Python call)."""
    known = _STATEMENT_TYPES.get(tp)
    if known is None:
        known = _STATEMENT_TYPES[tp] = issubclass(tp, _STATEMENTS)
    return known


# how a handler of Index._build puts (child, parent, scope) on the walk's stack
_Push = Callable[[tuple[Any, "cst.CSTNode | None", Scope]], None]
# nodes without meaningful children (see child_list)
_LEAF_TYPES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString})


class Index:
    """Everything the rules ask about one module, computed in one walk."""

    def __init__(
        self, module: cst.Module, source: str = "", source_map: SourceMap | None = None
    ) -> None:
        self.module = module
        self.source = source
        # where LibCST's code of ``module`` stands in ``source`` (None: it is ``source``)
        self.source_map = source_map
        # id(node) -> (parent, scope, order); keyed by id: a CST node's __hash__ is a Python call
        self._info: dict[int, tuple[cst.CSTNode | None, Scope, int]] = {}
        self._nodes: list[cst.CSTNode] = []  # walk order
        self.module_scope = Scope(ScopeKind.MODULE, module, None)
        self.scopes: list[Scope] = [self.module_scope]
        self.calls: list[cst.Call] = []
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.classes: dict[str, list[cst.ClassDef]] = {}
        self.loops: list[cst.CSTNode] = []  # For / While / comprehension-free loops
        # Dotted targets: `args.lr = ...`, `self.lr = ...` (key 'self.lr@Class'), `cfg["lr"] = ...`
        self.attr_assignments: dict[str, list[Assignment]] = {}
        self.returns: dict[cst.CSTNode, list[cst.Return]] = {}
        # type -> the positions in `_nodes` of the nodes of exactly that type (nodes_of;
        # sorted once asked)
        self._by_type: dict[type, list[int]] | None = None
        self._new_answers()
        self._build()

    def _new_answers(self) -> None:
        """Empty memos of what is asked of the index (not of the walk's own state)."""
        # Memos keyed by id(node) (a CST node's __hash__ is a Python call), each entry holding
        # its node: the `is` check makes a reused id (a node a rule built, since freed) a miss.
        self._qual_cache: dict[int, tuple[cst.CSTNode, str | None]] = {}
        self._qual_of_bindings: dict[int, tuple[list[Assignment], str | None]] = {}
        self._bindings_cache: dict[int, tuple[cst.CSTNode, list[Assignment]]] = {}
        self._values_cache: dict[int, tuple[cst.CSTNode, list[cst.CSTNode | None]]] = {}
        self._children_cache: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
        self._flow: Flow | None = None
        self._nodes_cache: dict[tuple[type, ...], list[cst.CSTNode]] = {}
        self._call_orders: list[int] | None = None  # the order of each call (calls_inside)
        self._owners: dict[str, int] | None = None
        self._binder_ids: dict[str, set[int]] | None = None
        self._calls_by_name: dict[str, list[cst.Call]] | None = (
            None  # callee name -> calls, built on demand
        )

    def forget_answers(self) -> list[Any]:
        """Start every memo of answers afresh (the module changed under the walk's state: an
        edit's index, see distlint.analysis.reindex); returns what they held (the Facts, the
        dataflow, the memos keyed by node), for the caller to free."""
        held = [self.__dict__.pop("_facts", None), self._flow, self._qual_cache]
        held += [self._qual_of_bindings, self._bindings_cache, self._values_cache]
        held.append(self._children_cache)
        self._new_answers()
        return held

    # ---------------------------------------------------------------- construction
    def _build(
        self,
        stack: list[tuple[Any, cst.CSTNode | None, Scope]] | None = None,
        order: int = 0,
        nodes: list[cst.CSTNode] | None = None,
    ) -> None:
        """One walk: every node's parent, scope and order, and what each statement binds.
        By default the whole module's; else that of the subtrees on ``stack`` (node, parent,
        scope; the first to walk last), numbered from ``order`` + 1, their nodes appended to
        ``nodes`` (an edit's new statements: see distlint.analysis.reindex)."""
        info = self._info
        append_node = (self._nodes if nodes is None else nodes).append
        append_call = self.calls.append
        binders = _BINDERS
        node_types = _NODE_TYPES
        # stack of (node, parent, scope); the node is Any: the walk dispatches on `type(node)`
        # (fast, but not a narrowing mypy follows)
        if stack is None:
            stack = [(self.module, None, self.module_scope)]
        pop, push = stack.pop, stack.append
        while stack:
            node, parent, scope = pop()
            order += 1
            info[id(node)] = (parent, scope, order)
            append_node(node)
            tp = type(node)
            if tp not in binders:  # most nodes: just their children
                if tp is cst.Call:
                    append_call(node)
                elif tp in _LEAF_TYPES:
                    continue
                # child_list(node), pushed last first as it is read (no list to build and turn)
                for name in _REVERSED_FIELDS.get(tp) or _reversed_fields(tp):
                    value = getattr(node, name)
                    vt = type(value)
                    if vt is tuple or vt is list:
                        for item in reversed(value):
                            known = node_types.get(type(item))
                            if known or (known is None and _is_node_type(type(item))):
                                push((item, node, scope))
                    else:
                        known = node_types.get(vt)
                        if known or (known is None and _is_node_type(vt)):
                            push((value, node, scope))
                continue
            child_scope = binders[tp](self, node, order, scope, push)
            if child_scope is not None:
                for child in reversed(child_list(node)):
                    push((child, node, child_scope))

    # One handler per kind of node that binds a name, opens a scope or is remembered (loops,
    # returns): it records that, and returns the scope its children are walked in (None: it
    # pushed them itself, a def or class whose decorators evaluate outside its own scope).
    def _on_assign(self, node: cst.Assign, order: int, scope: Scope, push: _Push) -> Scope | None:
        for t in node.targets:
            self._bind_target(t.target, node.value, node, order, scope, Op.ASSIGN)
        return scope

    def _on_single_target(
        self, node: cst.AnnAssign | cst.NamedExpr, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        self._bind_target(node.target, node.value, node, order, scope, Op.ASSIGN)
        return scope

    def _on_aug_assign(
        self, node: cst.AugAssign, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        op = _AUG_OPS.get(type(node.operator).__name__, Op.OTHER_AUGMENTED)
        self._bind_target(node.target, node.value, node, order, scope, op)
        return scope

    def _on_import(self, node: cst.Import, order: int, scope: Scope, push: _Push) -> Scope | None:
        for alias in node.names:
            full = _attr_to_str(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local, qual = alias.asname.name.value, full
            else:
                local = full.split(".")[0]
                qual = local
            record = ImportRecord(qual, None, 0)
            scope.add(
                Assignment(
                    local, None, node, order, Op.IMPORT, qualname=canonical(qual), record=record
                )
            )
        return scope

    def _on_import_from(
        self, node: cst.ImportFrom, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        self._bind_import_from(node, order, scope)
        return scope

    def _on_function(
        self, node: cst.FunctionDef, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        name = node.name.value
        scope.add(Assignment(name, None, node, order, Op.DEF))
        qual = name if scope.kind is not ScopeKind.CLASS else f"{scope.name}.{name}"
        self.functions.setdefault(qual, []).append(node)
        inner = Scope(ScopeKind.FUNCTION, node, scope, name=name)
        self.scopes.append(inner)
        self._bind_params(node.params, node, order, inner)
        # decorators and defaults evaluate in the enclosing scope; body in the new one
        body, params = node.body, node.params
        for child in reversed(child_list(node)):
            push((child, node, inner if child is body or child is params else scope))
        return None

    def _on_lambda(self, node: cst.Lambda, order: int, scope: Scope, push: _Push) -> Scope | None:
        inner = Scope(ScopeKind.LAMBDA, node, scope, name="<lambda>")
        self.scopes.append(inner)
        self._bind_params(node.params, node, order, inner)
        return inner

    def _on_class(self, node: cst.ClassDef, order: int, scope: Scope, push: _Push) -> Scope | None:
        name = node.name.value
        scope.add(Assignment(name, None, node, order, Op.CLASS))
        self.classes.setdefault(name, []).append(node)
        inner = Scope(ScopeKind.CLASS, node, scope, name=name)
        self.scopes.append(inner)
        body = node.body
        for child in reversed(child_list(node)):
            push((child, node, inner if child is body else scope))
        return None

    def _on_for(self, node: cst.For, order: int, scope: Scope, push: _Push) -> Scope | None:
        self.loops.append(node)
        self._bind_target(node.target, None, node, order, scope, Op.FOR, source=node.iter)
        return scope

    def _on_while(self, node: cst.While, order: int, scope: Scope, push: _Push) -> Scope | None:
        self.loops.append(node)
        return scope

    def _on_comprehension(
        self, node: cst.CSTNode, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        inner = Scope(ScopeKind.COMPREHENSION, node, scope)
        self.scopes.append(inner)
        return inner

    def _on_comp_for(
        self, node: cst.CompFor, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        self._bind_target(node.target, None, node, order, scope, Op.FOR, source=node.iter)
        return scope

    def _on_with_item(
        self, node: cst.WithItem, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        if node.asname is not None:
            self._bind_target(node.asname.name, node.item, node, order, scope, Op.WITH)
        return scope

    def _on_return(self, node: cst.Return, order: int, scope: Scope, push: _Push) -> Scope | None:
        fn = self._function_node(scope)
        if fn is not None:
            self.returns.setdefault(fn, []).append(node)
        return scope

    def _on_global(self, node: cst.Global, order: int, scope: Scope, push: _Push) -> Scope | None:
        for item in node.names:
            scope.globals.add(item.name.value)
        return scope

    def _on_nonlocal(
        self, node: cst.Nonlocal, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        for item in node.names:
            scope.nonlocals.add(item.name.value)
        return scope

    def _on_except(
        self, node: cst.ExceptHandler, order: int, scope: Scope, push: _Push
    ) -> Scope | None:
        if node.name is not None and isinstance(node.name.name, cst.Name):
            scope.add(Assignment(node.name.name.value, None, node, order, Op.EXCEPT))
        return scope

    @staticmethod
    def _function_node(scope: Scope) -> cst.CSTNode | None:
        while scope is not None and scope.kind not in (
            ScopeKind.FUNCTION,
            ScopeKind.LAMBDA,
            ScopeKind.MODULE,
        ):
            scope = scope.parent  # type: ignore[assignment]
        if scope is None or scope.kind is ScopeKind.MODULE:
            return None
        return scope.node

    def _bind_import_from(self, node: cst.ImportFrom, order: int, scope: Scope) -> None:
        level = len(node.relative)
        module = _attr_to_str(node.module) if node.module is not None else ""
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _attr_to_str(alias.name)
            local = (
                alias.asname.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                else name
            )
            # a relative import names a module of the user's project, never a library we know
            qualname = None if level else canonical(f"{module}.{name}")
            record = ImportRecord(module, name, level)
            scope.add(
                Assignment(local, None, node, order, Op.IMPORT, qualname=qualname, record=record)
            )

    def _bind_params(
        self, params: cst.Parameters, fn: cst.CSTNode, order: int, scope: Scope
    ) -> None:
        all_params = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        if isinstance(params.star_arg, cst.Param):
            all_params.append(params.star_arg)
        if isinstance(params.star_kwarg, cst.Param):
            all_params.append(params.star_kwarg)
        for param in all_params:
            scope.add(
                Assignment(
                    param.name.value, param.default, param, order, Op.PARAM, target=param.name
                )
            )

    def _bind_target(
        self,
        target: cst.BaseExpression,
        value: cst.BaseExpression | None,
        stmt: cst.CSTNode,
        order: int,
        scope: Scope,
        op: Op,
        source: cst.BaseExpression | None = None,
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            values: Sequence[cst.BaseExpression | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                values = [e.value for e in value.elements]
            else:
                values = [None] * len(elements)
            for el, val in zip(elements, values):
                if isinstance(el, cst.StarredElement):
                    el = el.value
                self._bind_target(el, val, stmt, order, scope, op if val is not None else Op.UNPACK)
            return
        if isinstance(target, cst.Name):
            name = target.value
            dest = scope
            if name in scope.globals:
                dest = self.module_scope
            dest.add(Assignment(name, value, stmt, order, op, target=target))
            return
        key = target_key(target)
        if key is None:
            return
        if key.startswith("self.") or key.startswith("cls."):
            cls = scope.enclosing_class if scope.kind is ScopeKind.FUNCTION else None
            if cls is not None:
                key = f"{key}@{cls.name}"
        self.attr_assignments.setdefault(key, []).append(
            Assignment(key, value, stmt, order, op, scope=scope, target=target)
        )

    # ---------------------------------------------------------------- structure queries
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        entry = self._info.get(id(node))
        return entry[0] if entry else None

    def scope(self, node: cst.CSTNode) -> Scope:
        entry = self._info.get(id(node))
        return entry[1] if entry else self.module_scope

    def order(self, node: cst.CSTNode) -> int:
        entry = self._info.get(id(node))
        return entry[2] if entry else 0

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        get = self._info.get
        entry = get(id(node))
        parent = entry[0] if entry else None
        while parent is not None:
            yield parent
            entry = get(id(parent))
            parent = entry[0] if entry else None

    def statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost statement (simple line or compound) containing ``node``."""
        get = self._info.get
        current: cst.CSTNode | None = node
        while current is not None and not _is_statement(type(current)):
            entry = get(id(current))
            current = entry[0] if entry else None
        return current

    def enclosing(self, node: cst.CSTNode, types: type | tuple[type, ...]) -> cst.CSTNode | None:
        for anc in self.ancestors(node):
            if isinstance(anc, types):
                found: cst.CSTNode = anc
                return found
        return None

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        found = self.enclosing(node, cst.FunctionDef)
        return found  # type: ignore[return-value]

    def enclosing_class_name(self, node: cst.CSTNode) -> str | None:
        scope = self.scope(node)
        while scope is not None:
            if scope.kind is ScopeKind.CLASS:
                return scope.name
            scope = scope.parent  # type: ignore[assignment]
        return None

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        if node is container:
            return True
        get = self._info.get  # (the ancestors, walked without a generator: a hot question)
        entry = get(id(node))
        while entry is not None:
            parent = entry[0]
            if parent is container:
                return True
            if parent is None:
                return False
            entry = get(id(parent))
        return False

    def calls_inside(self, node: cst.CSTNode) -> list[cst.Call]:
        """The calls of :attr:`calls` inside ``node`` (itself included), in source order. The
        walk numbers a subtree's nodes one after another (``order``): they are the calls from
        ``node``'s number to that of its last descendant, the last child's last child, ..."""
        info = self._info
        entry = info.get(id(node))
        if entry is None:
            return []
        last = node
        while True:
            kids = child_list(last)
            if not kids or id(kids[-1]) not in info:
                break  # (a leaf, or a node whose children are not walked)
            last = kids[-1]
        if self._call_orders is None:
            self._call_orders = [info[id(c)][2] for c in self.calls]
        orders = self._call_orders
        return self.calls[bisect_left(orders, entry[2]) : bisect_right(orders, info[id(last)][2])]

    def calls_run_by(self, node: cst.CSTNode) -> list[cst.Call]:
        """The calls of :meth:`calls_inside` that ``node`` runs itself: those inside a
        function, class or lambda defined within it left out (what
        :func:`distlint.analysis.loops.body_nodes` walks), in source order."""
        get = self._info.get
        out: list[cst.Call] = []
        for call in self.calls_inside(node):
            entry = get(id(call))
            while entry is not None:
                parent = entry[0]
                if parent is node or parent is None:
                    out.append(call)
                    break
                if type(parent) in _DEFINITIONS:
                    break
                entry = get(id(parent))
        return out

    def assignments(self) -> Iterator[Assignment]:
        """Every binding of the module: each scope's (in the order of `scopes`), then those of
        dotted targets."""
        for scope in self.scopes:
            for found in scope.bindings.values():
                yield from found
        for found in self.attr_assignments.values():
            yield from found

    # ---------------------------------------------------------------- name resolution
    def lookup(self, name: str, scope: Scope, before: int | None = None) -> list[Assignment]:
        """Assignments of ``name`` visible from ``scope`` (LEGB; class bodies are not enclosing).

        ``before``: only assignments earlier in source order, for names bound in ``scope`` itself;
        names bound in an enclosing scope are taken whole (a function runs after module setup).
        """
        found, outer = self._lookup(name, scope, before)
        return list(found) if outer else found

    def _lookup(
        self, name: str, scope: Scope, before: int | None = None
    ) -> tuple[list[Assignment], bool]:
        """:meth:`lookup`, and whether the name was found in an enclosing scope: then the list
        is that scope's own (shared by every use below it: not a copy per use)."""
        current: Scope | None = scope
        first = True
        while current is not None:
            if current.kind is ScopeKind.CLASS and not first:
                current = current.parent
                continue
            if name in current.globals and current is not self.module_scope:
                current = self.module_scope
                first = False
                continue
            found = current.bindings.get(name)
            if found:
                if first and before is not None and current.kind is not ScopeKind.CLASS:
                    earlier = found[: bisect_left(current.orders[name], before)]
                    # A name used before any assignment in a loop can still see later ones
                    return list(earlier) or (found if self._in_loop(current, found) else []), False
                return (list(found), False) if first else (found, True)
            current = current.parent
            first = False
        return [], False

    def _in_loop(self, scope: Scope, found: list[Assignment]) -> bool:
        return any(self.enclosing(a.node, (cst.For, cst.While)) is not None for a in found)

    def bindings_of(self, name_node: cst.Name) -> list[Assignment]:
        """The assignments of a name that can reach this use of it: the earlier ones, back to the
        latest that runs on every path to the use (an assignment in a block that encloses the use
        kills the ones before it; assignments under an `if` or a loop do not)."""
        known = self._bindings_cache.get(id(name_node))
        if known is not None and known[0] is name_node:
            return known[1]
        scope = self.scope(name_node)
        found, outer = self._lookup(name_node.value, scope, self.order(name_node))
        if found and not (
            outer and scope.kind in (ScopeKind.FUNCTION, ScopeKind.LAMBDA, ScopeKind.CLASS)
        ):
            # (bindings of an enclosing scope, seen from inside a function or class body: all
            # of them reach it; their statements cannot hold the use: nothing to filter, and
            # the list stays the one every such use shares)
            found = self._reaching(name_node, found)
        self._bindings_cache[id(name_node)] = (name_node, found)
        return found

    _KILLING_OPS = frozenset({Op.ASSIGN, Op.UNPACK, Op.IMPORT, Op.DEF, Op.CLASS})
    # bindings whose node encloses the uses they bind (loop targets, defs, with items)
    _SCOPED_OPS = frozenset({Op.FOR, Op.DEF, Op.CLASS, Op.PARAM, Op.WITH, Op.IMPORT, Op.EXCEPT})

    def _reaching(self, use: cst.CSTNode, found: list[Assignment]) -> list[Assignment]:
        blocks, around = self._surroundings(use)
        found = self._outside_own_statement(use, found, around)
        if len(found) < 2 or found[-1].order > self.order(use):
            return found  # a loop: later assignments reach the use too
        return self._from_last_kill(use, found, blocks)

    def _surroundings(self, use: cst.CSTNode) -> tuple[set[int], set[int]]:
        """The ids of the blocks that hold ``use`` in its own function or class body, and of
        every node around it (up to and including that function or class)."""
        blocks: set[int] = set()
        around: set[int] = set()
        get = self._info.get  # (the ancestors, walked without a generator: asked per name use)
        entry = get(id(use))
        while entry is not None and entry[0] is not None:
            anc = entry[0]
            key = id(anc)
            around.add(key)
            tp = type(anc)  # concrete LibCST classes: a type test, not an ABC isinstance call
            if tp is cst.IndentedBlock or tp is cst.Module:
                blocks.add(key)
            elif tp is cst.FunctionDef or tp is cst.Lambda or tp is cst.ClassDef:
                break
            entry = get(key)
        return blocks, around

    def _outside_own_statement(
        self, use: cst.CSTNode, found: list[Assignment], around: set[int]
    ) -> list[Assignment]:
        """`x = x + 1`: the statement being evaluated is not a source of the ``x`` it reads
        (a loop target, a def or a with item is: it encloses the uses it binds)."""
        name = getattr(use, "value", None)
        binding = self._binders().get(name) if type(name) is str else None
        if (
            binding is not None
            and not binding.isdisjoint(around)
            and any(id(a.node) in around and a.op not in self._SCOPED_OPS for a in found)
        ):
            return [a for a in found if id(a.node) not in around or a.op in self._SCOPED_OPS]
        return found

    def _from_last_kill(
        self, use: cst.CSTNode, found: list[Assignment], blocks: set[int]
    ) -> list[Assignment]:
        """``found`` from the latest assignment that runs on every path to ``use`` (one in a
        block that holds the use); the earlier ones never reach it."""
        scope = self.scope(use)
        for i in range(len(found) - 1, 0, -1):
            a = found[i]
            if a.op in self._KILLING_OPS and a.scope is scope:
                stmt = self.statement(a.node)
                block = self.parent(stmt) if stmt is not None else None
                if block is not None and id(block) in blocks:
                    return found[i:]
        return found

    def _binders(self) -> dict[str, set[int]]:
        """name -> the ids of the nodes binding it (the statements that assign it)."""
        found = self._binder_ids
        if found is None:
            found = self._binder_ids = {}
            for scope in self.scopes:
                for key, assignments in scope.bindings.items():
                    ids = found.setdefault(key, set())
                    for a in assignments:
                        ids.add(id(a.node))
        return found

    def import_record(self, name_node: cst.CSTNode) -> ImportRecord | None:
        """How the import that binds this name (at this use) was written, for resolving it to a
        project file; None when the name is not bound by exactly one import."""
        if not isinstance(name_node, cst.Name):
            return None
        bindings = self.bindings_of(name_node)
        if not bindings:
            # the name of an import statement itself (`from x import y`): look it up whole
            bindings = self.lookup(name_node.value, self.scope(name_node))
        records = {b.record for b in bindings if b.op is Op.IMPORT and b.record is not None}
        if len(records) == 1 and all(b.op is Op.IMPORT for b in bindings):
            return records.pop()
        return None

    def attribute_assignments(self, node: cst.BaseExpression) -> list[Assignment]:
        """Assignments to a dotted target such as ``args.lr``, ``self.lr`` or ``config["lr"]``."""
        key = target_key(node)
        if key is None:
            return []
        if key.startswith("self.") or key.startswith("cls."):
            cls = self.enclosing_class_name(node)
            if cls is not None:
                key = f"{key}@{cls}"
        return list(self.attr_assignments.get(key, ()))

    def qualname(self, node: cst.CSTNode) -> str | None:
        """Canonical qualified name of an expression (see module doc), or None."""
        cache = self._qual_cache
        key = id(node)
        known = cache.get(key)
        if known is not None and known[0] is node:
            return known[1]
        cache[key] = (node, None)  # cycle guard
        result = self._qualname(node)
        cache[key] = (node, result)
        return result

    def _qualname(self, node: cst.CSTNode) -> str | None:
        if isinstance(node, cst.Name):
            bindings = self.bindings_of(node)
            # uses in functions share their enclosing scope's list: judge each list once (a
            # name bound a thousand times at module level and used in every function)
            known = self._qual_of_bindings.get(id(bindings))
            if known is not None and known[0] is bindings:
                return known[1]
            self._qual_of_bindings[id(bindings)] = (bindings, None)  # cycle guard
            result = self._bindings_qualname(bindings)
            self._qual_of_bindings[id(bindings)] = (bindings, result)
            return result
        if isinstance(node, cst.Attribute):
            base = self.qualname(node.value)
            if base is not None:
                return canonical(f"{base}.{node.attr.value}")
            # `self.accelerator` / `args.x`: what was assigned to that attribute
            assigns = [
                a
                for a in self.attribute_assignments(node)
                if a.op is Op.ASSIGN and a.value is not None
            ]
            quals = {self.qualname(a.value) for a in assigns}  # type: ignore[arg-type]
            if len(quals) == 1:
                q = quals.pop()
                return q
            return None
        if isinstance(node, cst.Call):
            func = self.qualname(node.func)
            return None if func is None else func + "()"
        if isinstance(node, cst.Subscript):
            base = self.qualname(node.value)
            key = target_key(node)
            if base is not None and key is not None and "[" in key:
                return f"{base}[{key.rsplit('[', 1)[1]}"
            return None
        return None

    def _bindings_qualname(self, bindings: list[Assignment]) -> str | None:
        quals = set()
        for b in bindings:
            if b.op is Op.IMPORT:
                quals.add(b.qualname)
            elif b.op in (Op.ASSIGN, Op.WITH) and b.value is not None:
                q = self.qualname(b.value)
                if q is None:
                    return None
                quals.add(q)
            else:
                return None
        if len(quals) == 1:
            return quals.pop()
        return None

    def binding_for(self, qualname: str, at: cst.CSTNode | None = None) -> str | None:
        """An existing local name (or dotted path) that refers to ``qualname``, visible at ``at``.

        Used by fixes to reuse an import the file already has (``set_seed`` imported from
        ``accelerate.utils``, or ``import accelerate`` -> ``accelerate.utils.set_seed``).
        """
        imports = self._visible_imports(self.scope(at) if at is not None else self.module_scope)
        for local, imp in imports:
            if imp.qualname == qualname:
                return local
        for local, imp in imports:
            path = _path_through(local, imp, qualname)
            if path is not None:
                return path
        return None

    @staticmethod
    def _visible_imports(scope: Scope) -> list[tuple[str, Assignment]]:
        """(local name, its import) of every name bound only by imports, innermost scope first."""
        imports: list[tuple[str, Assignment]] = []
        current: Scope | None = scope
        while current is not None:
            for local, assigns in current.bindings.items():
                if assigns and all(a.op is Op.IMPORT for a in assigns):
                    imports.append((local, assigns[0]))
            current = current.parent
        return imports

    def is_bound(self, name: str, at: cst.CSTNode | None = None) -> bool:
        scope = self.scope(at) if at is not None else self.module_scope
        return bool(self.lookup(name, scope)) or name in _BUILTINS

    # ---------------------------------------------------------------- calls
    def calls_to(self, *qualnames: str) -> list[cst.Call]:
        """Calls whose callee resolves to one of ``qualnames`` (prefix ``x.*`` matches members)."""
        exact = {q for q in qualnames if not q.endswith(".*")}
        prefixes = tuple(q[:-1] for q in qualnames if q.endswith(".*"))
        out = []
        for call in self.calls:
            q = self.qualname(call.func)
            if q is None:
                continue
            if q in exact or (prefixes and q.startswith(prefixes)):
                out.append(call)
        return out

    def local_function(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The FunctionDef a call's callee refers to, when it is defined in this file."""
        if isinstance(func, cst.Name):
            for b in self.bindings_of(func):
                if b.op is Op.DEF and isinstance(b.node, cst.FunctionDef):
                    return b.node
            return None
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value in ("self", "cls")
        ):
            cls = self.enclosing_class_name(func)
            if cls is not None:
                defs = self.functions.get(f"{cls}.{func.attr.value}")
                if defs:
                    return defs[-1]
        return None

    def callers(self, fn: cst.FunctionDef) -> list[cst.Call]:
        """Calls in this file of a function or method (``f(...)``, ``self.f(...)``, ``Cls(...)``)."""
        by_name = self._calls_by_callee()
        name = fn.name.value
        owner = self.scope(fn)  # the scope the `def` sits in
        if owner.kind is ScopeKind.CLASS:
            out = self._method_calls(name, owner, by_name.get(name, ()))
        else:
            out = [
                call
                for call in by_name.get(name, ())
                if isinstance(call.func, cst.Name) and self.local_function(call.func) is fn
            ]
        if name == "__init__" and owner.kind is ScopeKind.CLASS:  # `Cls(...)` runs `__init__`
            out.extend(c for c in by_name.get(owner.name, ()) if isinstance(c.func, cst.Name))
        return out

    def _calls_by_callee(self) -> dict[str, list[cst.Call]]:
        """Callee name (``f`` of ``f(...)`` and of ``x.f(...)``) -> the calls of the file."""
        by_name = self._calls_by_name
        if by_name is None:  # profiled: rules ask this for every helper of a script
            by_name = self._calls_by_name = {}
            for call in self.calls:
                func = call.func
                if isinstance(func, cst.Name):
                    by_name.setdefault(func.value, []).append(call)
                elif isinstance(func, cst.Attribute):
                    by_name.setdefault(func.attr.value, []).append(call)
        return by_name

    def _method_calls(self, name: str, owner: Scope, calls: Iterable[cst.Call]) -> list[cst.Call]:
        """Calls of the method ``name`` of the class ``owner``: `self.m(...)` inside its class,
        or `obj.m(...)` when no other class of the file defines `m` (never every method that
        happens to share the name, such as `forward`, nor `optimizer.step()` for a
        module-level `step`)."""
        unique = self._method_owners().get(name, 0) == 1
        out = []
        for call in calls:
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            if isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
                if self.enclosing_class_name(call) == owner.name:
                    out.append(call)
            elif unique and not name.startswith("__"):
                out.append(call)
        return out

    def _method_owners(self) -> dict[str, int]:
        """Method name -> how many classes of the file define it."""
        if self._owners is None:
            owners: dict[str, int] = {}
            for qual in self.functions:
                if "." in qual:
                    method = qual.rsplit(".", 1)[1]
                    owners[method] = owners.get(method, 0) + 1
            self._owners = owners
        return self._owners

    @staticmethod
    def argument(
        call: cst.Call, keyword: str | None = None, position: int | None = None
    ) -> cst.Arg | None:
        """The argument given as ``keyword=`` or at ``position`` (0-based, positional only)."""
        positional = 0
        for arg in call.args:
            if arg.keyword is not None:
                if keyword is not None and arg.keyword.value == keyword:
                    return arg
            elif arg.star:
                positional = 10_000  # unknown positions after *args
            else:
                if position is not None and positional == position:
                    return arg
                positional += 1
        return None

    def argument_for_param(
        self, call: cst.Call, fn: cst.FunctionDef, param_name: str
    ) -> cst.Arg | None:
        params = list(fn.params.posonly_params) + list(fn.params.params)
        names = [p.name.value for p in params]
        is_method = self.scope(fn).kind is ScopeKind.CLASS
        if is_method and names and names[0] in ("self", "cls"):
            names = names[1:]
        position = names.index(param_name) if param_name in names else None
        return self.argument(call, keyword=param_name, position=position)

    def release(self) -> None:
        """Break the reference cycles of the analysis (a scope and its bindings, which point
        back at it; the facts and the dataflow, which hold this index), so that reference
        counting frees the parsed tree as soon as the caller drops it, instead of a full
        collection walking all of it. The index is unusable afterwards (as is one whose state
        an edit's index took over: see distlint.analysis.reindex)."""
        if not self.__dict__:
            return
        for scope in self.scopes:
            scope.release()
        facts = self.__dict__.get("_facts")
        if facts is not None:
            facts.release()
        if self._flow is not None:
            self._flow.__dict__.clear()
        self.__dict__.clear()

    # ---------------------------------------------------------------- dataflow
    @property
    def flow(self) -> Flow:
        """The module's :class:`~distlint.analysis.flow.Flow` (memoised dataflow), made once."""
        flow = self._flow
        if flow is None:
            from distlint.analysis.flow import Flow as _Flow

            flow = self._flow = _Flow(self)
        return flow

    def nodes_of(self, *types: type) -> list[cst.CSTNode]:
        """Every meaningful node of these types, in walk order (one filtered pass, cached: rules
        never re-walk the module)."""
        found = self._nodes_cache.get(types)
        if found is None:
            by_type = self._by_type
            if by_type is None:  # one pass for every later question
                by_type = self._by_type = {}
                for position, node in enumerate(self._nodes):
                    kept = by_type.get(type(node))
                    if kept is None:
                        by_type[type(node)] = [position]
                    else:
                        kept.append(position)
            # exact types (isinstance on LibCST's classes, ABCs, is slow)
            groups = [kept for tp, kept in by_type.items() if issubclass(tp, types)]
            # (several types: their positions merged back into walk order)
            positions = groups[0] if len(groups) == 1 else sorted(chain(*groups))
            found = list(map(self._nodes.__getitem__, positions))
            self._nodes_cache[types] = found
        return found

    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        known = self._children_cache.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        found = child_list(node)
        self._children_cache[id(node)] = (node, found)
        return found

    def reaches(
        self,
        expr: cst.CSTNode,
        predicate: Callable[[cst.CSTNode, str | None], bool],
        *,
        depth: int = 8,
        prune: Callable[[cst.CSTNode], bool] | None = None,
        key: object = None,
    ) -> bool:
        """Does any value flowing into ``expr`` satisfy ``predicate(node, qualname)``?

        Follows names to their assignments (the earlier ones of the same scope that can reach
        the use, any in enclosing scopes), dotted targets (``args.lr``, ``self.lr``,
        ``cfg["lr"]``) to every assignment in the file, parameters to the arguments of in-file
        call sites, and calls of in-file functions to their return values. Flow-insensitive
        across branches: both arms of an ``if`` count. ``prune(node)`` True: the predicate still
        sees ``node``, but nothing inside it or flowing into it is followed (e.g. ``len(loader)``
        must not look into how the loader was built). ``key``: see :meth:`Flow.reaches`.
        """
        return self.flow.reaches(expr, predicate, key=key, prune=prune, depth=depth)

    def values_of(self, node: cst.CSTNode) -> list[cst.CSTNode | None]:
        """Expressions whose value may flow into ``node`` one step back."""
        known = self._values_cache.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        found = self._values_of(node)
        self._values_cache[id(node)] = (node, found)
        return found

    def _values_of(self, node: cst.CSTNode) -> list[cst.CSTNode | None]:
        # `type(x) is C and isinstance(x, C)`: the type test fails fast where an isinstance
        # against a LibCST class is a Python call (ABCMeta); the isinstance that follows it is
        # the exact-type fast path, there for the type checker
        tp = type(node)
        if tp is cst.Name and isinstance(node, cst.Name):
            return self._name_values(node)
        if (tp is cst.Attribute or tp is cst.Subscript) and isinstance(
            node, (cst.Attribute, cst.Subscript)
        ):
            out: list[cst.CSTNode | None] = [a.value for a in self.attribute_assignments(node)]
            # `cfg.lr` where `cfg = Config(lr=...)` / `dict(lr=...)` / {"lr": ...}
            out.extend(self._constructor_field(node))
            return out
        if tp is cst.Call and isinstance(node, cst.Call):
            fn = self.local_function(node.func)
            if fn is not None:
                return [ret.value for ret in self.returns.get(fn, ()) if ret.value is not None]
        return []

    def _name_values(self, node: cst.Name) -> list[cst.CSTNode | None]:
        """What a name read may hold: its assignments' values, a loop's iterable, a parameter's
        default and the arguments of the calls of its function."""
        parent = self.parent(node)
        ptp = type(parent)
        # only names in load position
        if ptp is cst.Attribute and isinstance(parent, cst.Attribute) and parent.attr is node:
            return []
        if ptp is cst.Arg and isinstance(parent, cst.Arg) and parent.keyword is node:
            return []
        out: list[cst.CSTNode | None] = []
        for b in self.bindings_of(node):
            if b.op is Op.PARAM:
                out.extend(self._param_sources(b))
            elif b.op is Op.FOR and isinstance(b.node, (cst.For, cst.CompFor)):
                out.append(b.node.iter)
            else:
                out.append(b.value)
        return out

    def _param_sources(self, binding: Assignment) -> list[cst.CSTNode | None]:
        out: list[cst.CSTNode | None] = []
        param = binding.node
        if isinstance(param, cst.Param) and param.default is not None:
            out.append(param.default)
        up = self.parent(param) if param is not None else None
        fn = self.parent(up) if up is not None else None
        # Param -> Parameters -> FunctionDef
        if isinstance(fn, cst.FunctionDef):
            for call in self.callers(fn):
                arg = self.argument_for_param(call, fn, binding.key)
                if arg is not None:
                    out.append(arg.value)
        return out

    def _constructor_field(self, node: cst.BaseExpression) -> list[cst.CSTNode | None]:
        if isinstance(node, cst.Attribute):
            base, field_name = node.value, node.attr.value
        elif isinstance(node, cst.Subscript):
            key = target_key(node)
            if key is None or "[" not in key:
                return []
            base, field_name = node.value, key.rsplit("[", 1)[1][:-1]
        else:
            return []
        out: list[cst.CSTNode | None] = []
        for value in self.values_of(base) if isinstance(base, (cst.Name, cst.Attribute)) else []:
            if isinstance(value, cst.Call):
                arg = self.argument(value, keyword=field_name)
                if arg is not None:
                    out.append(arg.value)
            elif isinstance(value, cst.Dict):
                for el in value.elements:
                    if isinstance(el, cst.DictElement) and string_value(el.key) == field_name:
                        out.append(el.value)
        return out

    def constant_value(self, expr: cst.CSTNode) -> object | None:
        """Value of a literal, or of a name bound once to a literal; else None."""
        if isinstance(expr, cst.Integer):
            return int(expr.value.replace("_", ""), 0)
        if isinstance(expr, cst.Float):
            return float(expr.value.replace("_", ""))
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[expr.value]
            bindings = self.bindings_of(expr)
            if len(bindings) == 1 and bindings[0].op is Op.ASSIGN and bindings[0].value is not None:
                return self.constant_value(bindings[0].value)
        s = string_value(expr)
        return s


# the node types Index._build does more for than walking their children, and their handlers
_BINDERS: dict[type, Callable[[Index, Any, int, Scope, _Push], Scope | None]] = {
    cst.Assign: Index._on_assign,
    cst.AnnAssign: Index._on_single_target,
    cst.AugAssign: Index._on_aug_assign,
    cst.NamedExpr: Index._on_single_target,
    cst.Import: Index._on_import,
    cst.ImportFrom: Index._on_import_from,
    cst.FunctionDef: Index._on_function,
    cst.Lambda: Index._on_lambda,
    cst.ClassDef: Index._on_class,
    cst.For: Index._on_for,
    cst.While: Index._on_while,
    **{tp: Index._on_comprehension for tp in _COMPREHENSIONS},
    cst.CompFor: Index._on_comp_for,
    cst.WithItem: Index._on_with_item,
    cst.Return: Index._on_return,
    cst.Global: Index._on_global,
    cst.Nonlocal: Index._on_nonlocal,
    cst.ExceptHandler: Index._on_except,
}

_AUG_OPS = {
    "MultiplyAssign": Op.MULTIPLY,
    "DivideAssign": Op.DIVIDE,
    "FloorDivideAssign": Op.FLOOR_DIVIDE,
    "AddAssign": Op.ADD,
    "SubtractAssign": Op.SUBTRACT,
    "PowerAssign": Op.POWER,
}

_BUILTINS = frozenset(dir(__import__("builtins")))


def _attr_to_str(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_attr_to_str(node.value)}.{node.attr.value}"
    return ""


def _path_through(local: str, imp: Assignment, qualname: str) -> str | None:
    """``qualname`` spelled through the import ``imp`` bound as ``local``, when it reaches it:
    `import accelerate.utils as au` -> `au.set_seed`. A deeper path through a bare package
    binding is reused only when the import statement itself loaded that submodule
    (`import torch.distributed` -> `torch.distributed.get_world_size`)."""
    q = imp.qualname or ""
    if not q or not qualname.startswith(q + "."):
        return None
    rest = qualname[len(q) + 1 :]
    if "." not in rest:
        return f"{local}.{rest}"
    module = qualname.rsplit(".", 1)[0]
    named = (
        [_attr_to_str(a.name) for a in imp.node.names] if isinstance(imp.node, cst.Import) else []
    )
    if any(module == n or module.startswith(n + ".") for n in named if n != q):
        return f"{local}.{rest}"
    return None


def call_keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def iter_names(node: cst.CSTNode) -> Iterable[cst.Name]:
    for sub in walk(node):
        if isinstance(sub, cst.Name):
            yield sub
