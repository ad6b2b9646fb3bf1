"""The GPU as a PCIe function behind the bridge (``Gfx1100Function`` over ``BridgedFunction``): config space and BAR
sizing, BAR routing, narrow register accesses, plugging into a bridge and its power cycle."""

from __future__ import annotations

from typing import Any

import pytest

from tinyhil.emulators.amdgpu import BridgedFunction
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.amdgpu.gfx1100.bar5 import Bar5
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PcieFunction, PlainEndpoint
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.amdgpu import Bar
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.spec.pci import Config

VRAM_BYTES = 64 << 20  # the smallest gfx1100 board
PLAIN_REGISTER = 0x1000  # BAR5 byte offset of a dword no block claims: it stores what is written
MEMSIZE = Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE * 4


def _function(vram_bytes: int = VRAM_BYTES) -> Gfx1100Function:
    return Gfx1100Function(kernel=EventKernel(), vram_bytes=vram_bytes)


def _size(function: Gfx1100Function, reg: int) -> int:
    """Standard BAR sizing: write all ones, read back."""
    function.config_write(reg, 0xFFFF_FFFF, 0xF)
    return function.config_read(reg)


def test_it_is_a_bridged_pcie_function_with_navi31_identity() -> None:
    function = _function()
    assert isinstance(function, PcieFunction) and isinstance(function, BridgedFunction)
    assert function.config_read(Config.VENDOR_ID) == 0x744C << 16 | 0x1002
    assert function.config_read(Config.REVISION_ID) >> 8 == 0x030000, "class: VGA display controller"
    assert function.gpu.gfx_target_version == 110000 and function.kernel is function.gpu.kernel


def test_bars_size_as_the_spec_says() -> None:
    function = _function()
    base = Config.BASE_ADDRESS_0
    assert _size(function, base) == (~(VRAM_BYTES - 1) & 0xFFFF_FFF0) | 0xC, "BAR0: 64-bit prefetchable VRAM"
    assert _size(function, base + 4) == 0xFFFF_FFFF, "BAR0's upper dword: below 4 GB of size"
    assert _size(function, base + 8) == (~(8192 - 1) & 0xFFFF_FFF0) | 0xC, "BAR2: 8 KB doorbells, 64-bit"
    assert _size(function, base + 20) == ~((1 << 20) - 1) & 0xFFFF_FFF0, "BAR5: 1 MB registers, 32-bit"


def test_bar0_powers_on_at_256_mb_and_resizes_up_to_the_vram() -> None:
    function = _function(1 << 30)
    config = function.config
    assert config.bar_size(Bar.VRAM) == 256 << 20
    assert config.read(0x104, 4) >> 4 == 0b111 << 8, "supported sizes: 256 MB, 512 MB, 1 GB"
    control = config.read(0x108, 4)
    function.config_write(0x108, control & ~0x3F00 | 10 << 8, 0xF)  # size code 10: 1 MB << 10 = 1 GB
    assert config.bar_size(Bar.VRAM) == 1 << 30


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"vram_bytes": 96 << 20}, r"vram_bytes=0x6000000, expected a power of two >= 64 MB"),
        ({"vram_bytes": 32 << 20}, r"vram_bytes=33554432"),
        ({"kernel": None}, r"kernel=None, expected the EventKernel the bridge runs on"),
    ],
)
def test_bad_constructor_arguments(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"kernel": EventKernel(), "vram_bytes": VRAM_BYTES, **options}
    with pytest.raises(InvalidArgument, match=message):
        Gfx1100Function(**arguments)


def test_bar_accesses_reach_the_gpu() -> None:
    function = _function()
    function.mmio_write(Bar.VRAM, 0x1234, b"vram")
    assert bytes(function.gpu.vram[0x1234:0x1238]) == b"vram" and function.mmio_read(Bar.VRAM, 0x1234, 4) == b"vram"
    assert function.mmio_read(Bar.REGS, MEMSIZE, 4) == (VRAM_BYTES >> 20).to_bytes(4, "little"), "VRAM in MB"
    assert function.mmio_read(Bar.DOORBELL, 0, 8) == bytes(8), "doorbells read 0"


def test_narrow_bar5_accesses_read_and_merge_bytes_of_whole_registers() -> None:
    function = _function()
    assert function.mmio_read(Bar.REGS, MEMSIZE, 1) == bytes([VRAM_BYTES >> 20])
    function.mmio_write(Bar.REGS, PLAIN_REGISTER, (0x11223344).to_bytes(4, "little"))
    function.mmio_write(Bar.REGS, PLAIN_REGISTER + 1, b"\xaa")
    assert function.mmio_read(Bar.REGS, PLAIN_REGISTER, 4) == (0x1122AA44).to_bytes(4, "little")
    assert function.mmio_read(Bar.REGS, PLAIN_REGISTER + 1, 2) == b"\xaa\x22"


def test_a_gpu_plugs_into_one_bridge_and_its_power_cycle_is_a_cold_power_on() -> None:
    kernel = EventKernel()
    assert _function().host is None, "not plugged in until a bridge takes it"
    function = Gfx1100Function(kernel=kernel, vram_bytes=VRAM_BYTES)
    bridge = Asm2464(kernel=kernel, function=function)
    assert function.host is bridge and function.kernel is bridge.kernel
    function.attach_host(bridge)  # the same bridge again is harmless
    with pytest.raises(StateError, match="already plugged into"):
        function.attach_host(Asm2464(function=PlainEndpoint()))
    function.mmio_write(Bar.VRAM, 0, b"old")
    function.mmio_write(Bar.REGS, PLAIN_REGISTER, (7).to_bytes(4, "little"))
    bridge.reset()
    assert bytes(function.gpu.vram[0:3]) == bytes(3) and function.gpu.queues == ()
    assert function.mmio_read(Bar.REGS, PLAIN_REGISTER, 4) == bytes(4), "registers at their reset values"


@pytest.mark.parametrize(
    ("offset", "nbytes", "around"),
    [(8, 4, (8, 12)), (9, 1, (8, 12)), (10, 4, (8, 16)), (7, 9, (4, 16)), (4, 0, (4, 4))],
)
def test_a_register_access_reaches_only_the_whole_registers_around_it(
    offset: int, nbytes: int, around: tuple[int, int]
) -> None:
    registers = bytearray(range(16))
    accesses: list[tuple[str, int, int]] = []

    def read(at: int, count: int) -> bytes:
        accesses.append(("read", at, count))
        return bytes(registers[at : at + count])

    def write(at: int, data: bytes) -> None:
        accesses.append(("write", at, len(data)))
        registers[at : at + len(data)] = data

    assert Bar5.ACCESS.around(offset, nbytes) == around
    Bar5.ACCESS.write(read, write, offset, b"\xff" * nbytes)
    expected = bytearray(range(16))
    expected[offset : offset + nbytes] = b"\xff" * nbytes
    assert registers == expected, "the other bytes of the registers keep their values"
    assert Bar5.ACCESS.read(read, offset, nbytes) == b"\xff" * nbytes
    assert all(at % 4 == 0 and count % 4 == 0 for _, at, count in accesses), accesses
