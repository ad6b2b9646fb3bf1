"""Text from a file or a peer, made safe to print: control characters shown as escapes, never sent raw.

A trace's product string, a bundle's node id or a health record's reason could carry ANSI/OSC escape sequences
(which move the cursor, retitle the window, or write a clipboard) or bidirectional overrides (which make text read
otherwise than it is). Everything tinyhil prints that came from a file goes through :func:`printable` once, where it
is printed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE_IN_A_LINE", "printable"]

# C0 controls but tab and newline, DEL, C1 controls, the Unicode format characters that reorder or hide text, and
# lone surrogates (a file name's undecodable bytes as os.fsdecode gives them: written out raw, \udc9b is the C1
# byte 0x9b, CSI; and no UTF-8 stream can carry one).
_SHARED: Final = "\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff"
_UNSAFE: Final = re.compile(f"[\x00-\x08\x0b-\x1f{_SHARED}]")
_UNSAFE_LINES: Final = re.compile(f"[\x00-\x1f{_SHARED}]")
# The characters printable(..., newlines=False) escapes, for a writer with escapes of its own (a TOML string).
UNSAFE_IN_A_LINE: Final = _UNSAFE_LINES


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control and reordering character written as ``\\xNN`` / ``\\uNNNN``; tab and newline are
    kept unless ``newlines`` is false (a value printed on one line)."""
    return (_UNSAFE if newlines else _UNSAFE_LINES).sub(_escape, text)
