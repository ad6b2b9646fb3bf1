"""The PM4 compute command processor: register writes, end-of-pipe releases, waits, IBs, dispatches."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final

import numpy as np

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.spec.amdgpu_pm4 import (
    COMPUTE_NUM_THREAD_FULL,
    COMPUTE_PGM_ADDR_SHIFT,
    COMPUTE_SCRATCH_BASE_SHIFT,
    COMPUTE_TMPRING_SIZE_WAVES,
    COMPUTE_TMPRING_SIZE_WAVESIZE,
    DISPATCH_INITIATOR_CS_W32_EN,
    GFX1100_SHADER_ENGINES,
    INDIRECT_BUFFER_IB_SIZE,
    PM4_BODY_DWORDS,
    PM4_HEADER_COUNT,
    PM4_HEADER_OPCODE,
    PM4_HEADER_TYPE,
    PM4_NOP_HEADER_ONLY_COUNT,
    PM4_TYPE_3,
    RELEASE_MEM_DATA_SEL,
    RELEASE_MEM_INT_SEL,
    SH_REG_BASE,
    SH_REG_END,
    TMPRING_WAVESIZE_UNIT_BYTES,
    UCONFIG_REG_BASE,
    UCONFIG_REG_END,
    WAIT_REG_MEM_FUNCTION,
    WAIT_REG_MEM_MEM_SPACE,
    WAIT_REG_MEM_OPERATION,
    WAIT_REG_MEM_POLL_INTERVAL,
    WRITE_DATA_DST_SEL,
    DispatchDirectDw,
    IndirectBufferDw,
    MemSpace,
    Pm4Op,
    ReleaseMemDataSel,
    ReleaseMemDw,
    ReleaseMemIntSel,
    ShReg,
    WaitRegMemDw,
    WriteDataDstSel,
    WriteDataDw,
)
from tinyhil.spec.code_object import CODE_OBJECT_MAGIC

from .engine import RingEngine
from .errors import KernelError, WaveTrap
from .executor import Launch
from .model_choices import ErrorCode
from .packets import DONE, OpResult, Packet, PacketError, dword_bytes
from .rdna3 import DispatchSetup, run_dispatch
from .rdna3.executor import DEFAULT_STEP_BUDGET
from .services import Interrupt, InterruptKind

__all__ = ["Pm4Engine"]

# Variable-length bodies: SET_*_REG = register offset + at least one value; WRITE_DATA = control, address lo/hi
# and at least one dword.
_MIN_BODY_DWORDS = {Pm4Op.SET_SH_REG: 2, Pm4Op.SET_UCONFIG_REG: 2, Pm4Op.WRITE_DATA: 4}
_NOP: Final = int(Pm4Op.NOP)


def _addr(packet: Packet, lo: int) -> int:
    return packet[lo] | packet[lo + 1] << 32


class Pm4Engine(RingEngine):
    """One compute queue (pointers in dwords). Type-3 packets as in docs/amdgpu.md "PM4 packets", bodies as GC 9-11:

    | opcode | packet | body dwords | model |
    |---|---|---|---|
    | 0x10 | NOP | count + 1 (count 0x3FFF: none) | skip (a run of NOPs in one step) |
    | 0x76 / 0x79 | SET_SH_REG / SET_UCONFIG_REG | 1 + n | offset from 0x2C00 / 0xC000, then n values |
    | 0x58 | ACQUIRE_MEM | 7 | no-op (cache control) |
    | 0x49 | RELEASE_MEM | 7 | write 32-bit / 64-bit data or the timestamp; int_sel fires END_OF_PIPE |
    | 0x3C | WAIT_REG_MEM | 6 | memory poll; unsatisfied: the queue waits (no retry limit) |
    | 0x3F | INDIRECT_BUFFER | 3 | run an IB of ib_size dwords (ring -> IB1 -> IB2 at most) |
    | 0x37 | WRITE_DATA | 3 + n | n dwords to memory (dst_sel 5) |
    | 0x15 | DISPATCH_DIRECT | 4 | hand the launch the SH registers describe to the executor |

    Register file: SH ``0x2C00..0x2FFF`` and UCONFIG ``0xC000..0xFFFF`` (dword indices); DISPATCH_DIRECT reads
    COMPUTE_PGM_LO/HI (program address >> 8) and COMPUTE_NUM_THREAD_X/Y/Z bits 0-15 (workgroup size), then looks
    at the program: a host-native code object (``THILCODE`` header) goes to ``services.executor`` with
    COMPUTE_USER_DATA_0/1 as its argument buffer; anything else is GPU machine code for the RDNA3 wave executor
    (docs/rdna3.md), set up from COMPUTE_PGM_RSRC1/2/3, COMPUTE_USER_DATA_0..15, DISPATCH_INITIATOR.CS_W32_EN and
    the scratch registers (COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI, COMPUTE_TMPRING_SIZE: docs/amdgpu.md "Scratch"),
    within :attr:`WAVE_STEP_BUDGET` group steps. A wave trap stops the queue (``ErrorCode.WAVE_TRAP``, the PC and
    the instruction in the message); a kernel's access to an unmapped address is the queue's memory fault.
    """

    KIND: ClassVar[QueueKind] = QueueKind.COMPUTE
    MAX_IB_DEPTH: ClassVar[int] = 2
    OPCODE_NAMES: ClassVar[type[Pm4Op]] = Pm4Op
    NOP_OPCODE: ClassVar[int] = _NOP
    WAVE_STEP_BUDGET: ClassVar[int] = DEFAULT_STEP_BUDGET  # group steps one machine-code dispatch may take

    def reset(self) -> None:
        super().reset()
        self.sh_regs = np.zeros(SH_REG_END - SH_REG_BASE, np.uint32)
        self.uconfig_regs = np.zeros(UCONFIG_REG_END - UCONFIG_REG_BASE, np.uint32)

    def _op_table(self) -> dict[int, Callable[[Packet], OpResult]]:
        return {
            Pm4Op.NOP: self._op_nop,
            Pm4Op.SET_SH_REG: self._op_set_sh_reg,
            Pm4Op.SET_UCONFIG_REG: self._op_set_uconfig_reg,
            Pm4Op.ACQUIRE_MEM: self._op_acquire_mem,
            Pm4Op.RELEASE_MEM: self._op_release_mem,
            Pm4Op.WAIT_REG_MEM: self._op_wait_reg_mem,
            Pm4Op.INDIRECT_BUFFER: self._op_indirect_buffer,
            Pm4Op.WRITE_DATA: self._op_write_data,
            Pm4Op.DISPATCH_DIRECT: self._op_dispatch_direct,
        }

    def _packet_dwords(self, header: int, prefetched: Packet) -> int | None:
        packet_type = PM4_HEADER_TYPE.get(header)
        self._opcode = opcode = PM4_HEADER_OPCODE.get(header)
        if packet_type != PM4_TYPE_3:
            self._opcode = None
            raise PacketError(
                ErrorCode.UNKNOWN_OPCODE,
                f"type-{packet_type} PM4 packet (header {header:#010x}), expected type 3 (GC 9-11 compute rings)",
            )
        if opcode not in self._ops:
            raise PacketError(ErrorCode.UNKNOWN_OPCODE, f"unknown PM4 opcode {opcode:#x} (header {header:#010x})")
        count = PM4_HEADER_COUNT.get(header)
        if opcode == Pm4Op.NOP and count == PM4_NOP_HEADER_ONLY_COUNT:
            return 1
        body = count + 1
        fixed = PM4_BODY_DWORDS.get(Pm4Op(opcode))
        minimum = _MIN_BODY_DWORDS.get(Pm4Op(opcode), 1)
        if (fixed is not None and body != fixed) or body < minimum:
            expected = fixed if fixed is not None else f"at least {minimum}"
            raise self._bad(f"body of {body} dwords, expected {expected}")
        return 1 + body

    def _nop_dwords(self, words: np.ndarray) -> np.ndarray:
        header = PM4_HEADER_TYPE
        opcode, count = PM4_HEADER_OPCODE, PM4_HEADER_COUNT
        nop = (((words >> header.lsb) & header.max_value) == PM4_TYPE_3) & (
            ((words >> opcode.lsb) & opcode.max_value) == _NOP
        )
        counts = ((words >> count.lsb) & count.max_value).astype(np.int64)
        return np.where(nop, np.where(counts == PM4_NOP_HEADER_ONLY_COUNT, 1, counts + 2), 0)

    # --- registers ---
    def _set_regs(self, regs: np.ndarray, base: int, packet: Packet) -> OpResult:
        offset = packet[1] & 0xFFFF
        values = packet[2:]
        if offset + len(values) > len(regs):
            raise self._bad(
                f"registers {base + offset:#x}..{base + offset + len(values) - 1:#x} leave the block "
                f"{base:#x}..{base + len(regs) - 1:#x}"
            )
        regs[offset : offset + len(values)] = values
        return DONE

    def sh_reg(self, reg: int) -> int:
        """The value of SH register ``reg`` (a dword register index such as ``ShReg.COMPUTE_PGM_LO``)."""
        return int(self.sh_regs[reg - SH_REG_BASE])

    def _op_nop(self, packet: Packet) -> OpResult:
        return DONE

    def _op_set_sh_reg(self, packet: Packet) -> OpResult:
        return self._set_regs(self.sh_regs, SH_REG_BASE, packet)

    def _op_set_uconfig_reg(self, packet: Packet) -> OpResult:
        return self._set_regs(self.uconfig_regs, UCONFIG_REG_BASE, packet)

    def _op_acquire_mem(self, packet: Packet) -> OpResult:
        return DONE

    # --- memory ---
    def _op_release_mem(self, packet: Packet) -> OpResult:
        control = packet[ReleaseMemDw.DATA_CNTL]
        try:
            data_sel = ReleaseMemDataSel(RELEASE_MEM_DATA_SEL.get(control))
            int_sel = ReleaseMemIntSel(RELEASE_MEM_INT_SEL.get(control))
        except ValueError:
            raise self._bad(f"data_sel/int_sel in {control:#010x}, expected data_sel 0..3 and int_sel 0..2") from None
        addr = _addr(packet, ReleaseMemDw.ADDR_LO)
        value = _addr(packet, ReleaseMemDw.DATA_LO)
        memory = self.services.memory
        match data_sel:
            case ReleaseMemDataSel.VALUE_32:
                value &= 0xFFFF_FFFF
                memory.write_u32(self._aligned("address", addr, 4), value)
            case ReleaseMemDataSel.VALUE_64:
                memory.write_u64(self._aligned("address", addr, 8), value)
            case ReleaseMemDataSel.TIMESTAMP:
                value = self.services.timestamp()
                memory.write_u64(self._aligned("address", addr, 8), value)
            case ReleaseMemDataSel.NONE:
                value = 0
        if int_sel is not ReleaseMemIntSel.NONE:
            context = packet[ReleaseMemDw.INT_CTXID]
            now = self.services.kernel.now_ns
            self.services.interrupt(Interrupt(InterruptKind.END_OF_PIPE, self.queue_id, now, context, value))
        return DONE

    def _op_wait_reg_mem(self, packet: Packet) -> OpResult:
        control = packet[WaitRegMemDw.CONTROL]
        if WAIT_REG_MEM_MEM_SPACE.get(control) != MemSpace.MEMORY or WAIT_REG_MEM_OPERATION.get(control):
            raise self._bad(f"control {control:#010x}: only memory waits are modelled (mem_space 1, operation 0)")
        return self._poll(
            _addr(packet, WaitRegMemDw.ADDR_LO),
            packet[WaitRegMemDw.REFERENCE],
            packet[WaitRegMemDw.MASK],
            WAIT_REG_MEM_FUNCTION.get(control),
            WAIT_REG_MEM_POLL_INTERVAL.get(packet[WaitRegMemDw.POLL_INTERVAL]),
            None,
        )

    def _op_indirect_buffer(self, packet: Packet) -> OpResult:
        base = _addr(packet, IndirectBufferDw.IB_BASE_LO)
        ib_dwords = INDIRECT_BUFFER_IB_SIZE.get(packet[IndirectBufferDw.CONTROL])
        return self._enter_ib(base, ib_dwords * 4, len(packet))

    def _op_write_data(self, packet: Packet) -> OpResult:
        control = packet[WriteDataDw.CONTROL]
        if WRITE_DATA_DST_SEL.get(control) != WriteDataDstSel.MEMORY:
            dst_sel = WRITE_DATA_DST_SEL.get(control)
            raise self._bad(f"dst_sel={dst_sel}, expected {WriteDataDstSel.MEMORY} (memory)")
        dst = self._aligned("destination", _addr(packet, WriteDataDw.DST_ADDR_LO), 4)
        data = dword_bytes(packet[WriteDataDw.DATA :])
        self.services.memory.write(dst, data)
        self.cost_ns += self.services.timing.transfer_ns(len(data))
        return DONE

    # --- dispatch ---
    def _op_dispatch_direct(self, packet: Packet) -> OpResult:
        grid = (
            packet[DispatchDirectDw.DIM_X],
            packet[DispatchDirectDw.DIM_Y],
            packet[DispatchDirectDw.DIM_Z],
        )
        regs = (ShReg.COMPUTE_NUM_THREAD_X, ShReg.COMPUTE_NUM_THREAD_Y, ShReg.COMPUTE_NUM_THREAD_Z)
        group_size = tuple(COMPUTE_NUM_THREAD_FULL.get(self.sh_reg(reg)) for reg in regs)
        for reg, size in zip(regs, group_size, strict=True):
            if not size:
                raise self._bad(f"{reg.name} is 0, expected a workgroup size of at least 1 thread")
        program = (
            self.sh_reg(ShReg.COMPUTE_PGM_HI) << 32 | self.sh_reg(ShReg.COMPUTE_PGM_LO)
        ) << COMPUTE_PGM_ADDR_SHIFT
        args = self.sh_reg(ShReg.COMPUTE_USER_DATA_1) << 32 | self.sh_reg(ShReg.COMPUTE_USER_DATA_0)
        launch = Launch(program, grid, (group_size[0], group_size[1], group_size[2]), args)
        if not launch.workgroups:
            return DONE
        if bytes(self.services.memory.read(program, len(CODE_OBJECT_MAGIC))) != CODE_OBJECT_MAGIC:
            return self._dispatch_machine_code(packet, grid, launch.group_size)
        try:
            written = self.services.executor.dispatch(self.services.memory, launch)
        except KernelError as error:
            raise PacketError(ErrorCode.KERNEL_ERROR, f"DISPATCH_DIRECT: {error}") from None
        for va, nbytes in written:
            self.services.memory.notify_written(va, nbytes)
        self.cost_ns += self.services.timing.dispatch_cost_ns(launch.workgroups)
        return DONE

    def _dispatch_machine_code(
        self, packet: Packet, grid: tuple[int, int, int], group_size: tuple[int, int, int]
    ) -> OpResult:
        starts = [self.sh_reg(r) for r in (ShReg.COMPUTE_START_X, ShReg.COMPUTE_START_Y, ShReg.COMPUTE_START_Z)]
        if any(starts):
            raise self._bad(f"COMPUTE_START_X/Y/Z = {starts}, expected 0 (partial grids are not modelled)")
        if not DISPATCH_INITIATOR_CS_W32_EN.get(packet[DispatchDirectDw.DISPATCH_INITIATOR]):
            raise PacketError(ErrorCode.KERNEL_ERROR, "DISPATCH_DIRECT: a wave64 dispatch (DISPATCH_INITIATOR."
                              "CS_W32_EN clear); the RDNA3 executor runs wave32 only (docs/rdna3.md)")  # fmt: skip
        first = ShReg.COMPUTE_USER_DATA_0 - SH_REG_BASE
        try:
            setup = self._setup(first, grid, group_size)
        except InvalidArgument as error:
            raise self._bad(str(error)) from None
        try:
            run_dispatch(self.services.memory, setup, step_budget=self.WAVE_STEP_BUDGET)
        except WaveTrap as trap:
            raise PacketError(ErrorCode.WAVE_TRAP, f"DISPATCH_DIRECT: {trap}") from None
        self.cost_ns += self.services.timing.dispatch_cost_ns(grid[0] * grid[1] * grid[2])
        return DONE

    def _setup(self, first: int, grid: tuple[int, int, int], group_size: tuple[int, int, int]) -> DispatchSetup:
        tmpring = self.sh_reg(ShReg.COMPUTE_TMPRING_SIZE)
        wave_bytes = COMPUTE_TMPRING_SIZE_WAVESIZE.get(tmpring) * TMPRING_WAVESIZE_UNIT_BYTES
        slots = COMPUTE_TMPRING_SIZE_WAVES.get(tmpring) * GFX1100_SHADER_ENGINES  # WAVES counts per SE on GFX11
        scratch = self.sh_reg(ShReg.COMPUTE_DISPATCH_SCRATCH_BASE_HI) << 32 | self.sh_reg(
            ShReg.COMPUTE_DISPATCH_SCRATCH_BASE_LO
        )
        return DispatchSetup(
            self.sh_reg(ShReg.COMPUTE_PGM_LO), self.sh_reg(ShReg.COMPUTE_PGM_HI),
            self.sh_reg(ShReg.COMPUTE_PGM_RSRC1), self.sh_reg(ShReg.COMPUTE_PGM_RSRC2),
            self.sh_reg(ShReg.COMPUTE_PGM_RSRC3),
            tuple(int(v) for v in self.sh_regs[first : ShReg.COMPUTE_USER_DATA_15 - SH_REG_BASE + 1]),
            group_size, grid,
            scratch_base=scratch << COMPUTE_SCRATCH_BASE_SHIFT if wave_bytes and slots else None,
            scratch_wave_bytes=wave_bytes if slots else 0, scratch_waves=slots,
        )  # fmt: skip
