"""umockdev: a trace as a device that Debian's ``umockdev`` replays into the real ``usb1`` -> libusb -> usbfs stack.

``umockdev-run -d dev.umockdev -p SYSFS=trace.pcapng -- CMD`` makes the device described in ``dev.umockdev`` appear
in a fake sysfs and ``/dev/bus/usb``, and answers the usbfs URBs that ``CMD`` submits from the usbmon capture. This
module writes both files from a trace:

- **The device description** (:func:`umockdev_description`): the sysfs attributes of a USB device (``busnum``,
  ``devnum``, ``idVendor``, ``idProduct``, ``speed``, ``bConfigurationValue``, strings) and its descriptors, made
  from the trace header: a device descriptor with the recorded VID:PID and string indexes, and configuration 1
  with interface 0 (vendor class) and a bulk endpoint for each recorded endpoint address (``0x02`` OUT and ``0x81``
  IN for the bridge, ``tinyhil.spec.asm2464``), with SuperSpeed endpoint companions at 5 Gbit/s and above. The
  descriptors go both into the ``descriptors`` attribute (``H:``, what libusb reads from sysfs) and into the device
  node (``N:``, whose contents umockdev takes as uppercase hex).
- **The capture** (:func:`umockdev_trace`, then the pcapng writer): the recorded transfers, preceded by the
  GET_DESCRIPTOR(STRING) exchanges a client's discovery makes (``getProduct()`` and the like are control transfers on
  the wire, but an emulated or replayed handle answers them without one, so a recording does not hold them).

What umockdev 0.17 does and does not check (``docs/traces.md``, "Through the real stack"): it matches a submitted
URB with the next recorded submission by type, endpoint, length, setup packet and OUT data; an unmatched URB waits
until the client's own timeout (``LIBUSB_ERROR_TIMEOUT``); a recorded *standard* control request that nobody asks for
is skipped. It never checks that the whole capture was used, nor the order of OUT transfers in flight together:
:func:`first_divergence` does, comparing what the client actually issued (recorded on its side with
:class:`~tinyhil.trace.recorder.RecordingHandle`) with the trace.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil.errors import InvalidArgument
from tinyhil.spec.copyin import CHUNK_BYTES, SECTOR_CHUNK_BYTES, SENTINEL_BYTES
from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.exchanges import Exchange, difference_text, exchanges
from tinyhil.trace.pcapng import save_pcapng
from tinyhil.trace.records import ENDPOINT_IN, Op, Record, Trace, TraceHeader, Transfer

__all__ = [
    "LANGUAGE_TABLE",
    "MAX_TRANSFER_BYTES",
    "UMOCKDEV_PCAPNG",
    "UmockdevFiles",
    "first_divergence",
    "string_descriptor",
    "umockdev_description",
    "umockdev_trace",
    "usb_descriptors",
    "write_umockdev",
]

# --- USB 2.0 / 3.x chapter 9 facts: descriptor types and lengths, standard requests ---
USB_DT_DEVICE: Final = 0x01
USB_DT_CONFIG: Final = 0x02
USB_DT_STRING: Final = 0x03
USB_DT_INTERFACE: Final = 0x04
USB_DT_ENDPOINT: Final = 0x05
USB_DT_SS_ENDPOINT_COMP: Final = 0x30
USB_DT_DEVICE_SIZE: Final = 18
USB_DT_CONFIG_SIZE: Final = 9
USB_DT_INTERFACE_SIZE: Final = 9
USB_DT_ENDPOINT_SIZE: Final = 7
USB_DT_SS_EP_COMP_SIZE: Final = 6
USB_CLASS_VENDOR_SPEC: Final = 0xFF
USB_ENDPOINT_XFER_BULK: Final = 0x02
USB_CONFIG_ATT_ONE: Final = 0x80  # bmAttributes bit 7, reserved, always set
USB_REQ_GET_DESCRIPTOR: Final = 0x06
USB_REQ_SET_CONFIGURATION: Final = 0x09
USB_DIR_IN_STANDARD_DEVICE: Final = 0x80  # bmRequestType: IN, standard, to the device
USB_DIR_OUT_STANDARD_DEVICE: Final = 0x00  # bmRequestType: OUT, standard, to the device
USB_ENDPOINT_NUMBER_MASK: Final = 0x0F  # bEndpointAddress bits 3..0; bit 7 is the direction, bits 6..4 reserved
STRING_HEADER_BYTES: Final = 2  # a string descriptor's bLength and bDescriptorType, then UTF-16LE
LANGID_EN_US: Final = 0x0409
LANGUAGES_READ_LENGTH: Final = 4  # libusb_get_string_descriptor_ascii reads the first language id only
STRING_READ_LENGTH: Final = 255  # and then the string, into a buffer of 255 bytes
# String descriptor 0, the language table: one language, US English.
LANGUAGE_TABLE: Final = struct.pack("<BBH", LANGUAGES_READ_LENGTH, USB_DT_STRING, LANGID_EN_US)
MAX_POWER_2MA: Final = 0x32  # bMaxPower: 100 mA in 2 mA units (8 mA units at SuperSpeed; nothing reads it here)
BCD_DEVICE: Final = 0x0100
SS_MAX_BURST: Final = 15  # bMaxBurst of the bulk endpoints at SuperSpeed (16 packets per burst)

# String descriptor indexes of the described device (iManufacturer, iProduct, iSerialNumber).
I_MANUFACTURER: Final = 1
I_PRODUCT: Final = 2
I_SERIAL: Final = 3
_STRING_FIELDS: Final = ((I_MANUFACTURER, "manufacturer"), (I_PRODUCT, "product"), (I_SERIAL, "serial"))
# How many string reads the capture answers (each a language-table read then the string itself), in any order:
# discovery reads the product (the firmware check); a RecordingContext also the serial, product and manufacturer.
STRING_READ_ROUNDS: Final = 5

# libusb's SPEED_* (the header's ``speed``) -> (sysfs ``speed`` in Mbit/s, bcdUSB, bMaxPacketSize0, bulk packet bytes)
_SPEEDS: Final = {
    2: ("12", 0x0200, 64, 64),  # SPEED_FULL
    3: ("480", 0x0200, 64, 512),  # SPEED_HIGH
    4: ("5000", 0x0320, 9, 1024),  # SPEED_SUPER: bMaxPacketSize0 is the exponent, 2**9 = 512
    5: ("10000", 0x0320, 9, 1024),  # SPEED_SUPER_PLUS
}
_SUPER: Final = 4
_DEFAULT_SPEED: Final = 5
_DEFAULT_BUS: Final = 2  # where the pcapng writer puts a device whose header names none
_DEFAULT_ADDRESS: Final = 2
_UNWIRED: Final = frozenset({Op.CLAIM.value, Op.RELEASE.value, Op.RESET.value})  # host calls without a URB
UMOCKDEV_PCAPNG: Final = "trace.pcapng"
UMOCKDEV_DESCRIPTION: Final = "dev.umockdev"
_SYSFS_PARENT: Final = "/sys/devices/pci0000:00/0000:00:14.0"
_SHOWN_BYTES: Final = 16
# umockdev reads the capture with libpcap, which cuts every packet of link type 220 to MAXIMUM_SNAPLEN bytes
# (libpcap's max_snaplen_for_dlt): the 64-byte usbmon header and at most this much data of one transfer.
LIBPCAP_MAX_PACKET_BYTES: Final = 262_144
USBMON_HEADER_BYTES: Final = 64
MAX_TRANSFER_BYTES: Final = LIBPCAP_MAX_PACKET_BYTES - USBMON_HEADER_BYTES


@dataclass(frozen=True, slots=True)
class UmockdevFiles:
    """The files of one umockdev replay: ``description`` (``-d``), ``pcapng`` (``-p sysfs_path=pcapng``)."""

    description: Path
    pcapng: Path
    sysfs_path: str

    def argv(self) -> list[str]:
        """``umockdev-run``'s options for this device (the command follows ``--``)."""
        return ["-d", str(self.description), "-p", f"{self.sysfs_path}={self.pcapng}"]


