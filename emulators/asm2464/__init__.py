"""The ASM2464 USB-to-PCIe bridge model (spec/asm24.md), one class per hardware block."""

from __future__ import annotations

from tinyhil.emulators.asm2464.device import Asm2464
from tinyhil.emulators.asm2464.errors import UsbError, UsbNoDevice, UsbStall, UsbTimeout
from tinyhil.emulators.asm2464.front import UNBOUNDED_WAIT_NS, Urb, UsbFront, UsbStatus
from tinyhil.emulators.asm2464.link import LinkControl
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks, UnknownRequests
from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction, SramEngine
from tinyhil.emulators.asm2464.tlp import TlpEngine

__all__ = [
    "UNBOUNDED_WAIT_NS",
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
    "UsbError",
    "UsbFront",
    "UsbNoDevice",
    "UsbStall",
    "UsbStatus",
    "UsbTimeout",
]
