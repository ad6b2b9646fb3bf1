"""PCIe bring-up of the GPU behind the bridge with configuration TLPs alone (docs/asm2464.md "PCIe behind the bridge").

Buses 0-3 each hold a bridge at device 0, function 0; the GPU is 4:00.0 and answers only once every bridge above
it forwards its bus and its memory ranges. The sequence:

1. power PCIe on and wait for the link (LTSSM L0);
2. from the root down, give each bridge its bus numbers (primary ``b``, secondary ``b + 1``, subordinate 4), so
   type-1 configuration requests reach the next bus;
3. on the GPU, turn memory decode off, size every BAR the standard way (write ``0xFFFFFFFF``, read back
   ``~(size - 1)`` with the type bits; a 64-bit BAR takes two dwords; an I/O BAR gets its old value back),
   resize BAR0 to the largest size its resizable-BAR capability offers (extended capability list from
   ``0x100``), and size BAR0 again;
4. assign addresses, largest BAR first, each aligned to its size: 64-bit prefetchable BARs from ``pref_base``,
   the others below 4 GB from ``mem_base``; program them and read them back;
5. open the same memory and prefetchable windows (1 MB granular, an unused window closed with base > limit) on
   every bridge and set its COMMAND to IO|MEM|MASTER; set the GPU's COMMAND to MEM|MASTER;
6. read the GPU's vendor and device id through configuration space.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.align import round_down, round_up
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.topology import PcieBar, PcieBridge, PcieTopology, PcieWindow
from tinyhil.errors import DeviceError, InvalidArgument
from tinyhil.spec.asm2464 import GPU_BUS, RESIZABLE_BAR_CAP_OFFSET
from tinyhil.spec.pci import (
    BAR_COUNT_TYPE0,
    BAR_MEM_ADDRESS_MASK,
    BAR_MEM_TYPE_MASK,
    BRIDGE_WINDOW_ALIGN,
    EXT_CAP_ID_MASK,
    EXT_CAP_ID_REBAR,
    EXT_CAP_NEXT_MASK,
    EXT_CAP_NEXT_SHIFT,
    HEADER_TYPE_BRIDGE,
    HEADER_TYPE_LAYOUT_MASK,
    REBAR_CTRL_BAR_INDEX_MASK,
    REBAR_CTRL_BAR_SIZE_MASK,
    REBAR_CTRL_BAR_SIZE_SHIFT,
    REBAR_CTRL_NBAR_MASK,
    REBAR_CTRL_NBAR_SHIFT,
    REBAR_ENTRY_BYTES,
    REBAR_MIN_SIZE_BYTES,
    REBAR_SIZES_SHIFT,
    VENDOR_ID_AMD,
    BarBits,
    Command,
    Config,
    Rebar,
)

__all__ = ["DEFAULT_MEM_BASE", "DEFAULT_PREF_BASE", "pcie_bringup"]

DEFAULT_MEM_BASE: Final = 0x1000_0000  # 32-bit BARs: clear of the bridge's own PCIe addresses (0x200000-0x822FFF)
DEFAULT_PREF_BASE: Final = 0x1_0000_0000  # 64-bit prefetchable BARs (VRAM): above 4 GB
U32_MASK: Final = 0xFFFF_FFFF
U16_ALL_ONES: Final = 0xFFFF  # vendor id of an absent function
ADDR32_LIMIT: Final = 1 << 32
BAR_BYTES: Final = 4
WINDOW_FIELD_SHIFT: Final = 16  # a window register holds address bits 31:20 in its bits 15:4
WINDOW_FIELD_MASK: Final = 0xFFF0
CLOSED_WINDOW: Final = WINDOW_FIELD_MASK  # base 0xFFF00000 > limit 0x000FFFFF
BRIDGE_COMMAND: Final = Command.IO | Command.MEMORY | Command.MASTER
GPU_COMMAND: Final = Command.MEMORY | Command.MASTER


@dataclass(frozen=True, slots=True)
class _Sized:
    index: int
    size: int
    is_64bit: bool
    prefetchable: bool


def pcie_bringup(
    controller: Asm2464Controller,
    *,
    power_on: bool = True,
    link_timeout_s: float = 1.0,
    gpu_bus: int = GPU_BUS,
    mem_base: int = DEFAULT_MEM_BASE,
    pref_base: int = DEFAULT_PREF_BASE,
    expected_vendor: int | None = VENDOR_ID_AMD,
) -> PcieTopology:
    """Program the bridges on buses ``0..gpu_bus-1`` and the GPU at ``gpu_bus:00.0``; return what was set up.

    Raises:
        DeviceTimeout: the PCIe link did not come up.
        PcieError: a configuration request failed (UR on a bus no bridge forwards, CRS while the GPU boots, ...).
        DeviceError: a bridge missing or not a bridge, a malformed BAR, BARs that do not fit below 4 GB, or a GPU
            vendor id other than ``expected_vendor`` (``None`` accepts any).
    """
    check_int("gpu_bus", gpu_bus, min_value=1, max_value=0xFF)
    check_int("mem_base", mem_base, min_value=BRIDGE_WINDOW_ALIGN, max_value=ADDR32_LIMIT - 1)
    check_int("pref_base", pref_base, min_value=BRIDGE_WINDOW_ALIGN)
    for name, base in (("mem_base", mem_base), ("pref_base", pref_base)):
        if base % BRIDGE_WINDOW_ALIGN:
            raise InvalidArgument(f"{name}={base:#x}, expected a multiple of {BRIDGE_WINDOW_ALIGN:#x} (1 MB)")
    if power_on:
        controller.set_pcie_power(True)
    controller.wait_pcie_link(link_timeout_s)
    for bus in range(gpu_bus):
        _check_bridge(controller, bus)
        controller.pcie_cfg_write(bus, 0, 0, Config.PRIMARY_BUS, bus | (bus + 1) << 8 | gpu_bus << 16)

    gpu = (gpu_bus, 0, 0)
    if controller.pcie_cfg_read(*gpu, Config.VENDOR_ID, 2) == U16_ALL_ONES:
        raise DeviceError(f"no function answers at {gpu_bus}:00.0 (vendor id 0xffff)", op="pcie_bringup")
    controller.pcie_cfg_write(*gpu, Config.COMMAND, 0, 2)  # no decode while BARs move
    sized = _size_bars(controller, gpu)
    rebar_size = _resize_bar0(controller, gpu)
    if rebar_size is not None:
        sized = _size_bars(controller, gpu)
        bar0 = next((s for s in sized if s.index == 0), None)
        if bar0 is None or bar0.size != rebar_size:
            raise DeviceError(
                f"BAR0 of {gpu_bus}:00.0 sizes as {bar0.size if bar0 else 0:#x} after resizing it to {rebar_size:#x}",
                op="pcie_bringup",
            )
    bars = _assign(sized, mem_base, pref_base)
    for bar in bars:
        _program_bar(controller, gpu, bar)
    memory = _window([b for b in bars if not _in_pref(b)])
    prefetchable = _window([b for b in bars if _in_pref(b)])
    bridges = tuple(_program_bridge(controller, bus, gpu_bus, memory, prefetchable) for bus in range(gpu_bus))
    controller.pcie_cfg_write(*gpu, Config.COMMAND, int(GPU_COMMAND), 2)

    vendor_id = controller.pcie_cfg_read(*gpu, Config.VENDOR_ID, 2)
    device_id = controller.pcie_cfg_read(*gpu, Config.DEVICE_ID, 2)
    if expected_vendor is not None and vendor_id != expected_vendor:
        raise DeviceError(
            f"GPU at {gpu_bus}:00.0 has vendor id {vendor_id:#06x}, expected {expected_vendor:#06x}", op="pcie_bringup"
        )
    ordered = tuple(sorted(bars, key=lambda b: b.index))
    return PcieTopology(gpu_bus, 0, 0, vendor_id, device_id, ordered, bridges, rebar_size)


def _check_bridge(controller: Asm2464Controller, bus: int) -> None:
    vendor = controller.pcie_cfg_read(bus, 0, 0, Config.VENDOR_ID, 2)
    header = controller.pcie_cfg_read(bus, 0, 0, Config.HEADER_TYPE, 1) & HEADER_TYPE_LAYOUT_MASK
    if vendor == U16_ALL_ONES or header != HEADER_TYPE_BRIDGE:
        raise DeviceError(
            f"{bus}:00.0 has vendor id {vendor:#06x} and header type {header:#04x}, expected a bridge (header type "
            f"{HEADER_TYPE_BRIDGE:#04x}) on every bus above the GPU",
            op="pcie_bringup",
        )


def _size_bars(controller: Asm2464Controller, gpu: tuple[int, int, int]) -> list[_Sized]:
    found: list[_Sized] = []
    index = 0
    while index < BAR_COUNT_TYPE0:
        reg = Config.BASE_ADDRESS_0 + BAR_BYTES * index
        original = controller.pcie_cfg_read(*gpu, reg)
        controller.pcie_cfg_write(*gpu, reg, U32_MASK)
        low = controller.pcie_cfg_read(*gpu, reg)
        if low & BarBits.SPACE_IO:
            controller.pcie_cfg_write(*gpu, reg, original)  # I/O space: no bridge here routes it; leave it be
        if not low or low & BarBits.SPACE_IO:
            index += 1
            continue
        is_64bit = low & BAR_MEM_TYPE_MASK == BarBits.TYPE_64
        mask = low & BAR_MEM_ADDRESS_MASK
        width = 32
        if is_64bit:
            if index + 1 >= BAR_COUNT_TYPE0:
                raise DeviceError(f"BAR{index} of {_bdf(gpu)} is 64-bit but is the last BAR", op="pcie_bringup")
            controller.pcie_cfg_write(*gpu, reg + BAR_BYTES, U32_MASK)
            mask |= controller.pcie_cfg_read(*gpu, reg + BAR_BYTES) << 32
            width = 64
        size = (~mask & ((1 << width) - 1)) + 1
        if not mask or size & (size - 1):
            raise DeviceError(
                f"BAR{index} of {_bdf(gpu)} reads back {mask:#x} after writing all ones, expected ~(size - 1) for a "
                "power-of-two size",
                op="pcie_bringup",
            )
        prefetchable = bool(low & BarBits.PREFETCH)
        found.append(_Sized(index, size, is_64bit, prefetchable))
        index += 2 if is_64bit else 1
    return found


def _find_rebar(controller: Asm2464Controller, gpu: tuple[int, int, int]) -> int | None:
    offset = RESIZABLE_BAR_CAP_OFFSET
    seen: set[int] = set()
    while offset >= RESIZABLE_BAR_CAP_OFFSET and offset not in seen:
        seen.add(offset)
        header = controller.pcie_cfg_read(*gpu, offset)
        if header in (0, U32_MASK):
            return None
        if header & EXT_CAP_ID_MASK == EXT_CAP_ID_REBAR:
            return offset
        offset = header >> EXT_CAP_NEXT_SHIFT & EXT_CAP_NEXT_MASK
    return None


def _resize_bar0(controller: Asm2464Controller, gpu: tuple[int, int, int]) -> int | None:
    """Set BAR0 to the largest size its resizable-BAR entry supports; returns that size (None: no entry)."""
    cap = _find_rebar(controller, gpu)
    if cap is None:
        return None
    first_ctrl = controller.pcie_cfg_read(*gpu, cap + Rebar.CTRL)
    entries = max(1, (first_ctrl & REBAR_CTRL_NBAR_MASK) >> REBAR_CTRL_NBAR_SHIFT)
    for entry in range(entries):
        ctrl_reg = cap + Rebar.CTRL + entry * REBAR_ENTRY_BYTES
        ctrl = first_ctrl if entry == 0 else controller.pcie_cfg_read(*gpu, ctrl_reg)
        if ctrl & REBAR_CTRL_BAR_INDEX_MASK != 0:
            continue
        sizes = controller.pcie_cfg_read(*gpu, cap + Rebar.CAP + entry * REBAR_ENTRY_BYTES)
        sizes >>= REBAR_SIZES_SHIFT
        if not sizes:
            raise DeviceError(f"resizable-BAR entry for BAR0 of {_bdf(gpu)} lists no supported size", op="pcie_bringup")
        code = sizes.bit_length() - 1
        controller.pcie_cfg_write(
            *gpu, ctrl_reg, (ctrl & ~REBAR_CTRL_BAR_SIZE_MASK) | code << REBAR_CTRL_BAR_SIZE_SHIFT
        )
        return REBAR_MIN_SIZE_BYTES << code
    return None


def _in_pref(bar: _Sized | PcieBar) -> bool:
    return bar.is_64bit and bar.prefetchable


def _assign(sized: list[_Sized], mem_base: int, pref_base: int) -> list[PcieBar]:
    cursors = {False: mem_base, True: pref_base}
    bars: list[PcieBar] = []
    for bar in sorted(sized, key=lambda s: (-s.size, s.index)):
        region = _in_pref(bar)
        address = round_up(cursors[region], bar.size)
        cursors[region] = address + bar.size
        if not region and cursors[region] > ADDR32_LIMIT:
            raise DeviceError(
                f"BAR{bar.index} ({bar.size:#x} bytes) does not fit below 4 GB from mem_base {mem_base:#x}",
                op="pcie_bringup",
            )
        bars.append(PcieBar(bar.index, address, bar.size, bar.is_64bit, bar.prefetchable))
    return bars


def _program_bar(controller: Asm2464Controller, gpu: tuple[int, int, int], bar: PcieBar) -> None:
    reg = Config.BASE_ADDRESS_0 + BAR_BYTES * bar.index
    controller.pcie_cfg_write(*gpu, reg, bar.address & U32_MASK)
    if bar.is_64bit:
        controller.pcie_cfg_write(*gpu, reg + BAR_BYTES, bar.address >> 32)
    got = controller.pcie_cfg_read(*gpu, reg) & BAR_MEM_ADDRESS_MASK
    if bar.is_64bit:
        got |= controller.pcie_cfg_read(*gpu, reg + BAR_BYTES) << 32
    if got != bar.address:
        raise DeviceError(
            f"BAR{bar.index} of {_bdf(gpu)} reads back {got:#x} after assigning {bar.address:#x}", op="pcie_bringup"
        )


def _window(bars: list[PcieBar]) -> PcieWindow | None:
    if not bars:
        return None
    base = round_down(min(b.address for b in bars), BRIDGE_WINDOW_ALIGN)
    return PcieWindow(base, round_up(max(b.end for b in bars), BRIDGE_WINDOW_ALIGN) - 1)


def _window_fields(window: PcieWindow | None) -> int:
    """The base | limit << 16 dword of a bridge window register pair (address bits 31:20)."""
    if window is None:
        return CLOSED_WINDOW
    base = window.base >> WINDOW_FIELD_SHIFT & WINDOW_FIELD_MASK
    limit = window.limit >> WINDOW_FIELD_SHIFT & WINDOW_FIELD_MASK
    return base | limit << 16


def _program_bridge(
    controller: Asm2464Controller, bus: int, gpu_bus: int, memory: PcieWindow | None, prefetchable: PcieWindow | None
) -> PcieBridge:
    controller.pcie_cfg_write(bus, 0, 0, Config.MEMORY_BASE, _window_fields(memory))
    controller.pcie_cfg_write(bus, 0, 0, Config.PREF_MEMORY_BASE, _window_fields(prefetchable))
    upper_base, upper_limit = (prefetchable.base >> 32, prefetchable.limit >> 32) if prefetchable else (0, 0)
    controller.pcie_cfg_write(bus, 0, 0, Config.PREF_BASE_UPPER32, upper_base)
    controller.pcie_cfg_write(bus, 0, 0, Config.PREF_LIMIT_UPPER32, upper_limit)
    controller.pcie_cfg_write(bus, 0, 0, Config.COMMAND, int(BRIDGE_COMMAND), 2)
    return PcieBridge(bus, 0, 0, bus + 1, gpu_bus, memory, prefetchable)


def _bdf(gpu: tuple[int, int, int]) -> str:
    return f"{gpu[0]}:{gpu[1]:02x}.{gpu[2]}"
