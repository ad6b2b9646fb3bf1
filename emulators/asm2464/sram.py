"""The 0xF2 SRAM DMA engine: bounds-checked arms, arm -> bulk pairing, landing, copyout release."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

import numpy as np

from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks
from tinyhil.emulators.observe import Observed
from tinyhil.spec.asm2464 import (
    ARM_DIRECTION_IN,
    ARM_SECTORS_MASK,
    ARM_SLOT_COUNT_SHIFT,
    ARM_SLOT_START_MASK,
    PCIE_SRAM_BASE,
    SECTOR_BYTES,
    SLOT_BYTES,
    SLOT_SECTORS,
    SLOTS,
    WINDOW_BYTES,
    Request,
)

__all__ = ["Arm", "ArmKind", "Direction", "SramEngine"]


class Direction(Enum):
    """Bulk direction of an armed operation."""

    OUT = "out"  # host-to-device, bulk OUT 0x02
    IN = "in"  # device-to-host, bulk IN 0x81

    __hash__ = object.__hash__  # the arm table's key: members are singletons, so identity will do


class ArmKind(Enum):
    """What an armed operation moves."""

    SRAM = "sram"  # an 0xF2 arm: the bulk moves SRAM bytes
    STREAM = "stream"  # an 0xF0 mode 1/2 stream: the bulk moves dwords to or from a PCIe address


@dataclass(slots=True)
class Arm:
    """One armed operation: the next bulk of ``direction`` must move exactly ``nbytes - done`` bytes."""

    kind: ArmKind
    direction: Direction
    nbytes: int
    sram_offset: int = 0  # SRAM arms: first byte
    pcie_addr: int = 0  # streams: target address
    done: int = 0  # bytes already moved by partial transfers

    @property
    def remaining(self) -> int:
        return self.nbytes - self.done


_OUT: Final = Direction.OUT
_IN: Final = Direction.IN
_SRAM: Final = ArmKind.SRAM
_STREAM: Final = ArmKind.STREAM


class SramEngine:
    """The 0xF2 engine: one arm slot per direction, 0xF2 bounds checks, landing into SRAM with the quirks.

    An arm with start slot ``s``, slot count ``n`` (0 means 1) and ``k`` sectors covers SRAM bytes
    ``[s * 0x4000, s * 0x4000 + k * 512)``; it is valid only if ``s + n <= 32``, ``k <= n * 32`` and ``k >= 1``
    (docs/asm2464.md "SRAM, slots and windows"). A new arm of a direction replaces the unconsumed one. After
    a device-to-host arm, the bulk IN is released only by the GPU's completion-queue write.

    ``observed`` holds the bridge's observers (:mod:`tinyhil.emulators.observe`): arms, claims, give-backs and
    finished transfers are reported to them.
    """

    def __init__(
        self, memory: BridgeMemory, quirks: Quirks, notify: Callable[[int, int], None], observed: Observed | None = None
    ) -> None:
        self.memory = memory
        self.quirks = quirks
        self._notify = notify
        self.observed = observed if observed is not None else Observed()
        self.reset()

    def reset(self) -> None:
        self.arms: dict[Direction, Arm | None] = {Direction.OUT: None, Direction.IN: None}
        self.released = False
        self.inflight = 0  # 0xF2 transfers started and not yet landed (OUT) or completed (IN)
        self.landed_transfers = 0

    def state(self) -> tuple[object, ...]:
        arms = tuple(
            None if a is None else (a.kind.value, a.nbytes, a.sram_offset, a.pcie_addr, a.done)
            for a in self.arms.values()
        )
        return arms, self.released

    def _op_sram_arm(self, value: int, index: int) -> None:
        """0xF2: validate and arm; a rejected arm stalls and changes nothing."""
        sectors = value & ARM_SECTORS_MASK
        start, count = index & ARM_SLOT_START_MASK, index >> ARM_SLOT_COUNT_SHIFT or 1
        if start + count > SLOTS or sectors > count * SLOT_SECTORS or sectors < 1:
            raise UsbStall(
                f"0xF2 arm start_slot={start} slot_count={count} sectors={sectors}, expected start_slot + slot_count "
                f"<= {SLOTS}, 1 <= sectors <= slot_count * {SLOT_SECTORS}",
                op=f"{Request.SRAM_ARM:#x}",
            )
        direction = _IN if value & ARM_DIRECTION_IN else _OUT
        replaced = self.arms[direction]
        arm = self.arms[direction] = Arm(_SRAM, direction, sectors * SECTOR_BYTES, start * SLOT_BYTES)
        if direction is _IN:
            self.released = False
        observer = self.observed.observer
        if observer is not None:
            observer.sram_armed(direction, start, arm, replaced)

    def arm_stream(self, direction: Direction, pcie_addr: int, nbytes: int) -> None:
        """0xF0 mode 1/2: the next bulk of ``direction`` moves ``nbytes`` to/from ``pcie_addr``."""
        self.arms[direction] = Arm(_STREAM, direction, nbytes, pcie_addr=pcie_addr)

    def cancel_streams(self) -> None:
        """A new 0xF0 OUT cancels armed streams."""
        arms = self.arms
        for direction in (_OUT, _IN):
            arm = arms[direction]
            if arm is not None and arm.kind is _STREAM:
                arms[direction] = None

    def drop_arms(self) -> None:
        """CLEAR_FEATURE(HALT), SET_CONFIGURATION, SET_INTERFACE: the engine forgets its arms."""
        self.arms = {_OUT: None, _IN: None}

    def ready(self, direction: Direction, nbytes: int) -> Arm | None:
        """The arm a bulk of ``nbytes`` would pair with now, or ``None`` (no arm, wrong size, not released)."""
        arm = self.arms[direction]
        if arm is None or arm.nbytes - arm.done != nbytes:  # the arm's ``remaining``
            return None
        if direction is _IN and arm.kind is _SRAM and not self.released:
            return None
        return arm

    def claim(self, arm: Arm) -> None:
        """A bulk starts on ``arm``: the slot frees for the next arm."""
        self.arms[arm.direction] = None
        if arm.kind is _SRAM:
            self.inflight += 1
        observer = self.observed.observer
        if observer is not None:
            observer.arm_claimed(arm)

    def give_back(self, arm: Arm, moved: int) -> None:
        """A bulk on ``arm`` ended after ``moved`` of its bytes: the rest stays armed (unless re-armed meanwhile)."""
        arm.done += moved
        if arm.done != arm.nbytes and self.arms[arm.direction] is None:
            self.arms[arm.direction] = arm
        observer = self.observed.observer
        if observer is not None:
            observer.arm_given_back(arm, moved)

    def finished(self, arm: Arm) -> None:
        """An SRAM transfer on ``arm`` is no longer in flight (landed, or its IN completed)."""
        if arm.kind is _SRAM:
            self.inflight -= 1
        observer = self.observed.observer
        if observer is not None:
            observer.arm_finished(arm)

    def read_in(self, arm: Arm, nbytes: int, into: memoryview | bytearray | None = None) -> bytearray | memoryview:
        """The next ``nbytes`` of a device-to-host SRAM transfer: a fresh copy the host owns, or copied into the first
        ``nbytes`` of ``into`` (the host's buffer) and returned as a view of them."""
        start = arm.sram_offset + arm.done
        if into is None:
            return bytearray(self.memory.sram.data[start : start + nbytes])
        view = memoryview(into)[:nbytes]
        view[:] = self.memory.sram.data[start : start + nbytes]
        return view

    def land(self, arm: Arm, offset: int, data: memoryview, *, whole_transfer: bool) -> None:
        """Bytes of a bulk OUT land in SRAM, in order; the endpoint is told; quirk 1 applies to whole transfers."""
        start = arm.sram_offset + offset
        nbytes = data.nbytes
        end = start + nbytes
        sram = self.memory.sram
        sram.data[start:end] = data
        if (
            self.quirks.full_window_corruption
            and whole_transfer
            and start % WINDOW_BYTES == 0
            and nbytes % WINDOW_BYTES == 0
        ):
            last = sram[end - SECTOR_BYTES : end]
            np.invert(last, out=last)
        self.landed_transfers += 1
        self._notify(PCIE_SRAM_BASE + start, nbytes)
