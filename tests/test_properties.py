"""Property tests with generated programs (issue #8): no crash, fixes parse, fixes are idempotent,
`check` after `fix --unsafe-fixes` finds nothing fixable, untouched lines stay byte-identical.

Three sources of programs:
- ``hypothesmith.from_grammar()``: any text CPython's grammar accepts (as black and LibCST test);
- ``hypothesmith.from_node()``: LibCST-built modules;
- ``training_scripts()``: scripts assembled from the patterns the rules look for (every import
  alias form, seeding calls, Accelerator with or without DataLoaderConfiguration(split_batches=),
  optimizers whose lr comes from names / args / config dicts, scaled or not, DataLoader batch
  sizes, prints of the total batch size, schedulers, loss division by the accumulation steps,
  loops, helper functions and classes), with "keep" lines no fix may touch spread between them.

By default each property runs a bounded number of examples (the file takes well under a minute
on two cores). ``DISTLINT_LONG_PROPERTIES=1`` runs many more (``DISTLINT_PROPERTY_EXAMPLES=N``
sets the count of the training-script property; the others scale from it).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import hypothesmith
from helpers import FIXTURES
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from distlint.config import Config
from distlint.model import FileResult
from distlint.runner import lint_source

LONG = os.environ.get("DISTLINT_LONG_PROPERTIES", "") not in ("", "0")
SCRIPT_EXAMPLES = int(os.environ.get("DISTLINT_PROPERTY_EXAMPLES", "5000" if LONG else "100"))
GRAMMAR_EXAMPLES = SCRIPT_EXAMPLES if LONG else 50
NODE_EXAMPLES = SCRIPT_EXAMPLES // 5 if LONG else 10

_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("distlint-ci", max_examples=SCRIPT_EXAMPLES, **_COMMON)
settings.register_profile("distlint-long", max_examples=SCRIPT_EXAMPLES, **_COMMON)

# Every rule's trigger words, so that generated code is parsed and every rule really runs on it
# (a file without any trigger is skipped before parsing).
TRIGGER_HEADER = (
    "# manual_seed seed random_split DataLoader optim AdamW prepare backward split_batches\n"
)

# Errors that are a fair answer to generated input; anything else (above all "internal error in
# DLxxx", or a fix that "would not parse") is a bug.
ACCEPTABLE_ERRORS = (
    "syntax error",
    "cannot parse",
    "LibCST cannot parse",
    "too deeply nested",
    "too deep to analyse",
)


def _assert_no_bad_errors(result: FileResult, valid: bool) -> None:
    for error in result.errors:
        assert "internal error" not in error.message, error
        assert "would not parse" not in error.message, error
        if valid:
            # a program CPython accepts may only be refused as too deep or beyond LibCST's grammar
            assert error.message.startswith(
                ("LibCST cannot parse", "cannot parse", "too deeply nested", "expression nested")
            ), error
        else:
            assert error.message.startswith(ACCEPTABLE_ERRORS), error


def _compiles(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning about generated nonsense such as `1()`
        try:
            compile(source, "<generated>", "exec", flags=0x400, dont_inherit=True)  # ast only
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def check_properties(source: str, keep_lines: Sequence[str] = ()) -> FileResult:
    """The properties every input must satisfy; returns the fix result for further checks."""
    valid = _compiles(source)
    checked = lint_source(source, "train.py", Config())
    _assert_no_bad_errors(checked, valid)

    fixed = lint_source(source, "train.py", Config(), fix=True, unsafe_fixes=True)
    _assert_no_bad_errors(fixed, valid)
    if fixed.fixed_source is None:
        assert fixed.fixes_applied == 0
        return fixed
    new = fixed.fixed_source
    note(f"fixed source:\n{new}")
    assert fixed.fixes_applied > 0
    # Fixes parse: with LibCST (the engine re-parses) and with CPython.
    assert _compiles(new) or not valid, "a fix produced code CPython rejects"
    # Idempotent: fixing the fixed text changes nothing.
    again = lint_source(new, "train.py", Config(), fix=True, unsafe_fixes=True)
    _assert_no_bad_errors(again, valid)
    assert again.fixed_source is None, f"second fix changed the code:\n{again.fixed_source}"
    # `check` after `fix --unsafe-fixes` reports no fixable finding.
    rechecked = lint_source(new, "train.py", Config())
    fixable = [f for f in rechecked.findings if f.fix is not None]
    assert not fixable, fixable
    assert sorted(rechecked.findings, key=_key) == sorted(fixed.findings, key=_key)
    # Lines no fix is about are byte-identical, in the same order.
    new_lines = new.splitlines(keepends=True)
    positions = [_find_line(new_lines, line) for line in keep_lines]
    assert all(p is not None for p in positions), [
        line for line, p in zip(keep_lines, positions) if p is None
    ]
    assert positions == sorted(positions), "untouched lines were reordered"
    return fixed


def _key(finding):
    return (finding.code, finding.line, finding.column, finding.message)


def _find_line(lines: list[str], wanted: str) -> int | None:
    matches = [i for i, line in enumerate(lines) if line == wanted]
    return matches[0] if len(matches) == 1 else None


# --------------------------------------------------------------------------------------------
# Arbitrary Python: hypothesmith
# --------------------------------------------------------------------------------------------


@settings(max_examples=GRAMMAR_EXAMPLES, **_COMMON)
@given(source=hypothesmith.from_grammar())
def test_grammar_generated_programs(source):
    check_properties(source)
    check_properties(TRIGGER_HEADER + source)


@settings(max_examples=NODE_EXAMPLES, **_COMMON)
@given(source=hypothesmith.from_node())
def test_libcst_generated_modules(source):
    check_properties(source)
    check_properties(TRIGGER_HEADER + source)


# --------------------------------------------------------------------------------------------
# Training scripts mixing the rules' patterns
# --------------------------------------------------------------------------------------------


@dataclass
class Names:
    """How the script refers to each library object, given the import forms drawn."""

    imports: list[str]
    torch: str
    optim: str  # expression for the torch.optim module or the optimizer class' module
    optimizer_class: str
    dataloader: str
    accelerator_class: str
    set_seed: str | None
    dl_config: str | None
    np_random: str
    manual_seed: str


@st.composite
def names(draw) -> Names:
    imports: list[str] = []
    torch = draw(st.sampled_from(["torch", "T"]))
    imports.append("import torch" if torch == "torch" else "import torch as T")
    manual_seed = draw(st.sampled_from([f"{torch}.manual_seed", "manual_seed", "seed_torch"]))
    if manual_seed == "manual_seed":
        imports.append("from torch import manual_seed")
    elif manual_seed == "seed_torch":
        imports.append("from torch import manual_seed as seed_torch")
    form = draw(st.sampled_from(["module", "from", "alias", "class"]))
    opt_name = draw(st.sampled_from(["AdamW", "SGD", "Adam"]))
    if form == "module":
        optimizer_class, optim = f"{torch}.optim.{opt_name}", f"{torch}.optim"
    elif form == "from":
        imports.append("from torch import optim")
        optimizer_class, optim = f"optim.{opt_name}", "optim"
    elif form == "alias":
        imports.append("import torch.optim as topt")
        optimizer_class, optim = f"topt.{opt_name}", "topt"
    else:
        imports.append(f"from torch.optim import {opt_name} as Opt")
        optimizer_class, optim = "Opt", f"{torch}.optim"
    dl_form = draw(st.sampled_from(["from", "alias", "module", "rename"]))
    if dl_form == "from":
        imports.append("from torch.utils.data import DataLoader")
        dataloader = "DataLoader"
    elif dl_form == "alias":
        imports.append("import torch.utils.data as tud")
        dataloader = "tud.DataLoader"
    elif dl_form == "rename":
        imports.append("from torch.utils.data import DataLoader as DL")
        dataloader = "DL"
    else:
        dataloader = f"{torch}.utils.data.DataLoader"
    acc_form = draw(st.sampled_from(["from", "module", "alias"]))
    if acc_form == "from":
        imports.append("from accelerate import Accelerator")
        accelerator_class = "Accelerator"
    elif acc_form == "module":
        imports.append("import accelerate")
        accelerator_class = "accelerate.Accelerator"
    else:
        imports.append("from accelerate import Accelerator as Acc")
        accelerator_class = "Acc"
    set_seed = draw(
        st.sampled_from([None, "set_seed", "accelerate.utils.set_seed", "transformers.set_seed"])
    )
    if set_seed == "set_seed":
        imports.append("from accelerate.utils import set_seed")
    elif set_seed == "accelerate.utils.set_seed":
        imports.append("import accelerate.utils")
    elif set_seed == "transformers.set_seed":
        imports.append("import transformers")
    dl_config = draw(
        st.sampled_from(
            [None, "DataLoaderConfiguration", "accelerate.utils.DataLoaderConfiguration"]
        )
    )
    if dl_config == "DataLoaderConfiguration":
        imports.append("from accelerate.utils import DataLoaderConfiguration")
    elif dl_config is not None:
        imports.append("import accelerate.utils")
    np_form = draw(st.sampled_from(["np", "numpy", "npr"]))
    if np_form == "np":
        imports.append("import numpy as np")
        np_random = "np.random"
    elif np_form == "numpy":
        imports.append("import numpy")
        np_random = "numpy.random"
    else:
        imports.append("from numpy import random as npr")
        np_random = "npr"
    imports += ["import random", "import argparse"]
    imports = list(dict.fromkeys(draw(st.permutations(imports))))
    return Names(
        imports,
        torch,
        optim,
        optimizer_class,
        dataloader,
        accelerator_class,
        set_seed,
        dl_config,
        np_random,
        manual_seed,
    )


SEED_EXPRS = ["42", "seed", "args.seed", "seed + rank", "config['seed']"]
LR_SOURCES = ["lr", "args.lr", "config['lr']", "3e-4", "base_lr"]
BS_SOURCES = ["batch_size", "args.batch_size", "config['batch_size']", "16"]
GA_SOURCES = ["accum", "args.gradient_accumulation_steps", "4"]


@st.composite
def blocks(draw, n: Names, acc: str) -> list[list[str]]:
    """Statement groups (lists of lines at indentation 0 relative to their scope)."""
    out: list[list[str]] = []
    seed = draw(st.sampled_from(SEED_EXPRS))
    lr = draw(st.sampled_from(LR_SOURCES))
    bs = draw(st.sampled_from(BS_SOURCES))
    ga = draw(st.sampled_from(GA_SOURCES))
    out.append(
        [
            "seed = 1234",
            "rank = 0",
            "base_lr = 1e-3",
            "lr = 2e-3",
            "batch_size = 32",
            "accum = 2",
            "epochs = 3",
            "config = {'lr': 1e-4, 'batch_size': 8, 'seed': 7}",
            "args = argparse.Namespace(lr=1e-3, batch_size=16, seed=3, gradient_accumulation_steps=2)",
        ]
    )
    # seeding, possibly partial, possibly guarded
    seeding: list[str] = []
    for call in draw(
        st.lists(
            st.sampled_from(["torch", "cuda", "random", "numpy", "full"]), max_size=4, unique=True
        )
    ):
        if call == "torch":
            seeding.append(f"{n.manual_seed}({seed})")
        elif call == "cuda":
            seeding += [
                f"if {n.torch}.cuda.is_available():",
                f"    {n.torch}.cuda.manual_seed_all({seed})",
            ]
        elif call == "random":
            seeding.append(f"random.seed({seed})")
        elif call == "numpy":
            seeding.append(f"{n.np_random}.seed({seed})")
        elif n.set_seed:
            seeding.append(f"{n.set_seed}({seed})")
    if draw(st.booleans()):  # the data order drawn from numpy: DL101 counts only what is drawn
        seeding.append(f"order = {n.np_random}.permutation(8)")
    split = draw(st.sampled_from(["", "split_batches=True", "split_batches=flag", "config"]))
    if split == "config" and n.dl_config:
        split = f"dataloader_config={n.dl_config}(split_batches={draw(st.sampled_from(['True', 'False', 'flag']))})"
    elif split == "config":
        split = ""
    accumulation = f"gradient_accumulation_steps={ga}" if draw(st.booleans()) else ""
    kwargs = ", ".join(k for k in draw(st.permutations([split, accumulation])) if k)
    creation = ["flag = True", f"{acc} = {n.accelerator_class}({kwargs})"]
    model = [f"model = {n.torch}.nn.Linear(4, 2)"]
    loader = [
        f"loader = {n.dataloader}(range(64), batch_size={bs}, shuffle={draw(st.sampled_from(['True', 'False']))})"
    ]
    scaled = draw(st.sampled_from(["", f" * {acc}.num_processes", " * world_size"]))
    if scaled == " * world_size":
        creation.append(f"world_size = {acc}.num_processes")
    lr_arg = draw(st.sampled_from(["lr={}", "{}"])).format(lr + scaled)
    optimizer = [f"optimizer = {n.optimizer_class}(model.parameters(), {lr_arg})"]
    prepared = draw(
        st.sampled_from(
            [
                "model, optimizer, loader",
                "model, optimizer, loader",
                "model, optimizer",
                "loader",
                None,
            ]
        )
    )
    prepare = [f"{prepared} = {acc}.prepare({prepared})"] if prepared else []
    total = draw(
        st.sampled_from(
            [
                "epochs * len(loader)",
                "epochs * 100",
                f"epochs * len(loader) // {ga}",
            ]
        )
    )
    sched_kind = draw(st.sampled_from(["cosine", "onecycle", "linear", None]))
    scheduler: list[str] = []
    if sched_kind == "cosine":
        scheduler = [
            f"scheduler = {n.optim}.lr_scheduler.CosineAnnealingLR(optimizer, T_max={total})"
        ]
    elif sched_kind == "onecycle":
        scheduler = [
            f"scheduler = {n.optim}.lr_scheduler.OneCycleLR(optimizer, max_lr={lr}, total_steps={total})"
        ]
    elif sched_kind == "linear":
        scheduler = [
            "import transformers",
            f"scheduler = transformers.get_linear_schedule_with_warmup(optimizer, 0, {total})",
        ]
    if scheduler and draw(st.integers(0, 2)) > 0:
        scheduler.append(f"scheduler = {acc}.prepare(scheduler)")
    report = draw(
        st.sampled_from(
            [
                [f'print(f"total batch size: {{{bs} * {ga}}}")'],
                [f"{acc}.print('Global batch size', {bs})"],
                [
                    f"total_batch_size = {bs} * {ga} * {acc}.num_processes",
                    "print(total_batch_size)",
                ],
                [
                    f"total_batch_size = {bs} * {ga}",
                    "print(f'Total train batch size = {total_batch_size}')",
                ],
                [],
            ]
        )
    )
    division = draw(
        st.sampled_from([f"loss = loss / {ga}", f"loss /= {ga}", "", f"loss = loss / {ga} / 2"])
    )
    accumulate = draw(st.booleans())
    body = (
        ["loss = model(batch).sum()"]
        + ([division] if division else [])
        + [f"{acc}.backward(loss)", "optimizer.step()"]
    )
    if scheduler:
        body.append("scheduler.step()")
    if accumulate:
        body = [f"with {acc}.accumulate(model):"] + ["    " + line for line in body]
    iterable = draw(st.sampled_from(["loader", "enumerate(loader)", "tqdm(loader)"]))
    target = "step, batch" if iterable == "enumerate(loader)" else "batch"
    if iterable == "tqdm(loader)":
        loop = ["from tqdm import tqdm"]
    else:
        loop = []
    loop += ["for epoch in range(epochs):", f"    for {target} in {iterable}:"] + [
        "        " + line for line in body
    ]
    helper = draw(st.sampled_from([None, "optimizer", "loader", "seed"]))
    groups = [seeding, creation, model, loader, optimizer, prepare, scheduler, report, loop]
    if helper == "optimizer":
        out.append(
            [
                "def make_optimizer(model, lr):",
                f"    return {n.optimizer_class}(model.parameters(), lr=lr)",
            ]
        )
        optimizer[:] = [f"optimizer = make_optimizer(model, {lr}{scaled})"]
    elif helper == "loader":
        out.append(["def make_loader(bs):", f"    return {n.dataloader}(range(64), batch_size=bs)"])
        loader[:] = [f"loader = make_loader({bs})"]
    elif helper == "seed" and seeding:
        out.append(["def seed_everything(seed):"] + ["    " + line for line in seeding])
        seeding[:] = [f"seed_everything({seed})"]
    if draw(st.integers(0, 3)) == 0:
        groups = [
            creation,
            model,
            seeding,
            loader,
            optimizer,
            prepare,
            scheduler,
            report,
            loop,
        ]  # seeding too late
    if draw(st.integers(0, 4)) == 0:
        groups = draw(st.permutations(groups))  # out-of-order scripts: linted, never crash
    out += [g for g in groups if g]
    return out


KEEP = "keep_{i} = ( {i} ,)   # untouched {i}\n"


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


@st.composite
def training_scripts(draw) -> tuple[str, list[str]]:
    """(source, lines that no fix may change)."""
    n = draw(names())
    shape = draw(st.sampled_from(["module", "main", "class"]))
    acc = "self.accelerator" if shape == "class" else draw(st.sampled_from(["accelerator", "acc"]))
    groups = draw(blocks(n, acc))
    keep: list[str] = []
    lines: list[str] = ['"""Generated training script."""'] + n.imports + [""]

    def keep_line(prefix: str) -> str:
        text = prefix + KEEP.format(i=len(keep))
        keep.append(text)
        return text.rstrip("\n")

    if shape == "module":
        for group in groups:
            lines += group
            if draw(st.booleans()):
                lines.append(keep_line(""))
    else:
        helpers = [g for g in groups if g[0].startswith("def ")]
        for group in helpers:
            lines += group + [""]
        rest = [g for g in groups if not g[0].startswith("def ")]
        if shape == "main":
            lines.append("def main():")
            prefix = "    "
        else:
            lines += [
                "class Trainer:",
                "    def __init__(self):",
                "        self.ready = True",
                "",
                "    def train(self):",
            ]
            prefix = "        "
        lines.append(keep_line(prefix))
        for group in rest:
            lines += _indent(group, prefix)
            if draw(st.booleans()):
                lines.append(keep_line(prefix))
        lines += ["", ""]
        lines.append("if __name__ == '__main__':")
        lines.append("    main()" if shape == "main" else "    Trainer().train()")
    lines.append(keep_line(""))
    source = "\n".join(lines) + "\n"
    return source, keep


@settings(max_examples=SCRIPT_EXAMPLES, **_COMMON)
@given(script=training_scripts())
def test_training_scripts(script):
    source, keep = script
    note(f"source:\n{source}")
    assert _compiles(source), source
    result = check_properties(source, keep)
    # generated scripts are valid Python: no error at all
    assert not result.errors, result.errors


def test_training_script_strategy_reaches_every_rule():
    """The generator is worth its examples: across a fixed sample the scripts trigger every
    default rule and some fixes apply (otherwise the properties above test nothing)."""
    seen = set()
    fixed = 0

    @settings(max_examples=60, database=None, derandomize=True, **_COMMON)
    @given(script=training_scripts())
    def sample(script):
        nonlocal fixed
        result = lint_source(script[0], "train.py", Config(), fix=True, unsafe_fixes=True)
        seen.update(f.code for f in lint_source(script[0], "train.py", Config()).findings)
        fixed += bool(result.fixed_source)

    sample()
    assert {"DL101", "DL102", "DL201", "DL202", "DL203", "DL301", "DL302", "DL303"} <= seen, seen
    assert fixed >= 10


CLI_EXAMPLES = SCRIPT_EXAMPLES // 10 if LONG else 8


@settings(max_examples=CLI_EXAMPLES, **_COMMON)
@given(script=training_scripts(), newline=st.sampled_from(["\n", "\r\n"]), latin1=st.booleans())
def test_cli_fix_then_check(tmp_path_factory, script, newline, latin1):
    """Through the command users run: `distlint fix --unsafe-fixes` then `distlint check` finds
    nothing fixable; the file keeps its line endings and encoding, and untouched lines their bytes."""
    from click.testing import CliRunner

    from distlint.cli import main

    source, keep = script
    encoding = "latin-1" if latin1 else "utf-8"
    if latin1:
        source = "# -*- coding: latin-1 -*-\n" + source.replace(
            "# untouched", "# untouched \u00e9t\u00e9"
        )
        keep = [line.replace("# untouched", "# untouched \u00e9t\u00e9") for line in keep]
    path = tmp_path_factory.mktemp("cli") / "train.py"
    path.write_bytes(source.replace("\n", newline).encode(encoding))
    runner = CliRunner()
    fixed = runner.invoke(main, ["fix", "--isolated", "--no-cache", "--unsafe-fixes", str(path)])
    assert fixed.exit_code in (0, 1), fixed.output
    assert "error" not in fixed.output.lower().replace("errors", ""), fixed.output
    data = path.read_bytes()
    text = data.decode(encoding)  # still in its own encoding
    assert compile(text, str(path), "exec", flags=0x400, dont_inherit=True)
    if newline == "\r\n":
        assert "\n" not in text.replace("\r\n", ""), "line endings were mixed by the fix"
    lines = text.replace("\r\n", "\n").splitlines(keepends=True)
    assert all(_find_line(lines, line) is not None for line in keep)
    checked = runner.invoke(
        main, ["check", "--isolated", "--no-cache", "--unsafe-fixes", str(path)]
    )
    assert checked.exit_code in (0, 1), checked.output
    assert "[*]" not in checked.output, checked.output  # nothing fixable is left


# Valid but unusual code around the names the rules follow: star-args, walrus, lambdas, chained
# and annotated assignments, async loops, match, comprehensions, deletions, semicolons.
ODD_STATEMENTS = [
    "optimizer = torch.optim.AdamW(*params, **kw)",
    "lr = lambda: 1e-3",
    "loader = DataLoader(**cfg)",
    "objs = accelerator.prepare(*objs)",
    "torch.manual_seed(*s)",
    "for (a, b) in loader:\n    pass",
    "async def fetch():\n    async for batch in loader:\n        loss = batch / accum\n        accelerator.backward(loss)",
    "del lr",
    "def g():\n    global lr\n    lr = 5\n    return torch.optim.SGD([], lr)",
    "lr: float = 1e-3",
    "(lr := 3e-4)",
    "optimizer = torch.optim.AdamW(model.parameters(), lr=lr if flag else 2 * lr)",
    "match config:\n    case {'lr': lr}:\n        pass\n    case _:\n        pass",
    "loss = model(1); loss /= accum; accelerator.backward(loss)",
    "accelerator = Accelerator(**{'split_batches': True})",
    "loader = DataLoader(range(8), batch_size)",
    "@torch.no_grad()\ndef evaluate(loader=loader):\n    return [b for b in loader]",
    "print(f'{batch_size=}')",
    "lr = args.lr = 1e-3",
    "lr, batch_size = 1e-3, 8",
    "seeds = [torch.manual_seed(i) for i in range(3)]",
    "class Cfg:\n    lr = 1e-3\n    batch_size = 4",
    "optimizer = torch.optim.SGD(model.parameters(), lr=Cfg.lr * accelerator.num_processes)",
    "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=len(loader))",
    "try:\n    import numpy as np\nexcept ImportError:\n    np = None",
    "if TYPE_CHECKING:\n    from accelerate import Accelerator",
    "with open('x') as fh, accelerator.accumulate(model):\n    pass",
    "set_seed = None",
    "torch = None",
    "accelerator.backward(loss / accum)",
]


@st.composite
def odd_training_scripts(draw) -> tuple[str, list[str]]:
    source, keep = draw(training_scripts())
    lines = source.split("\n")
    for statement in draw(st.lists(st.sampled_from(ODD_STATEMENTS), min_size=1, max_size=6)):
        # a line at column 0 after the imports starts a module-level statement
        starts = [
            i
            for i, line in enumerate(lines)
            if i > 1
            and line[:1].isalpha()
            and not lines[i - 1].startswith("@")
            and not line.startswith(("import ", "from ", "except", "else", "elif", "finally"))
        ]
        at = draw(st.sampled_from(starts))
        lines[at:at] = statement.split("\n")
    return "\n".join(lines), keep


@settings(max_examples=SCRIPT_EXAMPLES // 2, **_COMMON)
@given(script=odd_training_scripts())
def test_training_scripts_with_unusual_code(script):
    source, keep = script
    note(f"source:\n{source}")
    assert _compiles(source), source
    result = check_properties(source, keep)
    assert not result.errors, result.errors


# --------------------------------------------------------------------------------------------
# Bytes LibCST does not round-trip (issue #16 items 0-2): edits on the original text keep them
# --------------------------------------------------------------------------------------------


@st.composite
def form_feed_scripts(draw) -> tuple[str, list[str]]:
    """Training scripts with form feeds at the start of module-level statement lines (PEP 8's
    page breaks): on every keep line, and on some others."""
    source, keep = draw(training_scripts())
    lines = source.split("\n")
    out = []
    for line in lines:
        at_module_level = line[:1].isalpha() and not line.startswith(
            ("else", "elif", "except", "finally")
        )
        if at_module_level and (line + "\n" in keep or draw(st.booleans())):
            line = "\x0c" + line
        out.append(line)
    keep = ["\x0c" + line if not line[:1].isspace() else line for line in keep]
    return "\n".join(out), keep


@settings(max_examples=max(SCRIPT_EXAMPLES // 4, 20), **_COMMON)
@given(script=form_feed_scripts(), cr_only=st.booleans())
def test_form_feeds_and_cr_only_endings_survive_fixes(script, cr_only):
    source, keep = script
    if cr_only:
        source = source.replace("\n", "\r")
        keep = [line.replace("\n", "\r") for line in keep]
    note(f"source:\n{source!r}")
    assert _compiles(source), source
    fixed = lint_source(source, "train.py", Config(), fix=True, unsafe_fixes=True)
    assert not fixed.errors, fixed.errors
    new = fixed.fixed_source
    if new is None:
        return
    # every keep line, form feed and line ending included, is still there, byte for byte
    # (str.splitlines would also split at the form feeds)
    new_lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", new)
    assert all(_find_line(new_lines, line) is not None for line in keep), [
        line for line in keep if _find_line(new_lines, line) is None
    ]
    if cr_only:
        assert "\n" not in new, "a fix brought a \\n into a file with \\r line endings"
        assert new.endswith("\r"), "the final \\r was lost"
    assert new.count("\x0c") >= len([line for line in keep if line.startswith("\x0c")])
    again = lint_source(new, "train.py", Config(), fix=True, unsafe_fixes=True)
    assert again.fixed_source is None, "second fix changed the code"


def test_comments_before_a_whitespace_only_last_line_survive_a_fix():
    """Issue #16 item 0: LibCST dropped these two comments when it re-serialised the module."""
    source = (
        "import random, torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
        "torch.manual_seed(0)\nrandom.shuffle(order := [0, 1])\nx = 1\n    # comment A\n    # comment B\n "
    )
    fixed = lint_source(source, "t.py", Config(), fix=True)
    assert fixed.fixes_applied == 1 and not fixed.errors
    assert fixed.fixed_source.endswith("x = 1\n    # comment A\n    # comment B\n ")
    assert "set_seed(0)" in fixed.fixed_source


