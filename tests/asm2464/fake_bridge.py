"""A minimal scripted ASM2464 device for the client's wire-level tests: a responder for the scripted USB handle.

Test support (not collected), loaded by ``tests/asm2464/conftest.py``. It answers the vendor requests of
spec/asm24.md just far enough to check the client: XDATA, power/LTSSM, 0xF2 arms paired with exact-size bulk
transfers, 0xF0 single TLPs against a PCI configuration model (bridges on buses 0-3 routing type-1 requests by
their bus numbers, a GPU at 4:00.0 with BAR sizing and a resizable-BAR capability) and a sparse memory, and 0xF0
streams. It is not the emulator (that is built elsewhere); it exists so the client's encodings can be asserted now.
"""

from __future__ import annotations

import struct
from typing import Any

import usb1

LTSSM = 0xB450
MB = 1 << 20


def _stall() -> Exception:
    return usb1.USBErrorPipe(usb1.ERROR_PIPE)


def _timeout() -> Exception:
    error = usb1.USBErrorTimeout(usb1.ERROR_TIMEOUT)
    error.transferred = 0
    error.received = b""
    return error


class Function:
    """A configuration space with per-dword writable masks and optional BAR sizing."""

    def __init__(self, vendor: int, device: int, header_type: int) -> None:
        self.space = bytearray(0x1000)
        self.writable = {}  # dword offset -> mask of writable bits
        struct.pack_into("<HH", self.space, 0, vendor, device)
        self.space[0x0E] = header_type
        self.writable[0x04] = 0x0000_07FF  # COMMAND (STATUS is RW1C: modelled as read-only here)
        self.bars: dict[int, tuple[int, int]] = {}  # BAR dword offset -> (size, type bits); upper halves size 0
        self.rebar_ctrl: int | None = None

    def read(self, reg: int) -> int:
        return struct.unpack_from("<I", self.space, reg)[0]

    def write(self, reg: int, value: int, enables: int) -> None:
        mask = self.writable.get(reg, 0)
        for lane in range(4):
            if not enables >> lane & 1:
                mask &= ~(0xFF << (8 * lane))
        current = self.read(reg)
        new = current & ~mask | value & mask
        if reg in self.bars:
            new = self._bar_value(reg, value if enables == 0xF else new)
        struct.pack_into("<I", self.space, reg, new)
        if reg == self.rebar_ctrl:
            self._apply_rebar()

    def add_bar(self, index: int, size: int, type_bits: int) -> None:
        reg = 0x10 + 4 * index
        self.bars[reg] = (size, type_bits)
        struct.pack_into("<I", self.space, reg, type_bits)
        if type_bits & 0x4:
            self.bars[reg + 4] = (size, -1)  # upper half of a 64-bit BAR
            struct.pack_into("<I", self.space, reg + 4, 0)

    def _bar_value(self, reg: int, value: int) -> int:
        size, type_bits = self.bars[reg]
        mask = ~(size - 1) & (1 << 64) - 1
        if type_bits == -1:
            return value & (mask >> 32) & 0xFFFF_FFFF
        if type_bits & 0x1:
            return value & mask & 0xFFFF_FFFC | type_bits
        return value & mask & 0xFFFF_FFF0 | type_bits

    def _apply_rebar(self) -> None:
        assert self.rebar_ctrl is not None
        code = self.read(self.rebar_ctrl) >> 8 & 0x3F
        _, type_bits = self.bars[0x10]
        self.bars[0x10] = (MB << code, type_bits)
        self.bars[0x14] = (MB << code, -1)
        struct.pack_into("<I", self.space, 0x10, type_bits)
        struct.pack_into("<I", self.space, 0x14, 0)


