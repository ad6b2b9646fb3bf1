"""Trace records: the header and one frozen dataclass per kind of operation on a USB handle.

Field names are those of ``docs/traces.md`` (and of the JSONL lines, one-to-one): ``seq`` numbers records from 0,
``t_ns`` is when the call started and ``dur_ns`` how long it took (virtual ns on emulated targets), ``data`` is the
payload (OUT: what was sent; IN: what came back, the partial data on an error), ``ret`` the call's result and ``err``
the ``usb1`` exception class name it raised instead. ``transferred`` is the byte count of a write that raised
``USBErrorTimeout``. ``usbmon`` keeps the usbmon header fields of a record imported from pcapng, so a capture
converts back byte for byte.

Every size is bounded where the record is built (:mod:`tinyhil.trace.limits`): a transfer's ``length`` by what one
transfer on the real stack moves, its data, ``ret`` and ``transferred`` by its ``length``, times by 2**62 ns.

Raises (every constructor): :class:`~tinyhil.trace.errors.TraceFormatError` naming the bad field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.limits import CONTROL_MAX_BYTES, TIME_MAX_NS, TRANSFER_MAX_BYTES, U8, U16, U32, U64, check_header

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HOST_OPS",
    "Complete",
    "HostCall",
    "Op",
    "Payload",
    "Record",
    "Submit",
    "Trace",
    "TraceHeader",
    "Transfer",
    "TransferStatus",
    "UsbmonFields",
]

FORMAT_NAME: Final = "tinyhil-trace"
FORMAT_VERSION: Final = 1
SEQ_MAX: Final = (1 << 48) - 1  # records of one trace (a pcapng URB id holds the seq in its low 48 bits)
ENDPOINT_IN: Final = 0x80  # bit 7 of bmRequestType and of an endpoint address: device to host
USBMON_SETUP_BYTES: Final = 8


# A record's bytes: ``bytes`` when read from a file, or a read-only view of a recorder's arena.
Payload = bytes | memoryview


class Op(StrEnum):
    """The ``op`` of a record."""

    CONTROL = "control"  # a synchronous control transfer (direction: bit 7 of bmRequestType)
    BULK = "bulk"  # a synchronous bulk transfer (direction: bit 7 of ep)
    SUBMIT = "submit"  # an asynchronous transfer submitted (control when bmRequestType is set, else bulk)
    COMPLETE = "complete"  # its completion (the callback), carrying the submit's tag
    CANCEL = "cancel"
    CLAIM = "claim"
    RELEASE = "release"
    CLEAR_HALT = "clear_halt"
    RESET = "reset"
    SET_CONFIGURATION = "set_configuration"
    GET_CONFIGURATION = "get_configuration"


# Calls on the handle that are not a transfer of the caller's: ``value`` is the interface, endpoint or configuration.
HOST_OPS: Final = frozenset({Op.CANCEL, Op.CLAIM, Op.RELEASE, Op.CLEAR_HALT, Op.RESET, Op.SET_CONFIGURATION,
                             Op.GET_CONFIGURATION})  # fmt: skip


class TransferStatus(StrEnum):
    """An asynchronous transfer's outcome: the names of ``usb1.TRANSFER_*`` without the prefix."""

    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    STALL = "STALL"
    NO_DEVICE = "NO_DEVICE"
    OVERFLOW = "OVERFLOW"


def _check_u(name: str, value: object, limit: int | None = None) -> int:
    """``value`` as a non-negative int (at most ``limit``), else a TraceFormatError naming the field."""
    if type(value) is int and value >= 0 and (limit is None or value <= limit):
        return value
    bound = "" if limit is None else f" <= {limit:#x}"
    raise TraceFormatError(f"field {name!r}", f"{name}={value!r:.60}, expected an int >= 0{bound}", field=name)


def _check_data(name: str, data: Payload, limit: int) -> None:
    """A record's payload is no longer than the request it answers (``limit``)."""
    if not isinstance(data, (bytes, memoryview)):
        raise TraceFormatError(f"field {name!r}", f"{name} of {type(data).__name__}, expected bytes", field=name)
    if len(data) > limit:
        raise TraceFormatError(f"field {name!r}", f"{len(data)} bytes of {name}, expected at most {limit} (the "
                                                  "transfer's length)", field=name)  # fmt: skip


