"""The SDMA copy engine: linear copies, writes, fills, fences, polls, traps and timestamps."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final

import numpy as np

from tinyhil.spec.amdgpu import (
    COMPARE_OPERATORS,
    POLL_RETRY_FOREVER,
    QueueKind,
)
from tinyhil.spec.amdgpu_sdma import (
    SDMA_CONST_FILL_COUNT,
    SDMA_CONST_FILL_FILL_SIZE,
    SDMA_COPY_LINEAR_COUNT,
    SDMA_HEADER_OP,
    SDMA_HEADER_SUB_OP,
    SDMA_NOP_COUNT,
    SDMA_PACKET_DWORDS,
    SDMA_POLL_REGMEM_FUNCTION,
    SDMA_POLL_REGMEM_INTERVAL,
    SDMA_POLL_REGMEM_MEM_POLL,
    SDMA_POLL_REGMEM_RETRY_COUNT,
    SDMA_SUBOP_COPY_LINEAR,
    SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
    SDMA_SUBOP_WRITE_LINEAR,
    SDMA_WRITE_COUNT,
    FillSize,
    SdmaConstFillDw,
    SdmaFenceDw,
    SdmaIndirectDw,
    SdmaOp,
    SdmaTimestampDw,
    SdmaTrapDw,
    SdmaWriteDw,
)

from ..observe import Observed
from .engine import RingEngine
from .model_choices import ErrorCode
from .packets import DONE, WAIT, OpResult, Packet, PacketError, dword_bytes
from .services import Interrupt, InterruptKind

__all__ = ["SdmaEngine"]

# the per-packet decode uses plain ints and shifts (docs/performance.md)
_OP_NOP: Final = int(SdmaOp.NOP)
_OP_WRITE: Final = int(SdmaOp.WRITE)
_WRITE_FIXED_DWORDS: Final = SDMA_PACKET_DWORDS[SdmaOp.WRITE]
_WRITE_COUNT_DW: Final = int(SdmaWriteDw.COUNT)
_WRITE_DST_DW: Final = int(SdmaWriteDw.DST_ADDR_LO)
_WRITE_DATA_DW: Final = int(SdmaWriteDw.DATA)
_OP_LSB, _OP_MAX = SDMA_HEADER_OP.lsb, SDMA_HEADER_OP.max_value
_SUB_OP_LSB, _SUB_OP_MAX = SDMA_HEADER_SUB_OP.lsb, SDMA_HEADER_SUB_OP.max_value
_NOP_COUNT_LSB, _NOP_COUNT_MAX = SDMA_NOP_COUNT.lsb, SDMA_NOP_COUNT.max_value
_MEM_POLL_MASK: Final = SDMA_POLL_REGMEM_MEM_POLL.mask
_FUNCTION_LSB, _FUNCTION_MAX = SDMA_POLL_REGMEM_FUNCTION.lsb, SDMA_POLL_REGMEM_FUNCTION.max_value
_INTERVAL_LSB, _INTERVAL_MAX = SDMA_POLL_REGMEM_INTERVAL.lsb, SDMA_POLL_REGMEM_INTERVAL.max_value
_RETRY_COUNT_LSB, _RETRY_COUNT_MAX = SDMA_POLL_REGMEM_RETRY_COUNT.lsb, SDMA_POLL_REGMEM_RETRY_COUNT.max_value
_FIXED_DWORDS: Final[dict[int, int]] = {int(op): dwords for op, dwords in SDMA_PACKET_DWORDS.items()}
# the sizes of the modelled packets whose size is fixed (NOP and WRITE carry theirs in the packet), found in one
# lookup; must list only opcodes of SdmaEngine._op_table
_MODELLED_FIXED_DWORDS: Final[dict[int, int]] = {
    int(op): SDMA_PACKET_DWORDS[op]
    for op in (
        SdmaOp.COPY_LINEAR,
        SdmaOp.INDIRECT,
        SdmaOp.FENCE,
        SdmaOp.TRAP,
        SdmaOp.POLL_REGMEM,
        SdmaOp.CONST_FILL,
        SdmaOp.TIMESTAMP,
    )
}


def _reporting(observed: Observed, va: int, compare: Callable[[int, int], bool]) -> Callable[[int, int], bool]:
    """``compare`` of a waiting poll, also reporting each re-check to the observers attached at that moment."""

    def checked(value: int, reference: int) -> bool:
        matched = compare(value, reference)
        observer = observed.observer
        if observer is not None:
            observer.gpu_polled(va, value, matched)
        return matched

    return checked


def _addr(packet: Packet, lo: int) -> int:
    return packet[lo] | packet[lo + 1] << 32


class SdmaEngine(RingEngine):
    """One SDMA queue (pointers in bytes). Packets as in docs/amdgpu.md "SDMA packets" (SDMA 5/6 layouts):

    | op | packet | dwords | model |
    |---|---|---|---|
    | 0 | NOP | 1 + count | skip (a run of NOPs in one step) |
    | 1 | COPY_LINEAR (sub-op 0) | 7 | memmove-correct copy of count + 1 bytes, any alignment |
    | 2 | WRITE (sub-op 0) | 4 + n | n dwords to a dword-aligned address |
    | 4 | INDIRECT | 6 | run an IB of DW3 dwords (IBs do not nest) |
    | 5 | FENCE | 4 | 32-bit write, dword aligned |
    | 6 | TRAP | 2 | interrupt with context DW1 |
    | 8 | POLL_REGMEM | 6 | memory poll; retry every interval x 16 cycles, hang when retries run out (0xFFF: never) |
    | 11 | CONST_FILL | 5 | byte or dword fill of count + 1 bytes |
    | 13 | TIMESTAMP (sub-op 2) | 3 | 64-bit 100 MHz timestamp, 8-byte aligned |

    Register polls (mem_poll = 0) and other sub-ops are not modelled: they stop the queue with a packet error.
    """

    __slots__ = ()
    KIND: ClassVar[QueueKind] = QueueKind.SDMA
    MAX_IB_DEPTH: ClassVar[int] = 1
    OPCODE_NAMES: ClassVar[type[SdmaOp]] = SdmaOp
    NOP_OPCODE: ClassVar[int] = _OP_NOP

    def _op_table(self) -> dict[int, Callable[[Packet], OpResult]]:
        return {
            SdmaOp.NOP: self._op_nop,
            SdmaOp.COPY_LINEAR: self._op_copy_linear,
            SdmaOp.WRITE: self._op_write,
            SdmaOp.INDIRECT: self._op_indirect,
            SdmaOp.FENCE: self._op_fence,
            SdmaOp.TRAP: self._op_trap,
            SdmaOp.POLL_REGMEM: self._op_poll_regmem,
            SdmaOp.CONST_FILL: self._op_const_fill,
            SdmaOp.TIMESTAMP: self._op_timestamp,
        }

    def _packet_dwords(self, header: int, prefetched: Packet) -> int | None:
        self._opcode = op = (header >> _OP_LSB) & _OP_MAX
        self._sub_op = (header >> _SUB_OP_LSB) & _SUB_OP_MAX
        dwords = _MODELLED_FIXED_DWORDS.get(op)
        if dwords is not None:
            return dwords
        if op not in self._ops:
            raise PacketError(ErrorCode.UNKNOWN_OPCODE, f"unknown SDMA opcode {op:#x} (header {header:#010x})")
        if op == _OP_NOP:
            return 1 + SDMA_NOP_COUNT.get(header)
        if op == _OP_WRITE:
            if len(prefetched) < _WRITE_FIXED_DWORDS:
                return None
            count = (prefetched[_WRITE_COUNT_DW] >> SDMA_WRITE_COUNT.lsb) & SDMA_WRITE_COUNT.max_value
            return _WRITE_FIXED_DWORDS + count + 1
        return _FIXED_DWORDS[op]

    def _nop_dwords(self, words: np.ndarray) -> np.ndarray:
        nop = ((words >> _OP_LSB) & _OP_MAX) == _OP_NOP  # any sub-op: _packet_dwords reads only op and count
        return np.where(nop, 1 + ((words >> _NOP_COUNT_LSB) & _NOP_COUNT_MAX).astype(np.int64), 0)

    def _check_sub_op(self, expected: int, meaning: str) -> None:
        if self._sub_op != expected:
            raise self._bad(f"sub-op {self._sub_op} is not modelled, expected {expected} ({meaning})")

    def _op_nop(self, packet: Packet) -> OpResult:
        return DONE

    def _op_copy_linear(self, packet: Packet) -> OpResult:
        if self._sub_op != SDMA_SUBOP_COPY_LINEAR:
            self._check_sub_op(SDMA_SUBOP_COPY_LINEAR, "linear copy")
        _header, count, _parameter, src_lo, src_hi, dst_lo, dst_hi = packet  # SdmaCopyLinearDw order (hot)
        nbytes = (count & SDMA_COPY_LINEAR_COUNT.max_value) + 1
        src = src_lo | src_hi << 32
        dst = dst_lo | dst_hi << 32
        system = self._memory.copy(dst, src, nbytes)  # whether it reads or writes the bridge's memory, as translated
        self.cost_ns += self.services.timing.transfer_ns(nbytes, system=system)
        return DONE

    def _op_write(self, packet: Packet) -> OpResult:
        if self._sub_op != SDMA_SUBOP_WRITE_LINEAR:
            self._check_sub_op(SDMA_SUBOP_WRITE_LINEAR, "linear write")
        dst = packet[_WRITE_DST_DW] | packet[_WRITE_DST_DW + 1] << 32
        if dst % 4:
            self._aligned("destination", dst, 4)
        data = dword_bytes(packet[_WRITE_DATA_DW:])
        self._memory.write(dst, data)
        self.cost_ns += self.services.timing.transfer_ns(len(data))
        return DONE

    def _op_indirect(self, packet: Packet) -> OpResult:
        base = _addr(packet, SdmaIndirectDw.IB_BASE_LO)
        return self._enter_ib(base, packet[SdmaIndirectDw.IB_SIZE] * 4, len(packet) * 4)

    def _op_fence(self, packet: Packet) -> OpResult:
        dst = self._aligned("fence address", _addr(packet, SdmaFenceDw.ADDR_LO), 4)
        self.services.memory.write_u32(dst, packet[SdmaFenceDw.DATA])
        return DONE

    def _op_trap(self, packet: Packet) -> OpResult:
        services = self.services
        context = packet[SdmaTrapDw.INT_CONTEXT]
        services.interrupt(Interrupt(InterruptKind.TRAP, self.queue_id, services.kernel.now_ns, context=context))
        return DONE

    def _op_poll_regmem(self, packet: Packet) -> OpResult:
        header, addr_lo, addr_hi, reference, mask, dw5 = packet  # SdmaPollRegmemDw order
        if not header & _MEM_POLL_MASK:
            raise self._bad("mem_poll=0 (register poll) is not modelled, expected mem_poll=1")
        retry_count = (dw5 >> _RETRY_COUNT_LSB) & _RETRY_COUNT_MAX
        va = addr_lo | addr_hi << 32
        result = self._poll(
            va,
            reference,
            mask,
            (header >> _FUNCTION_LSB) & _FUNCTION_MAX,
            (dw5 >> _INTERVAL_LSB) & _INTERVAL_MAX,
            None if retry_count == POLL_RETRY_FOREVER else retry_count,
        )
        observed = self.services.observed
        if observed.observer is not None:
            observed.observer.gpu_polled(va, self._memory.read_u32(va) & mask, result is DONE)
            wait = self.wait
            if result is WAIT and wait is not None and wait.compare in COMPARE_OPERATORS:  # not yet reporting
                wait.compare = _reporting(observed, va, wait.compare)
        return result

    def _op_const_fill(self, packet: Packet) -> OpResult:
        fill_size = SDMA_CONST_FILL_FILL_SIZE.get(packet[SdmaConstFillDw.HEADER])
        if fill_size not in (FillSize.BYTE, FillSize.DWORD):
            raise self._bad(f"fill_size={fill_size}, expected {FillSize.BYTE} (byte) or {FillSize.DWORD} (dword)")
        dst = _addr(packet, SdmaConstFillDw.DST_ADDR_LO)
        nbytes = SDMA_CONST_FILL_COUNT.get(packet[SdmaConstFillDw.COUNT]) + 1
        data = packet[SdmaConstFillDw.DATA]
        if fill_size == FillSize.DWORD:
            self._aligned("dword fill address", dst, 4)
            if nbytes % 4:
                raise self._bad(f"dword fill of {nbytes:#x} bytes, expected a multiple of 4")
            self.services.memory.fill(dst, nbytes, data, dword=True)
        else:
            self.services.memory.fill(dst, nbytes, data & 0xFF, dword=False)
        self.cost_ns += self.services.timing.transfer_ns(nbytes)
        return DONE

    def _op_timestamp(self, packet: Packet) -> OpResult:
        self._check_sub_op(SDMA_SUBOP_TIMESTAMP_GET_GLOBAL, "get global timestamp")
        dst = self._aligned("timestamp address", _addr(packet, SdmaTimestampDw.ADDR_LO), 8)
        self.services.memory.write_u64(dst, self.services.timestamp())
        return DONE
