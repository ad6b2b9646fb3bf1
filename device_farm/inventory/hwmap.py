"""The hardware map (``hwmap.toml``): one entry per board, validated on load.

A lab keeps the map under version control; discovery compares it with what a host really has. Each board is a
``[[board]]`` table::

    [[board]]
    id = "bridge-a"                                   # unique in the map
    kind = "usb-bridge"                               # usb-bridge | amd-kfd | nv | emulated | served
    usb = { vid_pid = "add1:0001", serial = "A1B2" }  # how to find it: one table named after the kind
    targets = ["USB+AMD"]                             # the target strings it serves
    capabilities = ["usb3", "copyin"]                 # optional: default, its targets' capabilities
    host = "lab-1"                                    # optional: default, this host's name
    tags = ["nightly"]                                # optional
    state = "maintenance"                             # optional: maintenance | retired (taken out of scheduling)
    power_cycle = ["uhubctl", "-l", "1-2", "-p", "3", "-a", "cycle"]  # optional: run before a BAD board's re-probe

The locator table per kind: ``usb`` (``vid_pid`` plus ``serial`` or a bus-port ``port`` such as ``"1-2.3"``),
``kfd`` (any of ``gpu_id``, ``unique_id``, ``pci``), ``nv`` (``pci_bus_id`` or ``uuid``), ``emulated``
(``target``, the one target string it runs, and ``slots``, how many tests may run on it at once; default 1),
``served`` (``serve``, ``target`` and ``options``: an emulator served to the real interface's target,
:mod:`~tinyhil.device_farm.inventory.served_boards`). ``power_cycle`` is an argument list, run as it is (never
through a shell), under the board's lease, before a BAD board is probed again (docs/farm.md, "Health"). Every error
is a :class:`HwmapError` naming the file, the line, the field and what was expected.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from tinyhil.capabilities import check_capabilities, known_capabilities
from tinyhil.device_farm.inventory.board_options import target_options
from tinyhil.device_farm.inventory.served_boards import (
    ServedLocator,
    check_served_targets,
    parse_served,
    served_capabilities,
)
from tinyhil.device_farm.inventory.toml_lines import TableLines, raising
from tinyhil.errors import InvalidArgument
from tinyhil.loading import Fields, FileFormatError, parse_toml, read_capped
from tinyhil.registry import SELECT_EMULATED, Target, TargetRegistry, default_registry

__all__ = [
    "MAX_BOARDS",
    "MAX_SLOTS",
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
    "board_id_from",
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
    SERVED = "served"


class MapState(StrEnum):
    """The states a map may give a board; the rest (GOOD, UNKNOWN, BAD) come from health probes."""

    MAINTENANCE = "maintenance"
    RETIRED = "retired"


class HwmapError(FileFormatError):
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
    text: see :mod:`tinyhil.device_farm.inventory.board_options`)."""

    target: str
    slots: int = 1
    options_json: str = "{}"
    per_run: bool = False  # made by a run for itself (no map): each run gets its own instance (its own lease key)

    @property
    def options(self) -> dict[str, Any]:
        """The options table as the map gave it (turn it into open options with ``target_options``)."""
        value: dict[str, Any] = json.loads(self.options_json)
        return value


Locator = UsbLocator | KfdLocator | NvLocator | EmulatedLocator | ServedLocator


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
    power_cycle: tuple[str, ...] = ()  # argv run before a BAD board's re-probe (never a shell string)

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


