"""Discovery: what boards a host really has, read from a root directory it is given (so tests build fake hosts).

- **USB bridges**: libusb enumeration (through ``usb1``, or any context with its API such as the emulated one)
  for the bridge VID:PIDs (``tinyhil.spec.asm2464.BRIDGE_VID_PIDS``), with serial and bus-port path.
- **AMD GPUs under KFD**: the topology amdkfd publishes under ``<root>/sys/devices/virtual/kfd/kfd/topology``
  (``gpu_id``, ``unique_id``, PCI location from ``domain`` and ``location_id``).
- **NVIDIA GPUs**: NVML (``nvidia-ml-py``, the ``nv`` extra) on the real root; where NVML is missing, has no
  driver or no permission, that is said, and ``<root>/proc/driver/nvidia/gpus/*/information`` (model, UUID, bus
  location) and PCI vendor ``0x10de`` display devices in ``<root>/sys/bus/pci/devices`` are read instead.

Nothing is guessed: every found device carries what it was found by, and every source that could not be read
says why in :attr:`Discovery.notes`.
"""

from __future__ import annotations

import importlib
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tinyhil.device_farm.inventory.hwmap import (
    BoardKind,
    KfdLocator,
    Locator,
    NvLocator,
    UsbLocator,
    board_id_from,
    normalize_pci,
)
from tinyhil.errors import InvalidArgument
from tinyhil.fileio import RealFileIO
from tinyhil.kfd.topology import read_topology
from tinyhil.spec.asm2464 import BRIDGE_VID_PIDS
from tinyhil.spec.kfd_topology import KFD_TOPOLOGY_PATH

__all__ = ["Discovery", "FoundBoard", "discover", "discover_kfd", "discover_nv", "discover_usb"]

NV_PCI_VENDOR: Final = 0x10DE
_PCI_DISPLAY_CLASS: Final = 0x03  # PCI base class "display controller"
# NVML errors that mean "no usable NVIDIA GPU here" rather than a broken one.
_NVML_ABSENT: Final = {
    "NVMLError_LibraryNotFound": "the NVIDIA driver library is not installed",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded",
    "NVMLError_NoPermission": "no permission to query the NVIDIA driver",
}


@dataclass(frozen=True, slots=True)
class FoundBoard:
    """A device discovery saw: its kind, its locator (every field it could read), and a one-line description."""

    kind: BoardKind
    locator: Locator
    description: str
    source: str

    def suggested_id(self) -> str:
        """A map id derived from the locator (a suggestion for a new entry, never used to match): a valid board id
        (:func:`~tinyhil.device_farm.inventory.hwmap.board_id_from`) whatever a serial or UUID holds."""
        loc = self.locator
        if isinstance(loc, UsbLocator):
            tail = loc.serial or (loc.port or "").replace(".", "-")
            return board_id_from(f"bridge-{tail}".lower())
        if isinstance(loc, KfdLocator):
            return board_id_from(f"kfd-{loc.pci or loc.gpu_id}".replace(":", "-").replace(".", "-"))
        assert isinstance(loc, NvLocator)
        return board_id_from(
            f"nv-{(loc.uuid or '')[4:12] or loc.pci_bus_id}".replace(":", "-").replace(".", "-").lower()
        )


@dataclass(frozen=True, slots=True)
class Discovery:
    """What one host has: the boards found and a note per source that could not be read."""

    boards: tuple[FoundBoard, ...]
    notes: tuple[str, ...] = field(default=())
    searched: frozenset[BoardKind] = frozenset({BoardKind.USB_BRIDGE, BoardKind.AMD_KFD, BoardKind.NV})


def discover_usb(context: Any = None) -> tuple[tuple[FoundBoard, ...], tuple[str, ...]]:
    """Bridges on the USB bus of ``context`` (a ``usb1.USBContext``-like object; ``None``: the real one)."""
    if context is None:
        try:
            usb1 = importlib.import_module("usb1")
            context = usb1.USBContext()
        except (ImportError, OSError) as exc:
            return (), (f"usb: libusb unavailable ({exc}); install the system package libusb-1.0-0",)
    found: list[FoundBoard] = []
    notes: list[str] = []
    try:
        context.open()
    except Exception as exc:  # usb1 raises OSError or USBError; either way nothing can be enumerated
        return (), (f"usb: libusb failed to initialise: {exc}",)
    try:
        for device in context.getDeviceIterator(skip_on_error=True):
            try:
                vid, pid = device.getVendorID(), device.getProductID()
                if (vid, pid) not in BRIDGE_VID_PIDS:
                    continue
                ports = device.getPortNumberList()
                port = f"{device.getBusNumber()}-{'.'.join(str(p) for p in ports)}" if ports else None
                try:
                    serial = device.getSerialNumber() or None
                except Exception as exc:  # reading the serial opens the device; a busy or locked one refuses
                    serial = None
                    notes.append(f"usb: the serial of {vid:04x}:{pid:04x} at {port} is unreadable: {exc}")
                locator = UsbLocator(f"{vid:04x}:{pid:04x}", serial, port)
                found.append(FoundBoard(BoardKind.USB_BRIDGE, locator, f"USB bridge {vid:04x}:{pid:04x}", "libusb"))
            finally:
                device.close()
    finally:
        context.close()
    return tuple(found), tuple(notes)


