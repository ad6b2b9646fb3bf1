"""usbmon pcapng: a trace as the packets Wireshark and tshark read, written and read with the standard library.

Block layout (the pcapng spec, draft-ietf-opsawg-pcapng): every block is ``type u32, total length u32, body,
total length u32``, lengths a multiple of 4. A file is one Section Header Block (type ``0x0A0D0D0A``, byte-order
magic ``0x1A2B3C4D``), one Interface Description Block (type 1: link type, snaplen, options; ``if_tsresol``, option
9, gives the timestamp unit) and one Enhanced Packet Block (type 6) per usbmon event. The packet is the usbmon
header (``struct mon_bin_hdr`` of Linux ``drivers/usb/mon/mon_bin.c``: 64 bytes for link type 220,
``LINKTYPE_USB_LINUX_MMAPPED``; its first 48 for link type 189, ``LINKTYPE_USB_LINUX``) and then the data.

Each transfer is two events on one URB id: ``S`` (submit: the setup packet and the OUT data) and ``C`` (complete:
the status and the IN data). Reading keeps every header field of each packet (record ``usbmon``) and the section and
interface blocks (header ``pcapng``), so pcapng -> JSONL -> pcapng is byte-identical.

This module writes (streamed, :func:`write_pcapng`); :mod:`tinyhil.trace.pcapng_reader` reads.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from tinyhil.trace.records import (
    ENDPOINT_IN,
    Complete,
    Op,
    Payload,
    Record,
    Submit,
    Trace,
    TraceHeader,
    Transfer,
    TransferStatus,
    UsbmonFields,
)

__all__ = ["LINKTYPE_USB_LINUX", "LINKTYPE_USB_LINUX_MMAPPED", "PCAPNG_SUFFIX", "USBMON_FIELDS", "USBMON_RANGES",
           "dump_pcapng", "pad4", "save_pcapng", "write_pcapng"]  # fmt: skip

PCAPNG_SUFFIX: Final = ".pcapng"
LINKTYPE_USB_LINUX: Final = 189  # 48-byte usbmon header
LINKTYPE_USB_LINUX_MMAPPED: Final = 220  # 64-byte usbmon header
LINKTYPE2HEADER_BYTES: Final = {LINKTYPE_USB_LINUX: 48, LINKTYPE_USB_LINUX_MMAPPED: 64}
BLOCK_SHB: Final = 0x0A0D0D0A
BLOCK_IDB: Final = 1
BLOCK_EPB: Final = 6
BYTE_ORDER_MAGIC: Final = 0x1A2B3C4D
OPT_ENDOFOPT: Final = 0
OPT_COMMENT: Final = 1
OPT_IF_TSRESOL: Final = 9
TSRESOL_NS: Final = 9  # tinyhil writes nanosecond timestamps (if_tsresol = 10**-9)
TSRESOL_DEFAULT: Final = 6  # without the option: microseconds
TSRESOL_BINARY: Final = 0x80
_MIN_BLOCK: Final = 12
_EPB_FIXED: Final = 20  # interface id, timestamp high and low, captured and original length
# struct mon_bin_hdr (mon_bin.c): id, type, xfer_type, epnum, devnum, busnum, flag_setup, flag_data, ts_sec, ts_usec,
# status, len_urb, len_cap, setup[8] (or iso error_count, numdesc), interval, start_frame, xfer_flags, ndesc.
USBMON_FORMAT: Final = "QBBBBHBBqiiII8siiII"
USBMON_FIELDS: Final = ("urb_id", "event", "xfer_type", "epnum", "devnum", "busnum", "flag_setup", "flag_data",
                        "ts_sec", "ts_usec", "status", "len_urb", "len_cap", "setup", "interval", "start_frame",
                        "xfer_flags", "ndesc")  # fmt: skip
_CODE_RANGES: Final = {"Q": (0, (1 << 64) - 1), "q": (-(1 << 63), (1 << 63) - 1), "I": (0, (1 << 32) - 1),
                       "i": (-(1 << 31), (1 << 31) - 1), "H": (0, 0xFFFF), "B": (0, 0xFF), "8s": (0, 0)}  # fmt: skip
# Each field's range as its struct code holds it (``setup`` is 8 bytes): a value read back from JSONL is checked here.
_CODES: Final = re.findall(r"\d*[A-Za-z]", USBMON_FORMAT)
USBMON_RANGES: Final = dict(zip(USBMON_FIELDS, (_CODE_RANGES[code] for code in _CODES), strict=True))
EVENT_SUBMIT: Final = ord("S")
EVENT_COMPLETE: Final = ord("C")
EVENT_ERROR: Final = ord("E")
XFER_CONTROL: Final = 2
XFER_BULK: Final = 3
FLAG_NO_SETUP: Final = ord("-")
FLAG_IN_SUBMIT: Final = ord("<")  # an IN submission carries no data yet
FLAG_OUT_COMPLETE: Final = ord(">")  # an OUT completion carries no data
EINPROGRESS: Final = -115
# URB status (a negative Linux errno) of each outcome, and back; a timed-out URB is unlinked by usbfs (ECONNRESET)
STATUS2ERRNO: Final = {TransferStatus.COMPLETED: 0, TransferStatus.STALL: -32, TransferStatus.TIMED_OUT: -104,
                       TransferStatus.CANCELLED: -2, TransferStatus.NO_DEVICE: -19, TransferStatus.OVERFLOW: -75,
                       TransferStatus.ERROR: -71}  # fmt: skip
ERRNO2STATUS: Final = {**{errno: status for status, errno in STATUS2ERRNO.items()}, -108: TransferStatus.NO_DEVICE}
ERR2STATUS: Final = {
    "USBErrorTimeout": TransferStatus.TIMED_OUT,
    "USBErrorPipe": TransferStatus.STALL,
    "USBErrorNoDevice": TransferStatus.NO_DEVICE,
    "USBErrorOverflow": TransferStatus.OVERFLOW,
}
_SYNC_URB: Final = 1 << 48  # URB ids of synchronous records: base + seq; of async ones: base + tag
_ASYNC_URB: Final = 2 << 48
_URB_MASK: Final = (1 << 64) - 1  # a tag from a JSONL trace may be any 64-bit value
_NS_PER_S: Final = 1_000_000_000
_CLEAR_FEATURE: Final = (0x02, 0x01)  # standard OUT to an endpoint, CLEAR_FEATURE (ENDPOINT_HALT = 0)
_SET_CONFIGURATION: Final = (0x00, 0x09)


def pad4(length: int) -> int:
    return -length % 4


# --- writing ----------------------------------------------------------------------------------------------------
class _Writer:
    def __init__(self, header: TraceHeader, out: IO[bytes]) -> None:
        self.meta: dict[str, Any] = header.pcapng or {}
        self.order = ">" if self.meta.get("big_endian") else "<"
        self.linktype = int(self.meta.get("linktype", LINKTYPE_USB_LINUX_MMAPPED))
        self.tsresol = int(self.meta.get("tsresol", TSRESOL_NS))
        self.bus = int(header.device.get("bus", 2))
        self.address = int(header.device.get("address", 2))
        self.out = out
        from tinyhil.trace.jsonl import header_to_json

        self.header_json = header_to_json(header)

    def block(self, kind: int, body: bytes) -> None:
        body += bytes(pad4(len(body)))
        total = len(body) + _MIN_BLOCK
        self.out.write(struct.pack(f"{self.order}II", kind, total))
        self.out.write(body)
        self.out.write(struct.pack(f"{self.order}I", total))

    def start(self) -> None:
        major, minor = self.meta.get("version", (1, 0))
        if "shb_options" in self.meta:
            shb_options = bytes.fromhex(self.meta["shb_options"])
        else:  # a tinyhil recording: its header rides along as the section's comment (Wireshark shows it)
            comment = json.dumps(self.header_json, separators=(",", ":")).encode()
            shb_options = (struct.pack(f"{self.order}HH", OPT_COMMENT, len(comment)) + comment
                           + bytes(pad4(len(comment))) + struct.pack(f"{self.order}HH", OPT_ENDOFOPT, 0))  # fmt: skip
        self.block(BLOCK_SHB, struct.pack(f"{self.order}IHHq", BYTE_ORDER_MAGIC, major, minor,
                                          int(self.meta.get("section_length", -1))) + shb_options)  # fmt: skip
        if "idb_options" in self.meta:
            idb_options = bytes.fromhex(self.meta["idb_options"])
        else:
            idb_options = struct.pack(f"{self.order}HHB3xHH", OPT_IF_TSRESOL, 1, TSRESOL_NS, OPT_ENDOFOPT, 0)
        self.block(BLOCK_IDB, struct.pack(f"{self.order}HHI", self.linktype, int(self.meta.get("idb_reserved", 0)),
                                          int(self.meta.get("snaplen", 0))) + idb_options)  # fmt: skip

    def packet(self, t_ns: int, fields: dict[str, Any], data: Payload, usbmon: UsbmonFields | None) -> None:
        values = dict(usbmon.raw) if usbmon is not None else fields
        values = {**values, "len_cap": len(data)} if usbmon is None else values
        header = struct.pack(self.order + USBMON_FORMAT, *(values[name] for name in USBMON_FIELDS))
        packet = header[: LINKTYPE2HEADER_BYTES[self.linktype]] + data
        ts = t_ns // 10 ** (TSRESOL_NS - self.tsresol)
        orig = usbmon.orig_len if usbmon is not None and usbmon.orig_len is not None else len(packet)
        options = usbmon.options if usbmon is not None else b""
        fixed = struct.pack(f"{self.order}IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(packet), orig)
        self.block(BLOCK_EPB, fixed + packet + bytes(pad4(len(packet))) + options)

    def event(self, t_ns: int, urb: int, event: int, ep: int, setup: tuple[int, ...] | None, length: int,
              status: int, data: Payload, is_in: bool) -> None:  # fmt: skip
        flag_data = 0 if data else (FLAG_IN_SUBMIT if is_in and event == EVENT_SUBMIT else
                                    FLAG_OUT_COMPLETE if not is_in and event == EVENT_COMPLETE else 0)  # fmt: skip
        fields = {"urb_id": urb, "event": event, "xfer_type": XFER_CONTROL if setup is not None else XFER_BULK,
                  "epnum": (ENDPOINT_IN if is_in else 0) if setup is not None else ep, "devnum": self.address,
                  "busnum": self.bus, "flag_setup": 0 if setup is not None and event == EVENT_SUBMIT else FLAG_NO_SETUP,
                  "flag_data": flag_data, "ts_sec": t_ns // _NS_PER_S, "ts_usec": t_ns % _NS_PER_S // 1000,
                  "status": status, "len_urb": length,
                  "setup": struct.pack("<BBHHH", *setup) if setup is not None and event == EVENT_SUBMIT else bytes(8),
                  "interval": 0, "start_frame": 0, "xfer_flags": 0, "ndesc": 0}  # fmt: skip
        self.packet(t_ns, fields, data, None)


def _setup_of(record: Transfer | Submit) -> tuple[int, ...] | None:
    if record.bmRequestType is None:
        return None
    return (record.bmRequestType, record.bRequest, record.wValue, record.wIndex, record.length)  # type: ignore[return-value]


def _async_urb(tag: int) -> int:
    return (_ASYNC_URB + tag) & _URB_MASK


def _status_of(record: Transfer) -> int:
    if record.err is None:
        return 0
    return STATUS2ERRNO[ERR2STATUS.get(record.err, TransferStatus.ERROR)]


def _write_records(out: _Writer, records: Iterable[Record]) -> Iterator[int]:
    """Write each record's events; yields after each record (for the positions of kept foreign blocks)."""
    submits: dict[int, Submit] = {}
    for record in records:
        if isinstance(record, Submit):
            if record.err is None:
                submits[record.tag] = record  # until its completion: only the transfers in flight are kept
            if record.usbmon is not None:
                out.packet(record.t_ns, {}, record.data, record.usbmon)
            elif record.err is None:
                data = b"" if record.is_in else record.data
                out.event(record.t_ns, _async_urb(record.tag), EVENT_SUBMIT, record.ep, _setup_of(record),
                          record.length, EINPROGRESS, data, record.is_in)  # fmt: skip
        elif isinstance(record, Complete):
            sub = submits.pop(record.tag, None)
            if record.usbmon is not None:
                out.packet(record.t_ns, {}, record.data, record.usbmon)
            elif sub is not None:  # (a reader refuses a completion of a transfer never submitted)
                out.event(record.t_ns, _async_urb(record.tag), EVENT_COMPLETE, sub.ep, _setup_of(sub), record.actual,
                          STATUS2ERRNO[record.status], record.data if sub.is_in else b"", sub.is_in)  # fmt: skip
        elif isinstance(record, Transfer):
            _write_sync(out, record)
        elif record.op in (Op.CLEAR_HALT, Op.SET_CONFIGURATION):  # on the wire: a standard control request
            kind = _CLEAR_FEATURE if record.op is Op.CLEAR_HALT else _SET_CONFIGURATION
            setup = (*kind, 0, record.value or 0, 0) if record.op is Op.CLEAR_HALT else (*kind, record.value or 0, 0, 0)
            as_transfer = Transfer(seq=record.seq, t_ns=record.t_ns, dur_ns=record.dur_ns, op=Op.CONTROL, ep=0,
                                   length=0, data=b"", timeout=0, bmRequestType=setup[0], bRequest=setup[1],
                                   wValue=setup[2], wIndex=setup[3], ret=None if record.err else 0,
                                   err=record.err)  # fmt: skip
            _write_sync(out, as_transfer)
        yield record.seq  # claim, release, reset, get_configuration, cancel: no URB on the wire


