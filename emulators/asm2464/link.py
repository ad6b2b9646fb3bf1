"""PCIe link and power: the 0xF3 request, the LTSSM byte at XDATA 0xB450, the link-up delay quirk."""

from __future__ import annotations

from typing import Final

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks
from tinyhil.emulators.kernel import EventHandle, EventKernel
from tinyhil.spec.asm2464 import LTSSM_L0, PCIE_POWER_ON, Request, Xdata

__all__ = ["LinkControl"]

# Model choice: the spec defines only L0 (0x78); the link reads 0x00 (detect) while off or training.
LTSSM_DOWN: Final = 0x00


class LinkControl:
    """PCIe power and link state. The custom firmware boots with PCIe off (link down).

    0xF3 with wValue bit 0 set powers PCIe on; the link reaches L0 (LTSSM ``0x78``) after ``link_up_delay_ns`` of
    virtual time (default 0: at once). Bit 0 clear powers it off and drops the link at once.
    """

    def __init__(self, memory: BridgeMemory, kernel: EventKernel, quirks: Quirks) -> None:
        self.memory = memory
        self.kernel = kernel
        self.quirks = quirks
        self._pending: EventHandle | None = None
        self.reset()

    def reset(self) -> None:
        if self._pending is not None:
            self.kernel.cancel(self._pending)
        self._pending = None
        self.powered = False
        self._set_up(False)

    def state(self) -> tuple[object, ...]:
        return self.powered, self.up, self._pending is not None

    def _set_up(self, up: bool) -> None:
        self.up = up
        self.memory.xdata[Xdata.LTSSM] = LTSSM_L0 if up else LTSSM_DOWN

    def _op_pcie_power(self, value: int, index: int) -> None:
        if value & ~PCIE_POWER_ON or index:
            raise UsbStall(
                f"0xF3 wValue={value:#x} wIndex={index:#x}, expected wValue 0 or 1 and wIndex 0",
                op=f"{Request.PCIE_POWER:#x}",
            )
        on = bool(value & PCIE_POWER_ON)
        if on == self.powered:
            return
        self.powered = on
        if self._pending is not None:
            self.kernel.cancel(self._pending)
            self._pending = None
        if not on:
            self._set_up(False)
        elif self.quirks.link_up_delay_ns == 0:
            self._set_up(True)
        else:
            self._pending = self.kernel.schedule(self.quirks.link_up_delay_ns, self._link_trained, label="link up")

    def _link_trained(self) -> None:
        self._pending = None
        self._set_up(True)