def discover_kfd(root: str | Path = "/") -> tuple[tuple[FoundBoard, ...], tuple[str, ...]]:
    """AMD GPUs in the KFD topology under ``root``."""
    topology_root = posixpath.join(str(root), KFD_TOPOLOGY_PATH.lstrip("/"))
    try:
        topology = read_topology(RealFileIO(), topology_root)
    except FileNotFoundError:
        return (), (f"kfd: no KFD topology at {topology_root} (amdkfd not loaded)",)
    except (OSError, InvalidArgument) as exc:
        return (), (f"kfd: the topology at {topology_root} is unreadable: {exc}",)
    found = []
    for node in topology.nodes:
        if not node.is_gpu:
            continue
        props = node.properties
        location = props.get("location_id")
        pci = None
        if location is not None:
            bus, devfn = location >> 8, location & 0xFF
            pci = f"{props.get('domain', 0):04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"
        locator = KfdLocator(gpu_id=node.gpu_id, unique_id=props.get("unique_id"), pci=pci)
        found.append(FoundBoard(BoardKind.AMD_KFD, locator, f"AMD GPU {node.arch} (KFD node {node.node_id})", "kfd"))
    return tuple(found), ()


def _nvml_boards(nvml: Any) -> tuple[FoundBoard, ...]:
    nvml.nvmlInit()
    try:
        boards = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid, name = nvml.nvmlDeviceGetUUID(handle), nvml.nvmlDeviceGetName(handle)
            bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
            uuid, name, bus_id = (v.decode() if isinstance(v, bytes) else v for v in (uuid, name, bus_id))
            locator = NvLocator(pci_bus_id=normalize_pci(bus_id), uuid=uuid)
            boards.append(FoundBoard(BoardKind.NV, locator, name, "nvml"))
        return tuple(boards)
    finally:
        nvml.nvmlShutdown()


def _information(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _procfs_boards(root: Path) -> dict[str, FoundBoard]:
    boards: dict[str, FoundBoard] = {}
    gpus = root / "proc" / "driver" / "nvidia" / "gpus"
    for entry in sorted(gpus.glob("*/information")) if gpus.is_dir() else ():
        info = _information(entry.read_text(errors="replace"))
        try:
            pci = normalize_pci(info.get("Bus Location", entry.parent.name))
        except InvalidArgument:
            continue
        uuid = info.get("GPU UUID") or None
        description = info.get("Model") or "NVIDIA GPU"
        boards[pci] = FoundBoard(BoardKind.NV, NvLocator(pci_bus_id=pci, uuid=uuid), description, "procfs")
    return boards


def _sysfs_boards(root: Path) -> dict[str, FoundBoard]:
    boards: dict[str, FoundBoard] = {}
    devices = root / "sys" / "bus" / "pci" / "devices"
    for device in sorted(devices.iterdir()) if devices.is_dir() else ():
        try:
            vendor = int((device / "vendor").read_text().strip(), 16)
            pci_class = int((device / "class").read_text().strip(), 16)
            pci = normalize_pci(device.name)
        except (OSError, ValueError):
            continue
        if vendor == NV_PCI_VENDOR and pci_class >> 16 == _PCI_DISPLAY_CLASS:
            boards[pci] = FoundBoard(BoardKind.NV, NvLocator(pci_bus_id=pci), "NVIDIA GPU (PCI only)", "sysfs")
    return boards


def discover_nv(root: str | Path = "/", nvml: Any = None) -> tuple[tuple[FoundBoard, ...], tuple[str, ...]]:
    """NVIDIA GPUs: through ``nvml`` (a ``pynvml``-like module; ``None``: import ``pynvml`` when ``root`` is the
    real one), else from procfs and sysfs under ``root``."""
    notes: list[str] = []
    if nvml is None and Path(root) == Path("/"):
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            notes.append("nv: NVML not installed (pip install 'tinyhil[nv]' for nvidia-ml-py); read procfs/sysfs")
    if nvml is not None:
        try:
            return _nvml_boards(nvml), ()
        except Exception as exc:
            name = type(exc).__name__
            if not name.startswith("NVMLError"):
                raise
            why = _NVML_ABSENT.get(name)
            said = f"no usable NVIDIA GPU here: {why}" if why else f"failed: {exc}"
            notes.append(f"nv: NVML {said} ({name}); read procfs/sysfs")
    root = Path(root)
    boards = _sysfs_boards(root)
    boards.update(_procfs_boards(root))  # procfs knows the UUID and model: it wins where both see a GPU
    return tuple(boards[pci] for pci in sorted(boards)), tuple(notes)


def discover(root: str | Path = "/", *, usb_context: Any = None, nvml: Any = None, usb: bool = True) -> Discovery:
    """Every board on the host under ``root``: USB bridges (through ``usb_context``; ``usb=False`` skips libusb,
    as a fake host tree has no bus), KFD GPUs and NVIDIA GPUs, each source's trouble as a note."""
    boards: list[FoundBoard] = []
    notes: list[str] = []
    sources = [discover_kfd(root), discover_nv(root, nvml)]
    searched = {BoardKind.AMD_KFD, BoardKind.NV}
    if usb:
        sources.insert(0, discover_usb(usb_context))
        searched.add(BoardKind.USB_BRIDGE)
    for found, said in sources:
        boards.extend(found)
        notes.extend(said)
    return Discovery(tuple(boards), tuple(notes), frozenset(searched))