def _write_sync(out: _Writer, record: Transfer) -> None:
    if record.usbmon is not None:  # an imported S or C cannot be a sync record; kept for symmetry
        out.packet(record.t_ns, {}, record.data, record.usbmon)
        return
    urb, setup, is_in = _SYNC_URB + record.seq, _setup_of(record), record.is_in
    out.event(record.t_ns, urb, EVENT_SUBMIT, record.ep, setup, record.length, EINPROGRESS,
              b"" if is_in else record.data, is_in)  # fmt: skip
    actual = record.ret if record.ret is not None else (len(record.data) if is_in else record.transferred or 0)
    out.event(record.t_ns + record.dur_ns, urb, EVENT_COMPLETE, record.ep, setup, actual, _status_of(record),
              record.data if is_in else b"", is_in)  # fmt: skip


def write_pcapng(header: TraceHeader, records: Iterable[Record], out: IO[bytes]) -> int:
    """Write a usbmon pcapng file of ``header`` and ``records`` (any iterable: streamed, one record at a time) to
    ``out``; link type 220 unless the trace was imported from a 189 capture. Returns the number of records."""
    writer = _Writer(header, out)
    writer.start()
    kept = list((header.pcapng or {}).get("blocks", ()))
    written = 0

    def flush_kept() -> None:
        while kept and kept[0]["after"] <= written:
            out.write(bytes.fromhex(kept.pop(0)["hex"]))

    flush_kept()
    for _ in _write_records(writer, records):
        written += 1
        flush_kept()
    for block in kept:
        out.write(bytes.fromhex(block["hex"]))
    return written


def dump_pcapng(trace: Trace) -> bytes:
    """``trace`` as the bytes of a usbmon pcapng file (:func:`write_pcapng`)."""
    out = io.BytesIO()
    write_pcapng(trace.header, trace.records, out)
    return out.getvalue()


def save_pcapng(trace: Trace, path: str | Path) -> None:
    with open(path, "wb") as out:
        write_pcapng(trace.header, trace.records, out)