def test_a_fixed_text_changed_outside_its_edits_is_refused(monkeypatch):
    """Whatever produced it, a fixed text that differs from the input outside the edited spans
    is never returned (so never written): the fix is refused with a message."""
    from distlint import edits

    real = edits.splice

    def sloppy(text, chosen):
        return real(text, chosen).replace("x = 1", "x = 2")  # a byte no edit covers

    monkeypatch.setattr(edits, "splice", sloppy)
    source = (
        "import random, torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
        "torch.manual_seed(0)\nrandom.shuffle(order := [0, 1])\nx = 1\n"
    )
    result = lint_source(source.encode(), "t.py", Config(), fix=True)
    assert result.fixed_source is None and result.fixed_bytes is None
    assert result.fixes_applied == 0
    assert any("outside the edited spans" in e.message for e in result.errors), result.errors
    assert [f.code for f in result.findings] == ["DL101"]  # what the input still has


def test_a_removed_statement_after_a_form_feed_takes_the_form_feed_along():
    """Found by test_form_feeds_and_cr_only_endings_survive_fixes: LibCST does not regenerate
    the form feed that starts `\\x0cif torch.cuda...`, the block was placed after it, and its
    removal left the form feed to join the next line (`\\x0c\\x0ckeep_0 = ...`)."""
    source = (
        '"""Generated training script."""\n'
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from accelerate import Accelerator\n"
        "from accelerate.utils import set_seed\n"
        "from accelerate.utils import DataLoaderConfiguration\n"
        "import numpy as np\n"
        "import random\n"
        "import argparse\n"
        "\n"
        "seed = 1234\n"
        "rank = 0\n"
        "base_lr = 1e-3\n"
        "lr = 2e-3\n"
        "batch_size = 32\n"
        "accum = 2\n"
        "epochs = 3\n"
        "config = {'lr': 1e-4, 'batch_size': 8, 'seed': 7}\n"
        "args = argparse.Namespace(lr=1e-3, batch_size=16, seed=3, gradient_accumulation_steps=2)\n"
        "flag = True\n"
        "accelerator = Accelerator()\n"
        "model = torch.nn.Linear(4, 2)\n"
        "torch.manual_seed(42)\n"
        "\x0cif torch.cuda.is_available():\n"
        "    torch.cuda.manual_seed_all(42)\n"
        "\x0ckeep_0 = ( 0 ,)   # untouched 0\n"
        "loader = DataLoader(range(64), batch_size=batch_size, shuffle=True)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))\n"
        'print(f"total batch size: {batch_size * accum}")\n'
        "for epoch in range(epochs):\n"
        "    for batch in loader:\n"
        "        loss = model(batch).sum()\n"
        "        loss = loss / accum\n"
        "        accelerator.backward(loss)\n"
        "        optimizer.step()\n"
        "        scheduler.step()\n"
        "\x0ckeep_1 = ( 1 ,)   # untouched 1\n"
    )
    fixed = lint_source(source, "train.py", Config(), fix=True, unsafe_fixes=True)
    assert fixed.fixed_source is not None
    assert "\n\x0ckeep_0 = ( 0 ,)   # untouched 0\n" in fixed.fixed_source


