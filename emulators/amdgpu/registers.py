"""The BAR5 register block: identity, VRAM size, and the queue registers the USB path programs queues with."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from tinyhil._check import check_range
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import (
    BAR5_ID_VALUE,
    ERROR_CODE_CODE,
    ERROR_CODE_OPCODE,
    ERROR_CODE_SUB_OP,
    QUEUE_REG_BLOCK_BYTES,
    REGS_BAR_BYTES,
    Bar5,
    ErrorCode,
    QueueKind,
    QueueReg,
    QueueStatus,
    RbCntl,
)

from .engine import QueueConfig
from .queues import Queue

__all__ = ["RegisterBlock"]

_log = logging.getLogger("tinyhil.emulators.amdgpu")
_U32: Final = 0xFFFF_FFFF
_LATCHED: Final = frozenset(
    {
        QueueReg.RB_BASE_LO,
        QueueReg.RB_BASE_HI,
        QueueReg.RB_SIZE_LOG2,
        QueueReg.RPTR_ADDR_LO,
        QueueReg.RPTR_ADDR_HI,
        QueueReg.WPTR_ADDR_LO,
        QueueReg.WPTR_ADDR_HI,
        QueueReg.DOORBELL,
    }
)
_SLOTS: Final = ((Bar5.SDMA0, QueueKind.SDMA), (Bar5.SDMA1, QueueKind.SDMA), (Bar5.COMPUTE0, QueueKind.COMPUTE))


@dataclass(slots=True)
class _QueueSlot:
    kind: QueueKind
    regs: dict[QueueReg, int] = field(default_factory=dict)
    queue: Queue | None = None
    config_error: str = ""

    def live_queue(self) -> Queue | None:
        return None if self.queue is None or self.queue.destroyed else self.queue

    def pair(self, lo: QueueReg, hi: QueueReg) -> int:
        return self.regs.get(lo, 0) | self.regs.get(hi, 0) << 32


class RegisterBlock:
    """BAR5 (spec/amdgpu.md "USB-path register interface"); all registers 32-bit, byte offsets:

    | offset | register | access |
    |---|---|---|
    | ``0x0000`` | ID (``0x48494C31``) | read-only |
    | ``0x0004`` | VRAM_MB | read-only |
    | ``0x1000``, ``0x1100`` | SDMA queue 0, 1 register blocks | see below |
    | ``0x2000`` | compute queue 0 register block | see below |
    | block ``+0x00..+0x20`` | RB_BASE_LO/HI, RB_SIZE_LOG2, RB_CNTL, RPTR/WPTR_ADDR_LO/HI, DOORBELL | read-write |
    | block ``+0x24..+0x2C`` | STATUS, ERROR_CODE, ERROR_RPTR | read-only |
    | block ``+0x30/+0x34`` | FAULT_ADDR_LO/HI (model extension) | read-only |
    | anything else | reads 0, writes ignored | |

    Setting RB_CNTL.ENABLE latches the other fields and creates the queue exactly like ``AmdGpu.create_queue``;
    clearing it destroys the queue. If the latched settings are unusable the queue stays disabled (RB_CNTL reads
    0) and STATUS reads PACKET_ERROR with ERROR_CODE BAD_QUEUE_CONFIG. ERROR_CODE packs the code in bits 0-7, the
    opcode in bits 8-15 and the SDMA sub-op in bits 16-23; ERROR_RPTR is the low 32 bits of the stopping packet's
    read pointer.
    """

    def __init__(self, vram_bytes: int, create: Callable[[QueueConfig], Queue], destroy: Callable[[Queue], None]):
        self.vram_bytes = vram_bytes
        self._create = create
        self._destroy = destroy
        self.reset()

    def reset(self) -> None:
        self.slots = {int(base): _QueueSlot(kind) for base, kind in _SLOTS}

    def _check(self, offset: int, nbytes: int) -> None:
        check_range("BAR5", offset, nbytes, REGS_BAR_BYTES)
        if offset % 4 or nbytes % 4:
            raise InvalidArgument(f"BAR5 access {offset:#x}+{nbytes:#x}, expected whole aligned 32-bit registers")

    def _locate(self, offset: int) -> tuple[_QueueSlot, QueueReg] | None:
        base = offset - offset % QUEUE_REG_BLOCK_BYTES
        slot = self.slots.get(base)
        if slot is None or offset - base not in QueueReg._value2member_map_:
            return None
        return slot, QueueReg(offset - base)

    def read(self, offset: int, nbytes: int) -> bytes:
        """Read whole registers.

        Raises:
            InvalidArgument: the access leaves BAR5 or is not dword aligned.
        """
        self._check(offset, nbytes)
        return b"".join(self._read_reg(o).to_bytes(4, "little") for o in range(offset, offset + nbytes, 4))

    def write(self, offset: int, data: bytes) -> None:
        """Write whole registers (in address order).

        Raises:
            InvalidArgument: the access leaves BAR5 or is not dword aligned.
        """
        self._check(offset, len(data))
        for index in range(0, len(data), 4):
            self._write_reg(offset + index, int.from_bytes(data[index : index + 4], "little"))

    def _read_reg(self, offset: int) -> int:
        if offset == Bar5.ID:
            return BAR5_ID_VALUE
        if offset == Bar5.VRAM_MB:
            return self.vram_bytes >> 20
        located = self._locate(offset)
        if located is None:
            return 0
        slot, reg = located
        if reg in _LATCHED:
            return slot.regs.get(reg, 0)
        queue = slot.live_queue()
        if reg is QueueReg.RB_CNTL:
            return int(RbCntl.ENABLE) if queue is not None else 0
        if queue is None:
            failed = bool(slot.config_error)
            return {
                QueueReg.STATUS: int(QueueStatus.PACKET_ERROR) if failed else 0,
                QueueReg.ERROR_CODE: int(ErrorCode.BAD_QUEUE_CONFIG) if failed else 0,
            }.get(reg, 0)
        fault = queue.fault_va or 0
        return {
            QueueReg.STATUS: int(queue.status),
            QueueReg.ERROR_CODE: ERROR_CODE_CODE.put(int(queue.error_code))
            | ERROR_CODE_OPCODE.put(queue.error_opcode & 0xFF)
            | ERROR_CODE_SUB_OP.put(queue.engine.error_sub_op & 0xFF),
            QueueReg.ERROR_RPTR: queue.error_rptr & _U32,
            QueueReg.FAULT_ADDR_LO: fault & _U32,
            QueueReg.FAULT_ADDR_HI: fault >> 32 & _U32,
        }.get(reg, 0)

    def _write_reg(self, offset: int, value: int) -> None:
        located = self._locate(offset)
        if located is None:
            return
        slot, reg = located
        if reg in _LATCHED:
            slot.regs[reg] = value
        elif reg is QueueReg.RB_CNTL:
            self._write_rb_cntl(slot, value)

    def _write_rb_cntl(self, slot: _QueueSlot, value: int) -> None:
        queue = slot.live_queue()
        if not value & RbCntl.ENABLE:
            if queue is not None:
                self._destroy(queue)
            slot.queue = None
            return
        if queue is not None:
            return  # already enabled: the fields stay latched
        slot.config_error = ""
        size_log2 = slot.regs.get(QueueReg.RB_SIZE_LOG2, 0)
        try:
            if size_log2 >= 64:
                raise InvalidArgument(f"RB_SIZE_LOG2={size_log2}, expected 8..30")
            config = QueueConfig(
                slot.kind,
                ring_va=slot.pair(QueueReg.RB_BASE_LO, QueueReg.RB_BASE_HI),
                ring_bytes=1 << size_log2,
                rptr_va=slot.pair(QueueReg.RPTR_ADDR_LO, QueueReg.RPTR_ADDR_HI),
                wptr_va=slot.pair(QueueReg.WPTR_ADDR_LO, QueueReg.WPTR_ADDR_HI),
                doorbell_index=slot.regs.get(QueueReg.DOORBELL, 0),
            )
            slot.queue = self._create(config)
        except InvalidArgument as error:
            slot.config_error = str(error)
            _log.warning("BAR5 RB_CNTL enable of a %s queue refused: %s", slot.kind.name, error)
