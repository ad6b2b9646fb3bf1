"""Boards for the copyin/copyout tests (``from support.boards import Board``): a fresh emulated bridge and
GPU (Navi 31 with its real register interface), booted over USB by ``open_usb_gpu``, with one SDMA queue.

VRAM layout (the GPU sees VRAM at address 0): SDMA pointers ``0x1000``/``0x1008`` and ring ``0x100000`` (1 MB,
docs/copyin.md), a second queue's pointers ``0x2000``/``0x2008`` and ring ``0x300000``, copy destinations from
``DATA`` = ``0x400000``; the driver's boot memory is the top 32 MB (docs/gfx1100.md). ``usb.gpu.vram``
(the emulator) is read and filled only to set up and check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.observe import Observer
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, SECTOR_BYTES
from tinyhil.spec.copyin import SDMA_RING_BYTES
from tinyhil.usbgpu.copy import UsbCopy
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu

VRAM_BYTES = 64 << 20  # the smallest gfx1100 board: the driver's boot memory takes the top 32 MB
DATA = 0x400000
GUARD = 0x10000  # pattern bytes checked on each side of a destination
PATTERN = 0xA5


@dataclass
class Board:
    usb: MockUSB3
    ctrl: Asm2464Controller
    gpu: Gfx1100UsbGpu
    sdma: AmdQueue

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.usb.close()

    def copier(self, revision: str = "pipelined", **options: Any) -> UsbCopy:
        return UsbCopy(self.ctrl, self.gpu, self.sdma, revision=revision, **options)

    @property
    def vram(self) -> np.ndarray:
        return np.frombuffer(self.usb.gpu.vram, dtype=np.uint8)

    def guard(self, dest: int, nbytes: int) -> None:
        """Fill the destination and ``GUARD`` bytes on each side with the pattern."""
        self.vram[dest - GUARD : dest + nbytes + GUARD] = PATTERN

    def guards_intact(self, dest: int, nbytes: int) -> bool:
        before = self.vram[dest - GUARD : dest]
        after = self.vram[dest + nbytes : dest + nbytes + GUARD]
        return bool((before == PATTERN).all() and (after == PATTERN).all())


def make_board(
    mode: str = "sync",
    *,
    quirks: Quirks | None = None,
    seed: int = 0,
    faults: FaultPlan | None = None,
    ring_bytes: int = SDMA_RING_BYTES,
) -> Board:
    usb = MockUSB3(mode=mode, quirks=quirks, seed=seed, faults=faults, vram_bytes=VRAM_BYTES)
    ctrl = Asm2464Controller(usb)
    gpu = open_usb_gpu(ctrl, firmware=GeneratedFirmware())
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=ring_bytes, rptr_va=0x1000, wptr_va=0x1008)
    return Board(usb, ctrl, gpu, sdma)


def arm_faults(board: Board, plan: FaultPlan) -> None:
    """Install ``plan`` after bring-up, so its occurrences count from the next transfer (from 1, as after a reset:
    the board counts attempts only while a plan has rules)."""
    front = board.usb.bridge.front
    assert not front.counts, "arm_faults twice on one board"
    board.usb.bridge.faults = plan


def sram_bulk_out_occurrences(run: Callable[[Board], None], mode: str = "sync", **options: Any) -> list[int]:
    """Run ``run`` on a probe board and return, for each bulk OUT after ``run`` installs a plan that moved SRAM data
    (an 0xF2 transfer, not an 0xF0 stream of ring packets), its occurrence number as that plan counts bulk OUTs.

    ``run`` must call :func:`arm_faults` itself (with a plan that never fires, e.g. :data:`NEVER`)."""
    board = make_board(mode, **options)
    bridge = board.usb.bridge
    occurrences: list[int] = []

    class SramBulkOuts(Observer):
        def arm_claimed(self, arm: Arm) -> None:
            if arm.kind is ArmKind.SRAM and arm.direction is Direction.OUT and bridge.faults.rules:
                occurrences.append(bridge.front.counts.get(Operation.bulk_out(), 0))

    with board, bridge.observe(SramBulkOuts()):
        run(board)
    return occurrences


NEVER = FaultPlan.single(Operation.bulk_out(), 1 << 30, Fault.drop())


def recover_and_write(usb: MockUSB3, seed: int) -> None:
    """After a fuzzed run: faults off, the host's recovery (a power cycle if the board left the bus or wedged,
    CLEAR_FEATURE(HALT) on both bulk endpoints, the transport's latched error cleared), then a valid scsi_write must
    land its bytes."""
    bridge = usb.bridge
    bridge.faults = FaultPlan()
    if bridge.front.gone or bridge.wedged:
        bridge.reset()
    usb.clear_halt(BULK_OUT_EP)
    usb.clear_halt(BULK_IN_EP)
    usb.clear_error()
    payload = np.random.default_rng(seed).integers(0, 256, 2 * SECTOR_BYTES + 5, dtype=np.uint8).tobytes()
    Asm2464Controller(usb).scsi_write(payload)
    assert bridge.read_sram(0, len(payload)) == payload, "the follow-up scsi_write landed other bytes"