def _identity(header: TraceHeader) -> tuple[int, int, int, int, int]:
    """``(vendor_id, product_id, bus, address, speed)`` from the header.

    Raises:
        TraceFormatError: the header names no device (a capture taken without tinyhil) or a speed below full speed.
    """
    device = header.device  # its fields' types and widths were checked when the header was read (trace.limits)
    for name in ("vendor_id", "product_id"):
        if name not in device:
            raise TraceFormatError(
                "line 1", f"device.{name}=None, expected the recorded device's id (an int)", field=f"device.{name}"
            )
    speed = device.get("speed", _DEFAULT_SPEED)
    if speed not in _SPEEDS:
        raise TraceFormatError("line 1", f"device.speed={speed!r}, expected one of libusb's SPEED_* {sorted(_SPEEDS)}",
                               field="device.speed")  # fmt: skip
    bus, address = device.get("bus", _DEFAULT_BUS), device.get("address", _DEFAULT_ADDRESS)
    return device["vendor_id"], device["product_id"], bus, address, speed


def _endpoints(header: TraceHeader) -> list[int]:
    endpoints = header.descriptors.get("endpoints", [])
    valid = {number | direction for number in range(1, USB_ENDPOINT_NUMBER_MASK + 1) for direction in (0, ENDPOINT_IN)}
    if not isinstance(endpoints, list) or not all(isinstance(ep, int) and ep in valid for ep in endpoints):
        raise TraceFormatError("line 1", f"descriptors.endpoints={endpoints!r}, expected endpoint addresses 0x01..0x0f "
                                         "(OUT) or 0x81..0x8f (IN)")  # fmt: skip
    return endpoints


