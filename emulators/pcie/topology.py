"""The PCIe tree behind the ASM2464: a chain of four bridges and one endpoint slot.

Physical wiring (docs/asm2464.md "PCIe behind the bridge"): bridge 0 is always on bus 0 (config type 0 reaches it);
the device below bridge k sits on bridge k's secondary bus. Programmed the way the spec expects (secondary = k + 1,
subordinate = 4) the bridges sit on buses 0-3 and the endpoint on bus 4, device 0, function 0. Nothing below bridge 0
is reachable before the bridges have their bus numbers; memory requests need every bridge's window and
COMMAND.MEMORY and the endpoint's BAR and COMMAND.MEMORY; DMA from the endpoint needs COMMAND.MASTER all the way up.
The primary-bus field is informational, as on real bridges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tinyhil.emulators.pcie.config import new_generation
from tinyhil.emulators.pcie.function import PcieFunction
from tinyhil.emulators.pcie.type1 import Type1Config
from tinyhil.spec.asm2464 import GPU_BUS
from tinyhil.spec.pci import Command

__all__ = ["ConfigTarget", "PcieTopology"]

# Model choices (the spec names no IDs for the bridges): ASMedia's PCI vendor ID and a device ID after the chip.
BRIDGE_VENDOR_ID: Final = 0x1B21
BRIDGE_DEVICE_ID: Final = 0x2464
BRIDGE_COUNT: Final = GPU_BUS  # buses 0-3 are bridges


_ADDRESS_LIMIT: Final = (1 << 64) - 1  # the last byte of the 64-bit PCIe memory space
_ROUTE_CACHE_ENTRIES: Final = 4096  # distinct ranges remembered per routing state, each direction


@dataclass(frozen=True, slots=True)
class ConfigTarget:
    """Where a config request lands: a bridge of the chain (``bridge`` is its index) or the endpoint function."""

    bridge: int | None
    function: PcieFunction | None


class PcieTopology:
    """Bridges 0-3 and the endpoint slot; routes config requests and memory requests both ways.

    ``function`` is the endpoint in the slot (``None``: the slot is empty and everything below bridge 3 answers UR).
    """

    def __init__(self, function: PcieFunction | None = None) -> None:
        self.function = function
        # This topology's routing generation, shared by its bridges' and its endpoint's config spaces: any config
        # change here bumps it, and nothing outside this topology does.
        self.generation = new_generation()
        self.bridges = [
            Type1Config(vendor_id=BRIDGE_VENDOR_ID, device_id=BRIDGE_DEVICE_ID) for _ in range(BRIDGE_COUNT)
        ]
        for config in [*self.bridges, *([function.config] if function is not None else [])]:
            config.share_generation(self.generation)
        self._upstream_key = -1
        self._upstream_ok: set[tuple[int, int]] = set()
        self._downstream_key = -1
        self._downstream: list[tuple[int, int, int, int]] = []

    def reset(self) -> None:
        """Fundamental reset of the bridges' config spaces (the endpoint keeps its own state)."""
        for bridge in self.bridges:
            bridge.reset()

    def config_target(self, bus: int, dev: int, fn: int, *, type1: bool) -> tuple[ConfigTarget | None, str]:
        """Route a config request; return the target, or ``None`` and why it completes with UR."""
        if not type1:
            if bus != 0:
                return None, f"config type 0 addresses bus 0, got bus {bus} (use type 1 for buses above 0)"
            if (dev, fn) != (0, 0):
                return None, f"no device at 0:{dev:02x}.{fn} (bus 0 holds only bridge 0 at 00.0)"
            return ConfigTarget(0, None), ""
        if bus == 0:
            return None, "config type 1 addresses buses above 0, got bus 0 (use type 0)"
        for index, bridge in enumerate(self.bridges):
            if not bridge.routes_bus(bus):
                return None, f"bridge {index} does not route bus {bus} ({bridge.describe()})"
            if bus == bridge.secondary_bus:
                if (dev, fn) != (0, 0):
                    return None, f"no device at {bus}:{dev:02x}.{fn}"
                if index + 1 < len(self.bridges):
                    return ConfigTarget(index + 1, None), ""
                if self.function is None:
                    return None, f"the slot at bus {bus} is empty"
                return ConfigTarget(None, self.function), ""
        return None, f"bus {bus} lies below the endpoint, which is not a bridge"

    def route_memory(self, addr: int, nbytes: int) -> tuple[int, int] | str:
        """Route a memory request from the TLP engine down the chain: ``(bar, offset)`` or why it is UR.

        Every TLP and stream asks this, at ever-changing addresses (ring writes), so the bridges' windows and the
        endpoint's decoding BARs are combined into cells once per routing state and the check runs on those."""
        key = self.generation[0]  # any config change on this topology invalidates the routing caches
        if key != self._downstream_key:
            self._downstream_key = key
            self._downstream = self._downstream_cells()
        last = addr + nbytes - 1
        for low, high, index, base in self._downstream:
            if low <= addr and last <= high:
                return index, addr - base
        return self._route_memory(addr, nbytes)  # refused: the full walk says why

    def _downstream_cells(self) -> list[tuple[int, int, int, int]]:
        """``(low, high, bar, bar base)`` per BAR (in BAR order) and choice of one window per bridge.

        A request ``[addr, last]`` passes the chosen windows into the BAR iff ``low <= addr and last <= high`` (the
        largest base and the smallest inclusive limit), so the first cell holding a request names the BAR the full
        walk would find, and no cell holding it means the walk refuses it.
        """
        paths = [(0, _ADDRESS_LIMIT)]  # (largest base, smallest limit) over the windows chosen so far
        for bridge in self.bridges:
            windows = bridge.downstream_windows()
            paths = [(max(low, base), min(high, limit)) for low, high in paths for base, limit in windows]
        function = self.function
        cells = []
        for index, bar_base, size in function.config.decoding_bars() if function is not None else []:
            for low, high in paths:
                low, high = max(low, bar_base), min(high, bar_base + size - 1)
                if low <= high + 1:  # otherwise no request, not even an empty one, fits
                    cells.append((low, high, index, bar_base))
        return cells

    def _route_memory(self, addr: int, nbytes: int) -> tuple[int, int] | str:
        for index, bridge in enumerate(self.bridges):
            if not bridge.forwards_downstream(addr, nbytes):
                return f"memory request {addr:#x}+{nbytes:#x} not forwarded by bridge {index} ({bridge.describe()})"
        if self.function is None:
            return f"memory request {addr:#x}+{nbytes:#x}: the slot is empty"
        hit = self.function.config.decode(addr, nbytes)
        if hit is None:
            config = self.function.config
            return (
                f"memory request {addr:#x}+{nbytes:#x} hits no BAR of the endpoint "
                f"({config.describe_bars()}, COMMAND={int(config.command):#x})"
            )
        return hit

    def upstream_error(self, addr: int, nbytes: int) -> str:
        """Why a DMA from the endpoint to ``[addr, addr + nbytes)`` cannot reach the bridge's memory ('' if it can).

        Every DMA asks this, so the answer for a range is cached until a config space on the path changes.
        """
        key = self.generation[0]
        if key != self._upstream_key:
            self._upstream_key, self._upstream_ok = key, set()
        if (addr, nbytes) in self._upstream_ok:
            return ""
        error = self._upstream_error(addr, nbytes)
        if not error and len(self._upstream_ok) < _ROUTE_CACHE_ENTRIES:
            self._upstream_ok.add((addr, nbytes))
        return error

    def _upstream_error(self, addr: int, nbytes: int) -> str:
        if self.function is not None and not self.function.config.command & Command.MASTER:
            return f"DMA {addr:#x}+{nbytes:#x}: bus mastering is off on the endpoint (COMMAND lacks MASTER)"
        for index in reversed(range(len(self.bridges))):
            bridge = self.bridges[index]
            if not bridge.forwards_upstream(addr, nbytes):
                return f"DMA {addr:#x}+{nbytes:#x} not forwarded upstream by bridge {index} ({bridge.describe()})"
        return ""
