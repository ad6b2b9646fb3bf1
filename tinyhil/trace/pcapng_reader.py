"""Reading usbmon pcapng, streamed: a file is read block by block, never whole, and each block at most once in memory.

The block layout and the usbmon header are described in :mod:`tinyhil.trace.pcapng`. A :class:`PcapngSource` reads
the file twice: once at open for the header (the section and interface blocks and the blocks tinyhil keeps as they
are, with every block's framing checked, the packet blocks skipped), then once per :meth:`PcapngSource.records`,
decoding one packet at a time. Memory is bounded by the largest block (``LIMITS["trace-block"]``), not the file.

Raises: :class:`~tinyhil.trace.errors.TraceFormatError` naming the file and the byte offset (and the record number
of a packet): a bad block length, a block over the cap, a truncated file, a wrong link type, a packet cut short,
more than one section or interface, a field out of its bounds (:mod:`tinyhil.trace.limits`).
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from tinyhil.loading import LIMITS, FileFormatError, parse_json
from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.pcapng import (
    BLOCK_EPB,
    BLOCK_IDB,
    BLOCK_SHB,
    BYTE_ORDER_MAGIC,
    ERRNO2STATUS,
    EVENT_COMPLETE,
    EVENT_ERROR,
    EVENT_SUBMIT,
    LINKTYPE2HEADER_BYTES,
    LINKTYPE_USB_LINUX,
    LINKTYPE_USB_LINUX_MMAPPED,
    OPT_COMMENT,
    OPT_ENDOFOPT,
    OPT_IF_TSRESOL,
    TSRESOL_BINARY,
    TSRESOL_DEFAULT,
    TSRESOL_NS,
    USBMON_FIELDS,
    USBMON_FORMAT,
    XFER_CONTROL,
    pad4,
)
from tinyhil.trace.records import (
    ENDPOINT_IN,
    FORMAT_NAME,
    Complete,
    Record,
    Submit,
    Trace,
    TraceHeader,
    TransferStatus,
    UsbmonFields,
)
from tinyhil.trace.source import TraceSource

__all__ = ["PcapngSource", "load_pcapng", "parse_pcapng", "read_pcapng"]

_MIN_BLOCK: Final = 12
_EPB_FIXED: Final = 20  # interface id, timestamp high and low, captured and original length
_UNSUPPORTED_BLOCKS: Final = {2: "obsolete Packet Block", 3: "Simple Packet Block"}
_HEADER_NAMES: Final = ("target", "options", "device", "descriptors", "versions", "clock")


def _option(options: bytes, order: str, wanted: int) -> bytes | None:
    """The value of option ``wanted`` in a block's options, or ``None``."""
    position = 0
    while position + 4 <= len(options):
        code, length = struct.unpack_from(f"{order}HH", options, position)
        if code == OPT_ENDOFOPT:
            break
        if code == wanted:
            return options[position + 4 : position + 4 + length]
        position += 4 + length + pad4(length)
    return None


def _options_tsresol(options: bytes, order: str, where: str) -> int:
    """The if_tsresol exponent (10**-n s) among an IDB's options; 6 when absent."""
    value = _option(options, order, OPT_IF_TSRESOL)
    if not value:
        return TSRESOL_DEFAULT
    if value[0] & TSRESOL_BINARY or value[0] > TSRESOL_NS:
        raise TraceFormatError(where, f"if_tsresol={value[0]:#x}, expected a power of ten 10**-n with n <= "
                                      f"{TSRESOL_NS}")  # fmt: skip
    return int(value[0])


def _recorded_header(shb_options: bytes, order: str) -> dict[str, Any]:
    """The tinyhil header a recording converted to pcapng carries as its section comment ({} for a capture, whose
    comment is any text: one that is not a tinyhil header, even one nested too deep to read, is left alone)."""
    comment = _option(shb_options, order, OPT_COMMENT)
    try:
        header = parse_json(bytes(comment), "the section comment") if comment else None
    except FileFormatError:
        return {}
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        return {}
    return {name: header[name] for name in _HEADER_NAMES if name in header}