def _check_length(control: bool, length: object) -> int:
    return _check_u("length", length, CONTROL_MAX_BYTES if control else TRANSFER_MAX_BYTES)


def _check_err(err: object) -> None:
    if err is not None and not (isinstance(err, str) and err.startswith("USBError")):
        raise TraceFormatError(
            "field 'err'", f"err={err!r:.60}, expected a usb1 error class name (USBError...)", field="err"
        )


def _check_request(record: Transfer | Submit, control: bool) -> int:
    """The request fields a synchronous transfer and a submit share (setup, length, OUT data, timeout); returns
    the checked length."""
    _check_setup(control, record.ep, record.bmRequestType, record.bRequest, record.wValue, record.wIndex)
    length = _check_length(control, record.length)
    _check_data("data", record.data, length)
    _check_u("timeout", record.timeout, U32)
    return length


@dataclass(frozen=True, slots=True)
class UsbmonFields:
    """The usbmon header of one pcapng packet (``struct mon_bin_hdr``, Linux ``drivers/usb/mon/mon_bin.c``), kept
    for a record imported from a capture; ``raw`` maps the field names of ``pcapng.USBMON_FIELDS`` to their values,
    ``orig_len`` is the EPB's original length when a snaplen cut the packet, ``options`` the EPB's raw options. The
    values are in their struct fields' ranges: the pcapng reader unpacks them from the struct, the JSONL reader checks
    each against ``pcapng.USBMON_RANGES``."""

    raw: tuple[tuple[str, int | bytes], ...]
    orig_len: int | None = None
    options: bytes = b""

    def get(self, name: str) -> int | bytes:
        return dict(self.raw)[name]


@dataclass(frozen=True, slots=True)
class Transfer:
    """A synchronous control (``op="control"``, ``ep=0``) or bulk (``op="bulk"``) transfer.

    ``length`` is wLength (control) or the bytes asked for (bulk); ``ret`` the bytes sent (OUT) or received (IN).
    """

    seq: int
    t_ns: int
    dur_ns: int
    op: Op
    ep: int
    length: int
    data: Payload
    timeout: int
    bmRequestType: int | None = None
    bRequest: int | None = None
    wValue: int | None = None
    wIndex: int | None = None
    ret: int | None = None
    err: str | None = None
    transferred: int | None = None
    usbmon: UsbmonFields | None = None

    def __post_init__(self) -> None:
        _check_common(self.seq, self.t_ns, self.dur_ns)
        if self.op not in (Op.CONTROL, Op.BULK):
            raise TraceFormatError("field 'op'", f"op={self.op!r}, expected 'control' or 'bulk'")
        length = _check_request(self, self.op is Op.CONTROL)
        if (self.ret is None) == (self.err is None):
            raise TraceFormatError("field 'ret'", f"ret={self.ret!r:.30} err={self.err!r:.30}, expected exactly one of "
                                                  "them", field="ret")  # fmt: skip
        if self.ret is not None:
            _check_u("ret", self.ret, length)
        if self.transferred is not None:
            _check_u("transferred", self.transferred, length)
        _check_err(self.err)

    @property
    def is_in(self) -> bool:
        return _is_in(self.ep, self.bmRequestType)


@dataclass(frozen=True, slots=True)
class Submit:
    """An asynchronous transfer submitted under ``tag``: control when ``bmRequestType`` is set, else bulk."""

    seq: int
    t_ns: int
    tag: int
    ep: int
    length: int
    data: Payload
    timeout: int
    bmRequestType: int | None = None
    bRequest: int | None = None
    wValue: int | None = None
    wIndex: int | None = None
    err: str | None = None  # the submit itself raised (nothing was queued)
    usbmon: UsbmonFields | None = None
    op: Op = field(default=Op.SUBMIT, init=False)
    dur_ns: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        _check_common(self.seq, self.t_ns, 0)
        _check_u("tag", self.tag, U64)
        _check_request(self, self.is_control)
        _check_err(self.err)

    @property
    def is_control(self) -> bool:
        return self.bmRequestType is not None

    @property
    def is_in(self) -> bool:
        return _is_in(self.ep, self.bmRequestType)


