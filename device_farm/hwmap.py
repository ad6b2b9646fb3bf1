"""The hardware map (``hwmap.toml``): one entry per board, validated on load.

A lab keeps the map under version control; discovery compares it with what a host really has. Each board is a
``[[board]]`` table::

    [[board]]
    id = "bridge-a"                                   # unique in the map
    kind = "usb-bridge"                               # usb-bridge | amd-kfd | nv | emulated
    usb = { vid_pid = "add1:0001", serial = "A1B2" }  # how to find it: one table named after the kind
    targets = ["USB+AMD"]                             # the target strings it serves
    capabilities = ["usb3", "copyin"]                 # optional: default, its targets' capabilities
    host = "lab-1"                                    # optional: default, this host's name
    tags = ["nightly"]                                # optional
    state = "maintenance"                             # optional: maintenance | retired (taken out of scheduling)

The locator table per kind: ``usb`` (``vid_pid`` plus ``serial`` or a bus-port ``port`` such as ``"1-2.3"``),
``kfd`` (any of ``gpu_id``, ``unique_id``, ``pci``), ``nv`` (``pci_bus_id`` or ``uuid``), ``emulated``
(``target``, the one target string it runs, and ``slots``, how many tests may run on it at once; default 1).
Every error is a :class:`HwmapError` naming the file, the line, the field and what was expected.
"""

from __future__ import annotations

import difflib
import json
import re
import socket
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, TypeVar

from tinyhil.capabilities import check_capabilities, known_capabilities
from tinyhil.device_farm.board_options import target_options
from tinyhil.device_farm.toml_lines import FileFieldError, TableLines, decode_error_line
from tinyhil.errors import InvalidArgument
from tinyhil.registry import SELECT_EMULATED, Target, TargetRegistry, default_registry

__all__ = [
    "Board",
    "BoardKind",
    "EmulatedLocator",
    "HardwareMap",
    "HwmapError",
    "KfdLocator",
    "Locator",
    "MapState",
    "NvLocator",
    "UsbLocator",
    "emulated_inventory",
    "load_hwmap",
    "normalize_pci",
    "parse_hwmap",
    "target_inventory",
]


class BoardKind(StrEnum):
    """What a board is; the locator table of an entry is named after it."""

    USB_BRIDGE = "usb-bridge"
    AMD_KFD = "amd-kfd"
    NV = "nv"
    EMULATED = "emulated"


class MapState(StrEnum):
    """The states a map may give a board; the rest (GOOD, UNKNOWN, BAD) come from health probes."""

    MAINTENANCE = "maintenance"
    RETIRED = "retired"


_E = TypeVar("_E", bound=StrEnum)


class HwmapError(FileFieldError):
    """A hardware map that cannot be used."""


@dataclass(frozen=True, slots=True)
class UsbLocator:
    """A USB bridge: its VID:PID and its serial number or bus-port path (``"1-2.3"``)."""

    vid_pid: str
    serial: str | None = None
    port: str | None = None


@dataclass(frozen=True, slots=True)
class KfdLocator:
    """An AMD GPU under KFD: its topology ``gpu_id``, ``unique_id`` or PCI location (``0000:03:00.0``)."""

    gpu_id: int | None = None
    unique_id: int | None = None
    pci: str | None = None


@dataclass(frozen=True, slots=True)
class NvLocator:
    """An NVIDIA GPU: its PCI bus id (``0000:01:00.0``) or UUID (``GPU-...``)."""

    pci_bus_id: str | None = None
    uuid: str | None = None


@dataclass(frozen=True, slots=True)
class EmulatedLocator:
    """A board found by its target string (an emulated board; without a map, a named hardware target too): the target
    it runs, how many tests may use it at once, and the target options it opens with, as the map gave them (JSON
    text: see :mod:`tinyhil.device_farm.board_options`)."""

    target: str
    slots: int = 1
    options_json: str = "{}"

    @property
    def options(self) -> dict[str, Any]:
        """The options table as the map gave it (turn it into open options with ``target_options``)."""
        value: dict[str, Any] = json.loads(self.options_json)
        return value


