"""The served device's identity: its sysfs entry for umockdev's testbed and its answers to GET_DESCRIPTOR.

The descriptors are the ones tinyhil describes a recorded bridge with (:func:`tinyhil.trace.umockdev.usb_descriptors`:
device descriptor, configuration 1, interface 0 of vendor class, bulk endpoints 0x02 OUT and 0x81 IN, SuperSpeed
companions on a USB3 link), made from the emulated board's own identity (VID:PID, strings, link speed) and placed
where the in-process stack puts the board (bus 2, address 2, :mod:`tinyhil.mocks.usb.device`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.mocks.usb.device import FIRST_ADDRESS, SUPERSPEED_BUS, usb1_speed
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP
from tinyhil.trace.records import TraceHeader
from tinyhil.trace.umockdev import (
    I_MANUFACTURER,
    I_PRODUCT,
    I_SERIAL,
    LANGUAGE_TABLE,
    USB_DIR_IN_STANDARD_DEVICE,
    USB_DT_CONFIG,
    USB_DT_DEVICE,
    USB_DT_DEVICE_SIZE,
    USB_DT_STRING,
    USB_REQ_GET_DESCRIPTOR,
    string_descriptor,
    umockdev_description,
    usb_descriptors,
)

__all__ = ["DescriptorSet", "describe_board"]

_DESCRIPTOR_TYPE_SHIFT: Final = 8  # GET_DESCRIPTOR's wValue: type in the high byte, index in the low byte
_BYTE: Final = 0xFF
_STRING_ATTRIBUTES: Final = ((I_MANUFACTURER, "manufacturer"), (I_PRODUCT, "product"), (I_SERIAL, "serial"))


@dataclass(frozen=True, slots=True)
class DescriptorSet:
    """The device's descriptors, strings, sysfs description (umockdev's ``P:/N:/E:/A:/H:`` text) and node, and its
    identity as a trace header holds it (``device``)."""

    descriptors: bytes
    strings: dict[int, str]
    description: str
    sysfs_path: str
    devnode: str
    bus: int
    address: int
    device: dict[str, Any]

    def string_attributes(self) -> dict[str, str]:
        """The sysfs string attributes (``manufacturer``, ``product``, ``serial``) and their text."""
        return {name: self.strings[index] for index, name in _STRING_ATTRIBUTES}

    def answer(self, request_type: int, request: int, value: int, index: int, length: int) -> bytes | None:
        """The data stage of a GET_DESCRIPTOR for the device, its configuration or a string (at most ``length``
        bytes), or ``None`` for any other request (the board answers those)."""
        if (request_type, request) != (USB_DIR_IN_STANDARD_DEVICE, USB_REQ_GET_DESCRIPTOR):
            return None
        kind, number = value >> _DESCRIPTOR_TYPE_SHIFT, value & _BYTE
        if kind == USB_DT_DEVICE and number == 0:
            return self.descriptors[:USB_DT_DEVICE_SIZE][:length]
        if kind == USB_DT_CONFIG and number == 0:
            return self.descriptors[USB_DT_DEVICE_SIZE:][:length]
        if kind == USB_DT_STRING and number == 0:
            return LANGUAGE_TABLE[:length]
        if kind == USB_DT_STRING and number in self.strings:
            return string_descriptor(self.strings[number])[:length]
        return None  # BOS, qualifier, debug and unknown strings go to the board, which stalls them


def describe_board(bridge: Asm2464, target: str) -> DescriptorSet:
    """The :class:`DescriptorSet` of ``bridge`` as the first board on the bus."""
    device = {"vendor_id": bridge.vendor_id, "product_id": bridge.product_id, "serial": bridge.serial,
              "product": bridge.product, "manufacturer": bridge.manufacturer, "speed": usb1_speed(bridge),
              "bus": SUPERSPEED_BUS, "address": FIRST_ADDRESS}  # fmt: skip
    interface = {"endpoints": [BULK_OUT_EP, BULK_IN_EP], "interface": 0, "configuration": 1}
    header = TraceHeader(target=target, device=device, descriptors=interface)
    description, sysfs_path = umockdev_description(header)
    strings = {I_MANUFACTURER: bridge.manufacturer, I_PRODUCT: bridge.product, I_SERIAL: bridge.serial}
    devnode = f"/dev/bus/usb/{SUPERSPEED_BUS:03d}/{FIRST_ADDRESS:03d}"
    return DescriptorSet(usb_descriptors(header), strings, description, sysfs_path, devnode, SUPERSPEED_BUS,
                         FIRST_ADDRESS, device)  # fmt: skip
