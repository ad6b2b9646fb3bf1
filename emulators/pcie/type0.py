"""The type-0 (endpoint) configuration header: BARs with standard sizing and a resizable-BAR capability at 0x100.

Reuse it for any endpoint model (the GPU function uses it)::

    config = Type0Config(vendor_id=0x1002, device_id=0x744C, class_code=0x030000, bars={
        0: BarSpec(256 << 20, is_64bit=True, prefetchable=True, resizable_sizes=(256 << 20, 512 << 20)),
        2: BarSpec(8 << 10, is_64bit=True, prefetchable=True),
        5: BarSpec(2 << 20),
    })
    config.decode(addr, nbytes)  # -> (bar, offset) once the host assigned BARs and set COMMAND.MEMORY
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.emulators.pcie.config import ConfigSpace
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import RESIZABLE_BAR_CAP_OFFSET
from tinyhil.spec.pci import (
    BAR_COUNT_TYPE0,
    EXT_CAP_ID_REBAR,
    HEADER_TYPE_NORMAL,
    REBAR_CTRL_BAR_SIZE_MASK,
    REBAR_CTRL_BAR_SIZE_SHIFT,
    REBAR_CTRL_NBAR_SHIFT,
    REBAR_MIN_SIZE_BYTES,
    REBAR_SIZES_SHIFT,
    BarBits,
    Command,
    Config,
)

__all__ = ["BarSpec", "Type0Config", "Type0Function"]

_MIN_MEMORY_BAR_BYTES: Final = 16
_BAR_TYPE_MASK: Final = 0xF
_U32: Final = 0xFFFFFFFF
_REBAR_VERSION: Final = 1
_REBAR_ENTRY_BYTES: Final = 8


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True, slots=True)
class BarSpec:
    """One memory BAR: its power-on size in bytes, width, prefetchability and (if resizable) the supported sizes."""

    size_bytes: int
    is_64bit: bool = False
    prefetchable: bool = False
    resizable_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_int("size_bytes", self.size_bytes, min_value=_MIN_MEMORY_BAR_BYTES)
        if not _is_power_of_two(self.size_bytes):
            raise InvalidArgument(f"size_bytes={self.size_bytes:#x}, expected a power of two >= 16")
        if not self.is_64bit and self.size_bytes > 1 << 31:
            raise InvalidArgument(f"size_bytes={self.size_bytes:#x}, expected <= 2 GB for a 32-bit BAR")
        for size in self.resizable_sizes:
            if not (_is_power_of_two(size) and size >= REBAR_MIN_SIZE_BYTES) or (not self.is_64bit and size > 1 << 31):
                raise InvalidArgument(f"resizable size {size:#x}, expected a power of two >= 1 MB that fits the BAR")
        if self.resizable_sizes and self.size_bytes not in self.resizable_sizes:
            raise InvalidArgument(
                f"size_bytes={self.size_bytes:#x} is not among resizable_sizes "
                f"{[hex(s) for s in self.resizable_sizes]}, expected the power-on size to be supported"
            )

    @property
    def type_bits(self) -> int:
        """The read-only low bits of the BAR's first dword."""
        return int((BarBits.TYPE_64 if self.is_64bit else 0) | (BarBits.PREFETCH if self.prefetchable else 0))


