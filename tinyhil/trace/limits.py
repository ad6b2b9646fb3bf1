"""What a trace may say: the bounds of every size, time and identity a record or header holds, and the header check.

Every size a trace gives is bounded here, where it is read, before anything is allocated from it: a transfer moves
at most what one transfer on the real stack can (:data:`CONTROL_MAX_BYTES`, :data:`TRANSFER_MAX_BYTES`), a record's
data is never longer than its request, times fit the 64-bit fields of usbmon and pcapng, and the header's device
fields have the widths of the USB descriptors they came from. docs/traces.md ("Security") lists the same bounds.

Raises (:func:`check_header`): :class:`~tinyhil.trace.errors.TraceFormatError` at ``header``, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from tinyhil.loading import LIMITS, Fields, FileFormatError
from tinyhil.trace.errors import TraceFormatError

if TYPE_CHECKING:
    from tinyhil.trace.records import TraceHeader

__all__ = ["CONTROL_MAX_BYTES", "INFLIGHT_MAX_BYTES", "INFLIGHT_MAX_URBS", "STRING_MAX_UNITS", "TIME_MAX_NS",
           "TRANSFER_MAX_BYTES", "U8", "U16", "U32", "U64",
           "check_header", "hex_field", "trace_fields"]  # fmt: skip

U8: Final = 0xFF
U16: Final = 0xFFFF
U32: Final = 0xFFFF_FFFF
U64: Final = (1 << 64) - 1
# wLength of a control transfer is 16 bits (USB 2.0 section 9.3.5).
CONTROL_MAX_BYTES: Final = U16
# The most one bulk transfer moves on Linux: usbfs refuses a URB larger than its usbfs_memory_mb budget (16 MiB by
# default) with ENOMEM, and libusb submits a bulk transfer as one URB. A trace asking for more is no real transfer.
TRANSFER_MAX_BYTES: Final = 16 << 20
# The most a trace may hold in flight at once (submitted, not yet completed): usbfs_memory_mb is one budget for every
# URB outstanding on the host, not per URB, so a real capture never had more buffer bytes in flight, nor more URBs
# than the budget holds of their bookkeeping (Linux charges each struct urb, 184 bytes on x86-64, and struct async:
# at least 256 bytes).
INFLIGHT_MAX_BYTES: Final = TRANSFER_MAX_BYTES
INFLIGHT_MAX_URBS: Final = INFLIGHT_MAX_BYTES // 256
# Timestamps and durations: 2**62 ns (146 years), so a start plus a duration fits pcapng's unsigned 64-bit timestamp
# and usbmon's signed 64-bit seconds.
TIME_MAX_NS: Final = 1 << 62
# A USB string descriptor is at most 255 bytes: 2 of header, then UTF-16LE (USB 2.0 section 9.6.7): 126 code units.
STRING_MAX_UNITS: Final = (U8 - 2) // 2
_TEXT_MAX: Final = 4096  # target strings, version strings, clock
# libusb's SPEED_UNKNOWN .. SPEED_SUPER_PLUS_X2 (libusb.h, enum libusb_speed; 6 since libusb 1.0.27).
_SPEED_MAX: Final = 6
_DEVADDR_MAX: Final = 127  # a USB device address is 7 bits
_TSRESOL_MAX: Final = 9  # pcapng if_tsresol as 10**-n seconds, n <= 9 (nanoseconds) here
_LINKTYPES: Final = (189, 220)  # LINKTYPE_USB_LINUX, LINKTYPE_USB_LINUX_MMAPPED
_I64: Final = 1 << 63
_BLOCK_MAX: Final = LIMITS["trace-block"].max_bytes


@contextmanager
def trace_fields(where: str) -> Iterator[None]:
    """Turn a :class:`~tinyhil.loading.Fields` error inside the block into a :class:`TraceFormatError` at ``where``."""
    try:
        yield
    except TraceFormatError:
        raise
    except FileFormatError as exc:
        raise TraceFormatError(where, f"field {exc.field!r}: {exc.why}", field=exc.field) from None


def hex_field(fields: Fields, name: str, max_bytes: int) -> bytes:
    """The bytes of the hex string ``name`` (``b""`` when absent), at most ``max_bytes`` of them."""
    text = fields.string(name, required=False, max_len=2 * max_bytes, empty=True) or ""
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise fields.error(name, f"{text!r:.40}, expected a string of hex digits (two per byte)") from None


def _string(fields: Fields, name: str) -> None:
    value = fields.table.get(name)
    if value is None:
        return
    text = fields.string(name, max_len=STRING_MAX_UNITS * 2, empty=True)
    assert text is not None
    if len(text.encode("utf-16-le", "surrogatepass")) > STRING_MAX_UNITS * 2:
        raise fields.error(name, f"a string of {len(text)} characters, expected at most {STRING_MAX_UNITS} UTF-16 "
                                 "code units (a USB string descriptor holds no more)")  # fmt: skip


def _device(fields: Fields) -> None:
    fields.integer("vendor_id", required=False, minimum=0, maximum=U16)
    fields.integer("product_id", required=False, minimum=0, maximum=U16)
    fields.integer("bus", required=False, minimum=0, maximum=U16)
    fields.integer("address", required=False, minimum=0, maximum=_DEVADDR_MAX)
    fields.integer("speed", required=False, minimum=0, maximum=_SPEED_MAX)
    for name in ("serial", "product", "manufacturer"):
        _string(fields, name)


def _descriptors(fields: Fields) -> None:
    fields.integer("configuration", required=False, minimum=0, maximum=U8)
    fields.integer("interface", required=False, minimum=0, maximum=U8)
    endpoints = fields.of_type("endpoints", list, required=False)
    if endpoints is not None and not all(type(ep) is int and 0 <= ep <= U8 for ep in endpoints):
        raise fields.error("endpoints", f"{endpoints!r:.60}, expected a list of endpoint addresses 0..0xff")


def _pcapng(fields: Fields) -> None:
    fields.boolean("big_endian", required=False)
    version = fields.of_type("version", list, required=False)
    if version is not None and not (len(version) == 2 and all(type(v) is int and 0 <= v <= U16 for v in version)):
        raise fields.error("version", f"{version!r:.60}, expected [major, minor], two integers 0..65535")
    fields.integer("section_length", required=False, minimum=-_I64, maximum=_I64 - 1)
    fields.integer("linktype", required=False, minimum=min(_LINKTYPES), maximum=max(_LINKTYPES))
    if fields.table.get("linktype") not in (None, *_LINKTYPES):
        raise fields.error("linktype", f"{fields.table['linktype']!r}, expected one of {list(_LINKTYPES)}")
    fields.integer("idb_reserved", required=False, minimum=0, maximum=U16)
    fields.integer("snaplen", required=False, minimum=0, maximum=U32)
    fields.integer("tsresol", required=False, minimum=0, maximum=_TSRESOL_MAX)
    hex_field(fields, "shb_options", _BLOCK_MAX)
    hex_field(fields, "idb_options", _BLOCK_MAX)
    blocks = fields.of_type("blocks", list, required=False) or []
    for number, block in enumerate(blocks):
        kept = Fields(block, "", prefix=f"{fields.prefix}blocks[{number}].")
        kept.integer("after", minimum=0)
        kept.string("hex", max_len=2 * _BLOCK_MAX)
        hex_field(kept, "hex", _BLOCK_MAX)


def check_header(header: TraceHeader) -> None:
    """Check every field a consumer of ``header`` reads, once (see the module docstring for the bounds).

    Raises:
        TraceFormatError: at ``header``, naming the field, its value and what was expected.
    """
    with trace_fields("header"):
        top = Fields(
            {"target": header.target, "options": header.options, "device": header.device,
             "descriptors": header.descriptors, "versions": header.versions, "clock": header.clock,
             "host_ops": header.host_ops, "version": header.version},
            "",
        )  # fmt: skip
        top.string("target", max_len=_TEXT_MAX, empty=True)
        top.string("clock", max_len=_TEXT_MAX)
        top.boolean("host_ops")
        for name in ("options", "versions"):
            top.of_type(name, dict)
        device, descriptors = top.table_of("device"), top.table_of("descriptors")
        assert device is not None and descriptors is not None
        _device(device)
        _descriptors(descriptors)
        if header.pcapng is not None:
            _pcapng(Fields(header.pcapng, "", prefix="pcapng."))
