"""Drift between a hardware map and what discovery found on a host: boards missing, new, or changed.

A map board *matches* a found device of its kind when every locator field the map gives equals the device's. A
board with no match but a device at the same place (USB bus-port path, PCI location) has *changed*: the fields
that differ are listed (a serial, a ``gpu_id``, a UUID), and nothing is assumed about which is right. A board
with neither is *missing*; a device no board matches or claims is *new*, with the map entry that would add it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from tinyhil.device_farm.inventory.discovery import Discovery, FoundBoard
from tinyhil.device_farm.inventory.hwmap import (
    Board,
    BoardKind,
    HardwareMap,
    KfdLocator,
    Locator,
    NvLocator,
    UsbLocator,
)
from tinyhil.printable import UNSAFE_IN_A_LINE, printable

__all__ = ["Change", "Drift", "compare", "map_entry"]

# The field that says where a device is plugged in, per locator type; the rest say which device it is.
_PLACE: Final[Mapping[type, str]] = {UsbLocator: "port", KfdLocator: "pci", NvLocator: "pci_bus_id"}
_TABLE: Final[Mapping[BoardKind, str]] = {BoardKind.USB_BRIDGE: "usb", BoardKind.AMD_KFD: "kfd", BoardKind.NV: "nv"}
# What a TOML basic string may not hold raw (TOML 1.0, "String": backslash, quote, controls other than tab), and what
# a terminal must not get raw (tinyhil.printable): both written as TOML escapes.
_TOML_UNSAFE: Final = re.compile(f'[\\\\"]|{UNSAFE_IN_A_LINE.pattern}')
_TOML_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
_SURROGATES: Final = re.compile("[\ud800-\udfff]")
_SUGGESTED_TARGETS: Final[Mapping[BoardKind, tuple[str, ...]]] = {
    BoardKind.USB_BRIDGE: ("USB+AMD",),
    BoardKind.AMD_KFD: ("KFD+AMD",),
    BoardKind.NV: (),
}


@dataclass(frozen=True, slots=True)
class Change:
    """A map board whose place holds a device that differs: ``(field, in the map, found)`` per difference."""

    board: Board
    found: FoundBoard
    differences: tuple[tuple[str, object, object], ...]

    def __str__(self) -> str:
        said = ", ".join(f"{name} {old!r} in the map, {new!r} found" for name, old, new in self.differences)
        return f"{self.board.id}: {said}"


@dataclass(frozen=True, slots=True)
class Drift:
    """The result of :func:`compare`; empty when the map and the host agree."""

    missing: tuple[Board, ...]
    new: tuple[FoundBoard, ...]
    changed: tuple[Change, ...]

    def __bool__(self) -> bool:
        return bool(self.missing or self.new or self.changed)


def _given(locator: Locator) -> dict[str, object]:
    return {f.name: getattr(locator, f.name) for f in fields(locator) if getattr(locator, f.name) is not None}


def _matches(board: Board, found: FoundBoard) -> bool:
    if type(board.locator) is not type(found.locator):
        return False
    return all(getattr(found.locator, name) == value for name, value in _given(board.locator).items())


def _same_place(board: Board, found: FoundBoard) -> bool:
    place = _PLACE.get(type(board.locator))
    if place is None or type(board.locator) is not type(found.locator):
        return False
    value = getattr(board.locator, place)
    return value is not None and getattr(found.locator, place) == value


def compare(hwmap: HardwareMap, discovery: Discovery, host: str) -> Drift:
    """Compare the map's boards on ``host`` of the kinds discovery searched for (emulated ones have nothing to
    find) with what it found."""
    boards = [b for b in hwmap.boards if b.host == host and b.kind in discovery.searched]
    unclaimed = list(discovery.boards)
    missing: list[Board] = []
    pending: list[Board] = []
    for board in boards:
        match = next((f for f in unclaimed if _matches(board, f)), None)
        if match is None:
            pending.append(board)
        else:
            unclaimed.remove(match)
    changed: list[Change] = []
    for board in pending:
        found = next((f for f in unclaimed if _same_place(board, f)), None)
        if found is None:
            missing.append(board)
            continue
        unclaimed.remove(found)
        differences = tuple(
            (name, value, getattr(found.locator, name))
            for name, value in _given(board.locator).items()
            if getattr(found.locator, name) != value
        )
        changed.append(Change(board, found, differences))
    return Drift(tuple(missing), tuple(unclaimed), tuple(changed))


def _toml_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _TOML_ESCAPES.get(char) or f"\\u{ord(char):04X}"


def _toml(value: object) -> str:
    """``value`` as a TOML value: a string as a basic string, every character TOML does not allow raw in one
    (backslash, quote, controls) or a terminal must not get raw (:mod:`tinyhil.printable`) escaped, so the same text
    reads back; a lone surrogate, which no TOML file can hold, is written as U+FFFD."""
    if isinstance(value, str):
        return '"' + _TOML_UNSAFE.sub(_toml_escape, _SURROGATES.sub("\ufffd", value)) + '"'
    return str(value)


def map_entry(found: FoundBoard, *, board_id: str | None = None) -> str:
    """The ``[[board]]`` table that would add ``found`` to a map (every locator field discovery read)."""
    table = _TABLE[found.kind]
    locator = ", ".join(f"{name} = {_toml(value)}" for name, value in _given(found.locator).items())
    targets = _SUGGESTED_TARGETS[found.kind]
    lines = [
        "[[board]]",
        f"id = {_toml(board_id or found.suggested_id())}",
        f"kind = {_toml(found.kind.value)}",
        f"{table} = {{ {locator} }}",
    ]
    if targets:
        lines.append(f"targets = [{', '.join(_toml(t) for t in targets)}]")
    return "\n".join(lines) + f"  # {printable(found.description, newlines=False)}\n"