class _Blocks:
    """The blocks of one stream, each read whole (at most ``LIMITS["trace-block"]`` bytes) with its framing checked;
    ``skip(kind)`` blocks are checked by their lengths and trailer only and not read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.size = stream.seek(0, os.SEEK_END)
        stream.seek(0)
        self.order = "<"
        self.cap = LIMITS["trace-block"].max_bytes

    def _first(self, head: bytes) -> None:
        kind_le = struct.unpack_from("<I", head)[0]
        if kind_le != BLOCK_SHB:
            expected = "expected a Section Header Block (0x0a0d0d0a)"
            raise TraceFormatError("offset 0x0", f"block type {kind_le:#x}, {expected}")
        if self.size < 12:
            raise TraceFormatError("offset 0x0", "truncated file: the Section Header Block is cut short")
        magic_bytes = self.stream.read(4)
        self.stream.seek(-4, os.SEEK_CUR)
        magic = struct.unpack("<I", magic_bytes)[0]
        self.order = "<" if magic == BYTE_ORDER_MAGIC else ">"
        if struct.unpack(f"{self.order}I", magic_bytes)[0] != BYTE_ORDER_MAGIC:
            raise TraceFormatError("offset 0x8", f"byte-order magic {magic:#010x}, expected 0x1a2b3c4d")

    def __call__(self, skip: Callable[[int], bool]) -> Iterator[tuple[int, int, bytes | None]]:
        """``(offset, block type, body)`` of each block; ``body`` is ``None`` for a skipped one."""
        offset = 0
        while offset < self.size:
            where = f"offset {offset:#x}"
            head = self.stream.read(8)
            if len(head) < 8:
                raise TraceFormatError(where, f"truncated file: {len(head)} bytes left, expected a block header")
            if offset == 0:
                self._first(head)
            kind, total = struct.unpack(f"{self.order}II", head)
            if total < _MIN_BLOCK or total % 4:
                expected = f"expected a multiple of 4 and >= {_MIN_BLOCK}"
                raise TraceFormatError(where, f"bad block length {total}, {expected}")
            if offset + total > self.size:
                end = f"ends at {offset + total:#x}, past the end {self.size:#x}"
                raise TraceFormatError(where, f"truncated file: the block of {total} bytes {end}")
            if total > self.cap:
                raise TraceFormatError(where, f"a block of {total} bytes, expected at most {self.cap} (the limit for "
                                              f"a {LIMITS['trace-block'].what})")  # fmt: skip
            body: bytes | None = None
            if skip(kind):
                self.stream.seek(total - 12, os.SEEK_CUR)
            else:
                body = self.stream.read(total - 12)
            trailer = struct.unpack(f"{self.order}I", self.stream.read(4))[0]
            if trailer != total:
                raise TraceFormatError(where, f"bad block length: {total} at the start, {trailer} at the end")
            yield offset, kind, body
            offset += total


class _Interface:
    """What the section and interface blocks say, as the header's ``pcapng`` table and the packet layout."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.header_bytes = 0
        self.tsresol = TSRESOL_DEFAULT

    def section(self, where: str, offset: int, order: str, body: bytes) -> None:
        if offset:
            raise TraceFormatError(where, "a second section, expected one Section Header Block")
        if len(body) < 16:
            raise TraceFormatError(where, f"bad block length {len(body) + 12}, expected >= 28 for a Section Header "
                                          "Block")  # fmt: skip
        _, major, minor, section = struct.unpack_from(f"{order}IHHq", body)
        self.meta = {"big_endian": order == ">", "version": [major, minor], "section_length": section,
                     "shb_options": body[16:].hex()}  # fmt: skip

    def interface(self, where: str, order: str, body: bytes) -> None:
        if "linktype" in self.meta:
            raise TraceFormatError(where, "a second interface, expected one Interface Description Block")
        if len(body) < 8:
            raise TraceFormatError(where, f"bad block length {len(body) + 12}, expected >= 20 for an interface block")
        linktype, reserved, snaplen = struct.unpack_from(f"{order}HHI", body)
        if linktype not in LINKTYPE2HEADER_BYTES:
            expected = (f"expected {LINKTYPE_USB_LINUX_MMAPPED} (LINKTYPE_USB_LINUX_MMAPPED) or {LINKTYPE_USB_LINUX} "
                        "(LINKTYPE_USB_LINUX)")  # fmt: skip
            raise TraceFormatError(where, f"link type {linktype}, {expected}")
        options = body[8:]
        self.tsresol = _options_tsresol(options, order, where)
        self.meta.update(linktype=linktype, idb_reserved=reserved, snaplen=snaplen, idb_options=options.hex(),
                         tsresol=self.tsresol)  # fmt: skip
        self.header_bytes = LINKTYPE2HEADER_BYTES[linktype]


