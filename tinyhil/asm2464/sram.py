"""The 0xF2 SRAM DMA engine's arm request and the sector padding of bulk images (docs/asm2464.md "Vendor requests").

SRAM is 512 KB = 32 slots of 16 KB, addressed in 512 B sectors. An arm with start slot ``s``, slot count ``n`` and
``k`` sectors covers SRAM bytes ``[s * 0x4000, s * 0x4000 + k * 512)`` and is valid only when ``s + n <= 32``,
``1 <= k <= n * 32``; the bulk transfer that follows must be exactly ``k * 512`` bytes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tinyhil._check import check_int
from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import (
    ARM_DIRECTION_IN,
    ARM_SECTORS_MASK,
    ARM_SLOT_COUNT_SHIFT,
    SECTOR_BYTES,
    SLOT_BYTES,
    SLOT_SECTORS,
    SLOTS,
    SRAM_BYTES,
)

__all__ = ["SramArm", "arm_request", "pad_to_sectors", "sectors_for"]


def sectors_for(nbytes: int) -> int:
    """512 B sectors needed to hold ``nbytes`` (rounded up)."""
    return ceil_div(nbytes, SECTOR_BYTES)


@dataclass(frozen=True, slots=True)
class SramArm:
    """One 0xF2 arm: ``sectors`` of 512 B from ``slot_start`` over ``slot_count`` slots, in one direction.

    ``value`` and ``index`` are the request's wValue and wIndex; ``wire_bytes`` is the exact length of the bulk
    transfer the arm pairs with.
    """

    sectors: int
    slot_start: int = 0
    slot_count: int = 0  # 0: as many slots as the sectors span
    device_to_host: bool = False

    def __post_init__(self) -> None:
        check_int("sectors", self.sectors, min_value=1)
        check_int("slot_start", self.slot_start, min_value=0, max_value=SLOTS - 1)
        check_int("slot_count", self.slot_count, min_value=0, max_value=SLOTS)
        if not self.slot_count:
            object.__setattr__(self, "slot_count", ceil_div(self.sectors, SLOT_SECTORS))
        end_slot = self.slot_start + self.slot_count
        if end_slot > SLOTS or self.sectors > self.slot_count * SLOT_SECTORS:
            raise InvalidArgument(
                f"SRAM arm of {self.sectors} sectors ({self.wire_bytes:#x} bytes) from slot {self.slot_start} over "
                f"{self.slot_count} slots, expected slot_start + slot_count <= {SLOTS} and sectors <= slot_count * "
                f"{SLOT_SECTORS} (SRAM is {SRAM_BYTES:#x} bytes: {SLOTS} slots of {SLOT_BYTES:#x})"
            )

    @classmethod
    def for_bytes(cls, nbytes: int, slot_start: int = 0, *, device_to_host: bool = False) -> SramArm:
        """The arm for a transfer of ``nbytes`` (padded up to whole sectors) starting at ``slot_start``."""
        check_int("nbytes", nbytes, min_value=1)
        return cls(sectors_for(nbytes), slot_start, 0, device_to_host)

    @property
    def wire_bytes(self) -> int:
        """Exact length of the bulk transfer this arm pairs with."""
        return self.sectors * SECTOR_BYTES

    @property
    def sram_offset(self) -> int:
        """First SRAM byte the transfer covers."""
        return self.slot_start * SLOT_BYTES

    @property
    def value(self) -> int:
        """wValue: bits 0-14 sectors, bit 15 the direction (1 = device-to-host)."""
        return (self.sectors & ARM_SECTORS_MASK) | (ARM_DIRECTION_IN if self.device_to_host else 0)

    @property
    def index(self) -> int:
        """wIndex: low byte the start slot, high byte the slot count."""
        return self.slot_start | self.slot_count << ARM_SLOT_COUNT_SHIFT


def pad_to_sectors(data: memoryview) -> memoryview:
    """``data`` itself when it is a whole number of sectors (no copy), else a zero-padded copy."""
    remainder = len(data) % SECTOR_BYTES
    if not remainder:
        return data
    padded = bytearray(len(data) + SECTOR_BYTES - remainder)
    padded[: len(data)] = data
    return memoryview(padded)


def _arm_fields(arm: SramArm) -> tuple[SramArm, int, int, int]:
    return arm, arm.value, arm.index, arm.wire_bytes


@functools.lru_cache(maxsize=256)
def _cached_arm_request(nbytes: int, slot_start: int, device_to_host: bool) -> tuple[SramArm, int, int, int]:
    return _arm_fields(SramArm.for_bytes(nbytes, slot_start, device_to_host=device_to_host))


def arm_request(nbytes: Any, slot_start: Any, device_to_host: bool) -> tuple[SramArm, int, int, int]:
    """The (frozen, validated) arm for a transfer with its wValue, wIndex and wire bytes: the controller's one cache
    of arms. A copy loop arms the same few shapes over and over, so plain-int shapes are validated once and cached;
    anything else (bools, floats, unhashables) goes to ``SramArm`` to be rejected by name.

    Raises:
        InvalidArgument: as :meth:`SramArm.for_bytes`.
    """
    if type(nbytes) is int and type(slot_start) is int:
        return _cached_arm_request(nbytes, slot_start, device_to_host)
    return _arm_fields(SramArm.for_bytes(nbytes, slot_start, device_to_host=device_to_host))