class Type0Config(ConfigSpace):
    """A type-0 header with up to six memory BARs and, if any BAR is resizable, a resizable-BAR capability.

    ==============  ==========================================================  ==================
    offset          meaning                                                     source
    ==============  ==========================================================  ==================
    0x10-0x27       BAR0-BAR5; a 64-bit BAR uses the next dword for bits 63:32  PCI 3.0 6.2.5.1
    0x100           resizable-BAR extended capability header (ID 0x15)          PCIe 4.0 7.8.6
    0x104 + 8i      entry i capability: bit n set = size 1 MB << (n-4) works     PCIe 4.0 7.8.6.2
    0x108 + 8i      entry i control: BAR index, #BARs, size (bits 13:8)         PCIe 4.0 7.8.6.3
    ==============  ==========================================================  ==================

    BAR sizing is standard: writing all ones reads back ``~(size - 1)`` with the type bits. A resize through the
    control dword changes what sizing reports and clears the BAR's address bits below the new size; an unsupported
    size written to the control dword is ignored.
    """

    def __init__(
        self,
        *,
        vendor_id: int,
        device_id: int,
        class_code: int,
        bars: Mapping[int, BarSpec],
        revision: int = 0,
        subsystem_vendor_id: int = 0,
        subsystem_id: int = 0,
    ) -> None:
        self.bar_specs = dict(sorted(bars.items()))
        for index, spec in self.bar_specs.items():
            check_int("BAR index", index, min_value=0, max_value=BAR_COUNT_TYPE0 - 1)
            if spec.is_64bit and (index == BAR_COUNT_TYPE0 - 1 or index + 1 in self.bar_specs):
                raise InvalidArgument(f"64-bit BAR{index} needs BAR{index + 1} free for its upper dword")
        self.resizable = [i for i, spec in self.bar_specs.items() if spec.resizable_sizes]
        self.subsystem_vendor_id = subsystem_vendor_id
        self.subsystem_id = subsystem_id
        super().__init__(
            vendor_id=vendor_id,
            device_id=device_id,
            class_code=class_code,
            header_type=HEADER_TYPE_NORMAL,
            revision=revision,
        )

    def _build(self) -> None:
        super()._build()
        self._set(Config.SUBSYSTEM_VENDOR_ID, self.subsystem_vendor_id, 2)
        self._set(Config.SUBSYSTEM_ID, self.subsystem_id, 2)
        self.bar_sizes = {i: spec.size_bytes for i, spec in self.bar_specs.items()}
        for index, spec in self.bar_specs.items():
            self._set(Config.BASE_ADDRESS_0 + 4 * index, spec.type_bits, 4)
            self._apply_bar_mask(index)
        if self.resizable:
            header = EXT_CAP_ID_REBAR | _REBAR_VERSION << 16  # next capability offset 0: the list ends here
            self._set(RESIZABLE_BAR_CAP_OFFSET, header, 4)
            for entry, index in enumerate(self.resizable):
                supported = 0
                for size in self.bar_specs[index].resizable_sizes:
                    supported |= 1 << (self._size_code(size) + REBAR_SIZES_SHIFT)
                self._set(self._rebar_cap_reg(entry), supported, 4)
                nbars = len(self.resizable) << REBAR_CTRL_NBAR_SHIFT if entry == 0 else 0
                code = self._size_code(self.bar_sizes[index]) << REBAR_CTRL_BAR_SIZE_SHIFT
                self._set(self._rebar_ctrl_reg(entry), index | nbars | code, 4)
                self._set_writable(self._rebar_ctrl_reg(entry), REBAR_CTRL_BAR_SIZE_MASK, 4)

    @staticmethod
    def _size_code(size: int) -> int:
        return (size // REBAR_MIN_SIZE_BYTES).bit_length() - 1

    @staticmethod
    def _rebar_cap_reg(entry: int) -> int:
        return RESIZABLE_BAR_CAP_OFFSET + 4 + _REBAR_ENTRY_BYTES * entry

    @staticmethod
    def _rebar_ctrl_reg(entry: int) -> int:
        return RESIZABLE_BAR_CAP_OFFSET + 8 + _REBAR_ENTRY_BYTES * entry

    def _apply_bar_mask(self, index: int) -> None:
        """Make the BAR's address bits below its current size read-only zero."""
        size = self.bar_sizes[index]
        reg = Config.BASE_ADDRESS_0 + 4 * index
        low_mask = ~(size - 1) & _U32 & ~_BAR_TYPE_MASK
        self._set_writable(reg, low_mask, 4)
        self._set(reg, self.read(reg, 4) & low_mask | self.bar_specs[index].type_bits, 4)
        if self.bar_specs[index].is_64bit:
            high_mask = ~((size - 1) >> 32) & _U32
            self._set_writable(reg + 4, high_mask, 4)
            self._set(reg + 4, self.read(reg + 4, 4) & high_mask, 4)

    def _written(self, reg: int, byte_enable: int) -> None:
        for entry, index in enumerate(self.resizable):
            if reg == self._rebar_ctrl_reg(entry):
                code = (self.read(reg, 4) & REBAR_CTRL_BAR_SIZE_MASK) >> REBAR_CTRL_BAR_SIZE_SHIFT
                size = REBAR_MIN_SIZE_BYTES << code
                if size in self.bar_specs[index].resizable_sizes:
                    self.bar_sizes[index] = size
                    self._apply_bar_mask(index)
                else:  # unsupported size: the field keeps the current size
                    current = self._size_code(self.bar_sizes[index]) << REBAR_CTRL_BAR_SIZE_SHIFT
                    self._set(reg, self.read(reg, 4) & ~REBAR_CTRL_BAR_SIZE_MASK | current, 4)

    # --- decoding ---
    def bar_base(self, index: int) -> int:
        """The bus address programmed into BAR ``index`` (0 when unassigned)."""
        if index not in self.bar_specs:
            raise InvalidArgument(f"BAR{index} is not implemented, expected one of {list(self.bar_specs)}")
        reg = Config.BASE_ADDRESS_0 + 4 * index
        base = self.read(reg, 4) & ~_BAR_TYPE_MASK
        if self.bar_specs[index].is_64bit:
            base |= self.read(reg + 4, 4) << 32
        return base

    def bar_size(self, index: int) -> int:
        """The current size in bytes of BAR ``index`` (after any resize)."""
        if index not in self.bar_specs:
            raise InvalidArgument(f"BAR{index} is not implemented, expected one of {list(self.bar_specs)}")
        return self.bar_sizes[index]

    def decode(self, addr: int, nbytes: int) -> tuple[int, int] | None:
        """Which ``(bar, offset)`` a memory request to ``[addr, addr + nbytes)`` hits, or ``None``.

        A BAR decodes only with COMMAND.MEMORY set and a non-zero base; the request must lie inside one BAR.
        """
        for index, base, size in self.decoding_bars():
            if base <= addr and addr + nbytes <= base + size:
                return index, addr - base
        return None

    def decoding_bars(self) -> list[tuple[int, int, int]]:
        """The BARs that decode now as ``(bar, base, size)``, in BAR order (none while COMMAND.MEMORY is clear)."""
        if not self.command & Command.MEMORY:
            return []
        bars = ((index, self.bar_base(index), self.bar_sizes[index]) for index in self.bar_specs)
        return [(index, base, size) for index, base, size in bars if base]

    def describe_bars(self) -> str:
        """The BARs as ``BAR0=0x...+0x...`` for error messages."""
        return ", ".join(f"BAR{i}={self.bar_base(i):#x}+{self.bar_sizes[i]:#x}" for i in self.bar_specs) or "none"


class Type0Function:
    """Base of a PCIe function whose config space is a :class:`Type0Config` (set ``_config`` in ``__init__``):
    the ``config`` property and the function's config reads and writes go to it."""

    _config: Type0Config

    @property
    def config(self) -> Type0Config:
        return self._config

    def config_read(self, reg: int) -> int:
        return self._config.config_read(reg)

    def config_write(self, reg: int, value: int, byte_enable: int) -> None:
        self._config.config_write(reg, value, byte_enable)
