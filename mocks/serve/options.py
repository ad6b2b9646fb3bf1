"""``tinyhil serve``'s ``--option KEY=VALUE`` strings, read one way for both paths (:func:`parse_options`).

A value is JSON where it parses as JSON (``seed=3``, ``usb3=false``, ``faults=[{"operation": "bulk_out", ...}]``),
else an integer in any base Python reads (``vram_bytes=0x10000000``), else the text itself (``mode=timed``). So any
value written as JSON reads back unchanged, which is how the farm passes a served board's map options on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tinyhil.errors import InvalidArgument

__all__ = ["option_text", "parse_options"]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return int(text, 0)
    except ValueError:
        return text


def parse_options(options: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict of typed values.

    Raises:
        InvalidArgument: an option without ``=`` or a key, or a key given twice.
    """
    parsed: dict[str, Any] = {}
    for option in options:
        key, sep, text = option.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--option {option!r}, expected KEY=VALUE (e.g. vram_bytes=0x10000000)")
        if key in parsed:
            raise InvalidArgument(f"--option {key}= given twice ({parsed[key]!r} and {text!r}), expected each once")
        parsed[key] = _value(text)
    return parsed


def option_text(key: str, value: Any) -> str:
    """``KEY=VALUE`` that :func:`parse_options` reads back to ``value`` (any JSON value)."""
    return f"{key}={json.dumps(value, sort_keys=True)}"
