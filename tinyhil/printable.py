"""Text from a file or a peer, made safe to print: control characters shown as escapes, never sent raw.

A trace's product string, a bundle's node id or a health record's reason could carry ANSI/OSC escape sequences
(which move the cursor, retitle the window, or write a clipboard) or bidirectional overrides (which make text read
otherwise than it is). Everything tinyhil prints that came from a file goes through :func:`printable` once, where it
is printed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode format characters that reorder or hide text.
_UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_LINES: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control and reordering character written as ``\\xNN`` / ``\\uNNNN``; tab and newline are
    kept unless ``newlines`` is false (a value printed on one line)."""
    return (_UNSAFE if newlines else _UNSAFE_LINES).sub(_escape, text)
