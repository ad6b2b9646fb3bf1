"""The emulated AMD GPU at the level a runtime driver sees it: memory, BARs, queue registers, SDMA and PM4 packets.

Every name and number cites ``spec/amdgpu.md``. The packet layouts live beside this module: SDMA in
:mod:`tinyhil.spec.amdgpu_sdma`, PM4 in :mod:`tinyhil.spec.amdgpu_pm4`; both use :class:`Field` for bit fields.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = [
    "BAR5_ID_VALUE",
    "COMPARE_OPERATORS",
    "COMPUTE_QUEUES",
    "DEFAULT_VRAM_BYTES",
    "DOORBELL_BAR_BYTES",
    "DOORBELL_SLOTS",
    "DOORBELL_SLOT_BYTES",
    "ERROR_CODE_CODE",
    "ERROR_CODE_OPCODE",
    "ERROR_CODE_SUB_OP",
    "GPU_VA_LIMIT",
    "PAGE_BYTES",
    "POLL_INTERVAL_CYCLES",
    "POLL_RETRY_FOREVER",
    "QUEUE_REG_BLOCK_BYTES",
    "REGS_BAR_BYTES",
    "RING_ALIGN_BYTES",
    "RING_MAX_BYTES",
    "RING_MIN_BYTES",
    "SDMA_QUEUES",
    "SDMA_QUEUE_STRIDE",
    "SYS_APERTURE",
    "SYS_APERTURE_BYTES",
    "SYS_APERTURE_END",
    "TIMESTAMP_HZ",
    "TIMESTAMP_PERIOD_NS",
    "Bar",
    "Bar5",
    "CompareFunction",
    "ErrorCode",
    "Field",
    "QueueKind",
    "QueueReg",
    "QueueStatus",
    "RbCntl",
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


# --- Memory (spec/amdgpu.md "Memory") ---
DEFAULT_VRAM_BYTES: Final = 256 << 20
PAGE_BYTES: Final = 4096  # VA mappings are page-granular
SYS_APERTURE: Final = 1 << 44  # GPU address SYS_APERTURE + pcie_addr reaches the bridge (USB path)
SYS_APERTURE_BYTES: Final = 1 << 44  # model choice: the aperture spans PCIe addresses 0 .. 2**44 - 1
SYS_APERTURE_END: Final = SYS_APERTURE + SYS_APERTURE_BYTES  # the first GPU address past the aperture
GPU_VA_LIMIT: Final = 1 << 48  # 48-bit GPU virtual addresses (GC 9-11 VM)

# --- Signals and timestamps (spec/amdgpu.md "Signals and timestamps") ---
TIMESTAMP_HZ: Final = 100_000_000
TIMESTAMP_PERIOD_NS: Final = 1_000_000_000 // TIMESTAMP_HZ


# --- Queues (spec/amdgpu.md "Queues") ---
class QueueKind(IntEnum):
    """What a queue's ring holds: SDMA packets (pointers in bytes) or PM4 packets (pointers in dwords)."""

    SDMA = 0
    COMPUTE = 1

    @property
    def unit_bytes(self) -> int:
        """Bytes per read/write-pointer unit: SDMA counts bytes, PM4 (compute) counts dwords."""
        return 1 if self is QueueKind.SDMA else 4


RING_MIN_BYTES: Final = 256  # model choice: ring sizes are powers of two from 256 B ...
RING_MAX_BYTES: Final = 1 << 30  # ... to 1 GB (BAR5 RB_SIZE_LOG2 8..30)
RING_ALIGN_BYTES: Final = 256  # model choice: ring bases are 256-byte aligned


# --- USB-path BARs (spec/amdgpu.md "USB-path register interface") ---
class Bar(IntEnum):
    """The GPU's BARs as the USB front door addresses them."""

    VRAM = 0
    DOORBELL = 2
    REGS = 5


DOORBELL_BAR_BYTES: Final = 8 << 10
DOORBELL_SLOT_BYTES: Final = 8
DOORBELL_SLOTS: Final = DOORBELL_BAR_BYTES // DOORBELL_SLOT_BYTES
REGS_BAR_BYTES: Final = 2 << 20
BAR5_ID_VALUE: Final = 0x48494C31  # "1LIH" read little-endian: H I L 1


class Bar5(IntEnum):
    """BAR5 byte offsets of the global registers and the queue register blocks."""

    ID = 0x0000
    VRAM_MB = 0x0004
    SDMA0 = 0x1000  # SDMA queue n at 0x1000 + 0x100 * n
    SDMA1 = 0x1100
    COMPUTE0 = 0x2000  # compute (PM4) queue 0: same layout


SDMA_QUEUES: Final = 2
COMPUTE_QUEUES: Final = 1
SDMA_QUEUE_STRIDE: Final = 0x100
QUEUE_REG_BLOCK_BYTES: Final = 0x100


class QueueReg(IntEnum):
    """Byte offsets inside one queue register block (all 32-bit)."""

    RB_BASE_LO = 0x00
    RB_BASE_HI = 0x04
    RB_SIZE_LOG2 = 0x08
    RB_CNTL = 0x0C
    RPTR_ADDR_LO = 0x10
    RPTR_ADDR_HI = 0x14
    WPTR_ADDR_LO = 0x18
    WPTR_ADDR_HI = 0x1C
    DOORBELL = 0x20
    STATUS = 0x24
    ERROR_CODE = 0x28
    ERROR_RPTR = 0x2C
    # Model extension past the spec table (read-only): the faulting GPU address of a memory fault.
    FAULT_ADDR_LO = 0x30
    FAULT_ADDR_HI = 0x34


class RbCntl(IntFlag):
    """RB_CNTL bits."""

    ENABLE = 1 << 0  # latches the other fields and creates the queue; clearing it destroys the queue


class QueueStatus(IntFlag):
    """STATUS bits."""

    IDLE = 1 << 0  # everything up to the write pointer has executed
    HUNG = 1 << 1  # a POLL_REGMEM ran out of retries
    PACKET_ERROR = 1 << 2  # unknown opcode or malformed packet
    MEMORY_FAULT = 1 << 3  # an access to an unmapped GPU address


class ErrorCode(IntEnum):
    """ERROR_CODE bits 0-7: what stopped the queue (this model's own encoding)."""

    NONE = 0
    UNKNOWN_OPCODE = 1
    BAD_PACKET = 2  # a field out of range, a misaligned address, a packet longer than its ring or IB
    MEMORY_FAULT = 3
    POLL_TIMEOUT = 4  # queue hung
    BAD_WPTR = 5  # the write pointer moved backwards or ran more than a ring ahead of the read pointer
    BAD_QUEUE_CONFIG = 6  # RB_CNTL enable with unusable ring, pointer or doorbell settings
    KERNEL_ERROR = 7  # DISPATCH_DIRECT: the program is not a loadable code object


ERROR_CODE_CODE: Final = Field("code", 0, 8)
ERROR_CODE_OPCODE: Final = Field("opcode", 8, 8)  # the opcode of the packet that stopped the queue
ERROR_CODE_SUB_OP: Final = Field("sub_op", 16, 8)  # SDMA sub-op


# --- Polls (spec/amdgpu.md "SDMA packets", POLL_REGMEM functions) ---
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
