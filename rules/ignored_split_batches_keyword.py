"""DL303 ignored-split-batches-keyword."""

from __future__ import annotations

import libcst as cst

from distlint.analysis import call_keyword
from distlint.analysis.facts import Facts
from distlint.fixes import FixPlan, import_name
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid


class IgnoredSplitBatchesKeyword(Rule):
    """
    ## What it does
    Flags `Accelerator(split_batches=...)`: the legacy top-level keyword that Accelerate 1.0 and
    later still accept but silently ignore. Only
    `Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=...))` takes effect.
    `split_batches=False` is not reported: it asks for the default behaviour, which is what the
    script gets.

    ## Why is this bad?
    `split_batches=True` says "the DataLoader's `batch_size` is the global batch; split it across
    the processes". Since Accelerate 1.0 the keyword is swallowed without a warning
    (`accelerator.split_batches` stays `False`), so every process still draws a full `batch_size`
    batch: on N processes the observed batch is N times what the script was written for, and the
    learning rate, schedule length and logged batch sizes that were derived from the global batch
    are all off by a factor of N.

    ## Fix safety
    The fix moves the keyword into `dataloader_config=DataLoaderConfiguration(split_batches=...)`
    (merging it into an existing `DataLoaderConfiguration(...)` call written inline or bound to a
    name, and importing `DataLoaderConfiguration` from `accelerate.utils` unless the file already
    has it). It is **unsafe**: it makes the user's stated intent real, which changes what the
    script does on more than one process. Each process then receives `batch_size / N` samples per
    step (and `batch_size` must be divisible by N), the prepared DataLoader gets N times longer per
    process, and the prepared scheduler is stepped once instead of N times per optimizer step.
    Runs that were tuned to the old, accidental behaviour will change, so a human should review it.

    When `dataloader_config` already sets `split_batches`, that value is the one in effect and the
    fix only deletes the ignored keyword, which changes nothing at runtime: that fix is safe. When
    the existing configuration is not a `DataLoaderConfiguration(...)` call the rule can see (or
    the value is not a literal and the configuration is built elsewhere), no fix is offered.

    ## References
    - Accelerate 1.0 release notes: deprecated `Accelerator` dataloader arguments removed in favour
      of `DataLoaderConfiguration`.
    - `accelerate.utils.DataLoaderConfiguration`.
    """

    CODE = "DL303"
    NAME = "ignored-split-batches-keyword"
    MESSAGE = (
        "`Accelerator(split_batches=...)` is ignored by Accelerate >= 1.0: "
        "pass it in `DataLoaderConfiguration`"
    )
    FIX_TITLE = "Move `split_batches` into `DataLoaderConfiguration`"
    FIX_SAFETY = Applicability.UNSAFE
    TRIGGERS = ("split_batches",)

    VALID = (
        Valid(
            "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
            "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))\n"
        ),
        Valid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(split_batches=False)\n"
        ),
        # not an Accelerator: a user's own class with the same keyword
        Valid(
            "class Loader:\n    def __init__(self, split_batches=False):\n        pass\n\nLoader(split_batches=True)\n"
        ),
        Valid(
            "import accelerate\nfrom accelerate.utils import DataLoaderConfiguration as DLC\n\n"
            "cfg = DLC(split_batches=True, even_batches=False)\nacc = accelerate.Accelerator(dataloader_config=cfg)\n"
        ),
        # the property read back from an Accelerator is fine
        Valid(
            "from accelerate import Accelerator\n\nacc = Accelerator()\nif acc.split_batches:\n    print('split')\n"
        ),
        Valid(
            "from accelerate.utils import DataLoaderConfiguration\n\nconfig = DataLoaderConfiguration(split_batches=True)\n"
        ),
    )
    INVALID = (
        Invalid(
            "from accelerate import Accelerator\n\naccelerator = Accelerator(split_batches=True)\n",
            fixed=(
                "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
                "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))\n"
            ),
            range="3:27-3:45",
        ),
        Invalid(
            "import accelerate\nfrom accelerate.utils import DataLoaderConfiguration\n\nsplit = True\n"
            "acc = accelerate.Accelerator(\n    mixed_precision='bf16',\n"
            "    dataloader_config=DataLoaderConfiguration(even_batches=False),\n    split_batches=split,\n)\n",
            fixed=(
                "import accelerate\nfrom accelerate.utils import DataLoaderConfiguration\n\nsplit = True\n"
                "acc = accelerate.Accelerator(\n    mixed_precision='bf16',\n"
                "    dataloader_config=DataLoaderConfiguration(even_batches=False, split_batches=split),\n)\n"
            ),
            range="8:5-8:24",
        ),
        Invalid(
            "from accelerate import Accelerator as Acc, DataLoaderConfiguration\n\n"
            "dl_config = DataLoaderConfiguration(dispatch_batches=False)\n"
            "acc = Acc(split_batches=True, dataloader_config=dl_config)\n",
            fixed=(
                "from accelerate import Accelerator as Acc, DataLoaderConfiguration\n\n"
                "dl_config = DataLoaderConfiguration(dispatch_batches=False, split_batches=True)\n"
                "acc = Acc(dataloader_config=dl_config)\n"
            ),
            range="4:11-4:29",
        ),
        # the configuration already decides: deleting the ignored keyword changes nothing
        Invalid(
            "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
            "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=False), split_batches=True)\n",
            fixed=(
                "from accelerate import Accelerator\nfrom accelerate.utils import DataLoaderConfiguration\n\n"
                "accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=False))\n"
            ),
            range="4:91-4:109",
        ),
        # the configuration comes from elsewhere: report only
        Invalid(
            "from accelerate import Accelerator\n\ndef make(config):\n"
            "    return Accelerator(split_batches=True, dataloader_config=config)\n",
            range="4:24-4:42",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        index, facts = ctx.index, ctx.facts
        for call in facts.accelerators:
            arg = _keyword_arg(call, "split_batches")
            if arg is None:
                # `Accelerator(**{"split_batches": True})` / `**kwargs` bound to a dict literal:
                # reported where the keyword is written; no fix (the dict may be shared)
                value = facts.accelerator_keyword(call, "split_batches")
                if value is not None and index.constant_value(value) is not False:
                    element = index.parent(value)
                    ctx.report(element if element is not None else value)
                continue
            if index.constant_value(arg.value) is False:
                continue
            ctx.report(arg, fix=self._fix(facts, call, arg))

    def _fix(self, facts: Facts, call: cst.Call, arg: cst.Arg) -> FixPlan | None:
        index = facts.index
        config_arg = _keyword_arg(call, "dataloader_config")
        if config_arg is None:
            name, spec = import_name(index, facts.DATALOADER_CONFIGURATION, call)
            new_value = cst.parse_expression(f"{name}(split_batches=...)")
            assert isinstance(new_value, cst.Call)
            new_value = new_value.with_changes(
                args=[new_value.args[0].with_changes(value=arg.value)]
            )
            replacement = arg.with_changes(keyword=cst.Name("dataloader_config"), value=new_value)
            return FixPlan(replace={arg: replacement}, imports=[spec] if spec else [])

        config = config_arg.value
        if facts.is_dataloader_configuration(config):
            assert isinstance(config, cst.Call)
            if call_keyword(config, "split_batches") is not None:
                return _drop_only(call, arg)
            new_config = _with_split_batches(config, arg.value)
            args = [a.with_changes(value=new_config) if a is config_arg else a for a in call.args]
            return FixPlan(replace={call: call.with_changes(args=_without(args, arg))})

        # `dataloader_config=name` bound once to a DataLoaderConfiguration(...) call
        if isinstance(config, cst.Name):
            bindings = index.bindings_of(config)
            if (
                len(bindings) == 1
                and bindings[0].op == "="
                and facts.is_dataloader_configuration(bindings[0].value)
            ):
                target = bindings[0].value
                assert isinstance(target, cst.Call)
                if call_keyword(target, "split_batches") is not None:
                    return _drop_only(call, arg)
                # A non-literal value may not be defined where the configuration is built.
                if index.constant_value(arg.value) is not True:
                    return None
                return FixPlan(
                    replace={
                        target: _with_split_batches(target, arg.value),
                        call: call.with_changes(args=_without(list(call.args), arg)),
                    }
                )
        return None


def _keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _with_split_batches(config: cst.Call, value: cst.BaseExpression) -> cst.Call:
    args = list(config.args)
    if args and isinstance(args[-1].comma, cst.Comma):
        # a trailing comma (often before a newline) stays after the new last argument
        last_comma = args[-1].comma
        args[-1] = args[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        new_arg = cst.Arg(
            keyword=cst.Name("split_batches"), value=value, equal=_EQUAL, comma=last_comma
        )
    else:
        new_arg = cst.Arg(keyword=cst.Name("split_batches"), value=value, equal=_EQUAL)
    return config.with_changes(args=[*args, new_arg])


_EQUAL = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def _without(args: list[cst.Arg], removed: cst.Arg) -> list[cst.Arg]:
    """``args`` minus ``removed``, keeping the trailing-comma style of the call."""
    position = next(i for i, a in enumerate(args) if a is removed)
    rest = args[:position] + args[position + 1 :]
    if position == len(args) - 1 and rest:
        # the removed argument was last: its comma (or lack of one) now ends the list
        rest[-1] = rest[-1].with_changes(comma=removed.comma)
    return rest


def _drop_only(call: cst.Call, arg: cst.Arg) -> FixPlan:
    # `dataloader_config` already sets split_batches: the ignored keyword has no effect at all.
    return FixPlan(
        replace={call: call.with_changes(args=_without(list(call.args), arg))},
        applicability=Applicability.SAFE,
    )