def _event_record(seq: int, t_ns: int, packet: bytes, header_bytes: int, order: str, orig: int | None,
                  options: bytes, where: str) -> Submit | Complete:  # fmt: skip
    values = struct.unpack(order + USBMON_FORMAT, packet[:header_bytes] + bytes(64 - header_bytes))
    raw = dict(zip(USBMON_FIELDS, values, strict=True))
    data = packet[header_bytes:]
    if len(data) != raw["len_cap"]:
        raise TraceFormatError(where, f"packet cut short: usbmon len_cap={raw['len_cap']} but {len(data)} data bytes "
                                      "captured (a snaplen too small?)")  # fmt: skip
    usbmon = UsbmonFields(tuple(raw.items()), orig, options)
    if raw["event"] == EVENT_SUBMIT:
        control = raw["xfer_type"] == XFER_CONTROL and raw["flag_setup"] == 0
        ep = raw["epnum"] & ~ENDPOINT_IN if control else raw["epnum"]
        setup = struct.unpack("<BBHHH", raw["setup"]) if control else (None,) * 5
        return Submit(seq=seq, t_ns=t_ns, tag=raw["urb_id"], ep=ep, length=raw["len_urb"], data=data, timeout=0,
                      bmRequestType=setup[0], bRequest=setup[1], wValue=setup[2], wIndex=setup[3],
                      usbmon=usbmon)  # fmt: skip
    if raw["event"] in (EVENT_COMPLETE, EVENT_ERROR):
        status = ERRNO2STATUS.get(raw["status"], TransferStatus.ERROR) if raw["event"] == EVENT_COMPLETE else (
            TransferStatus.ERROR)  # fmt: skip
        return Complete(seq=seq, t_ns=t_ns, tag=raw["urb_id"], status=status, actual=raw["len_urb"], data=data,
                        usbmon=usbmon)  # fmt: skip
    raise TraceFormatError(where, f"usbmon event {raw['event']:#04x}, expected 'S', 'C' or 'E'")


def _packet(seq: int, body: bytes, interface: _Interface, order: str, where: str) -> Submit | Complete:
    if len(body) < _EPB_FIXED:
        raise TraceFormatError(where, f"bad block length {len(body) + 12}, expected >= 32 for an Enhanced Packet Block")
    number, ts_hi, ts_lo, captured, orig = struct.unpack_from(f"{order}IIIII", body)
    if number:
        raise TraceFormatError(where, f"interface id {number}, expected 0 (one interface)")
    if _EPB_FIXED + captured + pad4(captured) > len(body):
        raise TraceFormatError(where, f"packet cut short: captured length {captured} does not fit the block of "
                                      f"{len(body) + 12} bytes")  # fmt: skip
    if captured < interface.header_bytes:
        raise TraceFormatError(where, f"packet cut short: {captured} bytes, expected at least the "
                                      f"{interface.header_bytes}-byte usbmon header")  # fmt: skip
    packet = body[_EPB_FIXED : _EPB_FIXED + captured]
    options = body[_EPB_FIXED + captured + pad4(captured) :]
    t_ns = ((ts_hi << 32) | ts_lo) * 10 ** (TSRESOL_NS - interface.tsresol)
    try:
        return _event_record(seq, t_ns, packet, interface.header_bytes, order, orig if orig != captured else None,
                             options, where)  # fmt: skip
    except TraceFormatError as exc:
        raise exc.within(where) from None