# --------------------------------------------------------------------------------------------
# Odd indentation Python reads otherwise than LibCST (issue #27 item 2): fuzzed mutants of the
# fixture scripts, with backslash-only lines, form feeds and odd block indentation inserted at
# statement boundaries. Positions, fixes and noqa lines must be those of the unmutated file.
# --------------------------------------------------------------------------------------------

MUTANT_SOURCES = sorted(
    [*FIXTURES.glob("DL*/bad.py"), *(FIXTURES / "scripts").glob("*.py")], key=str
)
MUTANTS = int(os.environ.get("DISTLINT_MUTANTS", "400" if LONG else "36"))
_BLANK_OR_CONTINUATION = re.compile(r"\\\r?\n|[\s\x0c]+")


def _squeezed(text: str) -> str:
    """``text`` without blanks, form feeds and backslash continuations: what the mutations
    change, so that a mutant's code compares with the original's."""
    return _BLANK_OR_CONTINUATION.sub("", text)


def _statement_lines(text: str) -> list[tuple[int, int]]:
    """(0-based line, indentation) of each statement that starts its physical line."""
    import ast

    lines = text.split("\n")
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt):
            line = lines[node.lineno - 1]
            if not line[: node.col_offset].strip() and not getattr(node, "decorator_list", None):
                out.add((node.lineno - 1, node.col_offset))
    return sorted(out)


