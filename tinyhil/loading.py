"""The one rule for every file tinyhil reads: a size cap, a depth cap, an integer cap, each field typed once, and one
typed error that names the file, the line where known, and the field.

Every loader (hardware map, quarantine, farm config, health record, journal, repro bundle, trace) reads through
:func:`read_capped`, parses through :func:`parse_json` or :func:`parse_toml`, and takes each field through a
:class:`Fields` getter, so a hostile or damaged file gets the same one-line :class:`FileFormatError` wherever it is
read, and nothing in it sizes an allocation beyond the file's own bytes. The caps are in :data:`LIMITS`, written out
in docs/security.md.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, TypeVar

from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable

__all__ = [
    "INT_DIGITS_MAX",
    "LIMITS",
    "NESTING_MAX",
    "Fields",
    "FileFormatError",
    "FileLimit",
    "check_tree",
    "parse_json",
    "parse_toml",
    "read_capped",
]

# A JSON or TOML document deeper than this is refused before it is used (none of tinyhil's formats nests past 6).
NESTING_MAX: Final = 32
# Digits in one integer literal: 20 holds every 64-bit value; more is refused before Python converts it.
INT_DIGITS_MAX: Final = 20
_INT_BOUND: Final = 1 << 64


@dataclass(frozen=True, slots=True)
class FileLimit:
    """The caps of one kind of file: ``max_bytes`` for the whole file (or, for a line-per-record file, one line)."""

    what: str
    max_bytes: int
    per_line: bool = False


_MIB: Final = 1 << 20
# Every file tinyhil reads, by its name in errors. docs/security.md lists the same table.
LIMITS: Final[Mapping[str, FileLimit]] = {
    "hwmap": FileLimit("hardware map (hwmap.toml)", 4 * _MIB),
    "quarantine": FileLimit("quarantine file", 4 * _MIB),
    "farm-config": FileLimit("farm config (farm.toml)", 1 * _MIB),
    "health": FileLimit("health record (health.json)", 16 * _MIB),
    "lease": FileLimit("lease holder record", 64 * 1024),
    "journal": FileLimit("journal line (journal.jsonl)", 4 * _MIB, per_line=True),
    "bundle": FileLimit("repro bundle (bundle.json)", 1 * _MIB),
    "tls-pem": FileLimit("TLS certificate or key (PEM)", 1 * _MIB),
    "summary": FileLimit("run summary (summary.json)", 256 * _MIB),
    "pairs": FileLimit("collected pairs (pairs.json)", 256 * _MIB),
    "durations": FileLimit("kept durations (durations.json)", 64 * _MIB),
    "trace-line": FileLimit("JSONL trace record", 64 * _MIB, per_line=True),
    "trace-block": FileLimit("pcapng block", 64 * _MIB, per_line=True),
}


class FileFormatError(InvalidArgument):
    """A file tinyhil cannot use: ``path:line: field: what was wrong and what was expected`` (line 0: the file as a
    whole, shown without a line). The message is one printable line: the field names and values a file put into it
    have their control characters escaped (:func:`~tinyhil.printable.printable`), here, for every loader.

    Attributes:
        path: the file as the user named it. line: 1-based, 0 when unknown. field: the field, or ``file``.
        why: the problem alone.
    """

    def __init__(self, path: str | Path, line: int, field: str, why: str) -> None:
        where = f"{path}:{line}" if line else f"{path}"
        super().__init__(printable(f"{where}: {field}: {why}", newlines=False))
        self.path, self.line, self.field, self.why = str(path), line, field, why


def read_capped(path: str | Path, limit: str) -> bytes:
    """The bytes of ``path``, refused if they exceed ``LIMITS[limit].max_bytes`` (read at most one byte more, so a
    huge file costs no memory).

    Raises:
        FileFormatError: the file cannot be read (missing, a directory, no permission) or is over its cap.
        FileNotFoundError: never; a missing file is a :class:`FileFormatError` too (callers that accept a missing
            file check ``exists()`` first).
    """
    cap = LIMITS[limit]
    try:
        with open(path, "rb") as file:
            data = file.read(cap.max_bytes + 1)
    except OSError as exc:
        raise FileFormatError(path, 0, "file", f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > cap.max_bytes:
        raise FileFormatError(path, 0, "file", f"larger than {cap.max_bytes} bytes, the limit for a {cap.what}")
    return data


def _decode(data: bytes | str, path: str | Path, line: int) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileFormatError(path, line, "file", f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _json_int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > INT_DIGITS_MAX:
        raise ValueError(f"an integer of {digits} digits, expected at most {INT_DIGITS_MAX}")
    return int(text)


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON, expected a finite number")


def parse_json(data: bytes | str, path: str | Path, *, line: int = 0) -> Any:
    """Parse one JSON document (a whole file, or the JSONL record on ``line``) under :data:`NESTING_MAX` and
    :data:`INT_DIGITS_MAX`; ``NaN`` and ``Infinity`` are refused, as JSON does.

    Raises:
        FileFormatError: not UTF-8, not JSON, too deep, or an integer too long.
    """
    text = _decode(data, path, line)
    try:
        value = json.loads(text, parse_int=_json_int, parse_constant=_json_constant)
    except RecursionError:
        raise FileFormatError(path, line, "file", f"nested deeper than {NESTING_MAX} levels") from None
    except ValueError as exc:
        raise FileFormatError(path, line, "file", f"not JSON: {exc}") from None
    check_tree(value, path, line=line)
    return value


def parse_toml(data: bytes | str, path: str | Path) -> dict[str, Any]:
    """Parse a TOML document under :data:`NESTING_MAX`, with integers in the 64-bit range TOML defines.

    Raises:
        FileFormatError: not UTF-8, not TOML (the line is the parser's), too deep, or an integer out of range.
    """
    text = _decode(data, path, 0)
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileFormatError(path, _toml_line(str(exc)), "file", f"not TOML: {exc}") from None
    except RecursionError:
        raise FileFormatError(path, 0, "file", f"nested deeper than {NESTING_MAX} levels") from None
    except ValueError as exc:  # an integer literal past Python's conversion limit
        raise FileFormatError(path, 0, "file", f"not TOML: {exc}") from None
    check_tree(value, path)
    return value


def _toml_line(message: str) -> int:
    marker = "line "
    at = message.rfind(marker)
    if at < 0:
        return 0
    digits = message[at + len(marker) :].split(",", 1)[0].split(")", 1)[0]
    return int(digits) if digits.isdigit() else 0


def check_tree(value: Any, path: str | Path, *, line: int = 0) -> None:
    """Check a parsed document: nested at most :data:`NESTING_MAX` deep, every integer within 64 bits.

    Raises:
        FileFormatError: naming the first offending field by its path of keys.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict):
            children: Sequence[tuple[Any, str]] = [(v, f"{where}.{k}" if where else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{where}[{n}]") for n, v in enumerate(item)]
        else:
            if type(item) is int and not -_INT_BOUND < item < _INT_BOUND:
                raise FileFormatError(path, line, where or "file", "an integer past 64 bits")
            continue
        if depth >= NESTING_MAX:
            raise FileFormatError(path, line, where or "file", f"nested deeper than {NESTING_MAX} levels")
        stack.extend((child, depth + 1, name) for child, name in children)


_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")


class Fields:
    """Typed getters over one table of a file (a JSON object, a TOML table): each returns the field checked once, or
    raises :class:`FileFormatError` naming the file, the field's line and ``prefix + name``.

    ``line_of`` maps a field name to its line (TOML files with :class:`TableLines`-style lookups); without it every
    error carries ``line``.
    """

    def __init__(
        self,
        table: Any,
        path: str | Path,
        *,
        line: int = 0,
        prefix: str = "",
        line_of: Callable[[str], int] | None = None,
    ) -> None:
        self.path, self.line, self.prefix, self._line_of = path, line, prefix, line_of
        if not isinstance(table, dict):
            raise FileFormatError(path, line, prefix.rstrip(".") or "file", f"{_kind(table)}, expected a table")
        self.table: dict[str, Any] = table

    def error(self, name: str, why: str) -> FileFormatError:
        """The error for field ``name`` (its line from ``line_of`` when given)."""
        line = self._line_of(name.split(".")[0]) if self._line_of is not None else self.line
        return FileFormatError(self.path, line, f"{self.prefix}{name}", why)

    def _get(self, name: str, required: bool, expected: str) -> Any:
        if name not in self.table and required:
            raise self.error(name, f"missing, expected {expected}")
        return self.table.get(name)

    def string(self, name: str, *, required: bool = True, max_len: int = 4096, empty: bool = False) -> str | None:
        """A string of at most ``max_len`` characters (non-empty unless ``empty``), or ``None`` when absent."""
        expected = f"a {'' if empty else 'non-empty '}string"
        value = self._get(name, required, expected)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (not value and not empty) or len(value) > max_len:
            size = f" of at most {max_len} characters" if isinstance(value, str) and len(value) > max_len else ""
            raise self.error(name, f"{_short(value)}, expected {expected}{size}")
        return value

    def integer(
        self, name: str, *, required: bool = True, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        """An integer (not a bool) in ``[minimum, maximum]``, or ``None`` when absent."""
        bounds = [f">= {minimum}" if minimum is not None else "", f"<= {maximum}" if maximum is not None else ""]
        shown = " and ".join(b for b in bounds if b)
        expected = f"an integer{' ' + shown if shown else ''}"
        value = self._get(name, required, expected)
        if value is None and not required:
            return None
        low = minimum is None or (type(value) is int and value >= minimum)
        high = maximum is None or (type(value) is int and value <= maximum)
        if type(value) is not int or not low or not high:
            raise self.error(name, f"{_short(value)}, expected {expected}")
        return value

    def number(self, name: str, *, required: bool = True, minimum: float = 0.0) -> float | None:
        """A finite int or float ``>= minimum`` (not a bool), as a float, or ``None`` when absent."""
        expected = f"a number >= {minimum:g}"
        value = self._get(name, required, expected)
        if value is None and not required:
            return None
        ok = type(value) in (int, float) and value == value and abs(value) != float("inf") and value >= minimum
        if not ok:
            raise self.error(name, f"{_short(value)}, expected {expected}")
        return float(value)

    def boolean(self, name: str, *, required: bool = True, default: bool = False) -> bool:
        """``true`` or ``false`` (``default`` when absent and not required)."""
        value = self._get(name, required, "true or false")
        if value is None and not required:
            return default
        if type(value) is not bool:
            raise self.error(name, f"{_short(value)}, expected true or false")
        return value

    def strings(self, name: str, *, required: bool = True, max_items: int = 4096) -> tuple[str, ...]:
        """A non-empty list of non-empty strings (``()`` when absent and not required)."""
        expected = f"a non-empty list of at most {max_items} strings"
        value = self._get(name, required, expected)
        if value is None and not required:
            return ()
        good = isinstance(value, list) and 0 < len(value) <= max_items and all(isinstance(v, str) and v for v in value)
        if not good:
            raise self.error(name, f"{_short(value)}, expected {expected}")
        return tuple(value)

    def choice(self, name: str, choices: type[_E], *, required: bool = True) -> _E | None:
        """One of the enum's values, with a did-you-mean hint (``None`` when absent and not required)."""
        names = [c.value for c in choices]
        expected = f"one of {', '.join(names)}"
        value = self._get(name, required, expected)
        if value is None and not required:
            return None
        if isinstance(value, str) and value in names:
            return choices(value)
        hint = difflib.get_close_matches(value, names, n=1) if isinstance(value, str) else []
        close = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise self.error(name, f"{_short(value)}{close}, expected {expected}")

    def table_of(self, name: str, *, required: bool = True) -> Fields | None:
        """The nested table ``name`` as :class:`Fields` (its errors prefixed ``name.``), or ``None`` when absent."""
        value = self._get(name, required, "a table")
        if value is None and not required:
            return None
        if not isinstance(value, dict):
            raise self.error(name, f"{_short(value)}, expected a table")
        return Fields(value, self.path, line=self.line, prefix=f"{self.prefix}{name}.", line_of=self._line_of)

    def of_type(self, name: str, kind: type[_T], *, required: bool = True) -> _T | None:
        """A value of exactly ``kind`` (a JSON/TOML ``list`` or ``dict`` left for the caller to walk), or ``None``."""
        value = self._get(name, required, _kind_name(kind))
        if value is None and not required:
            return None
        if type(value) is not kind:
            raise self.error(name, f"{_short(value)}, expected {_kind_name(kind)}")
        return value

    def only(self, allowed: Sequence[str]) -> None:
        """Refuse any key not in ``allowed``, with a did-you-mean hint."""
        for key in self.table:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                close = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise self.error(str(key), f"unknown field{close}, expected one of {', '.join(allowed)}")


_KIND_NAMES: Final = {dict: "a table", list: "a list", str: "a string", int: "an integer", float: "a number",
                      bool: "true or false", type(None): "null"}  # fmt: skip


def _kind_name(kind: type) -> str:
    return _KIND_NAMES.get(kind, f"a {kind.__name__}")


def _kind(value: Any) -> str:
    return _KIND_NAMES.get(type(value), f"a {type(value).__name__}")


def _short(value: Any, limit: int = 60) -> str:
    """``value`` for a message: missing, or its repr cut to ``limit`` characters (a file's field may be huge)."""
    if value is None:
        return "missing"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