Locator = UsbLocator | KfdLocator | NvLocator | EmulatedLocator


@dataclass(frozen=True, slots=True)
class Board:
    """One hardware-map entry; ``line`` is where its ``[[board]]`` header is."""

    id: str
    kind: BoardKind
    locator: Locator
    targets: tuple[str, ...]
    capabilities: frozenset[str]
    host: str
    tags: tuple[str, ...] = ()
    state: MapState | None = None
    line: int = 0

    @property
    def slots(self) -> int:
        """How many tests may run on the board at once (real boards: one)."""
        return self.locator.slots if isinstance(self.locator, EmulatedLocator) else 1


@dataclass(frozen=True, slots=True)
class HardwareMap:
    """A validated map: its boards in file order."""

    path: str
    boards: tuple[Board, ...]

    def board(self, board_id: str) -> Board:
        """The board named ``board_id``.

        Raises:
            InvalidArgument: no such board (the known ids are listed).
        """
        for board in self.boards:
            if board.id == board_id:
                return board
        known = ", ".join(b.id for b in self.boards) or "none"
        raise InvalidArgument(f"board {board_id!r} is not in {self.path}; boards: {known}")


_BOARD_KEYS: Final = ("id", "kind", "targets", "capabilities", "host", "tags", "state")
_LOCATOR_KEYS: Final[Mapping[BoardKind, str]] = {
    BoardKind.USB_BRIDGE: "usb",
    BoardKind.AMD_KFD: "kfd",
    BoardKind.NV: "nv",
    BoardKind.EMULATED: "emulated",
}
_BOARD_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The board kind per hardware target.
_HARDWARE_KIND: Final = {"USB+AMD": BoardKind.USB_BRIDGE, "KFD+AMD": BoardKind.AMD_KFD, "NV": BoardKind.NV}
# The target a board of a kind serves when its entry lists none (discovery's entries name no target for an NV GPU).
_DEFAULT_TARGETS: Final[Mapping[BoardKind, tuple[str, ...]]] = {BoardKind.NV: ("NV",)}
_NEEDS_TARGETS: Final = (BoardKind.USB_BRIDGE, BoardKind.AMD_KFD)
_VID_PID: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}")
_USB_PORT: Final = re.compile(r"\d+-\d+(\.\d+)*")
_PCI: Final = re.compile(r"(?:[0-9a-fA-F]{4}|[0-9a-fA-F]{8}):[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def normalize_pci(text: str) -> str:
    """A PCI location in one spelling: lower case, a 4-digit domain (NVML writes 8): ``0000:01:00.0``.

    Raises:
        InvalidArgument: ``text`` is not ``DDDD:BB:DD.F`` (or the 8-digit-domain form).
    """
    if not isinstance(text, str) or not _PCI.fullmatch(text):
        raise InvalidArgument(f"PCI location {text!r}, expected DDDD:BB:DD.F such as '0000:03:00.0'")
    domain, rest = text.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


class _Entry:
    """One ``[[board]]`` table being validated: typed getters whose errors carry file, line and field."""

    def __init__(self, path: str, lines: TableLines, index: int, table: Mapping[str, Any]) -> None:
        self.path, self.lines, self.index, self.table = path, lines, index, table
        self.board_id = table.get("id") if isinstance(table.get("id"), str) else None

    def error(self, name: str, why: str, *, line_of: str | None = None) -> HwmapError:
        field = f"board {self.board_id!r} {name}" if self.board_id else f"board #{self.index + 1} {name}"
        return HwmapError(self.path, self.lines.field(self.index, line_of or name.split(".")[0]), field, why)

    def string(self, name: str, value: Any, *, required: bool = True) -> str | None:
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            what = "missing" if value is None else f"{value!r}"
            raise self.error(name, f"{what}, expected a non-empty string")
        return value

    def strings(self, name: str, value: Any, *, required: bool) -> tuple[str, ...]:
        if value is None and not required:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or not value:
            what = "missing" if value is None else f"{value!r}"
            raise self.error(name, f"{what}, expected a non-empty list of strings")
        return tuple(value)

    def choice(self, name: str, value: Any, choices: type[_E]) -> _E:
        names = [c.value for c in choices]
        if isinstance(value, str) and value in names:
            return choices(value)
        hint = difflib.get_close_matches(value, names, n=1) if isinstance(value, str) else []
        close = f" (did you mean {hint[0]!r}?)" if hint else ""
        what = "missing" if value is None else f"{value!r}"
        raise self.error(name, f"{what}{close}, expected one of {', '.join(names)}")

    def unknown_keys(self, table: Mapping[str, Any], allowed: Sequence[str], prefix: str = "") -> None:
        for key in table:
            if key not in allowed:
                hint = difflib.get_close_matches(key, allowed, n=1)
                close = f" (did you mean {hint[0]!r}?)" if hint else ""
                where = prefix.rstrip(".") or key
                raise self.error(f"{prefix}{key}", f"unknown field{close}, expected one of {', '.join(allowed)}",
                                 line_of=where)  # fmt: skip


def _int_field(entry: _Entry, name: str, value: Any, *, minimum: int) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < minimum:
        raise entry.error(name, f"{value!r}, expected an integer >= {minimum}")
    return value


def _pci_field(entry: _Entry, name: str, value: Any) -> str | None:
    if value is None:
        return None
    try:
        return normalize_pci(value)
    except InvalidArgument:
        raise entry.error(name, f"{value!r}, expected a PCI location DDDD:BB:DD.F such as '0000:03:00.0'") from None


def _usb(entry: _Entry, table: Mapping[str, Any]) -> UsbLocator:
    vid_pid = entry.string("usb.vid_pid", table.get("vid_pid"))
    assert vid_pid is not None
    if not _VID_PID.fullmatch(vid_pid):
        raise entry.error("usb.vid_pid", f"{vid_pid!r}, expected VVVV:PPPP in hex such as 'add1:0001'")
    serial = entry.string("usb.serial", table.get("serial"), required=False)
    port = entry.string("usb.port", table.get("port"), required=False)
    if port is not None and not _USB_PORT.fullmatch(port):
        raise entry.error("usb.port", f"{port!r}, expected a bus-port path such as '1-2.3'")
    if serial is None and port is None:
        raise entry.error("usb", "no serial and no port, expected one of them to tell boards apart")
    return UsbLocator(vid_pid.lower(), serial, port)


def _kfd(entry: _Entry, table: Mapping[str, Any]) -> KfdLocator:
    locator = KfdLocator(
        gpu_id=_int_field(entry, "kfd.gpu_id", table.get("gpu_id"), minimum=1),
        unique_id=_int_field(entry, "kfd.unique_id", table.get("unique_id"), minimum=0),
        pci=_pci_field(entry, "kfd.pci", table.get("pci")),
    )
    if locator == KfdLocator():
        raise entry.error("kfd", "empty, expected at least one of gpu_id, unique_id, pci")
    return locator


def _nv(entry: _Entry, table: Mapping[str, Any]) -> NvLocator:
    uuid = entry.string("nv.uuid", table.get("uuid"), required=False)
    if uuid is not None and not uuid.startswith(("GPU-", "MIG-")):
        raise entry.error("nv.uuid", f"{uuid!r}, expected an NVML UUID starting 'GPU-' or 'MIG-'")
    locator = NvLocator(pci_bus_id=_pci_field(entry, "nv.pci_bus_id", table.get("pci_bus_id")), uuid=uuid)
    if locator == NvLocator():
        raise entry.error("nv", "empty, expected pci_bus_id or uuid")
    return locator


def _emulated(entry: _Entry, table: Mapping[str, Any]) -> EmulatedLocator:
    target = entry.string("emulated.target", table.get("target"))
    assert target is not None
    slots = _int_field(entry, "emulated.slots", table.get("slots"), minimum=1)
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise entry.error("emulated.options", f"{options!r}, expected a table of the target's options")
    try:
        target_options(target, options)
    except InvalidArgument as exc:
        raise entry.error("emulated.options", str(exc)) from None
    return EmulatedLocator(target, 1 if slots is None else slots, json.dumps(options, sort_keys=True))


_LOCATORS: Final[Mapping[BoardKind, tuple[Callable[[_Entry, Mapping[str, Any]], Locator], tuple[str, ...]]]] = {
    BoardKind.USB_BRIDGE: (_usb, ("vid_pid", "serial", "port")),
    BoardKind.AMD_KFD: (_kfd, ("gpu_id", "unique_id", "pci")),
    BoardKind.NV: (_nv, ("pci_bus_id", "uuid")),
    BoardKind.EMULATED: (_emulated, ("target", "slots", "options")),
}


def _targets(entry: _Entry, kind: BoardKind, locator: Locator, registry: TargetRegistry) -> tuple[str, ...]:
    emulated = isinstance(locator, EmulatedLocator)
    # An NV board that lists no target serves NV (the CUDA driver runtime), with NV's capabilities.
    given = entry.strings("targets", entry.table.get("targets"), required=kind in _NEEDS_TARGETS)
    if not given:
        given = _DEFAULT_TARGETS.get(kind, ())
    checks = [("targets", text) for text in given]
    if isinstance(locator, EmulatedLocator):
        if given and locator.target not in given:
            raise entry.error("targets", f"{list(given)!r} leaves out emulated.target {locator.target!r}")
        given = given or (locator.target,)
        checks.insert(0, ("emulated.target", locator.target))
    for name, text in checks:
        try:
            resolved = registry.resolve(text)
        except InvalidArgument as exc:
            raise entry.error(name, str(exc)) from None
        if resolved.emulated != emulated:
            expected = "an emulated target" if emulated else "a hardware target"
            raise entry.error(name, f"{text!r} on a {kind.value} board, expected {expected}")
    return given


def _board(entry: _Entry, registry: TargetRegistry, known: frozenset[str], default_host: str) -> Board:
    table = entry.table
    kind_key = _LOCATOR_KEYS.values()
    entry.unknown_keys(table, (*_BOARD_KEYS, *kind_key))
    board_id = entry.string("id", table.get("id"))
    assert board_id is not None
    if not _BOARD_ID.fullmatch(board_id):
        raise entry.error("id", f"{board_id!r}, expected letters, digits, '.', '_' or '-' (it names lock files)")
    kind = entry.choice("kind", table.get("kind"), BoardKind)
    locator_key = _LOCATOR_KEYS[kind]
    for other in kind_key:
        if other != locator_key and other in table:
            raise entry.error(other, f"a {other} table on a {kind.value} board, expected {locator_key} = {{...}}")
    locator_table = table.get(locator_key)
    if not isinstance(locator_table, dict):
        what = "missing" if locator_table is None else f"{locator_table!r}"
        raise entry.error(
            locator_key, f"{what}, expected a table telling how to find the board ({locator_key} = {{...}})"
        )
    build, allowed = _LOCATORS[kind]
    entry.unknown_keys(locator_table, allowed, prefix=f"{locator_key}.")
    locator = build(entry, locator_table)
    targets = _targets(entry, kind, locator, registry)
    declared = entry.strings("capabilities", table.get("capabilities"), required=False)
    try:
        check_capabilities(declared, known, where="capabilities:")
    except InvalidArgument as exc:
        raise entry.error("capabilities", str(exc)) from None
    capabilities = frozenset(declared) or frozenset().union(*(registry.resolve(t).capabilities for t in targets))
    host = entry.string("host", table.get("host"), required=False) or default_host
    tags = entry.strings("tags", table.get("tags"), required=False)
    state = entry.choice("state", table["state"], MapState) if "state" in table else None
    return Board(board_id, kind, locator, targets, capabilities, host, tags, state, entry.lines.entry(entry.index))


def parse_hwmap(
    text: str, path: str = "hwmap.toml", *, registry: TargetRegistry | None = None, host: str | None = None
) -> HardwareMap:
    """Validate a hardware map's text (``path`` only names it in errors).

    Raises:
        HwmapError: the first problem: not TOML, an unknown field, a wrong type, an unknown kind or target, a
            duplicate id, a missing locator.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HwmapError(path, decode_error_line(str(exc)), "toml", str(exc)) from None
    lines = TableLines(text, "board")
    for key in document:
        if key not in ("board", "version"):
            raise HwmapError(path, 1, key, "unknown top-level field, expected [[board]] tables (and version)")
    if document.get("version", 1) != 1:
        raise HwmapError(path, 1, "version", f"{document['version']!r}, expected 1")
    tables = document.get("board", [])
    if not isinstance(tables, list):
        raise HwmapError(path, 1, "board", "expected [[board]] tables (an array of tables), got a single table")
    registry = registry if registry is not None else default_registry()
    known = known_capabilities(registry)
    default_host = host if host is not None else socket.gethostname()
    boards: list[Board] = []
    seen: dict[str, Board] = {}
    for index, table in enumerate(tables):
        board = _board(_Entry(path, lines, index, table), registry, known, default_host)
        if board.id in seen:
            first = seen[board.id].line
            raise HwmapError(path, board.line, f"board {board.id!r} id", f"duplicate id (first at line {first})")
        seen[board.id] = board
        boards.append(board)
    return HardwareMap(path, tuple(boards))


def load_hwmap(path: str | Path, *, registry: TargetRegistry | None = None, host: str | None = None) -> HardwareMap:
    """Read and validate the hardware map at ``path``.

    Raises:
        HwmapError: the file cannot be read, or its content is invalid (see :func:`parse_hwmap`).
    """
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HwmapError(shown, 0, "file", f"cannot read it: {exc}") from None
    return parse_hwmap(text, shown, registry=registry, host=host)


def target_inventory(targets: Iterable[Target], *, slots: int = 1, host: str | None = None) -> HardwareMap:
    """A map without ``hwmap.toml``: one board per target, found by its target string. An emulated target's board
    takes ``slots`` tests at once, a hardware target's one (``tinyhil run --target KFD+AMD`` runs on the GPU the
    target string names, as the device runtime opens it)."""
    if type(slots) is not int or slots < 1:
        raise InvalidArgument(f"slots={slots!r}, expected an integer >= 1")
    host = host if host is not None else socket.gethostname()
    boards = []
    for resolved in targets:
        board_id = re.sub(r"[^A-Za-z0-9._-]", "-", resolved.name.lower())
        locator = EmulatedLocator(resolved.name, slots if resolved.emulated else 1)
        kind = BoardKind.EMULATED if resolved.emulated else _HARDWARE_KIND.get(resolved.definition.name, BoardKind.NV)
        boards.append(Board(board_id, kind, locator, (resolved.name,), resolved.capabilities, host))
    return HardwareMap("(targets)", tuple(boards))


def emulated_inventory(
    registry: TargetRegistry | None = None, *, slots: int = 1, host: str | None = None
) -> HardwareMap:
    """The map a farm uses without ``hwmap.toml``: one emulated board per available emulated target, each taking
    ``slots`` tests at once (emulated targets are inventory entries too, so scheduling has one model)."""
    registry = registry if registry is not None else default_registry()
    inventory = target_inventory(registry.select([SELECT_EMULATED]), slots=slots, host=host)
    return HardwareMap("(emulated targets)", inventory.boards)