def usb_descriptors(header: TraceHeader) -> bytes:
    """The device descriptor then configuration 1 (interface 0, a bulk endpoint per recorded endpoint), as a device
    returns them to GET_DESCRIPTOR and as Linux's sysfs ``descriptors`` file holds them; multi-byte fields are
    little-endian (USB 3.2 section 9.6).

    Raises:
        TraceFormatError: the header names no device, or bad endpoints.
    """
    vendor_id, product_id, _, _, speed = _identity(header)
    _, bcd_usb, max_packet0, bulk_packet = _SPEEDS[speed]
    interface_number = int(header.descriptors.get("interface", 0))
    configuration = int(header.descriptors.get("configuration", 1))
    endpoints = _endpoints(header)
    body = struct.pack("<BBBBBBBBB", USB_DT_INTERFACE_SIZE, USB_DT_INTERFACE, interface_number, 0, len(endpoints),
                       USB_CLASS_VENDOR_SPEC, USB_CLASS_VENDOR_SPEC, USB_CLASS_VENDOR_SPEC, 0)  # fmt: skip
    for address in endpoints:
        body += struct.pack("<BBBBHB", USB_DT_ENDPOINT_SIZE, USB_DT_ENDPOINT, address, USB_ENDPOINT_XFER_BULK,
                            bulk_packet, 0)  # fmt: skip
        if speed >= _SUPER:
            body += struct.pack("<BBBBH", USB_DT_SS_EP_COMP_SIZE, USB_DT_SS_ENDPOINT_COMP, SS_MAX_BURST, 0, 0)
    config = struct.pack("<BBHBBBBB", USB_DT_CONFIG_SIZE, USB_DT_CONFIG, USB_DT_CONFIG_SIZE + len(body), 1,
                         configuration, 0, USB_CONFIG_ATT_ONE, MAX_POWER_2MA)  # fmt: skip
    device = struct.pack("<BBHBBBBHHHBBBB", USB_DT_DEVICE_SIZE, USB_DT_DEVICE, bcd_usb, 0, 0, 0, max_packet0,
                         vendor_id, product_id, BCD_DEVICE, I_MANUFACTURER, I_PRODUCT, I_SERIAL, 1)  # fmt: skip
    return device + config + body


def _sysfs_path(bus: int, address: int) -> str:
    return f"{_SYSFS_PARENT}/usb{bus}/{bus}-{address}"