@dataclass(frozen=True, slots=True)
class Complete:
    """The completion of the transfer submitted under ``tag``: its status, ``actual`` bytes moved, IN ``data``."""

    seq: int
    t_ns: int
    tag: int
    status: TransferStatus
    actual: int
    data: Payload = b""
    usbmon: UsbmonFields | None = None
    op: Op = field(default=Op.COMPLETE, init=False)
    dur_ns: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        _check_common(self.seq, self.t_ns, 0)
        _check_u("tag", self.tag, U64)
        _check_data("data", self.data, _check_u("actual", self.actual, TRANSFER_MAX_BYTES))
        if not isinstance(self.status, TransferStatus):
            raise TraceFormatError("field 'status'", f"status={self.status!r}, expected a TransferStatus")


@dataclass(frozen=True, slots=True)
class HostCall:
    """Any other call on the handle (``HOST_OPS``): ``value`` is the interface (claim, release), the endpoint
    (clear_halt), the configuration (set_configuration), the tag (cancel), ``None`` for reset and
    get_configuration; ``ret`` is get_configuration's answer."""

    seq: int
    t_ns: int
    dur_ns: int
    op: Op
    value: int | None = None
    ret: int | None = None
    err: str | None = None

    def __post_init__(self) -> None:
        _check_common(self.seq, self.t_ns, self.dur_ns)
        if self.op not in HOST_OPS:
            raise TraceFormatError("field 'op'", f"op={self.op!r}, expected one of {sorted(HOST_OPS)}")
        if self.value is not None:  # a tag (cancel), else an interface, endpoint or configuration number
            _check_u("value", self.value, U64 if self.op is Op.CANCEL else U8)
        if self.ret is not None:
            _check_u("ret", self.ret, U8)
        _check_err(self.err)


Record = Transfer | Submit | Complete | HostCall


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """Line 1 of a trace: what was recorded and on what.

    ``target`` and ``options`` (JSON values: quirks, seed, fault plan, mode, revision) say how the device was opened;
    ``device`` holds ``vendor_id``, ``product_id``, ``serial``, ``product``, ``manufacturer``, ``speed``;
    ``descriptors`` the configuration, interface and endpoints; ``versions`` tinyhil, Python, libusb1 and libusb;
    ``clock`` is ``"virtual"`` or ``"monotonic"``; ``host_ops`` says whether calls that are no USB transfer (claim,
    release, reset, get_configuration) were recorded (false for an imported capture: replay then accepts them
    unrecorded); ``pcapng`` keeps what a capture's section and interface blocks held, for a byte-exact round trip.
    """

    target: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    descriptors: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    clock: str = "virtual"
    host_ops: bool = True
    pcapng: dict[str, Any] | None = None
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise TraceFormatError(
                "field 'version'",
                f"version={self.version!r:.30}, expected {FORMAT_VERSION} (the format this tinyhil reads)",
            )
        check_header(self)
        if self.clock not in ("virtual", "monotonic"):
            raise TraceFormatError(
                "field 'clock'", f"clock={self.clock!r:.60}, expected 'virtual' or 'monotonic'", field="clock"
            )


@dataclass(frozen=True, slots=True)
class Trace:
    """A header and its records, in ``seq`` order."""

    header: TraceHeader
    records: tuple[Record, ...]


def _check_common(seq: object, t_ns: object, dur_ns: object) -> None:
    _check_u("seq", seq, SEQ_MAX)
    _check_u("t_ns", t_ns, TIME_MAX_NS)
    _check_u("dur_ns", dur_ns, TIME_MAX_NS)


def _check_setup(
    control: bool, ep: object, request_type: object, request: object, value: object, index: object
) -> None:
    _check_u("ep", ep, U8)
    if control:
        _check_u("bmRequestType", request_type, U8)
        _check_u("bRequest", request, U8)
        _check_u("wValue", value, U16)
        _check_u("wIndex", index, U16)
    elif (request_type, request, value, index) != (None, None, None, None):
        raise TraceFormatError(
            "field 'bmRequestType'", "a bulk transfer with setup fields, expected none", field="bmRequestType"
        )


def _is_in(ep: int, request_type: int | None) -> bool:
    return bool((ep if request_type is None else request_type) & ENDPOINT_IN)