def _mutate(text: str, rng) -> str:
    """``text`` with one to three odd-indentation mutations at statement boundaries."""
    import ast

    lines = text.split("\n")
    starts = _statement_lines(text)
    for at, col in sorted(rng.sample(starts, min(len(starts), rng.randint(1, 3))), reverse=True):
        indent, rest = lines[at][:col], lines[at][col:]
        kind = rng.randrange(7)
        if kind == 0:  # the repro: a backslash-only line, the statement indented more
            lines[at] = f"{indent}\\\n{indent}{' ' * rng.randint(0, 9)}{rest}"
        elif kind == 1:  # a backslash-only line at column 0: the statement's blanks count
            lines[at] = f"\\\n{indent}{rest}"
        elif kind == 2:  # the backslash line sets the indentation, the statement's are odd
            lines[at] = f"{indent}\\\n{' ' * rng.randint(0, 3)}{rest}"
        elif kind == 3:  # a form feed before the indentation
            lines[at] = f"\x0c{indent}{rest}"
        elif kind == 4:  # blanks, a form feed (the column starts again), the indentation
            lines[at] = f"{' ' * rng.randint(1, 6)}\x0c{indent}{rest}"
        elif kind == 5:  # a form-feed line before the statement
            lines[at] = f"\x0c\n{indent}{rest}"
        else:  # the block the statement opens, indented by an odd amount
            lines = "\n".join(lines).split("\n")  # (lines below hold mutations already)
            try:
                tree = ast.parse("\n".join(lines))
            except SyntaxError:
                continue
            node = next(
                (
                    n
                    for n in ast.walk(tree)
                    if isinstance(n, ast.stmt) and n.lineno - 1 == at and hasattr(n, "body")
                ),
                None,
            )
            if node is None or not isinstance(node.body, list) or not node.body:
                continue
            first, last = node.body[0].lineno - 1, node.end_lineno or node.lineno
            block = lines[first:last]
            inner = node.body[0].col_offset
            if any("'''" in b or '"""' in b for b in block):
                continue
            odd = " " * (col + rng.choice([1, 3, 5, 7]))
            lines[first:last] = [
                odd + b[inner:] if b[:inner].strip() == "" and b.strip() else b for b in block
            ]
    return "\n".join(lines)