def default_topology(
    *, bar0: int = 256 * MB, rebar_codes: tuple[int, ...] = (8, 9, 10), rebar: bool = True
) -> dict[tuple[int, int, int], Function]:
    """Bridges at (b, 0, 0) for b in 0..3, and a GPU at 4:00.0 (BAR0 64-bit pref, BAR2 64-bit 8 KB, BAR4 I/O,
    BAR5 32-bit 2 MB, a resizable-BAR capability at 0x100 offering ``1 MB << code`` for each code)."""
    functions: dict[tuple[int, int, int], Function] = {}
    for bus in range(4):
        bridge = Function(0x1B21 if bus < 2 else 0x1002, 0x2464 if bus < 2 else 0x1478, 0x01)
        bridge.writable.update({0x18: 0x00FF_FFFF, 0x20: 0xFFF0_FFF0, 0x24: 0xFFF0_FFF0, 0x28: ~0, 0x2C: ~0})
        struct.pack_into("<I", bridge.space, 0x24, 0x0001_0001)  # 64-bit prefetchable window capable
        functions[(bus, 0, 0)] = bridge
    gpu = Function(0x1002, 0x744C, 0x00)
    gpu.add_bar(0, bar0, 0xC)  # 64-bit prefetchable
    gpu.add_bar(2, 8 * 1024, 0x4)  # 64-bit, not prefetchable
    gpu.add_bar(4, 256, 0x1)  # I/O
    gpu.add_bar(5, 2 * MB, 0x0)  # 32-bit
    if rebar:
        sizes = sum(1 << (4 + code) for code in rebar_codes)
        struct.pack_into("<III", gpu.space, 0x100, 0x0001_0015, sizes, 1 << 5 | (bar0 // MB).bit_length() - 1 << 8)
        gpu.writable[0x108] = 0x3F00
        gpu.rebar_ctrl = 0x108
    functions[(4, 0, 0)] = gpu
    return functions


class FakeBridge:
    """Responder implementing the vendor requests (see the module docstring). Attributes are the device state."""

    def __init__(self, *, functions: dict[tuple[int, int, int], Function] | None = None) -> None:
        self.xdata = bytearray(0x10000)
        self.sram = bytearray(512 * 1024)
        self.functions = default_topology() if functions is None else functions
        # PCIe memory regions (base -> bytes); anything else is unmapped (UR). One region straddles 4 GB.
        self.regions: dict[int, bytearray] = {0x1000_0000: bytearray(0x10000), (1 << 32) - 0x8000: bytearray(0x10000)}
        self.completion: bytes | None = None
        self.armed: dict[str, tuple[int, int]] = {}  # "out"/"in" -> (sram offset, bytes)
        self.stream: tuple[int, int, int] | None = None  # (mode, address, bytes)
        self.ret_status_script: list[int] = []  # ret_status of the next completions (then OK)
        self.cpl_status_override: int | None = None
        self.link_polls_until_up = 0
        self.powered = False
        self.tlps: list[tuple[int, int, int, int]] = []  # (fmt_type, byte_enables, address, value)

    def __call__(self, call: Any) -> Any:
        handler = getattr(self, f"_{call.kind}")
        return handler(call)

    # --- control ---
    def _control_in(self, call: Any) -> bytes:
        if call.request == 0xE4:
            if call.length > 512 or call.value + call.length > 0x10000:
                raise _stall()
            if call.value <= LTSSM < call.value + call.length and self.powered and self.link_polls_until_up:
                self.link_polls_until_up -= 1
                if not self.link_polls_until_up:
                    self.xdata[LTSSM] = 0x78
            return bytes(self.xdata[call.value : call.value + call.length])
        if call.request == 0xF0 and call.length == 8 and self.completion is not None:
            completion, self.completion = self.completion, None
            return completion
        raise _stall()

    def _control_out(self, call: Any) -> None:
        if call.request == 0xE5:
            self.xdata[call.value] = call.index
        elif call.request == 0xF3:
            self.powered = bool(call.value & 1)
            self.xdata[LTSSM] = 0x78 if self.powered and not self.link_polls_until_up else 0x00
        elif call.request == 0xF2:
            self._arm(call.value, call.index)
        elif call.request == 0xF0:
            self._tlp_request(call.value, call.index, call.data)
        else:
            raise _stall()

    def _arm(self, value: int, index: int) -> None:
        sectors, start, count = value & 0x7FFF, index & 0xFF, (index >> 8) or 1
        if not sectors or start + count > 32 or sectors > count * 32:
            raise _stall()
        self.armed["in" if value & 0x8000 else "out"] = (start * 0x4000, sectors * 512)

    # --- bulk ---
    def _bulk_out(self, call: Any) -> None:
        assert call.endpoint == 0x02
        if self.stream is not None and self.stream[0] == 1:
            _, address, nbytes = self.stream
            window = self.window(address, nbytes)
            if len(call.data) != nbytes or window is None:
                raise _timeout()
            self.stream = None
            window[:] = call.data
            return None
        armed = self.armed.pop("out", None)
        if armed is None or armed[1] != len(call.data):
            raise _timeout()
        self.sram[armed[0] : armed[0] + armed[1]] = call.data
        return None

    def _bulk_in(self, call: Any) -> bytes:
        assert call.endpoint == 0x81
        if self.stream is not None and self.stream[0] == 2:
            _, address, nbytes = self.stream
            window = self.window(address, nbytes)
            if call.length != nbytes or window is None:
                raise _timeout()
            self.stream = None
            return bytes(window)
        armed = self.armed.pop("in", None)
        if armed is None or armed[1] != call.length:
            raise _timeout()
        return bytes(self.sram[armed[0] : armed[0] + armed[1]])

    # --- TLPs ---
    def _tlp_request(self, value: int, mode: int, data: bytes) -> None:
        fmt_type, enables = value & 0xFF, value >> 8
        addr_lo, addr_hi, word = struct.unpack("<III", data)
        address = addr_hi << 32 | addr_lo
        self.stream = None  # a new 0xF0 OUT cancels an in-flight stream
        if mode in (1, 2):
            self.stream = (mode, address, word * 4)
            return
        self.tlps.append((fmt_type, enables, address, word))
        status, result = self._execute(fmt_type, enables, address, word)
        posted = fmt_type in (0x40, 0x60) or fmt_type & 0x18 == 0x10
        if posted:
            self.completion = None
            return
        ret_status = self.ret_status_script.pop(0) if self.ret_status_script else 0
        if self.cpl_status_override is not None:
            status = self.cpl_status_override
        if ret_status or status:
            result = 0
        self.completion = struct.pack("<IBBxB", result, status << 5, bin(enables).count("1"), ret_status)

    def _execute(self, fmt_type: int, enables: int, address: int, word: int) -> tuple[int, int]:
        if fmt_type in (0x04, 0x05, 0x44, 0x45):
            function = self._route_config(fmt_type & 1, address)
            if function is None:
                return 0b001, 0
            reg = address & 0xFFC
            if fmt_type & 0x40:
                function.write(reg, word, enables)
                return 0, 0
            return 0, function.read(reg)
        if fmt_type in (0x00, 0x20, 0x40, 0x60):
            window = self.window(address, 4)
            if window is None:
                return 0b001, 0
            mask = sum(0xFF << (8 * lane) for lane in range(4) if enables >> lane & 1)
            current = int.from_bytes(window, "little")
            if fmt_type & 0x40:
                window[:] = (current & ~mask | word & mask).to_bytes(4, "little")
                return 0, 0
            return 0, current & mask
        return 0b001, 0

    def window(self, address: int, nbytes: int) -> memoryview | None:
        """The bytes ``[address, address + nbytes)`` of one memory region, or None when unmapped."""
        for base, region in self.regions.items():
            if base <= address and address + nbytes <= base + len(region):
                return memoryview(region)[address - base : address - base + nbytes]
        return None

    def _route_config(self, type1: int, address: int) -> Function | None:
        bus, dev, fn = address >> 24 & 0xFF, address >> 19 & 0x1F, address >> 16 & 0x7
        if (bus == 0) == bool(type1):
            return None
        for upstream in range(bus):  # every bridge above must forward this bus
            bridge = self.functions.get((upstream, 0, 0))
            if bridge is None:
                return None
            secondary, subordinate = bridge.space[0x19], bridge.space[0x1A]
            if not secondary <= bus <= subordinate or secondary != upstream + 1:
                return None
        return self.functions.get((bus, dev, fn))
