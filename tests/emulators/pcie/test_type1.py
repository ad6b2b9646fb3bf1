"""Type-1 bridge header: bus numbers, memory windows (incl. the prefetchable upper 32 bits), forwarding."""

from __future__ import annotations

from tinyhil.emulators.pcie import Type1Config
from tinyhil.spec.pci import Command, Config


def bridge() -> Type1Config:
    return Type1Config(vendor_id=0x1B21, device_id=0x2464)


def test_header_type_and_class() -> None:
    config = bridge()
    assert config.read(Config.HEADER_TYPE, 1) == 0x01 and config.read(Config.CLASS_DEVICE, 2) == 0x0604


def test_bus_numbers_route_only_once_programmed() -> None:
    config = bridge()
    assert not config.routes_bus(1)
    config.config_write(0x18, 0x00_04_01_00, 0x7)  # primary 0, secondary 1, subordinate 4
    assert [config.routes_bus(bus) for bus in range(6)] == [False, True, True, True, True, False]


def test_memory_windows_decode_with_memory_enable_and_upper_bits() -> None:
    config = bridge()
    config.write(Config.MEMORY_BASE, 0xE000, 2)
    config.write(Config.MEMORY_LIMIT, 0xE010, 2)
    config.write(Config.PREF_MEMORY_BASE, 0x0000, 2)
    config.write(Config.PREF_MEMORY_LIMIT, 0xFFF0, 2)
    config.write(Config.PREF_BASE_UPPER32, 0x8, 4)
    config.write(Config.PREF_LIMIT_UPPER32, 0x8, 4)
    assert config.read(Config.PREF_MEMORY_BASE, 2) == 0x0001, "64-bit capable bit is read-only"
    assert config.windows() == [(0xE000_0000, 0xE01F_FFFF), (0x8_0000_0000, 0x8_FFFF_FFFF)]
    assert not config.forwards_downstream(0xE000_0000, 4), "COMMAND.MEMORY is off"
    config.write(Config.COMMAND, int(Command.MEMORY), 2)
    assert config.forwards_downstream(0xE01F_FFFC, 4) and not config.forwards_downstream(0xE01F_FFFE, 4)
    assert config.forwards_downstream(0x8_1234_0000, 0x1000) and not config.forwards_downstream(0x9_0000_0000, 4)


def test_upstream_needs_master_and_an_address_outside_the_windows() -> None:
    config = bridge()
    config.write(Config.MEMORY_BASE, 0xE000, 2)
    config.write(Config.MEMORY_LIMIT, 0xE000, 2)
    assert not config.forwards_upstream(0x200000, 4)
    config.write(Config.COMMAND, int(Command.MASTER), 2)
    assert config.forwards_upstream(0x200000, 4) and not config.forwards_upstream(0xE000_0000, 4)


def test_reset_closes_everything() -> None:
    config = bridge()
    config.config_write(0x18, 0x00_04_01_00, 0xF)
    config.write(Config.COMMAND, 0x7, 2)
    config.reset()
    assert config.secondary_bus == 0 and int(config.command) == 0
    # Base and limit reset to 0: the first megabyte is a window (as on real bridges), but decoding is off.
    assert config.windows() == [(0, 0xFFFFF), (0, 0xFFFFF)] and not config.forwards_downstream(0, 4)
