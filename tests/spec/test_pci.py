"""spec/pci.py is the one home of the standard PCI layout: its values (Linux pci_regs.h) and no copy elsewhere."""

from __future__ import annotations

from tinyhil.spec import asm2464, pci
from tinyhil.spec.pci import Command, Config, Rebar


def test_register_offsets_and_bits_are_the_standard_ones() -> None:
    assert (Config.VENDOR_ID, Config.COMMAND, Config.HEADER_TYPE, Config.BASE_ADDRESS_0) == (0x00, 0x04, 0x0E, 0x10)
    assert (Config.PRIMARY_BUS, Config.MEMORY_BASE, Config.PREF_MEMORY_BASE, Config.PREF_LIMIT_UPPER32) == (
        0x18,
        0x20,
        0x24,
        0x2C,
    )
    assert Command.IO | Command.MEMORY | Command.MASTER == 0x7
    assert (Rebar.CAP, Rebar.CTRL, pci.REBAR_ENTRY_BYTES) == (0x04, 0x08, 8)


def test_masks_agree_with_their_fields() -> None:
    assert pci.BAR_MEM_ADDRESS_MASK | 0xF == 0xFFFF_FFFF and pci.BAR_MEM_TYPE_MASK & pci.BarBits.TYPE_64
    assert pci.REBAR_CTRL_NBAR_MASK >> pci.REBAR_CTRL_NBAR_SHIFT == 0x7
    assert pci.REBAR_CTRL_BAR_SIZE_MASK >> pci.REBAR_CTRL_BAR_SIZE_SHIFT == 0x3F
    assert pci.HEADER_TYPE_BRIDGE & pci.HEADER_TYPE_LAYOUT_MASK == pci.HEADER_TYPE_BRIDGE
    assert pci.BRIDGE_WINDOW_ALIGN == pci.REBAR_MIN_SIZE_BYTES == 1 << 20


def test_the_bridge_spec_module_keeps_no_copy_of_the_pci_layout() -> None:
    copies = [name for name in asm2464.__all__ if name.startswith(("PCI_", "Pci"))]
    assert copies == [], f"PCI layout names belong in tinyhil.spec.pci, found {copies} in tinyhil.spec.asm2464"
