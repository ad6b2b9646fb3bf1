"""The plain, frozen description of the PCIe tree the bring-up programmed: GPU BARs and bridge windows."""

from __future__ import annotations

from dataclasses import dataclass

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument

__all__ = ["PcieBar", "PcieBridge", "PcieTopology", "PcieWindow"]


@dataclass(frozen=True, slots=True)
class PcieBar:
    """One assigned memory BAR: ``size`` bytes (a power of two) at PCIe ``address`` (aligned to ``size``)."""

    index: int
    address: int
    size: int
    is_64bit: bool
    prefetchable: bool

    def __post_init__(self) -> None:
        check_int("index", self.index, min_value=0, max_value=5)
        check_int("size", self.size, min_value=1)
        if self.size & (self.size - 1) or self.address % self.size:
            raise InvalidArgument(
                f"BAR{self.index} at {self.address:#x}+{self.size:#x}, expected a power-of-two size and an address "
                "aligned to it"
            )

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.address + self.size


@dataclass(frozen=True, slots=True)
class PcieWindow:
    """A bridge memory window ``[base, limit]`` (inclusive limit, as bridges encode it; 1 MB granular)."""

    base: int
    limit: int

    def __post_init__(self) -> None:
        if self.limit < self.base:
            raise InvalidArgument(f"window base={self.base:#x} limit={self.limit:#x}, expected limit >= base")

    @property
    def size(self) -> int:
        return self.limit + 1 - self.base

    def __contains__(self, address: object) -> bool:
        return isinstance(address, int) and self.base <= address <= self.limit


@dataclass(frozen=True, slots=True)
class PcieBridge:
    """A programmed bridge at ``bus:dev.fn`` forwarding buses ``secondary..subordinate`` and its windows."""

    bus: int
    dev: int
    fn: int
    secondary: int
    subordinate: int
    memory: PcieWindow | None  # non-prefetchable, 32-bit
    prefetchable: PcieWindow | None  # prefetchable, 64-bit


@dataclass(frozen=True, slots=True)
class PcieTopology:
    """What :func:`~tinyhil.asm2464.bringup.pcie_bringup` set up: the GPU function, its BARs and the bridges."""

    bus: int
    dev: int
    fn: int
    vendor_id: int
    device_id: int
    bars: tuple[PcieBar, ...]  # ordered by BAR index
    bridges: tuple[PcieBridge, ...]  # from the root (bus 0) down
    rebar_size: int | None  # BAR0 size chosen through the resizable-BAR capability, None without one

    def bar(self, index: int) -> PcieBar:
        """The assigned BAR ``index``.

        Raises:
            InvalidArgument: the GPU has no memory BAR ``index``.
        """
        for bar in self.bars:
            if bar.index == index:
                return bar
        raise InvalidArgument(f"BAR{index!r} is not assigned, expected one of {[b.index for b in self.bars]}")

    @property
    def bar_map(self) -> dict[int, PcieBar]:
        """BAR index -> BAR."""
        return {bar.index: bar for bar in self.bars}
