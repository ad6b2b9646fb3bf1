"""The emulated AMD GPU at the level a runtime driver sees it: memory, BARs, queues, SDMA and PM4 packets.

Every name and number cites ``docs/amdgpu.md``. The packet layouts live beside this module: SDMA in
:mod:`tinyhil.spec.amdgpu_sdma`, PM4 in :mod:`tinyhil.spec.amdgpu_pm4`; both use :class:`Field` for bit fields.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = [
    "COMPARE_OPERATORS",
    "DOORBELL_BAR_BYTES",
    "DOORBELL_SLOTS",
    "DOORBELL_SLOT_BYTES",
    "GPU_VA_LIMIT",
    "PAGE_BYTES",
    "PAGE_SHIFT",
    "POLL_INTERVAL_CYCLES",
    "POLL_RETRY_FOREVER",
    "REGS_BAR_BYTES",
    "RING_ALIGN_BYTES",
    "RING_BASE_SHIFT",
    "RING_MAX_BYTES",
    "RING_MIN_BYTES",
    "SYS_APERTURE",
    "TIMESTAMP_HZ",
    "TIMESTAMP_PERIOD_NS",
    "Bar",
    "CompareFunction",
    "Field",
    "QueueKind",
    "RegFields",
    "compare",
]


@dataclass(frozen=True, slots=True)
class Field:
    """A bit field ``[lsb, lsb + width)`` of one little-endian dword."""

    name: str
    lsb: int
    width: int
    max_value: int = dataclasses.field(init=False, repr=False, compare=False)  # the largest value the field holds
    mask: int = dataclasses.field(init=False, repr=False, compare=False)  # the field's bits in place

    def __post_init__(self) -> None:
        if not 0 <= self.lsb < 32 or not 1 <= self.width <= 32 - self.lsb:
            raise InvalidArgument(
                f"field {self.name}: lsb={self.lsb!r} width={self.width!r}, expected bits within 0-31"
            )
        object.__setattr__(self, "max_value", (1 << self.width) - 1)  # decoded on every packet: computed once
        object.__setattr__(self, "mask", self.max_value << self.lsb)

    def get(self, dword: int) -> int:
        """The field's value in ``dword``."""
        return (int(dword) >> self.lsb) & self.max_value

    def put(self, value: int) -> int:
        """``value`` shifted into place.

        Raises:
            InvalidArgument: ``value`` does not fit the field.
        """
        if not isinstance(value, int) or not 0 <= value <= self.max_value:
            raise InvalidArgument(
                f"{self.name}={value!r}, expected an int in 0..{self.max_value:#x} ({self.width} bits)"
            )
        return value << self.lsb


@dataclass(frozen=True, slots=True)
class RegFields:
    """The named bit fields of one register (``register`` names it in errors): a driver writes the register by field
    name through the same :class:`Field` objects a model decodes it with.

    Raises (constructor):
        InvalidArgument: two fields share a name or a bit.
    """

    register: str
    fields: tuple[Field, ...]
    by_name: dict[str, Field] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Field] = {}
        used = 0
        for field in self.fields:
            if field.name in by_name or used & field.mask:
                raise InvalidArgument(
                    f"{self.register}: field {field.name} (bits {field.lsb}+{field.width}) repeats a name or a bit, "
                    f"expected distinct fields (so far: {', '.join(by_name)})"
                )
            by_name[field.name] = field
            used |= field.mask
        object.__setattr__(self, "by_name", by_name)

    def field(self, name: str) -> Field:
        """The field called ``name``.

        Raises:
            InvalidArgument: the register has no such field.
        """
        field = self.by_name.get(name)
        if field is None:
            raise InvalidArgument(f"{self.register} has no field {name!r}, expected one of: {', '.join(self.by_name)}")
        return field

    def encode(self, **values: int) -> int:
        """The dword holding ``values`` (field name -> value) in their fields and 0 in every other bit.

        Raises:
            InvalidArgument: an unknown field name, or a value that is not an int that fits its field.
        """
        dword = 0
        for name, value in values.items():
            field = self.field(name)
            if type(value) is not int or not 0 <= value <= field.max_value:
                raise InvalidArgument(
                    f"{self.register}.{name}={value!r}, expected an int in 0..{field.max_value:#x} ({field.width} bits)"
                )
            dword |= value << field.lsb
        return dword

    def merge(self, dword: int, **values: int) -> int:
        """``dword`` with the fields of ``values`` replaced (its other bits kept).

        Raises:
            InvalidArgument: as :meth:`encode`.
        """
        return dword & ~self.mask(*values) | self.encode(**values)

    def mask(self, *names: str) -> int:
        """The bits of the fields called ``names``.

        Raises:
            InvalidArgument: an unknown field name.
        """
        mask = 0
        for name in names:
            mask |= self.field(name).mask
        return mask


