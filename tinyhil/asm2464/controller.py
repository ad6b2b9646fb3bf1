"""The ASM2464 controller client: the custom firmware's vendor requests as Python methods (docs/asm2464.md).

Works over any :class:`~tinyhil.usb.bridge_io.BridgeIO` (the real USB3 transport or an emulated one).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from tinyhil._check import as_readonly_bytes, as_writable_bytes, check_int, check_range
from tinyhil.asm2464.errors import PcieError
from tinyhil.asm2464.sram import SramArm, arm_request, pad_to_sectors
from tinyhil.asm2464.stream import MemPiece, bulk_timeout_ms, check_mem_access, plan_mem_access, plan_write
from tinyhil.asm2464.tlp import TlpCompletion, describe_fmt_type, encode_tlp, has_data, is_posted
from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.spec.asm2464 import (
    BYTE_ENABLE_SHIFT,
    CPL_BYTES,
    LTSSM_L0,
    PCIE_POWER_ON,
    SECTOR_BYTES,
    STREAM_PACKET_BYTES_USB2,
    STREAM_PACKET_BYTES_USB3,
    TLP_BYTE_ENABLE_ALL,
    TLP_REQUEST_FORMAT,
    TLP_RETRIES,
    XDATA_BYTES,
    XDATA_READ_MAX_USB2,
    XDATA_READ_MAX_USB3,
    CplStatus,
    FmtType,
    Request,
    RetStatus,
    TlpMode,
    Xdata,
    config_address,
)
from tinyhil.usb.bridge_io import AsyncBridgeIO, BridgeIO, check_timeout_ms

__all__ = ["Asm2464Controller"]

DWORD_BYTES: Final = 4
U32_MASK: Final = 0xFFFF_FFFF
CONFIG_BYTES: Final = 0x1000  # PCIe extended configuration space per function
MAX_BUS: Final = 0xFF
MAX_DEVICE: Final = 0x1F
MAX_FUNCTION: Final = 0x7
SINGLE_TLP_MAX_BYTES: Final = 8  # up to two dwords as posted single TLPs (one control transfer each), not a stream
DEFAULT_STREAM_PACKETS: Final = 1024  # 1 MB streams on USB3, far below the 4 MB upstream saw wedge the bridge
DEFAULT_RETRY_DELAY_S: Final = 0.001
MAX_WAIT_S: Final = 60.0
# The shortest pause between link polls: a poll is a control round trip (tens of us on hardware), so a shorter
# pause only spins; with MAX_WAIT_S it bounds a wait to MAX_WAIT_S / MIN_POLL_S + 1 polls.
MIN_POLL_S: Final = 0.001
_CPL_STATUS_MEANINGS: Final = {
    CplStatus.UR: "unsupported request",
    CplStatus.CRS: "configuration request retry status",
    CplStatus.CA: "completer abort",
}

_TLP_REQUEST: Final = struct.Struct(TLP_REQUEST_FORMAT)
ADDR32_LIMIT: Final = 1 << 32


def _check_xdata_read(address: Any, size: Any, max_size: int | None = None) -> None:
    """The one check of an 0xE4 read: ``size`` bytes (at most ``max_size`` in one request) inside XDATA."""
    fits = type(address) is int and type(size) is int and address >= 0 and 1 <= size <= XDATA_BYTES - address
    if fits and (max_size is None or size <= max_size):
        return
    check_int("size", size, min_value=1, max_value=max_size)
    check_range("XDATA read", address, size, XDATA_BYTES)


def _check_seconds(name: str, value: object, *, minimum: float, inclusive: bool = True) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        above = value >= minimum if inclusive else value > minimum
        if above and value <= MAX_WAIT_S:
            return float(value)
    bracket = "[" if inclusive else "("
    raise InvalidArgument(f"{name}={value!r}, expected a number of seconds in {bracket}{minimum}, {MAX_WAIT_S}]")


class Asm2464Controller:
    """Client of the ASM2464 custom firmware: XDATA, the 0xF2 SRAM engine, PCIe TLPs, power and link.

    Host view (docs/asm2464.md "XDATA map"):

    ======================  ==================================================  ===========================
    XDATA                   what                                                method
    ======================  ==================================================  ===========================
    0x0000-0xFFFF (bank 0)  bridge memory, read 0xE4 (<= 512 B per request on   ``xdata_read/xdata_write``
                            USB3, 64 on USB2), written 0xE5 one byte a request
    0x8000-0x8FFF           window onto SRAM at PCIe 0x200000                   ``xdata_read``
    0xA000-0xAFFF           sys_buf, PCIe 0x820000 (drain fence at 0xA800)      ``xdata_read``
    0xB450                  LTSSM link state (0x78 = L0, link up)               ``pcie_link_state``
    0xF000 + slot * 0x4000  SRAM as the 0xF2 engine addresses it                ``scsi_write/scsi_read``
    ======================  ==================================================  ===========================

    PCIe transactions go through the 0xF0 engine: single TLPs (``pcie_request``, config reads/writes) with one
    8-byte completion for non-posted requests, and streams for bulk memory access (``pcie_mem_read/write``).
    ``retry_delay_s`` is the pause between re-issues of a TLP the firmware reported as ERROR/TIMEOUT; it goes
    through the transport's ``pause`` (so an emulated clock advances instead of the wall clock).

    Over an :class:`~tinyhil.usb.bridge_io.AsyncBridgeIO` (``asynchronous``), an 0xF2 arm, an XDATA read and an armed
    bulk OUT can be submitted without waiting (``scsi_write_arm_async``, ``xdata_read_async``, ``scsi_write_async``,
    each returning a tag) and reaped together (``reap``), so an arm and a fence read share one round trip; over a
    synchronous transport these raise ``StateError``.
    """

    def __init__(
        self,
        transport: BridgeIO,
        *,
        usb2: bool = False,
        retry_delay_s: float = DEFAULT_RETRY_DELAY_S,
        stream_chunk_bytes: int | None = None,
    ) -> None:
        if not isinstance(transport, BridgeIO):
            raise InvalidArgument(
                f"transport={transport!r}, expected a BridgeIO (control_write, control_read, bulk_write, bulk_read, "
                "pause): a Usb3Transport or MockUSB3"
            )
        _check_seconds("retry_delay_s", retry_delay_s, minimum=0)
        self.transport = transport
        self._async: AsyncBridgeIO | None = transport if isinstance(transport, AsyncBridgeIO) else None
        self.usb2 = bool(usb2)
        self.xdata_read_max = XDATA_READ_MAX_USB2 if usb2 else XDATA_READ_MAX_USB3
        self.stream_packet_bytes = STREAM_PACKET_BYTES_USB2 if usb2 else STREAM_PACKET_BYTES_USB3
        chunk = DEFAULT_STREAM_PACKETS * self.stream_packet_bytes if stream_chunk_bytes is None else stream_chunk_bytes
        check_int("stream_chunk_bytes", chunk, min_value=self.stream_packet_bytes)
        if chunk % self.stream_packet_bytes:
            raise InvalidArgument(
                f"stream_chunk_bytes={chunk:#x}, expected a multiple of the {self.stream_packet_bytes}-byte packet"
            )
        self.stream_chunk_bytes = chunk
        self.retry_delay_s = retry_delay_s

    def __repr__(self) -> str:
        return f"<{type(self).__name__} over {self.transport!r}{' (USB2)' if self.usb2 else ''}>"

    # --- XDATA (0xE4 / 0xE5) ---
    def xdata_read(self, address: int, size: int) -> bytes:
        """Read ``size`` bytes of XDATA from ``address``, in requests of at most ``xdata_read_max`` bytes."""
        _check_xdata_read(address, size)
        out = bytearray(size)
        for offset in range(0, size, self.xdata_read_max):
            n = min(self.xdata_read_max, size - offset)
            out[offset : offset + n] = self.transport.control_read(Request.XDATA_READ, n, address + offset, 0)
        return bytes(out)

    def xdata_read_async(self, address: int, size: int) -> tuple[int, bytearray]:
        """Submit one 0xE4 read of ``size`` bytes (at most ``xdata_read_max``) at ``address``; returns ``(tag,
        buffer)``, the buffer filled once the tag is reaped. A bad ``address`` or ``size`` raises ``InvalidArgument``
        (as :meth:`xdata_read`) and sends nothing."""
        transport = self._async
        if transport is None:
            raise self._not_async("xdata_read_async")
        _check_xdata_read(address, size, self.xdata_read_max)
        return transport.control_read_async(Request.XDATA_READ, size, address, 0)

    def xdata_write(self, address: int, data: Any) -> None:
        """Write ``data`` (bytes-like) to XDATA at ``address``: one 0xE5 request per byte, as the firmware takes it."""
        view = as_readonly_bytes("data", data)
        if not len(view):
            raise InvalidArgument("data of 0 bytes, expected at least 1 byte")
        check_range("XDATA write", address, len(view), XDATA_BYTES)
        for offset, byte in enumerate(view):  # one byte per request (docs/asm2464.md "Vendor requests")
            self.transport.control_write(Request.XDATA_WRITE, address + offset, byte)

    # --- SRAM DMA (0xF2 + bulk) ---
    def scsi_write(self, buf: Any, slot_start: int = 0, *, timeout: int | None = None) -> SramArm:
        """Land ``buf`` in SRAM from slot ``slot_start``: arm 0xF2, then bulk OUT the image padded to 512 B sectors.

        A sector-aligned buffer is sent as is (no copy). There is no completion signal: the bytes land some time
        after the bulk transfer completes (docs/asm2464.md). Returns the arm that was sent.

        Raises:
            InvalidArgument: empty ``buf``, an image that does not fit the SRAM from ``slot_start``, or a ``timeout``
                that is not an int of milliseconds in ``1..tinyhil.usb.MAX_TIMEOUT_MS``: each before the arm goes out.
        """
        view = as_readonly_bytes("buf", buf)
        if not len(view):
            raise InvalidArgument("buf of 0 bytes, expected at least 1 byte")
        arm, value, index, wire_bytes = arm_request(len(view), slot_start, False)
        wait_ms = bulk_timeout_ms(wire_bytes, timeout)
        wire = pad_to_sectors(view)
        self.transport.control_write(Request.SRAM_ARM, value, index)
        self.transport.bulk_write(wire, wait_ms)
        return arm

    def scsi_write_arm(self, size: int, slot_start: int = 0) -> SramArm:
        """Arm a host-to-device 0xF2 transfer of ``size`` bytes (rounded up to sectors) into ``slot_start``; the bulk
        OUT that follows (:meth:`scsi_write_async`) must be exactly the arm's ``wire_bytes``."""
        arm, value, index, _ = arm_request(size, slot_start, False)
        self.transport.control_write(Request.SRAM_ARM, value, index)
        return arm

    def scsi_write_arm_async(self, size: int, slot_start: int = 0) -> int:
        """:meth:`scsi_write_arm` as an asynchronous control transfer; returns its tag. A bad ``size`` or
        ``slot_start`` raises ``InvalidArgument`` (as :meth:`scsi_write`) and sends nothing."""
        transport = self._async
        if transport is None:
            raise self._not_async("scsi_write_arm_async")
        _, value, index, _ = arm_request(size, slot_start, False)
        return transport.control_write_async(Request.SRAM_ARM, value, index)

    def scsi_write_async(self, wire: Any, *, timeout: int | None = None) -> int:
        """Submit the bulk OUT of an armed wire image (the arm's ``wire_bytes``, whole sectors, else
        ``InvalidArgument``); returns its tag. ``wire`` is read when the transfer moves: leave it unchanged until it
        is reaped. ``timeout`` defaults to the transport's for asynchronous transfers."""
        transport = self._async
        if transport is None:
            raise self._not_async("scsi_write_async")
        view = wire if type(wire) is memoryview else as_readonly_bytes("wire", wire)
        if not view.nbytes or view.nbytes % SECTOR_BYTES:
            raise InvalidArgument(
                f"wire of {view.nbytes:#x} bytes, expected a whole number of {SECTOR_BYTES}-byte sectors"
            )
        if timeout is None:
            return transport.bulk_write_async(view)
        return transport.bulk_write_async(view, check_timeout_ms(timeout))  # the client's rule: never "forever"

    def reap(self, *tags: int) -> None:
        """Wait for the asynchronous transfers ``tags``, in order, and reap them; the oldest failure of any
        asynchronous transfer raises (``usb1.USBError``, ``ShortTransfer``), once."""
        transport = self._async
        if transport is None:
            raise self._not_async("reap")
        for tag in tags:
            transport.bulk_wait(tag)

    def clear_error(self) -> tuple[BaseException, ...]:
        """Drop the asynchronous failures that have not surfaced (after recovering from one); returns them."""
        transport = self._async
        if transport is None:
            raise self._not_async("clear_error")
        return transport.clear_error()

    @property
    def asynchronous(self) -> bool:
        """Whether the transport is an :class:`~tinyhil.usb.bridge_io.AsyncBridgeIO` (see the class docstring)."""
        return self._async is not None

    def _not_async(self, method: str) -> StateError:
        return StateError(
            f"{type(self).__name__}.{method} needs asynchronous transfers, and {self.transport!r} is not an "
            "AsyncBridgeIO (bulk_write_async, control_write_async, control_read_async, bulk_wait)"
        )

    def scsi_read_arm(self, size: int, slot_start: int = 0) -> SramArm:
        """Arm a device-to-host 0xF2 transfer of ``size`` bytes (rounded up to sectors) from ``slot_start``."""
        arm, value, index, _ = arm_request(size, slot_start, True)
        self.transport.control_write(Request.SRAM_ARM, value, index)
        return arm

    def scsi_read(self, size: int, slot_start: int = 0, *, arm: bool = True, timeout: int | None = None) -> Any:
        """Read ``size`` bytes of SRAM from ``slot_start`` with a device-to-host arm and a bulk IN.

        ``arm=False`` skips the arm (already sent with :meth:`scsi_read_arm`, e.g. before the GPU fills the SRAM
        for a copyout). Returns a ``bytearray`` of ``size`` bytes.

        Raises:
            InvalidArgument: a bad ``size``, ``slot_start`` or ``timeout`` (as :meth:`scsi_write`), before the arm.
        """
        _, value, index, wire_bytes = arm_request(size, slot_start, True)
        wait_ms = bulk_timeout_ms(wire_bytes, timeout)
        if arm:
            self.transport.control_write(Request.SRAM_ARM, value, index)
        data = self.transport.bulk_read(wire_bytes, wait_ms)
        if len(data) == size:
            return data
        if isinstance(data, bytearray):
            del data[size:]  # drop the sector padding in place
            return data
        return bytearray(memoryview(data)[:size])

    def scsi_read_into(self, out: Any, slot_start: int = 0, *, arm: bool = True, timeout: int | None = None) -> None:
        """:meth:`scsi_read` of ``len(out)`` bytes into ``out`` (a writable flat buffer).

        A whole number of sectors over an asynchronous transport (:class:`~tinyhil.usb.bridge_io.AsyncBridgeIO`) is
        read straight into ``out``; anything else goes through :meth:`scsi_read` and one copy.
        """
        view = as_writable_bytes("out", out)
        size = len(view)
        transport = self._async
        if transport is None or size % SECTOR_BYTES or not size:
            view[:] = self.scsi_read(size, slot_start, arm=arm, timeout=timeout)
            return
        _, value, index, wire_bytes = arm_request(size, slot_start, True)
        wait_ms = bulk_timeout_ms(wire_bytes, timeout)
        if arm:
            transport.control_write(Request.SRAM_ARM, value, index)
        transport.bulk_read_into(view, wait_ms)

    # --- PCIe TLPs (0xF0) ---
    def pcie_request(self, fmt_type: int, address: int, value: int | None = None, size: int = 4) -> int | None:
        """Issue one TLP of ``size`` bytes at byte ``address``; returns the read data, or ``None`` for writes.

        Posted requests (memory writes, messages) read no completion. Otherwise the 8-byte completion is read;
        a firmware ``ret_status`` of ERROR or TIMEOUT re-issues the TLP, up to ``TLP_RETRIES`` (10) times.

        Raises:
            InvalidArgument: malformed request (see :func:`~tinyhil.asm2464.tlp.encode_tlp`).
            PcieError: completion status UR/CRS/CA (named), or ret_status still failing after the retries.
        """
        wvalue, payload = encode_tlp(fmt_type, address, size, value)
        posted = is_posted(fmt_type)
        attempts = 0
        while True:
            attempts += 1
            self.transport.control_write(Request.TLP, wvalue, TlpMode.SINGLE, payload)
            if posted:
                return None
            completion = TlpCompletion.decode(self.transport.control_read(Request.TLP, CPL_BYTES))
            if not completion.retryable or attempts > TLP_RETRIES:
                break
            self.transport.pause(self.retry_delay_s)
        where = f"{describe_fmt_type(fmt_type)} at {address:#x}+{size:#x}"
        if completion.ret_status != RetStatus.OK:
            raise PcieError(
                f"{where} failed: firmware ret_status {completion.ret_status_name()} ({completion.ret_status:#04x}) "
                f"on {attempts} attempt(s) (1 + up to {TLP_RETRIES} retries)",
                fmt_type=fmt_type,
                address=address,
                size=size,
                ret_status=_enum_or_int(RetStatus, completion.ret_status),
                attempts=attempts,
            )
        if completion.cpl_status != CplStatus.SC:
            name = completion.status_name()
            meaning = _CPL_STATUS_MEANINGS.get(completion.cpl_status, "undefined completion status")  # type: ignore[call-overload]
            raise PcieError(
                f"{where} completed with {name} ({meaning})",
                fmt_type=fmt_type,
                address=address,
                size=size,
                cpl_status=_enum_or_int(CplStatus, completion.cpl_status),
                attempts=attempts,
            )
        if has_data(fmt_type):
            return None
        return completion.data >> (8 * (address % DWORD_BYTES)) & ((1 << (8 * size)) - 1)

    def pcie_cfg_read(self, bus: int, dev: int, fn: int, reg: int, size: int = 4) -> int:
        """Configuration read of ``size`` bytes at register ``reg`` of ``bus:dev.fn`` (type 0 on bus 0, else 1)."""
        address = self._cfg_address(bus, dev, fn, reg)
        fmt_type = FmtType.CFGRD0 if bus == 0 else FmtType.CFGRD1
        try:
            result = self.pcie_request(fmt_type, address, size=size)
        except PcieError as exc:
            exc.add_note(f"config read of {bus}:{dev:02x}.{fn} register {reg:#05x} ({size} bytes)")
            raise
        assert result is not None  # a read that did not raise returns its data
        return result

    def pcie_cfg_write(self, bus: int, dev: int, fn: int, reg: int, value: int, size: int = 4) -> None:
        """Configuration write of ``value`` (``size`` bytes) to register ``reg`` of ``bus:dev.fn``."""
        address = self._cfg_address(bus, dev, fn, reg)
        fmt_type = FmtType.CFGWR0 if bus == 0 else FmtType.CFGWR1
        try:
            self.pcie_request(fmt_type, address, value, size)
        except PcieError as exc:
            exc.add_note(f"config write of {value:#x} to {bus}:{dev:02x}.{fn} register {reg:#05x} ({size} bytes)")
            raise

    @staticmethod
    def _cfg_address(bus: int, dev: int, fn: int, reg: int) -> int:
        check_int("bus", bus, min_value=0, max_value=MAX_BUS)
        check_int("dev", dev, min_value=0, max_value=MAX_DEVICE)
        check_int("fn", fn, min_value=0, max_value=MAX_FUNCTION)
        check_int("reg", reg, min_value=0, max_value=CONFIG_BYTES - 1)
        return config_address(bus, dev, fn, reg) | reg % DWORD_BYTES

    def pcie_mem_read(self, address: int, size: int) -> bytearray:
        """Read ``size`` bytes of PCIe memory at ``address``: streams for whole dwords (single TLPs for a body of
        at most 8 bytes), single TLPs for the unaligned rest.

        Raises:
            InvalidArgument: before anything is allocated or sent: ``size`` outside
                ``1..MAX_MEM_ACCESS_BYTES`` (1 GiB), a range leaving the 64-bit PCIe address space
                (:func:`~tinyhil.asm2464.stream.plan_mem_access`).
            PcieError: a completion status other than SC.
        """
        pieces = plan_mem_access(
            address, size, stream_chunk_bytes=self.stream_chunk_bytes, single_max_bytes=SINGLE_TLP_MAX_BYTES
        )
        out = bytearray(size)
        for piece in pieces:
            fmt_type = piece.fmt_type(write=False)
            if piece.stream:
                self._stream_start(fmt_type, piece, TlpMode.STREAM_READ)
                data = self.transport.bulk_read(piece.size, bulk_timeout_ms(piece.size))
            else:
                value = self.pcie_request(fmt_type, piece.address, size=piece.size)
                assert value is not None
                data = value.to_bytes(piece.size, "little")
            out[piece.offset : piece.offset + piece.size] = data
        return out

    def pcie_mem_write(self, address: int, data: Any) -> None:
        """Write ``data`` (bytes-like) to PCIe memory at ``address``: streams for whole dwords (single TLPs for a
        body of at most 8 bytes), single TLPs for the unaligned rest."""
        view = memoryview(data) if type(data) is bytes else as_readonly_bytes("data", data)
        size = len(view)
        if not size:
            raise InvalidArgument("data of 0 bytes, expected at least 1 byte")
        check_mem_access(
            address, size, stream_chunk_bytes=self.stream_chunk_bytes, single_max_bytes=SINGLE_TLP_MAX_BYTES
        )
        transport = self.transport
        for step in plan_write(address % DWORD_BYTES, size, self.stream_chunk_bytes, SINGLE_TLP_MAX_BYTES):
            piece_address = address + step.offset
            wide = piece_address + step.end - step.offset > ADDR32_LIMIT  # as MemPiece.fmt_type
            fmt_type = FmtType.MWR64 if wide else FmtType.MWR32
            if step.stream:
                request = _TLP_REQUEST.pack(piece_address & U32_MASK, piece_address >> 32, step.dwords)
                transport.control_write(Request.TLP, fmt_type | step.byte_enables, TlpMode.STREAM_WRITE, request)
                transport.bulk_write(view[step.offset : step.end], step.timeout_ms)
            else:  # a posted single TLP, as pcie_request sends it (encode_tlp's layout): no completion to read
                aligned = piece_address - step.lane
                value = int.from_bytes(view[step.offset : step.end], "little") << 8 * step.lane
                request = _TLP_REQUEST.pack(aligned & U32_MASK, aligned >> 32, value)
                transport.control_write(Request.TLP, fmt_type | step.byte_enables, TlpMode.SINGLE, request)

    def _stream_start(self, fmt_type: FmtType, piece: MemPiece, mode: TlpMode) -> None:
        payload = struct.pack(TLP_REQUEST_FORMAT, piece.address & U32_MASK, piece.address >> 32, piece.size // 4)
        self.transport.control_write(Request.TLP, fmt_type | TLP_BYTE_ENABLE_ALL << BYTE_ENABLE_SHIFT, mode, payload)

    # --- power and link ---
    def set_pcie_power(self, on: bool) -> None:
        """Power the PCIe side on (0xF3 wValue bit 0 = 1) or off; the link may come up some time later."""
        if not isinstance(on, bool):
            raise InvalidArgument(f"on={on!r}, expected True or False")
        self.transport.control_write(Request.PCIE_POWER, PCIE_POWER_ON if on else 0)

    def pcie_link_state(self) -> int:
        """The LTSSM byte at XDATA 0xB450 (``0x78`` = L0, link up)."""
        return self.xdata_read(Xdata.LTSSM, 1)[0]

    def pcie_link_up(self) -> bool:
        """Whether the LTSSM reads L0."""
        return self.pcie_link_state() == LTSSM_L0

    def wait_pcie_link(self, timeout_s: float = 1.0, poll_s: float = 0.01) -> None:
        """Poll the LTSSM until it reads L0, at most ``timeout_s / poll_s + 1`` times, pausing ``poll_s`` between.

        Bounded in both: ``timeout_s`` of pauses at most (``MAX_WAIT_S``, 60 s) and so at most
        ``MAX_WAIT_S / MIN_POLL_S + 1`` polls (60,001), ``poll_s`` being at least ``MIN_POLL_S`` (1 ms).

        Raises:
            InvalidArgument: ``timeout_s`` not in ``(0, MAX_WAIT_S]`` or ``poll_s`` not in ``[MIN_POLL_S, MAX_WAIT_S]``.
            DeviceTimeout: the link never came up; the message gives the last LTSSM value.
        """
        _check_seconds("timeout_s", timeout_s, minimum=0, inclusive=False)
        _check_seconds("poll_s", poll_s, minimum=MIN_POLL_S)
        polls = int(timeout_s / poll_s) + 1
        state = -1
        for poll in range(polls):
            state = self.pcie_link_state()
            if state == LTSSM_L0:
                return
            if poll + 1 < polls:
                self.transport.pause(poll_s)
        raise DeviceTimeout(
            f"PCIe link not up after {polls} polls over {timeout_s}s: LTSSM at XDATA {Xdata.LTSSM:#06x} reads "
            f"{state:#04x}, expected {LTSSM_L0:#04x} (L0); is PCIe powered (set_pcie_power(True))?",
            op="wait_pcie_link",
        )


def _enum_or_int(enum: type[CplStatus] | type[RetStatus], value: int) -> Any:
    try:
        return enum(value)
    except ValueError:
        return value
