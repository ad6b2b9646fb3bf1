"""The emulated ``usb1.USBDevice``: one per emulated board, with that board's identity and its own state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.mocks.usb.handle import EmulatedUsbDeviceHandle

if TYPE_CHECKING:
    from tinyhil.mocks.usb.context import EmulatedUsbContext

__all__ = ["FIRST_ADDRESS", "SUPERSPEED_BUS", "EmulatedUsbDevice", "usb1_speed"]

SUPERSPEED_BUS: Final = 2  # Linux puts SuperSpeed devices on the xHCI's USB3 root hub, typically bus 2
FIRST_ADDRESS: Final = 2


def usb1_speed(bridge: Asm2464) -> int:
    """The link speed libusb reports for ``bridge`` (usb1's ``SPEED_*``): SuperSpeed+ on a USB3 link, else high."""
    return int(usb1.SPEED_SUPER_PLUS if bridge.usb3 else usb1.SPEED_HIGH)


class EmulatedUsbDevice:
    """A device as ``USBContext.getDeviceList`` lists it; :meth:`open` returns an :class:`EmulatedUsbDeviceHandle`."""

    def __init__(self, context: EmulatedUsbContext, bridge: Asm2464, position: int) -> None:
        self._context = context
        self._bridge = bridge
        self._position = position

    @property
    def bridge(self) -> Asm2464:
        """The emulated board behind this device (for tests)."""
        return self._bridge

    def getVendorID(self) -> int:
        return self._bridge.vendor_id

    def getProductID(self) -> int:
        return self._bridge.product_id

    def getSerialNumber(self) -> str:
        return self._bridge.serial

    def getProduct(self) -> str:
        return self._bridge.product

    def getManufacturer(self) -> str:
        return self._bridge.manufacturer

    def getBusNumber(self) -> int:
        return SUPERSPEED_BUS

    def getPortNumber(self) -> int:
        return self._position + 1

    def getPortNumberList(self) -> list[int]:
        return [self._position + 1]

    def getDeviceAddress(self) -> int:
        return FIRST_ADDRESS + self._position

    def getDeviceSpeed(self) -> int:
        return usb1_speed(self._bridge)

    def open(self) -> Any:
        """Open a handle on this board (every handle of a board shares the board's state)."""
        if self._bridge.front.gone:
            raise usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
        return EmulatedUsbDeviceHandle(self)

    def close(self) -> None:
        """Nothing to free (usb1 frees descriptors here)."""

    def __repr__(self) -> str:
        return (
            f"<EmulatedUsbDevice {self.getBusNumber():03}.{self.getDeviceAddress():03} "
            f"{self.getVendorID():04x}:{self.getProductID():04x} serial={self.getSerialNumber()!r}>"
        )
