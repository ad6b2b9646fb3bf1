"""What ``report.html``'s parts share: text made safe for HTML, and where an attempt ran."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from tinyhil.printable import printable

__all__ = ["escape", "where"]


def escape(value: object) -> str:
    """``value`` as HTML text or attribute: markup escaped, control characters shown as ``\\xNN`` (printable)."""
    return html.escape(printable(str(value)), quote=True)


def where(attempt: Mapping[str, Any]) -> str:
    """``board @ host`` (just the board where no host ran it: a pair reported without running)."""
    board, host = attempt.get("board") or "-", attempt.get("host") or "-"
    return str(board) if host == "-" else f"{board} @ {host}"
