"""What the USB copy protocol needs of the GPU behind the bridge: the :class:`UsbGpu` protocol.

:class:`~tinyhil.usbgpu.copy.UsbCopy` runs its SDMA program on a queue it is given and needs three things of the GPU
driver besides: the size of BAR0 (the VRAM the host reaches), a polling wait that ends early when a queue stops, and
the stopped-queue check itself. :class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu` is the driver that provides them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from tinyhil._check import check_int
from tinyhil.asm2464.topology import PcieBar
from tinyhil.errors import InvalidArgument

__all__ = ["UsbGpu", "vram_address"]


def vram_address(vram_bar: PcieBar, name: str, va: int, nbytes: int) -> int:
    """The PCIe address of GPU address ``va`` (``nbytes`` from it), checked to lie in the VRAM BAR0 reaches.

    Raises:
        InvalidArgument: ``va`` is not an int >= 0, or the range ends past BAR0 (a system-aperture address too).
    """
    if type(va) is not int or va < 0:
        check_int(name, va, min_value=0)
    if va + nbytes > vram_bar.size:
        raise InvalidArgument(
            f"GPU address {name}={va:#x}+{nbytes:#x}, expected VRAM the host reaches through BAR0 (below "
            f"{vram_bar.size:#x}); system-aperture addresses are the bridge's memory: use the controller"
        )
    return vram_bar.address + va


@runtime_checkable
class UsbGpu(Protocol):
    """A GPU driver on the USB path, as the copy protocol drives it."""

    vram_bar: PcieBar  # BAR0: VRAM at GPU address = BAR0 offset, below ``vram_bar.size``

    def wait(self, condition: Callable[[], bool], what: str, *, timeout_s: float | None = None) -> None:
        """Poll until ``condition()`` holds.

        Raises:
            QueueStopped: a queue of this GPU stopped before the condition held.
            DeviceTimeout: the condition did not hold within ``timeout_s`` (default: the driver's).
        """
        ...

    def check_queues(self) -> None:
        """Raise if the chip reports that a queue stopped.

        Raises:
            QueueStopped: naming the queue and what stopped it.
        """
        ...
