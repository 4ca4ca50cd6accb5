"""distlint.analysis.flow and the Index's reaching definitions."""

from __future__ import annotations

import textwrap

import libcst as cst

from distlint.analysis import Index, Op, ScopeKind


def index_of(code: str) -> Index:
    code = textwrap.dedent(code)
    return Index(cst.parse_module(code), code)


def name_uses(index: Index, name: str) -> list[cst.Name]:
    return [
        n
        for n in index.nodes_of(cst.Name)
        if n.value == name and not isinstance(index.parent(n), cst.AssignTarget)
    ]


def is_int(value: int):
    return lambda node, _q: isinstance(node, cst.Integer) and node.value == str(value)


def test_a_dominating_assignment_kills_the_earlier_ones():
    index = index_of("x = 1\nx = 2\nprint(x)\n")
    (use,) = name_uses(index, "x")
    assert index.reaches(use, is_int(2))
    assert not index.reaches(use, is_int(1))


def test_branches_and_loops_do_not_kill():
    index = index_of("x = 1\nif c:\n    x = 2\nprint(x)\nfor i in r:\n    x = 3\nprint(x)\n")
    first, second = name_uses(index, "x")
    assert index.reaches(first, is_int(1)) and index.reaches(first, is_int(2))
    assert not index.reaches(first, is_int(3))
    assert all(index.reaches(second, is_int(v)) for v in (1, 2, 3))


def test_self_reference_follows_the_previous_value():
    index = index_of("x = 1\nx = x + 1\nprint(x)\n")
    assert index.reaches(name_uses(index, "x")[-1], is_int(1))


def test_keyed_answers_are_memoised_and_shared():
    index = index_of("a = 1\nb = a\nc = b\nd = c\n")
    calls = []

    def pred(node, _q):
        calls.append(node)
        return isinstance(node, cst.Integer)

    d = index.module_scope.bindings["d"][0].value
    c = index.module_scope.bindings["c"][0].value
    assert index.reaches(d, pred, key="int")
    seen = len(calls)
    assert index.reaches(c, pred, key="int")  # answered from the memo of the first question
    assert len(calls) == seen


def test_closure_is_one_set_for_many_roots():
    index = index_of("o = make()\ns = sched(o)\nr = prepare(s)\nq = other()\n")
    r = index.module_scope.bindings["r"][0].value
    closure = index.flow.closure([r])
    o_call = index.module_scope.bindings["o"][0].value
    q_call = index.module_scope.bindings["q"][0].value
    assert o_call in closure and q_call not in closure


def test_a_class_call_is_a_caller_of_its_init_and_its_arguments_reach_the_parameters():
    index = index_of(
        """
        class Trainer:
            def __init__(self, lr, steps=10):
                self.lr = lr

        def make(lr):
            return lr

        t = Trainer(0.1)
        u = Trainer(steps=3, lr=0.2)
        v = mod.Trainer(0.3)
        """
    )
    init = index.functions["Trainer.__init__"][0]
    calls = [index.module.code_for_node(c) for c in index.callers(init)]
    assert calls == ["Trainer(0.1)", "Trainer(steps=3, lr=0.2)"]
    lr = init.params.params[1].name
    sources = {index.module.code_for_node(n) for n in index.values_of(lr) if n is not None}
    assert sources == {"0.1", "0.2"}


def test_method_callers_are_not_every_method_of_that_name():
    index = index_of(
        """
        class A:
            def forward(self, x):
                return x
            def run(self):
                return self.forward(1)

        class B:
            def forward(self, y):
                return y

        def step(z):
            return z

        b = B()
        b.forward(2)
        optimizer.step()
        step(3)
        """
    )
    a_forward = index.functions["A.forward"][0]
    b_forward = index.functions["B.forward"][0]
    step = index.functions["step"][0]
    assert [index.module.code_for_node(c) for c in index.callers(a_forward)] == ["self.forward(1)"]
    assert index.callers(b_forward) == []  # `b.forward` is ambiguous between two classes
    assert [index.module.code_for_node(c) for c in index.callers(step)] == ["step(3)"]


def test_import_records():
    index = index_of("import a.b as c\nfrom ..pkg import mod\nfrom x import y as z\n")
    scope = index.module_scope
    assert scope.bindings["c"][0].record.module == "a.b"
    record = scope.bindings["mod"][0].record
    assert (record.module, record.name, record.level) == ("pkg", "mod", 2)
    assert scope.bindings["mod"][0].qualname is None  # a project module, not a library
    assert scope.bindings["z"][0].record.name == "y"


def test_index_import_record_of_a_use():
    index = index_of("from .helpers import get_world_size as gws\nx = gws()\nprint(x)\n")
    use = name_uses(index, "gws")[-1]
    record = index.import_record(use)
    assert (record.module, record.name, record.level) == ("helpers", "get_world_size", 1)
    assert index.import_record(name_uses(index, "x")[0]) is None


def test_binding_tags_are_enums_that_stay_their_strings():
    """`Op` / `ScopeKind` replace the string tags; code that still compares, looks up or formats
    the strings must get the same answers (a plain `(str, Enum)` formats as `Op.PARAM`)."""
    index = index_of("import os\ndef f(a):\n    b = a\n    b += 1\n    return [c for c in b]\n")
    fn = index.functions["f"][0]
    (param,) = index.lookup("a", index.scope(fn.body))
    ops = [a.op for a in index.lookup("b", index.scope(fn.body))]
    assert param.op is Op.PARAM and ops == [Op.ASSIGN, Op.ADD]
    assert index.scope(fn.body).kind is ScopeKind.FUNCTION
    assert index.module_scope.bindings["os"][0].op is Op.IMPORT
    for tag in (*Op, *ScopeKind):
        assert tag == tag.value and hash(tag) == hash(tag.value)
        assert tag.value in {tag} and tag in frozenset({tag.value}) and {tag.value: 1}[tag] == 1
        assert f"{tag}" == str(tag) == f"{tag:>0}" == tag.value