MAX_BOARDS: Final = 4096  # boards in one map: a lab's inventory, not a data set
MAX_SLOTS: Final = 256  # tests at once on one emulated board (each slot is a lease file and a shard)
_BOARD_KEYS: Final = ("id", "kind", "targets", "capabilities", "host", "tags", "state", "power_cycle")
_POWER_CYCLE_MAX_ARGS: Final = 64
_LOCATOR_KEYS: Final[Mapping[BoardKind, str]] = {
    BoardKind.USB_BRIDGE: "usb",
    BoardKind.AMD_KFD: "kfd",
    BoardKind.NV: "nv",
    BoardKind.EMULATED: "emulated",
    BoardKind.SERVED: "served",
}
_BOARD_ID_MAX: Final = 64  # a board id names lock files
_BOARD_ID: Final = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{_BOARD_ID_MAX - 1}}}")
_BOARD_ID_OTHER: Final = re.compile(r"[^A-Za-z0-9._-]+")  # what a board id may not hold
# The board kind per hardware target.
_HARDWARE_KIND: Final = {"USB+AMD": BoardKind.USB_BRIDGE, "KFD+AMD": BoardKind.AMD_KFD, "NV": BoardKind.NV}
# The target a board of a kind serves when its entry lists none (discovery's entries name no target for an NV GPU).
_DEFAULT_TARGETS: Final[Mapping[BoardKind, tuple[str, ...]]] = {BoardKind.NV: ("NV",)}
_NEEDS_TARGETS: Final = (BoardKind.USB_BRIDGE, BoardKind.AMD_KFD)
_VID_PID: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}")
_USB_PORT: Final = re.compile(r"\d+-\d+(\.\d+)*")
_PCI: Final = re.compile(r"(?:[0-9a-fA-F]{4}|[0-9a-fA-F]{8}):[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def board_id_from(text: str) -> str:
    """The nearest valid board id to ``text`` (a suggestion from a serial or a UUID): each run of characters an id may
    not hold becomes ``-``, a leading ``.``/``_``/``-`` is dropped, and it is cut to the id's length (``board`` when
    nothing is left)."""
    kept = _BOARD_ID_OTHER.sub("-", text).lstrip("._-")[:_BOARD_ID_MAX]
    return kept if _BOARD_ID.fullmatch(kept) else "board"


def normalize_pci(text: str) -> str:
    """A PCI location in one spelling: lower case, a 4-digit domain (NVML writes 8): ``0000:01:00.0``.

    Raises:
        InvalidArgument: ``text`` is not ``DDDD:BB:DD.F`` (or the 8-digit-domain form).
    """
    if not isinstance(text, str) or not _PCI.fullmatch(text):
        raise InvalidArgument(f"PCI location {text!r}, expected DDDD:BB:DD.F such as '0000:03:00.0'")
    domain, rest = text.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def _entry_fields(path: str, lines: TableLines, index: int, table: Any) -> Fields:
    """The typed getters of ``[[board]]`` entry ``index``: errors name the board by id (or number) and the field's
    line."""
    board_id = table.get("id") if isinstance(table, dict) else None
    prefix = f"board {board_id!r:.70} " if isinstance(board_id, str) and board_id else f"board #{index + 1} "
    if not isinstance(table, dict):
        raise HwmapError(path, lines.entry(index), prefix.rstrip(), "expected a [[board]] table")
    return Fields(table, path, prefix=prefix, line_of=lambda name: lines.field(index, name))


def _locator_fields(entry: Fields, key: str) -> Fields:
    """The getters of the entry's inline locator table ``key`` (its fields' errors carry the line of ``key``)."""
    line = entry.error(key, "").line
    return Fields(entry.table[key], entry.path, prefix=f"{entry.prefix}{key}.", line_of=lambda _name: line)


def _pci_field(table: Fields, name: str) -> str | None:
    value = table.string(name, required=False)
    if value is None:
        return None
    try:
        return normalize_pci(value)
    except InvalidArgument:
        raise table.error(name, f"{value!r:.60}, expected a PCI location DDDD:BB:DD.F such as '0000:03:00.0'") from None


def _usb(table: Fields) -> UsbLocator:
    vid_pid = table.string("vid_pid")
    assert vid_pid is not None
    if not _VID_PID.fullmatch(vid_pid):
        raise table.error("vid_pid", f"{vid_pid!r:.60}, expected VVVV:PPPP in hex such as 'add1:0001'")
    serial = table.string("serial", required=False)
    port = table.string("port", required=False)
    if port is not None and not _USB_PORT.fullmatch(port):
        raise table.error("port", f"{port!r:.60}, expected a bus-port path such as '1-2.3'")
    if serial is None and port is None:
        raise _whole(table, "no serial and no port, expected one of them to tell boards apart")
    return UsbLocator(vid_pid.lower(), serial, port)


def _whole(table: Fields, why: str) -> HwmapError:
    """An error about the locator table as a whole (``board 'b' usb: ...``)."""
    error = table.error("", why)
    return HwmapError(error.path, error.line, error.field.rstrip("."), why)


def _kfd(table: Fields) -> KfdLocator:
    locator = KfdLocator(
        gpu_id=table.integer("gpu_id", required=False, minimum=1),
        unique_id=table.integer("unique_id", required=False, minimum=0),
        pci=_pci_field(table, "pci"),
    )
    if locator == KfdLocator():
        raise _whole(table, "empty, expected at least one of gpu_id, unique_id, pci")
    return locator


def _nv(table: Fields) -> NvLocator:
    uuid = table.string("uuid", required=False)
    if uuid is not None and not uuid.startswith(("GPU-", "MIG-")):
        raise table.error("uuid", f"{uuid!r:.60}, expected an NVML UUID starting 'GPU-' or 'MIG-'")
    locator = NvLocator(pci_bus_id=_pci_field(table, "pci_bus_id"), uuid=uuid)
    if locator == NvLocator():
        raise _whole(table, "empty, expected pci_bus_id or uuid")
    return locator


def _emulated(table: Fields) -> EmulatedLocator:
    target = table.string("target")
    assert target is not None
    slots = table.integer("slots", required=False, minimum=1, maximum=MAX_SLOTS)
    options = table.of_type("options", dict, required=False) or {}
    try:  # the target first: an unknown one is the target field's fault, not the options'
        default_registry().resolve(target)
    except InvalidArgument as exc:
        raise table.error("target", str(exc)) from None
    try:
        target_options(target, options)
        options_json = json.dumps(options, sort_keys=True)
    except InvalidArgument as exc:
        raise table.error("options", str(exc)) from None
    except (TypeError, ValueError) as exc:  # a TOML date or time among the options: not plain data
        raise table.error("options", f"{exc}, expected strings, numbers, booleans, lists and tables") from None
    return EmulatedLocator(target, 1 if slots is None else slots, options_json)


_LOCATORS: Final[Mapping[BoardKind, tuple[Callable[[Fields], Locator], tuple[str, ...]]]] = {
    BoardKind.USB_BRIDGE: (_usb, ("vid_pid", "serial", "port")),
    BoardKind.AMD_KFD: (_kfd, ("gpu_id", "unique_id", "pci")),
    BoardKind.NV: (_nv, ("pci_bus_id", "uuid")),
    BoardKind.EMULATED: (_emulated, ("target", "slots", "options")),
    BoardKind.SERVED: (parse_served, ("serve", "target", "options")),
}


def _targets(entry: Fields, kind: BoardKind, locator: Locator, registry: TargetRegistry) -> tuple[str, ...]:
    emulated = isinstance(locator, EmulatedLocator)
    # An NV board that lists no target serves NV (the CUDA driver runtime), with NV's capabilities.
    given = entry.strings("targets", required=kind in _NEEDS_TARGETS)
    if not given:
        given = _DEFAULT_TARGETS.get(kind, ())
    checks = [("targets", text) for text in given]
    if isinstance(locator, ServedLocator):
        given = check_served_targets(entry, locator, given, registry)
        checks = [("targets", text) for text in given]
    if isinstance(locator, EmulatedLocator):
        if given and locator.target not in given:
            raise entry.error("targets", f"{list(given)!r:.200} leaves out emulated.target {locator.target!r}")
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


def _board(entry: Fields, registry: TargetRegistry, known: frozenset[str], default_host: str, line: int) -> Board:
    table = entry.table
    kind_key = _LOCATOR_KEYS.values()
    entry.only((*_BOARD_KEYS, *kind_key))
    board_id = entry.string("id")
    assert board_id is not None
    if not _BOARD_ID.fullmatch(board_id):
        raise entry.error("id", f"{board_id!r:.60}, expected letters, digits, '.', '_' or '-' (it names lock files)")
    kind = entry.choice("kind", BoardKind)
    assert kind is not None
    locator_key = _LOCATOR_KEYS[kind]
    for other in kind_key:
        if other != locator_key and other in table:
            raise entry.error(other, f"a {other} table on a {kind.value} board, expected {locator_key} = {{...}}")
    if not isinstance(table.get(locator_key), dict):
        what = "missing" if table.get(locator_key) is None else f"{table[locator_key]!r:.60}"
        raise entry.error(
            locator_key, f"{what}, expected a table telling how to find the board ({locator_key} = {{...}})"
        )
    build, allowed = _LOCATORS[kind]
    locator_table = _locator_fields(entry, locator_key)
    locator_table.only(allowed)
    locator = build(locator_table)
    targets = _targets(entry, kind, locator, registry)
    declared = entry.strings("capabilities", required=False)
    try:
        check_capabilities(declared, known, where="capabilities:")
    except InvalidArgument as exc:
        raise entry.error("capabilities", str(exc)) from None
    capabilities = frozenset(declared) or frozenset().union(*(registry.resolve(t).capabilities for t in targets))
    if isinstance(locator, ServedLocator):
        capabilities = served_capabilities(entry, capabilities)
    host = entry.string("host", required=False) or default_host
    tags = entry.strings("tags", required=False)
    state = entry.choice("state", MapState, required=False)
    power_cycle = entry.strings("power_cycle", required=False, max_items=_POWER_CYCLE_MAX_ARGS)
    return Board(board_id, kind, locator, targets, capabilities, host, tags, state, line, power_cycle)


def parse_hwmap(
    text: str | bytes, path: str = "hwmap.toml", *, registry: TargetRegistry | None = None, host: str | None = None
) -> HardwareMap:
    """Validate a hardware map's text (``path`` only names it in errors).

    Raises:
        HwmapError: the first problem: not UTF-8 or not TOML, nested too deep, an integer past 64 bits, more than
            :data:`MAX_BOARDS` boards, an unknown field, a wrong type, an unknown kind or target, a duplicate id, a
            missing locator, more than :data:`MAX_SLOTS` slots.
    """
    with raising(HwmapError):
        document = parse_toml(text, path)
        return _parse(document, text if isinstance(text, str) else text.decode(), path, registry, host)


def _parse(
    document: dict[str, Any], text: str, path: str, registry: TargetRegistry | None, host: str | None
) -> HardwareMap:
    for key in document:
        if key not in ("board", "version"):
            raise HwmapError(path, 1, key, "unknown top-level field, expected [[board]] tables (and version)")
    if document.get("version", 1) != 1:
        raise HwmapError(path, 1, "version", f"{document['version']!r:.60}, expected 1")
    tables = document.get("board", [])
    if not isinstance(tables, list):
        raise HwmapError(path, 1, "board", "expected [[board]] tables (an array of tables), got a single table")
    if len(tables) > MAX_BOARDS:
        raise HwmapError(path, 0, "board", f"{len(tables)} boards, expected at most {MAX_BOARDS} in one map")
    lines = TableLines(text, "board")
    registry = registry if registry is not None else default_registry()
    known = known_capabilities(registry)
    default_host = host if host is not None else socket.gethostname()
    boards: list[Board] = []
    seen: dict[str, Board] = {}
    for index, table in enumerate(tables):
        entry = _entry_fields(path, lines, index, table)
        board = _board(entry, registry, known, default_host, lines.entry(index))
        if board.id in seen:
            first = seen[board.id].line
            raise HwmapError(path, board.line, f"board {board.id!r} id", f"duplicate id (first at line {first})")
        seen[board.id] = board
        boards.append(board)
    return HardwareMap(path, tuple(boards))


def load_hwmap(path: str | Path, *, registry: TargetRegistry | None = None, host: str | None = None) -> HardwareMap:
    """Read and validate the hardware map at ``path`` (refused unread past its size cap, ``LIMITS["hwmap"]``).

    Raises:
        HwmapError: the file cannot be read or is too large, or its content is invalid (see :func:`parse_hwmap`).
    """
    with raising(HwmapError):
        data = read_capped(path, "hwmap")
    return parse_hwmap(data, str(path), registry=registry, host=host)


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
        locator = EmulatedLocator(resolved.name, slots if resolved.emulated else 1, per_run=resolved.emulated)
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
