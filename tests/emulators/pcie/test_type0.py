"""Type-0 config space: BAR sizing (32/64-bit, prefetchable), byte enables, the resizable-BAR capability."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import BarSpec, PlainEndpoint, Type0Config
from tinyhil.emulators.pcie.type0 import Type0Function
from tinyhil.errors import InvalidArgument
from tinyhil.spec.pci import EXT_CAP_ID_REBAR, Command, Config

MB = 1 << 20


def make_config() -> Type0Config:
    return Type0Config(
        vendor_id=0x1002,
        device_id=0x744C,
        class_code=0x030000,
        bars={
            0: BarSpec(256 * MB, is_64bit=True, prefetchable=True, resizable_sizes=(64 * MB, 256 * MB, 1024 * MB)),
            2: BarSpec(8 << 10, is_64bit=True, prefetchable=True),
            5: BarSpec(2 * MB),
        },
    )


def size_bar(config: Type0Config, index: int, *, is_64bit: bool) -> int:
    """Standard sizing: write all ones, read back, decode the size from the writable address bits."""
    reg = Config.BASE_ADDRESS_0 + 4 * index
    config.config_write(reg, 0xFFFFFFFF, 0xF)
    low = config.config_read(reg)
    value = low & ~0xF
    if is_64bit:
        config.config_write(reg + 4, 0xFFFFFFFF, 0xF)
        value |= config.config_read(reg + 4) << 32
        return (~value & 0xFFFFFFFFFFFFFFFF) + 1
    return (~value & 0xFFFFFFFF) + 1


def test_identity_and_type_bits() -> None:
    config = make_config()
    assert config.config_read(Config.VENDOR_ID) == 0x744C_1002
    assert config.config_read(Config.BASE_ADDRESS_0) == 0xC  # 64-bit | prefetchable
    assert config.config_read(Config.BASE_ADDRESS_0 + 4 * 5) == 0x0  # 32-bit, not prefetchable
    assert config.config_read(Config.BASE_ADDRESS_0 + 4 * 4) == 0, "unimplemented BARs read as zero"


@pytest.mark.parametrize(("index", "is_64bit", "size"), [(0, True, 256 * MB), (2, True, 8 << 10), (5, False, 2 * MB)])
def test_bar_sizing_reads_back_the_size_with_type_bits(index: int, is_64bit: bool, size: int) -> None:
    config = make_config()
    assert size_bar(config, index, is_64bit=is_64bit) == size
    reg = Config.BASE_ADDRESS_0 + 4 * index
    assert config.config_read(reg) & 0xF == config.bar_specs[index].type_bits
    assert config.config_read(reg) == (~(size - 1) & 0xFFFFFFFF & ~0xF) | config.bar_specs[index].type_bits


def test_unimplemented_bar_ignores_sizing_writes() -> None:
    config = make_config()
    config.config_write(Config.BASE_ADDRESS_0 + 4 * 4, 0xFFFFFFFF, 0xF)
    assert config.config_read(Config.BASE_ADDRESS_0 + 4 * 4) == 0


def test_resizable_bar_capability_layout_and_resize_changes_sizing() -> None:
    config = make_config()
    header = config.config_read(0x100)
    assert header & 0xFFFF == EXT_CAP_ID_REBAR and header >> 16 & 0xF == 1 and header >> 20 == 0
    supported = config.config_read(0x104)
    assert supported == (1 << (6 + 4)) | (1 << (8 + 4)) | (1 << (10 + 4))  # 64 MB, 256 MB, 1 GB
    control = config.config_read(0x108)
    assert control & 0x7 == 0 and control >> 5 & 0x7 == 1 and control >> 8 & 0x3F == 8  # BAR0, 1 BAR, 256 MB
    config.config_write(0x10, 0x1000_0000, 0xF)
    config.config_write(0x108, 10 << 8, 0xF)  # 1 GB
    assert config.bar_size(0) == 1024 * MB and config.config_read(0x108) >> 8 & 0x3F == 10
    assert config.bar_base(0) == 0, "a resize clears address bits below the new size"
    assert size_bar(config, 0, is_64bit=True) == 1024 * MB
    config.config_write(0x108, 6 << 8, 0x2)  # byte enable on lane 1 only: 64 MB
    assert size_bar(config, 0, is_64bit=True) == 64 * MB


def test_unsupported_resize_is_ignored() -> None:
    config = make_config()
    config.config_write(0x108, 7 << 8, 0xF)  # 128 MB is not supported
    assert config.bar_size(0) == 256 * MB and config.config_read(0x108) >> 8 & 0x3F == 8


def test_byte_enables_write_only_their_lanes_and_status_is_write_one_to_clear() -> None:
    config = make_config()
    config.config_write(Config.COMMAND, 0xFFFF_0006, 0x1)
    assert config.command == Command.MEMORY | Command.MASTER
    assert config.read(Config.STATUS, 2) == 0, "lanes 2-3 were not enabled"
    config._regs[Config.STATUS + 1] = 0x20  # received master abort
    config.config_write(Config.COMMAND, 0x2000_0000, 0xC)
    assert config.read(Config.STATUS, 2) == 0 and config.command == Command.MEMORY | Command.MASTER
    config.write(Config.INTERRUPT_LINE, 0x5A, 1)
    assert config.config_read(Config.INTERRUPT_LINE) & 0xFF == 0x5A


def test_decode_needs_memory_enable_and_an_assigned_bar() -> None:
    config = make_config()
    config.config_write(0x24, 0xE000_0000, 0xF)
    assert config.decode(0xE000_0000, 4) is None, "COMMAND.MEMORY is off"
    config.write(Config.COMMAND, int(Command.MEMORY), 2)
    assert config.decode(0xE000_0010, 4) == (5, 0x10)
    assert config.decode(0xE000_0000 + 2 * MB - 2, 4) is None, "straddles the end of BAR5"
    assert config.decode(0x10, 4) is None, "unassigned BARs decode nothing"


@given(st.integers(0, 0xFFFFFFFF), st.integers(0, 0xF))
def test_vendor_and_class_are_read_only(value: int, byte_enable: int) -> None:
    config = make_config()
    config.config_write(0x00, value, byte_enable)
    config.config_write(0x08, value, byte_enable)
    assert config.config_read(0x00) == 0x744C_1002 and config.config_read(0x08) == 0x0300_0000


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.config_read(0x102), "dword-aligned"),
        (lambda c: c.config_read(0x1000), "<= 4092"),
        (lambda c: c.config_write(0x10, 1 << 32, 0xF), "value"),
        (lambda c: c.config_write(0x10, 0, 0x10), "byte_enable"),
        (lambda c: c.write(0x13, 0xFFFF, 2), "within one dword"),
        (lambda c: c.bar_base(1), "BAR1 is not implemented"),
        (lambda c: BarSpec(3000), "power of two"),
        (lambda c: BarSpec(4 << 30), "32-bit BAR"),
        (lambda c: BarSpec(1 << 20, resizable_sizes=(2 << 20,)), "not among resizable_sizes"),
        (lambda c: Type0Config(vendor_id=1, device_id=1, class_code=0, bars={5: BarSpec(16, is_64bit=True)}), "BAR6"),
    ],
)
def test_bad_inputs_raise_typed_errors(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgument, match=match):
        call(make_config())


@pytest.mark.parametrize(
    "make_function", [PlainEndpoint, lambda: Gfx1100Function(kernel=EventKernel(), vram_bytes=64 * MB)]
)
def test_functions_delegate_config_space_to_their_type0_config(make_function) -> None:  # type: ignore[no-untyped-def]
    """The plain endpoint and the GPU's PCIe function share one delegation (``Type0Function``)."""
    function = make_function()
    assert isinstance(function, Type0Function) and isinstance(function.config, Type0Config)
    assert function.config_read(Config.VENDOR_ID) == function.config.config_read(Config.VENDOR_ID)
    assert function.config_read(Config.VENDOR_ID) & 0xFFFF == 0x1002
    function.config_write(Config.COMMAND, Command.MEMORY, 0b0011)
    assert function.config.command & Command.MEMORY
