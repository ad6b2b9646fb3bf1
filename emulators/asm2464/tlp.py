"""The 0xF0 PCIe TLP engine: single TLPs with byte enables, completions via 0xF0 IN, stream modes 1/2."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.link import LinkControl
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks
from tinyhil.emulators.asm2464.sram import Arm, Direction, SramEngine
from tinyhil.emulators.faults import Fault, FaultKind
from tinyhil.emulators.pcie.topology import PcieTopology
from tinyhil.spec.asm2464 import CONFIG_REG_MASK, CplStatus, FmtType, Request, RetStatus, TlpMode, Xdata

__all__ = ["TlpEngine"]

_TLP_OUT = struct.Struct("<III")  # addr_lo, addr_hi, value
_COMPLETION = struct.Struct("<IBBBB")  # data, header high byte (status << 5), byte count, reserved, ret_status
_CPL_STATUS_SHIFT: Final = 5
_FMT_MASK: Final = 0xFF
_BYTE_ENABLE_SHIFT: Final = 8
_BYTE_ENABLE_ALL: Final = 0xF
_DWORD_BYTES: Final = 4
_BUS_SHIFT, _DEV_SHIFT, _FN_SHIFT = 24, 19, 16
_BUS_MASK, _DEV_MASK, _FN_MASK = 0xFF, 0x1F, 0x7
_CONFIG_BYTE_COUNT: Final = 4  # completions of config requests report a byte count of 4
_MEMORY_READS: Final = (FmtType.MRD32, FmtType.MRD64)
_MEMORY_WRITES: Final = (FmtType.MWR32, FmtType.MWR64)
_ADDR32_FMTS: Final = (FmtType.MRD32, FmtType.MWR32, FmtType.CFGRD0, FmtType.CFGRD1, FmtType.CFGWR0, FmtType.CFGWR1)
# every 0xF0 OUT decodes with these tables (a table, not a lane loop)
_FMTS: Final = {int(fmt): fmt for fmt in FmtType}
_MODES: Final = {int(mode): mode for mode in TlpMode}
_LANE_MASKS: Final = tuple(
    int.from_bytes(bytes(0xFF if enable >> i & 1 else 0 for i in range(_DWORD_BYTES)), "little")
    for enable in range(_BYTE_ENABLE_ALL + 1)
)
# per byte enable: the first enabled lane (the offset), the lane count (the size), and whether the lanes are contiguous
_LANE_OFFSETS: Final = tuple((enable & -enable).bit_length() - 1 for enable in range(_BYTE_ENABLE_ALL + 1))
_LANE_COUNTS: Final = tuple(enable.bit_count() for enable in range(_BYTE_ENABLE_ALL + 1))
_LANES_CONTIGUOUS: Final = tuple(
    enable > 0 and not (enable >> _LANE_OFFSETS[enable]) & ((enable >> _LANE_OFFSETS[enable]) + 1)
    for enable in range(_BYTE_ENABLE_ALL + 1)
)
_SINGLE: Final = TlpMode.SINGLE
_STREAM_WRITE: Final = TlpMode.STREAM_WRITE
_BULK_OUT_LANDING: Final = int(Xdata.BULK_OUT_LANDING)
_TYPE1_FMTS: Final = (FmtType.CFGRD1, FmtType.CFGWR1)
_CONFIG_WRITES: Final = (FmtType.CFGWR0, FmtType.CFGWR1)


def _stall(message: str) -> UsbStall:
    return UsbStall(message, op=f"{Request.TLP:#x}")


class TlpEngine:
    """Turns 0xF0 requests into TLPs on the PCIe tree (docs/asm2464.md "Vendor requests").

    Byte enables give offset (trailing zero bits) and size (set bits); data travels in byte lanes both ways: the
    value of a single write and the data of a completion are the whole dword with the enabled lanes meaningful.
    Posted memory writes produce no completion (an 0xF0 IN after one stalls); config requests and memory reads
    complete through 0xF0 IN with UR for anything unmapped. Streams (modes 1/2) arm the next bulk transfer.
    """

    def __init__(
        self,
        memory: BridgeMemory,
        topology: PcieTopology,
        engine: SramEngine,
        quirks: Quirks,
        link: LinkControl,
        *,
        next_tlp_fault: Callable[[], Fault | None],
        on_stream_request: Callable[[], None],
        on_wedge: Callable[[], None],
    ) -> None:
        self.memory = memory
        self.topology = topology
        self.engine = engine
        self.quirks = quirks
        self.link = link
        self._next_tlp_fault = next_tlp_fault
        self._on_stream_request = on_stream_request
        self._on_wedge = on_wedge
        self.reset()

    def reset(self) -> None:
        self.completion: bytes | None = None
        self.tlps_issued = 0

    def state(self) -> tuple[object, ...]:
        return (self.completion,)

    # --- 0xF0 OUT ---
    def _op_tlp_out(self, value: int, index: int, data: bytes) -> None:
        if len(data) != _TLP_OUT.size:
            raise _stall(f"0xF0 OUT data of {len(data)} bytes, expected {_TLP_OUT.size} (<III addr_lo, addr_hi, value)")
        byte_enable = value >> _BYTE_ENABLE_SHIFT
        fmt = _FMTS.get(value & _FMT_MASK)
        mode = _MODES.get(index)
        if fmt is None or mode is None:
            raise _stall(
                f"0xF0 OUT fmt_type={value & _FMT_MASK:#04x} mode={index}, expected fmt_type in "
                f"{[hex(f) for f in FmtType]} and mode in {[int(m) for m in TlpMode]}"
            )
        addr_lo, addr_hi, payload = _TLP_OUT.unpack(data)
        if addr_hi and fmt in _ADDR32_FMTS:
            raise _stall(f"0xF0 OUT {fmt.name} with addr_hi={addr_hi:#x}, expected 0 (use the 64-bit format)")
        if addr_lo & (_DWORD_BYTES - 1):
            raise _stall(f"0xF0 OUT address {addr_lo:#x}, expected dword aligned (byte enables give the offset)")
        addr = addr_hi << 32 | addr_lo
        if mode is _SINGLE:
            if not 0 < byte_enable <= _BYTE_ENABLE_ALL or not _LANES_CONTIGUOUS[byte_enable]:
                raise _stall(f"0xF0 OUT byte_enable={byte_enable:#x}, expected contiguous lanes within 0x1-0xF")
            self._on_stream_request()  # a new 0xF0 OUT cancels a stream
            self._single(fmt, byte_enable, addr, payload)
            return
        expected = _MEMORY_WRITES if mode is _STREAM_WRITE else _MEMORY_READS
        if fmt not in expected or payload < 1 or byte_enable > _BYTE_ENABLE_ALL:
            raise _stall(
                f"0xF0 OUT stream mode={mode.name} fmt_type={fmt.name} dwords={payload} byte_enable={byte_enable:#x}, "
                f"expected a memory {'write' if mode is TlpMode.STREAM_WRITE else 'read'} of >= 1 dword"
            )
        self._on_stream_request()
        nbytes = payload * _DWORD_BYTES
        direction = Direction.OUT if mode is _STREAM_WRITE else Direction.IN
        self.engine.arm_stream(direction, addr, nbytes)
        self.completion = None
        if self.quirks.stream_wedge and nbytes > self.quirks.stream_wedge_threshold_bytes:
            self._on_wedge()

    def _single(self, fmt: FmtType, byte_enable: int, addr: int, value: int) -> None:
        self.tlps_issued += 1
        offset = _LANE_OFFSETS[byte_enable]
        size = _LANE_COUNTS[byte_enable]
        lane_mask = _LANE_MASKS[byte_enable]
        if fmt in _MEMORY_WRITES:  # posted: no completion, and nothing to report if it goes nowhere
            self.completion = None
            if self.link.up:
                hit = self.topology.route_memory(addr + offset, size)
                if not isinstance(hit, str) and self.topology.function is not None:
                    lanes = (value & lane_mask).to_bytes(_DWORD_BYTES, "little")
                    self.topology.function.mmio_write(hit[0], hit[1], lanes[offset : offset + size])
            return
        byte_count = size if fmt in _MEMORY_READS else _CONFIG_BYTE_COUNT
        fault = self._next_tlp_fault()
        if not self.link.up:
            self._complete(0, CplStatus.SC, byte_count, RetStatus.TIMEOUT)
        elif fault is not None and fault.kind is FaultKind.RET_STATUS:
            self._complete(0, CplStatus.SC, byte_count, RetStatus(fault.status))
        elif fault is not None:
            self._complete(0, CplStatus(fault.status), byte_count, RetStatus.OK)
        elif fmt in _MEMORY_READS:
            hit = self.topology.route_memory(addr + offset, size)
            if isinstance(hit, str) or self.topology.function is None:
                self._complete(0, CplStatus.UR, byte_count, RetStatus.OK)
            else:
                data = self.topology.function.mmio_read(hit[0], hit[1], size)
                self._complete(int.from_bytes(data, "little") << (8 * offset), CplStatus.SC, byte_count, RetStatus.OK)
        else:
            self._config(fmt, byte_enable, addr, value & lane_mask, lane_mask)

    def _config(self, fmt: FmtType, byte_enable: int, addr: int, value: int, lane_mask: int) -> None:
        bus, dev, fn = addr >> _BUS_SHIFT & _BUS_MASK, addr >> _DEV_SHIFT & _DEV_MASK, addr >> _FN_SHIFT & _FN_MASK
        reg = addr & CONFIG_REG_MASK
        target, _why = self.topology.config_target(bus, dev, fn, type1=fmt in _TYPE1_FMTS)
        if target is None:
            self._complete(0, CplStatus.UR, _CONFIG_BYTE_COUNT, RetStatus.OK)
            return
        if fmt in _CONFIG_WRITES:
            if target.function is not None:
                target.function.config_write(reg, value, byte_enable)
            else:
                self.topology.bridges[target.bridge or 0].config_write(reg, value, byte_enable)
            self._complete(0, CplStatus.SC, _CONFIG_BYTE_COUNT, RetStatus.OK)
            return
        if target.function is not None:
            data = target.function.config_read(reg)
        else:
            data = self.topology.bridges[target.bridge or 0].config_read(reg)
        self._complete(data & lane_mask, CplStatus.SC, _CONFIG_BYTE_COUNT, RetStatus.OK)

    def _complete(self, data: int, cpl_status: CplStatus, byte_count: int, ret_status: RetStatus) -> None:
        if cpl_status is not CplStatus.SC or ret_status is not RetStatus.OK:
            data = 0
        self.completion = _COMPLETION.pack(data, cpl_status << _CPL_STATUS_SHIFT, byte_count, 0, ret_status)

    # --- 0xF0 IN ---
    def _op_tlp_in(self, value: int, index: int, length: int) -> bytes:
        if (value, index, length) != (0, 0, _COMPLETION.size):
            raise _stall(f"0xF0 IN wValue={value:#x} wIndex={index:#x} wLength={length}, expected 0, 0, 8")
        if self.completion is None:
            raise _stall("0xF0 IN with no completion pending (posted writes and streams produce none)")
        return self.completion

    # --- streams (called by the device front when the paired bulk moves bytes) ---
    def stream_write(self, arm: Arm, offset: int, data: memoryview, packet_bytes: int) -> None:
        """Bytes of a mode-1 stream go out as posted writes; they vanish if nothing is behind the address."""
        nbytes = data.nbytes
        if nbytes:
            tail = min(packet_bytes, nbytes)
            self.memory.xdata.data[_BULK_OUT_LANDING : _BULK_OUT_LANDING + tail] = data[nbytes - tail :]
        if not nbytes or not self.link.up:
            return
        hit = self.topology.route_memory(arm.pcie_addr + offset, nbytes)
        if not isinstance(hit, str) and self.topology.function is not None:
            self.topology.function.mmio_write(hit[0], hit[1], data.tobytes())

    def stream_readable(self, arm: Arm) -> bool:
        """Whether the whole range of a mode-2 stream has a completer (otherwise its bulk IN never completes)."""
        return self.link.up and not isinstance(self.topology.route_memory(arm.pcie_addr, arm.nbytes), str)

    def stream_read(self, arm: Arm, offset: int, nbytes: int) -> bytes:
        """The next ``nbytes`` of a mode-2 stream."""
        hit = self.topology.route_memory(arm.pcie_addr + offset, nbytes)
        if isinstance(hit, str) or self.topology.function is None:
            return bytes(nbytes)
        return self.topology.function.mmio_read(hit[0], hit[1], nbytes)
