"""The ASM2464 USB-to-PCIe bridge model (docs/asm2464.md), one class per hardware block.

Lifecycle::

    kernel = EventKernel(seed=0)                 # one virtual clock for the bridge and the GPU behind it
    bridge = Asm2464(kernel=kernel, function=gpu, quirks=Quirks(...), faults=FaultPlan(...))
    # the bridge calls gpu.attach_host(bridge); the GPU DMAs with bridge.dma_read / bridge.dma_write and is told
    # about host writes (landed bulks, XDATA writes into windows) through gpu.host_memory_written(addr, n)
    urb = bridge.front.transfer(Urb(0, 1, timeout_ns, setup=(0xC0, 0xE4, 0xB450, 0)))   # synchronous
    bridge.front.submit(urb); ...; bridge.front.wait(urb)                               # asynchronous
    bridge.reset()                               # power cycle: the whole state, see Asm2464.reset

Host-side code normally reaches the bridge through the emulated usb1 stack (``tinyhil.mocks.usb``); tests read
and write SRAM and XDATA directly with ``read_sram`` / ``write_sram`` / ``read_xdata`` / ``write_xdata`` and prove
that rejected requests change nothing with ``state_digest()``.
"""

from __future__ import annotations

from tinyhil.emulators.asm2464.device import Asm2464
from tinyhil.emulators.asm2464.errors import UsbBabble, UsbError, UsbNoDevice, UsbStall, UsbTimeout
from tinyhil.emulators.asm2464.front import UNBOUNDED_WAIT_NS, WAIT_CAP_NS, UsbFront
from tinyhil.emulators.asm2464.link import LinkControl
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks, UnknownRequests
from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction, SramEngine
from tinyhil.emulators.asm2464.tlp import TlpEngine
from tinyhil.emulators.asm2464.urb import Urb, UsbStatus

__all__ = [
    "UNBOUNDED_WAIT_NS",
    "WAIT_CAP_NS",
    "Arm",
    "ArmKind",
    "Asm2464",
    "BridgeMemory",
    "Direction",
    "LinkControl",
    "Quirks",
    "SramEngine",
    "TlpEngine",
    "UnknownRequests",
    "Urb",
    "UsbBabble",
    "UsbError",
    "UsbFront",
    "UsbNoDevice",
    "UsbStall",
    "UsbStatus",
    "UsbTimeout",
]