def umockdev_description(header: TraceHeader) -> tuple[str, str]:
    """The ``dev.umockdev`` text of the recorded device and its sysfs path (what ``-p`` names); ``N:`` holds the
    device node's contents in uppercase hex, as umockdev requires.

    Raises:
        TraceFormatError: the header names no device.
    """
    vendor_id, product_id, bus, address, speed = _identity(header)
    descriptors = usb_descriptors(header)
    node = f"bus/usb/{bus:03d}/{address:03d}"
    sysfs = _sysfs_path(bus, address)
    strings = {name: str(header.device.get(name) or "") for _, name in _STRING_FIELDS}
    lines = [
        f"P: {sysfs.removeprefix('/sys')}",
        f"N: {node}={descriptors.hex().upper()}",
        f"E: BUSNUM={bus:03d}",
        f"E: DEVNAME=/dev/{node}",
        f"E: DEVNUM={address:03d}",
        "E: DEVTYPE=usb_device",
        "E: DRIVER=usb",
        f"E: PRODUCT={vendor_id:x}/{product_id:x}/{BCD_DEVICE:x}",
        "E: SUBSYSTEM=usb",
        f"A: bConfigurationValue={header.descriptors.get('configuration', 1)}",
        "A: bNumConfigurations=1",
        f"A: busnum={bus}",
        f"A: devnum={address}",
        f"A: idProduct={product_id:04x}",
        f"A: idVendor={vendor_id:04x}",
        *(_attribute(name, strings[name]) for name in ("manufacturer", "product", "serial")),
        f"A: speed={_SPEEDS[speed][0]}",
        f"H: descriptors={descriptors.hex().upper()}",
    ]
    return "\n".join(lines) + "\n\n", sysfs


def _attribute(name: str, text: str) -> str:
    """One string attribute of ``dev.umockdev``: ``A: name=text`` when ``text`` is printable ASCII without a
    backslash (what an ``A:`` line carries as it is), else ``H: name=HEX``, its UTF-8 bytes in hex, so no string from
    a trace can end the line and add lines of its own (``N:``, ``L:``, another device)."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return f"A: {name}={text}"
    return f"H: {name}={text.encode('utf-8', 'surrogatepass').hex().upper()}"


def string_descriptor(text: str) -> bytes:
    """A USB string descriptor of ``text``: bLength, bDescriptorType 3, then UTF-16LE (USB 2.0 section 9.6.7)."""
    encoded = text.encode("utf-16-le")
    return bytes([STRING_HEADER_BYTES + len(encoded), USB_DT_STRING]) + encoded


def _string_reads(header: TraceHeader) -> list[tuple[int, int, int, bytes]]:
    """``(wValue, wIndex, wLength, reply)`` of GET_DESCRIPTOR(STRING): the language table, then a string, for each
    string of the device, in :data:`STRING_READ_ROUNDS` rounds."""
    one_round: list[tuple[int, int, int, bytes]] = []
    for index, name in _STRING_FIELDS:
        text = header.device.get(name)
        if isinstance(text, str):
            one_round.append((USB_DT_STRING << 8, 0, LANGUAGES_READ_LENGTH, LANGUAGE_TABLE))
            one_round.append((USB_DT_STRING << 8 | index, LANGID_EN_US, STRING_READ_LENGTH, string_descriptor(text)))
    return one_round * STRING_READ_ROUNDS


def _check_fits_libpcap(trace: Trace) -> None:
    for record in trace.records:
        data = getattr(record, "data", b"")
        if len(data) > MAX_TRANSFER_BYTES:
            raise InvalidArgument(
                f"record seq {record.seq}: a transfer of {len(data):#x} bytes, expected at most "
                f"{MAX_TRANSFER_BYTES:#x}: umockdev reads the capture with libpcap, which cuts a usbmon packet (the "
                f"{USBMON_HEADER_BYTES}-byte header and the data) to {LIBPCAP_MAX_PACKET_BYTES:#x} bytes, so a longer "
                "transfer cannot be replayed (record a copy whose transfers fit: copyin's sentinel-sector revision "
                f"sends chunks of {SECTOR_CHUNK_BYTES:#x} bytes and a sentinel sector, the pipelined one full "
                f"{CHUNK_BYTES + SENTINEL_BYTES:#x}-byte windows)"
            )


def umockdev_trace(trace: Trace) -> Trace:
    """``trace`` with the string descriptor reads of a client's discovery in front, for umockdev to answer.

    The recorded device's manufacturer, product and serial (header ``device``) are each answered
    :data:`STRING_READ_ROUNDS` times, a read of the language table before each; umockdev skips the standard requests
    nobody asks for, so the client may read any of them, in any order, up to that many times in all.

    Raises:
        InvalidArgument: a transfer longer than :data:`MAX_TRANSFER_BYTES` (libpcap would cut its packet short).
    """
    _check_fits_libpcap(trace)
    front: list[Record] = []
    for seq, (value, index, length, reply) in enumerate(_string_reads(trace.header)):
        front.append(Transfer(seq, 0, 0, Op.CONTROL, 0, length, reply, 0, USB_DIR_IN_STANDARD_DEVICE,
                              USB_REQ_GET_DESCRIPTOR, value, index, ret=len(reply)))  # fmt: skip
    shifted = [dataclasses.replace(record, seq=record.seq + len(front)) for record in trace.records]
    return Trace(trace.header, (*front, *shifted))


def write_umockdev(trace: Trace, directory: str | Path) -> UmockdevFiles:
    """Write ``dev.umockdev`` and ``trace.pcapng`` (from :func:`umockdev_trace`) for ``trace`` into ``directory``.

    Raises:
        TraceFormatError: the header names no device; InvalidArgument: a transfer too long for libpcap.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    text, sysfs = umockdev_description(trace.header)
    files = UmockdevFiles(folder / UMOCKDEV_DESCRIPTION, folder / UMOCKDEV_PCAPNG, sysfs)
    files.description.write_text(text)
    save_pcapng(umockdev_trace(trace), files.pcapng)
    return files


