"""Text that came from outside (file names, messages quoting the user's code) made safe to show."""

from __future__ import annotations

import re

# Characters that must not reach a terminal or a report raw: C0 and C1 controls (ANSI escape
# sequences start with ESC), DEL, lone surrogates (undecodable bytes of a file name), the
# bidirectional overrides (text that reads differently from what it is) and the two XML
# non-characters. Tab stays.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_UNPRINTABLE_KEEP_NEWLINES = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``): a file name or
    a message never moves the cursor, colours the terminal, breaks a line or an XML document.
    ``newlines``: keep line breaks (a format that escapes them its own way)."""
    pattern = _UNPRINTABLE_KEEP_NEWLINES if newlines else _UNPRINTABLE
    return pattern.sub(_escape, text) if pattern.search(text) else text
