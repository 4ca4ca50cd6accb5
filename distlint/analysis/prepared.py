"""Whether a value went through ``accelerator.prepare`` (or Fabric's setup), asked three ways.

:meth:`Facts.is_prepared <distlint.analysis.facts.Facts.is_prepared>` answers whether a value
flows into a prepare call. The questions here follow a value the other way or in time: a
loader *returned* by prepare where it is used (a scheduler's ``len(loader)``), a name bound
again to what prepare returns *after* an iterator was taken from it, and an optimizer whose
parameters belong to a prepared model.
"""

from __future__ import annotations

import libcst as cst

from distlint.analysis.facts import Facts, Optimizer
from distlint.analysis.index import Assignment, Op


def returned_by_prepare(facts: Facts, loader: cst.BaseExpression, at: int, depth: int = 3) -> bool:
    """Was ``loader`` (a name / attribute / call) returned by ``accelerator.prepare`` at ``at``?"""
    if depth <= 0:
        return False
    if facts.is_prepare_call(loader):
        return True
    if isinstance(loader, cst.Name):
        return _name_returned_by_prepare(facts, loader, depth)
    if isinstance(loader, cst.Attribute):
        return _attribute_returned_by_prepare(facts, loader, at)
    return False


def _name_returned_by_prepare(facts: Facts, loader: cst.Name, depth: int) -> bool:
    """The latest binding of the name is prepare's result, or, for a parameter, the arguments
    of the helper's call sites are."""
    index = facts.index
    bindings = index.bindings_of(loader)
    if not bindings:
        return False
    latest = max(bindings, key=lambda b: b.order)
    if latest.op is Op.PARAM:
        # a helper gets the loader passed in: prepared at the call sites?
        return any(
            isinstance(v, cst.BaseExpression)
            and returned_by_prepare(facts, v, index.order(v), depth - 1)
            for v in index.values_of(loader)
            if not isinstance(v, cst.Param)
        )
    value = _assigned(latest)
    return value is not None and facts.is_prepare_call(value)


def _attribute_returned_by_prepare(facts: Facts, loader: cst.Attribute, at: int) -> bool:
    """`self.loader`: its latest assignment before ``at`` in the same function (else its
    latest anywhere) is prepare's result."""
    index = facts.index
    assigns = [a for a in index.attribute_assignments(loader) if a.op in (Op.ASSIGN, Op.UNPACK)]
    if not assigns:
        return False
    fn = index.enclosing_function(loader)
    same_fn = [a for a in assigns if index.enclosing_function(a.node) is fn and a.order < at]
    latest = max(same_fn or assigns, key=lambda a: a.order)
    value = _assigned(latest)
    return value is not None and facts.is_prepare_call(value)


def _assigned(assignment: Assignment) -> cst.BaseExpression | None:
    """The right-hand side of the statement that made ``assignment`` (also for unpacking)."""
    if assignment.value is not None:
        return assignment.value
    stmt = assignment.node
    return stmt.value if isinstance(stmt, (cst.Assign, cst.AnnAssign)) else None


def rebound_by_prepare_after(facts: Facts, loader: cst.BaseExpression, site: cst.Call) -> bool:
    """The name ``loader`` is bound again, after ``site``, to what `accelerator.prepare` returns."""
    index = facts.index
    if not isinstance(loader, cst.Name):
        return False
    for a in index.scope(loader).bindings.get(loader.value, ()):
        if a.order <= index.order(site):
            continue
        value = a.value if a.op is Op.ASSIGN else getattr(a.node, "value", None)
        if value is not None and facts.is_prepare_call(value):
            return True
    return False


def parameters_prepared(facts: Facts, opt: Optimizer) -> bool:
    """Does the optimizer (or the model whose parameters it holds) go through `accelerator.prepare`?
    An optimizer of a side model that each process trains on its own (never prepared, so never
    synchronised) does not see a batch that grows with the processes."""
    if opt.params is None or facts.is_prepared(opt.call):
        return True
    texts = facts.prepared_texts

    def is_prepared(node: cst.CSTNode, _q: str | None) -> bool:
        return isinstance(node, (cst.Name, cst.Attribute)) and facts.text_of(node) in texts

    # `params = list(model.parameters())`: follow the parameters back to the model they belong to
    return facts.flow.reaches(opt.params, is_prepared, key="prepared-model", depth=3)
