"""A tiny host for the bridge tests: raw vendor requests through the device front, and a bridge bring-up made of
raw 0xF0 config requests (the real bring-up is the driver's; this one only needs to be correct)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from tinyhil.emulators.asm2464 import Asm2464, Urb
from tinyhil.spec.asm2464 import FmtType

GPU_BARS = {0: 0x8_0000_0000, 2: 0x8_1000_0000, 5: 0xE000_0000}
SECOND_NS = 1_000_000_000


class Host:
    """Drives one emulated board through its USB front, synchronously."""

    def __init__(self, bridge: Asm2464 | None = None, **options: Any) -> None:
        self.bridge = bridge if bridge is not None else Asm2464(**options)
        self.front = self.bridge.front

    def out(self, request: int, value: int = 0, index: int = 0, data: bytes = b"", timeout_ns: int = SECOND_NS) -> Urb:
        urb = Urb(0, len(data), timeout_ns, setup=(0x40, request, value, index), payload=memoryview(data))
        return self.front.transfer(urb)

    def inp(self, request: int, length: int, value: int = 0, index: int = 0, timeout_ns: int = SECOND_NS) -> bytes:
        return self.front.transfer(Urb(0, length, timeout_ns, setup=(0xC0, request, value, index))).data

    def bulk_out(self, data: bytes, timeout_ns: int = SECOND_NS) -> Urb:
        return self.front.transfer(Urb(0x02, len(data), timeout_ns, payload=memoryview(data)))

    def bulk_in(self, length: int, timeout_ns: int = SECOND_NS) -> bytes:
        return self.front.transfer(Urb(0x81, length, timeout_ns)).data

    def xdata(self, addr: int, length: int) -> bytes:
        return b"".join(self.inp(0xE4, min(512, length - o), addr + o) for o in range(0, length, 512))

    def arm(self, start_slot: int, slots: int, sectors: int, *, device_to_host: bool = False) -> None:
        self.out(0xF2, sectors | (0x8000 if device_to_host else 0), start_slot | slots << 8)

    def power_on(self) -> None:
        self.out(0xF3, 1)

    def tlp(self, fmt: int, addr: int, value: int = 0, byte_enable: int = 0xF, mode: int = 0) -> None:
        self.out(0xF0, fmt | byte_enable << 8, mode, struct.pack("<III", addr & 0xFFFFFFFF, addr >> 32, value))

    def completion(self) -> tuple[int, int, int]:
        data = self.inp(0xF0, 8)
        return struct.unpack_from("<I", data)[0], data[4] >> 5, data[7]

    def cfg(self, bus: int, reg: int, value: int | None = None, size: int = 4) -> tuple[int, int]:
        """One config request to bus:00.0 (type 0 on bus 0, type 1 above): ``(value, cpl_status)``."""
        offset = reg & 3
        fmt = (FmtType.CFGWR0 if value is not None else FmtType.CFGRD0) | int(bus > 0)
        self.tlp(fmt, bus << 24 | (reg & 0xFFC), (value or 0) << (8 * offset), ((1 << size) - 1) << offset)
        data, cpl, _ret = self.completion()
        return data >> (8 * offset) & ((1 << (8 * size)) - 1), cpl

    def program_bridges(self) -> None:
        """Bus numbers, windows (non-prefetchable 0xE0000000-0xEFFFFFFF, prefetchable 0x8_00000000-0x8_FFFFFFFF)
        and COMMAND IO|MEM|MASTER on bridges 0-3, then the endpoint's BARs and COMMAND MEM|MASTER."""
        for bus in range(4):
            for reg, value, size in (
                (0x18, bus, 1),
                (0x19, bus + 1, 1),
                (0x1A, 4, 1),
                (0x20, 0xE000, 2),
                (0x22, 0xEFF0, 2),
                (0x24, 0x0000, 2),
                (0x26, 0xFFF0, 2),
                (0x28, 0x8, 4),
                (0x2C, 0x8, 4),
                (0x04, 0x7, 2),
            ):
                assert self.cfg(bus, reg, value, size)[1] == 0, f"bridge {bus} reg {reg:#x}"

    def assign_bars(self) -> None:
        for bar, addr in GPU_BARS.items():
            self.cfg(4, 0x10 + 4 * bar, addr & 0xFFFFFFFF)
            if addr >> 32:
                self.cfg(4, 0x14 + 4 * bar, addr >> 32)
        self.cfg(4, 0x04, 0x6, 2)

    def bring_up(self) -> None:
        self.power_on()
        self.program_bridges()
        self.assign_bars()


@pytest.fixture(scope="session")
def make_host() -> type[Host]:
    """The Host class (session-scoped so hypothesis tests can build fresh boards per example)."""
    return Host