# --- Memory (docs/amdgpu.md "Memory") ---
PAGE_BYTES: Final = 4096  # VA mappings are page-granular (GPU VM pages and the x86-64 host pages KFD maps)
PAGE_SHIFT: Final = PAGE_BYTES.bit_length() - 1
SYS_APERTURE: Final = 1 << 44  # GPU address SYS_APERTURE + pcie_addr reaches the bridge (USB path)
GPU_VA_LIMIT: Final = 1 << 48  # 48-bit GPU virtual addresses (GC 9-11 VM)

# --- Signals and timestamps (docs/amdgpu.md "Signals, timestamps, interrupts") ---
TIMESTAMP_HZ: Final = 100_000_000
TIMESTAMP_PERIOD_NS: Final = 1_000_000_000 // TIMESTAMP_HZ


# --- Queues (docs/amdgpu.md "Queues") ---
class QueueKind(IntEnum):
    """What a queue's ring holds: SDMA packets (pointers in bytes) or PM4 packets (pointers in dwords)."""

    SDMA = 0
    COMPUTE = 1

    @property
    def unit_bytes(self) -> int:
        """Bytes per read/write-pointer unit: SDMA counts bytes, PM4 (compute) counts dwords."""
        return 1 if self is QueueKind.SDMA else 4


# Ring sizes are powers of two from 256 B to 1 GB: the rule the engine model enforces and the driver's queues obey
# (docs/amdgpu.md "Queues"; the KFD ABI has its own minimum, KFD_MIN_QUEUE_RING_SIZE).
RING_MIN_BYTES: Final = 256
RING_MAX_BYTES: Final = 1 << 30
RING_BASE_SHIFT: Final = 8  # SDMA RB_BASE and CP_HQD_PQ_BASE / CP_HQD_EOP_BASE_ADDR hold the address >> 8 ...
RING_ALIGN_BYTES: Final = 1 << RING_BASE_SHIFT  # ... so ring bases are 256-byte aligned


# --- USB-path BARs (docs/gfx1100.md section 1: BAR0 VRAM, BAR2 doorbells, BAR5 registers) ---
class Bar(IntEnum):
    """The GPU's BARs as the USB front door addresses them."""

    VRAM = 0
    DOORBELL = 2
    REGS = 5


DOORBELL_BAR_BYTES: Final = 8 << 10
DOORBELL_SLOT_BYTES: Final = 8
DOORBELL_SLOTS: Final = DOORBELL_BAR_BYTES // DOORBELL_SLOT_BYTES
REGS_BAR_BYTES: Final = 2 << 20  # a register BAR of this size (the plain PCIe endpoint's); gfx1100's is 1 MB


# --- Polls (docs/amdgpu.md "SDMA packets", POLL_REGMEM functions) ---
class CompareFunction(IntEnum):
    """POLL_REGMEM / WAIT_REG_MEM function: ``(mem & mask) <op> reference``."""

    ALWAYS = 0
    LESS = 1
    LESS_EQUAL = 2
    EQUAL = 3
    NOT_EQUAL = 4
    GREATER_EQUAL = 5
    GREATER = 6


def _always(value: int, reference: int) -> bool:
    return True


# Indexed by the function field (CompareFunction order): evaluated on every poll, so a table, not a match.
COMPARE_OPERATORS: Final[tuple[Callable[[int, int], bool], ...]] = (
    _always,
    operator.lt,
    operator.le,
    operator.eq,
    operator.ne,
    operator.ge,
    operator.gt,
)


def compare(function: CompareFunction | int, value: int, reference: int) -> bool:
    """Evaluate a poll function on ``value`` (already masked) against ``reference``.

    Raises:
        InvalidArgument: ``function`` is not one of the seven functions (0..6).
    """
    if type(function) is bool or not isinstance(function, int) or not 0 <= function < len(COMPARE_OPERATORS):
        raise InvalidArgument(f"function={function!r}, expected a CompareFunction (0..6)")
    return COMPARE_OPERATORS[function](value, reference)


POLL_INTERVAL_CYCLES: Final = 16  # the interval field counts units of 16 model clock cycles
POLL_RETRY_FOREVER: Final = 0xFFF
