"""The type-1 (PCI-to-PCI bridge) configuration header: bus numbers, memory windows and forwarding decisions."""

from __future__ import annotations

from typing import Final

from tinyhil.emulators.pcie.config import ConfigSpace
from tinyhil.spec.pci import HEADER_TYPE_BRIDGE, Command, Config

__all__ = ["Type1Config"]

_WINDOW_FIELD_MASK: Final = 0xFFF0  # bits 15:4 of a base/limit register hold address bits 31:20
_WINDOW_SHIFT: Final = 16
_WINDOW_GRANULE_MASK: Final = 0xFFFFF  # windows are 1 MB granular: a limit covers its whole last megabyte
_PREF_64BIT: Final = 0x1  # low nibble of the prefetchable base/limit: the window decodes 64-bit addresses
_IO_FIELD_MASK: Final = 0xF0
_BRIDGE_CONTROL_WRITABLE: Final = 0x0FFF
_CLASS_PCI_BRIDGE: Final = 0x060400


class Type1Config(ConfigSpace):
    """A bridge header: routing by secondary/subordinate bus numbers and by the memory windows.

    ==============  ==================================================  ==================
    offset          meaning                                             source
    ==============  ==================================================  ==================
    0x18/0x19/0x1A  primary (informational), secondary, subordinate     PCI-PCI 1.2 3.2.5
    0x1C/0x1D       I/O base/limit (kept, never decoded: no I/O here)   PCI-PCI 1.2 3.2.5.6
    0x20/0x22       memory base/limit, bits 15:4 = address bits 31:20   PCI-PCI 1.2 3.2.5.8
    0x24/0x26       prefetchable base/limit (64-bit capable)            PCI-PCI 1.2 3.2.5.9
    0x28/0x2C       prefetchable base/limit, upper 32 bits              PCI-PCI 1.2 3.2.5.10
    ==============  ==================================================  ==================

    Config requests pass a bridge by bus number alone; memory requests downstream need COMMAND.MEMORY and an
    address inside a window; requests upstream from below need COMMAND.MASTER.
    """

    def __init__(self, *, vendor_id: int, device_id: int, revision: int = 0) -> None:
        super().__init__(
            vendor_id=vendor_id,
            device_id=device_id,
            class_code=_CLASS_PCI_BRIDGE,
            header_type=HEADER_TYPE_BRIDGE,
            revision=revision,
        )

    def _build(self) -> None:
        super()._build()
        for reg in (Config.PRIMARY_BUS, Config.SECONDARY_BUS, Config.SUBORDINATE_BUS, Config.SEC_LATENCY_TIMER):
            self._set_writable(reg, 0xFF, 1)
        self._set_writable(Config.IO_BASE, _IO_FIELD_MASK, 1)
        self._set_writable(Config.IO_LIMIT, _IO_FIELD_MASK, 1)
        for reg in (Config.MEMORY_BASE, Config.MEMORY_LIMIT, Config.PREF_MEMORY_BASE, Config.PREF_MEMORY_LIMIT):
            self._set_writable(reg, _WINDOW_FIELD_MASK, 2)
        self._set(Config.PREF_MEMORY_BASE, _PREF_64BIT, 2)
        self._set(Config.PREF_MEMORY_LIMIT, _PREF_64BIT, 2)
        self._set_writable(Config.PREF_BASE_UPPER32, 0xFFFFFFFF, 4)
        self._set_writable(Config.PREF_LIMIT_UPPER32, 0xFFFFFFFF, 4)
        self._set_writable(Config.BRIDGE_CONTROL, _BRIDGE_CONTROL_WRITABLE, 2)

    @property
    def secondary_bus(self) -> int:
        return self.read(Config.SECONDARY_BUS, 1)

    @property
    def subordinate_bus(self) -> int:
        return self.read(Config.SUBORDINATE_BUS, 1)

    def routes_bus(self, bus: int) -> bool:
        """Whether a config request for ``bus`` passes this bridge (secondary <= bus <= subordinate)."""
        secondary = self.secondary_bus
        return secondary != 0 and secondary <= bus <= self.subordinate_bus

    def windows(self) -> list[tuple[int, int]]:
        """The memory windows as inclusive ``(base, limit)`` byte ranges; a window with base > limit is closed."""
        base = (self.read(Config.MEMORY_BASE, 2) & _WINDOW_FIELD_MASK) << _WINDOW_SHIFT
        limit = (self.read(Config.MEMORY_LIMIT, 2) & _WINDOW_FIELD_MASK) << _WINDOW_SHIFT | _WINDOW_GRANULE_MASK
        pref_base = (self.read(Config.PREF_MEMORY_BASE, 2) & _WINDOW_FIELD_MASK) << _WINDOW_SHIFT
        pref_base |= self.read(Config.PREF_BASE_UPPER32, 4) << 32
        pref_limit = (self.read(Config.PREF_MEMORY_LIMIT, 2) & _WINDOW_FIELD_MASK) << _WINDOW_SHIFT
        pref_limit |= _WINDOW_GRANULE_MASK | self.read(Config.PREF_LIMIT_UPPER32, 4) << 32
        return [(b, lim) for b, lim in ((base, limit), (pref_base, pref_limit)) if b <= lim]

    def forwards_downstream(self, addr: int, nbytes: int) -> bool:
        """Whether a memory request to ``[addr, addr + nbytes)`` passes down through this bridge."""
        return any(base <= addr and addr + nbytes - 1 <= limit for base, limit in self.downstream_windows())

    def downstream_windows(self) -> list[tuple[int, int]]:
        """The windows memory requests pass down through now (none while COMMAND.MEMORY is clear)."""
        return self.windows() if self.command & Command.MEMORY else []

    def forwards_upstream(self, addr: int, nbytes: int) -> bool:
        """Whether a memory request from below to ``[addr, addr + nbytes)`` passes up (bus master, outside windows)."""
        if not self.command & Command.MASTER:
            return False
        end = addr + nbytes - 1
        return not any(addr <= limit and end >= base for base, limit in self.windows())

    def describe(self) -> str:
        """Bus numbers, windows and COMMAND, for error messages."""
        windows = ", ".join(f"{b:#x}-{lim:#x}" for b, lim in self.windows()) or "closed"
        return (
            f"secondary={self.secondary_bus} subordinate={self.subordinate_bus} windows={windows} "
            f"COMMAND={int(self.command):#x}"
        )