def _walk(stream: IO[bytes], *, packets: bool) -> Iterator[Record | dict[str, Any]]:
    """Pass over ``stream``: with ``packets``, each packet's record; without, only the header's ``pcapng`` table
    (packets skipped, their framing checked), yielded last."""
    blocks, interface = _Blocks(stream), _Interface()
    kept: list[dict[str, Any]] = []
    count = 0
    for offset, kind, body in blocks(lambda kind: kind == BLOCK_EPB and not packets):
        where = f"offset {offset:#x}"
        if kind == BLOCK_SHB:
            interface.section(where, offset, blocks.order, body or b"")
        elif kind == BLOCK_IDB:
            interface.interface(where, blocks.order, body or b"")
        elif kind == BLOCK_EPB:
            if not interface.header_bytes:
                raise TraceFormatError(where, "a packet before any Interface Description Block")
            if body is not None:
                yield _packet(count, body, interface, blocks.order, f"{where} (record {count})")
            count += 1
        elif kind in _UNSUPPORTED_BLOCKS:
            raise TraceFormatError(where, f"a {_UNSUPPORTED_BLOCKS[kind]} (type {kind}), expected Enhanced Packet "
                                          "Blocks")  # fmt: skip
        elif not packets:  # statistics, name resolution, custom blocks: kept as they are, in place
            assert body is not None
            whole = (
                struct.pack(f"{blocks.order}II", kind, len(body) + 12)
                + body
                + struct.pack(f"{blocks.order}I", len(body) + 12)
            )
            kept.append({"after": count, "hex": whole.hex()})
    if "linktype" not in interface.meta:
        raise TraceFormatError(f"offset {blocks.size:#x}", "the file has no Interface Description Block")
    if not packets:
        yield {**interface.meta, "blocks": kept, "_order": blocks.order}


class PcapngSource(TraceSource):
    """A usbmon pcapng file, streamed (:class:`~tinyhil.trace.source.TraceSource`): the header from a first pass over
    the blocks (packets skipped), the records decoded one block at a time."""

    def _read_header(self, stream: IO[bytes]) -> TraceHeader:
        meta = next(_walk(stream, packets=False))
        assert isinstance(meta, dict)
        order = meta.pop("_order")
        recorded = _recorded_header(bytes.fromhex(meta["shb_options"]), order)
        try:
            return TraceHeader(**{"clock": "monotonic", **recorded, "host_ops": False, "pcapng": meta})
        except (TypeError, TraceFormatError) as exc:
            raise TraceFormatError("offset 0x0", f"the section comment holds a bad tinyhil header: {exc}") from None

    def _read_records(self, stream: IO[bytes]) -> Iterator[Record]:
        return _walk(stream, packets=True)  # type: ignore[return-value]  # with packets: records only


def read_pcapng(path: str | Path) -> PcapngSource:
    """Open a usbmon pcapng file for streaming; errors name the file and the byte offset."""
    return PcapngSource(lambda: open(path, "rb"), str(path))


def parse_pcapng(blob: bytes) -> Trace:
    """A trace from the bytes of a usbmon pcapng file (see the module docstring)."""
    return PcapngSource(lambda: io.BytesIO(blob)).trace()


def load_pcapng(path: str | Path) -> Trace:
    """Read a usbmon pcapng file whole; errors name the file and the byte offset."""
    return read_pcapng(path).trace()
