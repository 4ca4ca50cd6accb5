"""DL001 unused-noqa.

The check is an engine post-pass (:func:`distlint.noqa.unused_noqa`): it runs after every other
rule has reported and the `# noqa` comments have been matched against the findings, since only
then is it known which codes of a suppression comment suppressed nothing. This module holds the
rule's identity, docs and snippets (so `distlint rule DL001` and `--select DL001` work).
"""

from __future__ import annotations

from distlint import noqa
from distlint.model import Applicability
from distlint.rule import Invalid, Rule, RuleContext, Valid

CODE = noqa.UNUSED_CODE


class UnusedNoqa(Rule):
    """
    ## What it does
    Flags `# noqa: DLxxx` comments whose distlint codes suppress nothing: the finding they were
    written for is gone (the code was fixed or moved), or the code does not exist.

    Only distlint's own codes are looked at (`# noqa: E501` belongs to another tool), blanket
    `# noqa` comments are left alone for the same reason, and a code of a rule that is not
    enabled for the file is not reported (the comment may be meant for a run that selects it).
    Like ruff's RUF100, this rule is opt-in: select it with `--extend-select DL001` or
    `extend-select = ["DL001"]`. It is not reported under `--ignore-noqa`.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line: if someone later writes an
    unscaled learning rate or a per-device batch size on a line that still carries an old
    `# noqa: DL201`, the multi-GPU run silently diverges from the single-GPU one and nobody is
    told.

    ## Fix safety
    The fix removes the unused codes from the comment (the whole `# noqa` part when none is
    left, keeping any other comment text). It is safe: it only edits a comment.

    ## References
    - ruff, RUF100 unused-noqa.
    """

    CODE = CODE
    NAME = noqa.UNUSED_NAME
    MESSAGE = noqa.UNUSED_MESSAGE
    FIX_TITLE = noqa.UNUSED_FIX_TITLE
    FIX_SAFETY = Applicability.SAFE
    TRIGGERS = ("noqa", "NOQA")
    DEFAULT_ENABLED = False

    VALID = (
        Valid("x = 1  # noqa\n"),
        Valid("import os  # noqa: F401\n"),
        Valid("x = 1  # noqa: DL101\n"),  # DL101 is not enabled when this rule runs alone
    )
    INVALID = (
        Invalid("x = 1  # noqa: DL000\n", fixed="x = 1\n", range="1:8-1:21"),
        Invalid(
            "import os  # noqa: F401, DL000  # kept for the CLI\n",
            fixed="import os  # noqa: F401  # kept for the CLI\n",
            range="1:12-1:31",
        ),
    )

    def check(self, ctx: RuleContext) -> None:
        """Nothing to do here: the engine runs :func:`distlint.noqa.unused_noqa` after
        suppression, when this rule is enabled."""