# --- did the client issue the recording, all of it, in order? ---------------------------------------------------
def _compared(trace: Trace, *, host_ops: bool) -> list[Exchange]:
    """The exchanges a client must repeat: all but selecting the configuration (SET_CONFIGURATION goes out only when
    the device is in another configuration, see ``tinyhil.usb.backend``) and reading it (no transfer at all); without
    ``host_ops`` (one side is a capture, which cannot hold them) neither claim, release nor reset."""
    kept = []
    for exchange in exchanges(trace):
        request = exchange.request
        if request.kind == Op.GET_CONFIGURATION.value or (not host_ops and request.kind in _UNWIRED):
            continue
        if request.setup is not None and request.setup[:2] == (USB_DIR_OUT_STANDARD_DEVICE, USB_REQ_SET_CONFIGURATION):
            continue
        kept.append(exchange)
    return kept


def _answer(exchange: Exchange) -> tuple[Any, ...]:
    return exchange.status, exchange.actual, exchange.err, bytes(exchange.data)


def _answer_text(exchange: Exchange) -> str:
    data = exchange.data[:_SHOWN_BYTES]
    shown = f" data={bytes(data).hex()}{'...' if len(exchange.data) > _SHOWN_BYTES else ''}" if len(data) else ""
    return f"{exchange.status.value} actual={exchange.actual}{shown}"


def first_divergence(recorded: Trace, issued: Trace) -> str | None:
    """Where what a client issued (``issued``, recorded on its side) first departs from ``recorded``, or ``None``
    when it issued every recorded request, in the recorded order, and got every recorded answer.

    Requests are compared as the wire carries them (setup fields, endpoint, length, OUT bytes), answers by status,
    length and IN bytes; a synchronous call and an asynchronous submit of the same request are the same exchange.
    """
    host_ops = recorded.header.host_ops and issued.header.host_ops
    want, got = _compared(recorded, host_ops=host_ops), _compared(issued, host_ops=host_ops)
    for number, (expected, actual) in enumerate(zip(want, got, strict=False), 1):
        if expected.request != actual.request:
            detail = difference_text(expected.request.data, actual.request.data)
            return (f"exchange {number}: the client issued another request than record seq {expected.seq}{detail}\n"
                    f"  recorded: {expected.request.describe()}\n"
                    f"  issued:   {actual.request.describe()} -> {_answer_text(actual)}")  # fmt: skip
        if _answer(expected) != _answer(actual):
            detail = difference_text(expected.data, actual.data)
            return (f"exchange {number} ({expected.request.describe()}): the client got another answer than record "
                    f"seq {expected.seq}{detail}\n  recorded: {_answer_text(expected)}\n"
                    f"  got:      {_answer_text(actual)}")  # fmt: skip
    if len(got) < len(want):
        missing = want[len(got)]
        return (f"the client issued {len(got)} of {len(want)} recorded exchanges; the first never issued is record "
                f"seq {missing.seq}: {missing.request.describe()}")  # fmt: skip
    if len(got) > len(want):
        extra = got[len(want)]
        return (f"the client issued {len(got) - len(want)} exchanges more than the {len(want)} recorded; the first: "
                f"{extra.request.describe()} -> {_answer_text(extra)}")  # fmt: skip
    return None