def _mutants() -> list[tuple[str, str, str]]:
    """(name, original, mutant) for a fixed seed: mutants Python compiles and that differ."""
    import random

    rng = random.Random(27)
    out = []
    tries = 0
    while len(out) < MUTANTS and tries < MUTANTS * 5:
        tries += 1
        path = rng.choice(MUTANT_SOURCES)
        original = path.read_text(encoding="utf-8")
        mutant = _mutate(original, rng)
        if mutant != original and _compiles(mutant):
            out.append((f"{path.parent.name}/{path.name}#{tries}", original, mutant))
    return out


def _range_text(text: str, finding) -> str:
    from distlint.edits import LineIndex

    lines = LineIndex(text)
    start = lines.offset(finding.line, finding.column - 1)
    return text[start : lines.offset(finding.end_line, finding.end_column - 1)]


def _lint_both(name: str, original: str, mutant: str, fix: bool = False):
    path = name.split("#")[0].rsplit("/", 1)[-1]
    return (
        lint_source(original, path, Config(), fix=fix, unsafe_fixes=True),
        lint_source(mutant, path, Config(), fix=fix, unsafe_fixes=True),
    )


def test_odd_indentation_mutants_keep_positions_fixes_and_noqa_lines():
    from distlint.edits import choose, fixes_to_apply
    from distlint.noqa import add_noqa

    mutants = _mutants()
    assert len(mutants) == MUTANTS  # the generator really makes them
    kinds_seen = {"\\\n" in m and "\x0c" in m for _, _, m in mutants}
    assert kinds_seen == {True, False} or len(mutants) < 10
    for name, original, mutant in mutants:
        clean, odd = _lint_both(name, original, mutant)
        assert not odd.errors, (name, odd.errors)
        # the same findings, each reported at the same code (not a line above or below)
        assert [f.code for f in odd.findings] == [f.code for f in clean.findings], name
        for a, b in zip(clean.findings, odd.findings):
            assert _squeezed(_range_text(mutant, b)) == _squeezed(_range_text(original, a)), (
                name,
                b,
            )
            # every edit of the fix replaces the same code as in the unmutated file
            if a.fix is not None:
                assert b.fix is not None and len(b.fix.edits) == len(a.fix.edits), (name, b)
                for x, y in zip(a.fix.edits, b.fix.edits):
                    assert _squeezed(mutant[y.start : y.end]) == _squeezed(
                        original[x.start : x.end]
                    ), (name, b, y)
                    assert _squeezed(y.content) == _squeezed(x.content), (name, b, y)
        # `--add-noqa` writes each comment on the line of the same code
        noqa_clean, _ = add_noqa(original, clean.findings)
        noqa_odd, _ = add_noqa(mutant, odd.findings)
        assert _squeezed(noqa_odd) == _squeezed(noqa_clean), name
        # the first round's edits change nothing outside their lines
        chosen, _ = choose(fixes_to_apply(odd.findings, True))
        touched = {
            line
            for f in chosen
            for e in f.edits
            for line in range(e.range.line, e.range.end_line + 1)
        }
        fixed_clean, fixed_odd = _lint_both(name, original, mutant, fix=True)
        assert not fixed_odd.errors, (name, fixed_odd.errors)
        new = fixed_odd.fixed_source
        if new is None:
            assert fixed_clean.fixed_source is None, name
            continue
        assert _compiles(new), (name, new)
        # the fix does what it does to the unmutated file
        assert _squeezed(new) == _squeezed(fixed_clean.fixed_source or original), name
        # a mutated line no edit touches is still there, byte for byte
        new_lines = new.split("\n")
        for number, line in enumerate(mutant.split("\n"), 1):
            if ("\x0c" in line or line.rstrip().endswith("\\")) and number not in touched:
                assert line in new_lines, (name, number, line)
        # a second fix changes nothing
        again = lint_source(
            new, name.split("#")[0].rsplit("/", 1)[-1], Config(), fix=True, unsafe_fixes=True
        )
        assert again.fixed_source is None, (name, again.fixed_source)
