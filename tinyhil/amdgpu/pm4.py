"""PM4 type-3 packet builders, one per packet of docs/amdgpu.md "PM4 packets" (GC 9-11 bodies, see tinyhil.spec.amdgpu).

Each returns the packet as a little-endian uint32 array; arguments are checked eagerly (``InvalidArgument``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import CompareFunction
from tinyhil.spec.amdgpu_pm4 import (
    COMPUTE_NUM_THREAD_FULL,
    COMPUTE_PGM_ADDR_SHIFT,
    COMPUTE_SCRATCH_BASE_SHIFT,
    COMPUTE_TMPRING_SIZE_WAVES,
    COMPUTE_TMPRING_SIZE_WAVESIZE,
    DISPATCH_INITIATOR_COMPUTE_SHADER_EN,
    DISPATCH_INITIATOR_CS_W32_EN,
    EVENT_CACHE_FLUSH_AND_INV_TS,
    EVENT_INDEX_END_OF_PIPE,
    INDIRECT_BUFFER_IB_SIZE,
    INDIRECT_BUFFER_VALID,
    PM4_HEADER_COUNT,
    PM4_HEADER_OPCODE,
    PM4_HEADER_TYPE,
    PM4_NOP_HEADER_ONLY_COUNT,
    PM4_TYPE_3,
    RELEASE_MEM_DATA_SEL,
    RELEASE_MEM_DST_SEL,
    RELEASE_MEM_EVENT_INDEX,
    RELEASE_MEM_EVENT_TYPE,
    RELEASE_MEM_INT_SEL,
    SH_REG_BASE,
    SH_REG_END,
    TMPRING_WAVESIZE_UNIT_BYTES,
    UCONFIG_REG_BASE,
    UCONFIG_REG_END,
    USER_DATA_REGS,
    WAIT_REG_MEM_FUNCTION,
    WAIT_REG_MEM_MEM_SPACE,
    WAIT_REG_MEM_POLL_INTERVAL,
    WRITE_DATA_DST_SEL,
    WRITE_DATA_WR_CONFIRM,
    MemSpace,
    Pm4Op,
    ReleaseMemDataSel,
    ReleaseMemIntSel,
    ShReg,
    WriteDataDstSel,
)

from ._packet import Packet, as_dwords, check_address, check_enum, hi32, lo32, packet

__all__ = [
    "pm4_acquire_mem",
    "pm4_dispatch_direct",
    "pm4_header",
    "pm4_indirect_buffer",
    "pm4_launch",
    "pm4_launch_kernel",
    "pm4_nop",
    "pm4_release_mem",
    "pm4_set_sh_reg",
    "pm4_set_uconfig_reg",
    "pm4_wait_reg_mem",
    "pm4_write_data",
]

_COHER_SIZE_ALL = 0xFFFF_FFFF
_COHER_SIZE_HI_ALL = 0xFF  # GC 10/11 COHER_SIZE_HI is 8 bits: the whole address space


def pm4_header(opcode: Pm4Op, body_dwords: int) -> int:
    """Type-3 header: type 3 in bits 30-31, body dwords - 1 in bits 16-29, opcode in bits 8-15."""
    check_int("body_dwords", body_dwords, min_value=1, max_value=PM4_HEADER_COUNT.max_value + 1)
    return (
        PM4_HEADER_TYPE.put(PM4_TYPE_3)
        | PM4_HEADER_COUNT.put(body_dwords - 1)
        | PM4_HEADER_OPCODE.put(int(check_enum("opcode", opcode, Pm4Op)))
    )


def _type3(opcode: Pm4Op, body: Sequence[int]) -> Packet:
    return packet([pm4_header(opcode, len(body)), *body])


def pm4_nop(body_dwords: int = 0) -> Packet:
    """NOP with ``body_dwords`` zero dwords; 0 gives the header-only NOP (count 0x3FFF)."""
    if body_dwords == 0:
        header = PM4_HEADER_TYPE.put(PM4_TYPE_3) | PM4_HEADER_COUNT.put(PM4_NOP_HEADER_ONLY_COUNT)
        return packet([header | PM4_HEADER_OPCODE.put(Pm4Op.NOP)])
    return _type3(Pm4Op.NOP, [0] * body_dwords)


def _set_reg(opcode: Pm4Op, base: int, end: int, reg: int, values: Any) -> Packet:
    dwords = as_dwords("values", values)
    check_int("reg", reg, min_value=base, max_value=end - 1)
    if not dwords.size or reg + dwords.size > end:
        raise InvalidArgument(
            f"{dwords.size} values from register {reg:#x}, expected 1.. within {base:#x}..{end - 1:#x}"
        )
    return _type3(opcode, [reg - base, *dwords.tolist()])


def pm4_set_sh_reg(reg: int, values: Any) -> Packet:
    """SET_SH_REG: write ``values`` to consecutive SH registers from ``reg`` (a dword index, 0x2C00..0x2FFF)."""
    return _set_reg(Pm4Op.SET_SH_REG, SH_REG_BASE, SH_REG_END, reg, values)


def pm4_set_uconfig_reg(reg: int, values: Any) -> Packet:
    """SET_UCONFIG_REG: write ``values`` to consecutive UCONFIG registers from ``reg`` (0xC000..0xFFFF)."""
    return _set_reg(Pm4Op.SET_UCONFIG_REG, UCONFIG_REG_BASE, UCONFIG_REG_END, reg, values)


def pm4_acquire_mem() -> Packet:
    """ACQUIRE_MEM over the whole address space (GC 10/11 layout; the model treats it as a no-op)."""
    return _type3(Pm4Op.ACQUIRE_MEM, [0, _COHER_SIZE_ALL, _COHER_SIZE_HI_ALL, 0, 0, 10, 0])


def pm4_release_mem(
    addr: int,
    value: int = 0,
    *,
    data_sel: ReleaseMemDataSel = ReleaseMemDataSel.VALUE_32,
    int_sel: ReleaseMemIntSel = ReleaseMemIntSel.NONE,
    ctx_id: int = 0,
    event_type: int = EVENT_CACHE_FLUSH_AND_INV_TS,
    event_index: int = EVENT_INDEX_END_OF_PIPE,
) -> Packet:
    """RELEASE_MEM: at end of pipe write ``value`` (32 or 64 bits) or the timestamp to ``addr``; with
    ``int_sel`` fire an event carrying ``ctx_id``."""
    data_sel = check_enum("data_sel", data_sel, ReleaseMemDataSel)
    int_sel = check_enum("int_sel", int_sel, ReleaseMemIntSel)
    wide = data_sel in (ReleaseMemDataSel.VALUE_64, ReleaseMemDataSel.TIMESTAMP)
    check_address("addr", addr, 8 if wide else 4)
    check_int("value", value, min_value=0, max_value=(1 << 64 if wide else 1 << 32) - 1)
    check_int("ctx_id", ctx_id, min_value=0, max_value=0xFFFF_FFFF)
    event = RELEASE_MEM_EVENT_TYPE.put(event_type) | RELEASE_MEM_EVENT_INDEX.put(event_index)
    control = (
        RELEASE_MEM_DST_SEL.put(0) | RELEASE_MEM_INT_SEL.put(int(int_sel)) | RELEASE_MEM_DATA_SEL.put(int(data_sel))
    )
    return _type3(Pm4Op.RELEASE_MEM, [event, control, lo32(addr), hi32(addr), lo32(value), hi32(value), ctx_id])


def pm4_wait_reg_mem(
    addr: int,
    reference: int,
    *,
    mask: int = 0xFFFF_FFFF,
    function: CompareFunction = CompareFunction.EQUAL,
    interval: int = 4,
) -> Packet:
    """WAIT_REG_MEM on memory: the queue waits until ``(mem & mask) <function> reference`` (no retry limit)."""
    check_address("addr", addr, 4)
    check_int("reference", reference, min_value=0, max_value=0xFFFF_FFFF)
    check_int("mask", mask, min_value=0, max_value=0xFFFF_FFFF)
    control = WAIT_REG_MEM_FUNCTION.put(
        int(check_enum("function", function, CompareFunction))
    ) | WAIT_REG_MEM_MEM_SPACE.put(MemSpace.MEMORY)
    return _type3(
        Pm4Op.WAIT_REG_MEM,
        [control, lo32(addr), hi32(addr), reference, mask, WAIT_REG_MEM_POLL_INTERVAL.put(interval)],
    )


def pm4_indirect_buffer(ib_va: int, ib_dwords: int) -> Packet:
    """INDIRECT_BUFFER: run the ``ib_dwords``-dword IB at the dword-aligned ``ib_va``."""
    check_address("ib_va", ib_va, 4)
    control = INDIRECT_BUFFER_IB_SIZE.put(ib_dwords) | INDIRECT_BUFFER_VALID.put(1)
    return _type3(Pm4Op.INDIRECT_BUFFER, [lo32(ib_va), hi32(ib_va), control])


def pm4_write_data(dst: int, data: Any) -> Packet:
    """WRITE_DATA of ``data`` (whole dwords) to memory at the dword-aligned ``dst``, write confirmed."""
    check_address("dst", dst, 4)
    dwords = as_dwords("data", data)
    if not dwords.size:
        raise InvalidArgument("data is empty, expected at least one dword")
    control = WRITE_DATA_DST_SEL.put(WriteDataDstSel.MEMORY) | WRITE_DATA_WR_CONFIRM.put(1)
    return _type3(Pm4Op.WRITE_DATA, [control, lo32(dst), hi32(dst), *dwords.tolist()])


def pm4_dispatch_direct(grid: Sequence[int], *, wave32: bool = False) -> Packet:
    """DISPATCH_DIRECT of ``grid`` = (x, y, z) workgroups, compute shader enabled; ``wave32`` sets CS_W32_EN."""
    x, y, z = (check_int(f"grid[{i}]", v, min_value=0, max_value=0xFFFF_FFFF) for i, v in enumerate(grid))
    initiator = DISPATCH_INITIATOR_COMPUTE_SHADER_EN.put(1) | DISPATCH_INITIATOR_CS_W32_EN.put(int(wave32))
    return _type3(Pm4Op.DISPATCH_DIRECT, [x, y, z, initiator])


def pm4_launch(program_va: int, args_va: int, grid: Sequence[int], group_size: Sequence[int]) -> Packet:
    """The SET_SH_REG writes DISPATCH_DIRECT reads, then DISPATCH_DIRECT: a complete kernel launch.

    ``program_va`` is 256-byte aligned (COMPUTE_PGM_LO/HI hold it >> 8); ``args_va`` goes to USER_DATA_0/1.
    """
    check_address("program_va", program_va, 1 << COMPUTE_PGM_ADDR_SHIFT)
    check_address("args_va", args_va)
    if len(group_size) != 3 or len(grid) != 3:
        raise InvalidArgument(f"grid={grid!r} group_size={group_size!r}, expected three dimensions each")
    threads = [COMPUTE_NUM_THREAD_FULL.put(check_int("group_size", v, min_value=1)) for v in group_size]
    program = program_va >> COMPUTE_PGM_ADDR_SHIFT
    return np.concatenate(
        [
            pm4_set_sh_reg(ShReg.COMPUTE_PGM_LO, [lo32(program), hi32(program)]),
            pm4_set_sh_reg(ShReg.COMPUTE_NUM_THREAD_X, threads),
            pm4_set_sh_reg(ShReg.COMPUTE_USER_DATA_0, [lo32(args_va), hi32(args_va)]),
            pm4_dispatch_direct(grid),
        ]
    )


def pm4_launch_kernel(
    entry_va: int,
    rsrc: Sequence[int],
    user_data: Sequence[int],
    grid: Sequence[int],
    group_size: Sequence[int],
    *,
    wave32: bool,
    scratch_va: int = 0,
    scratch_waves_per_se: int = 0,
    scratch_wave_bytes: int = 0,
) -> Packet:
    """The register writes a GPU kernel's dispatch needs, then DISPATCH_DIRECT, as a PM4 driver emits them:
    COMPUTE_PGM_LO/HI (``entry_va`` >> 8), COMPUTE_PGM_RSRC1/2/3 (``rsrc``, from the kernel descriptor),
    COMPUTE_USER_DATA_0.. (the user SGPRs the descriptor enables), COMPUTE_NUM_THREAD_X/Y/Z, COMPUTE_START_X/Y/Z
    (0), COMPUTE_RESOURCE_LIMITS (0: no limit), and the GFX11 scratch registers (docs/amdgpu.md "Scratch"):
    COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (``scratch_va`` >> 8, 256-byte aligned) and COMPUTE_TMPRING_SIZE
    (WAVES ``scratch_waves_per_se``, WAVESIZE ``scratch_wave_bytes`` in 256-byte units; 0: no scratch);
    ``wave32`` sets DISPATCH_INITIATOR.CS_W32_EN."""
    check_address("entry_va", entry_va, 1 << COMPUTE_PGM_ADDR_SHIFT)
    if len(group_size) != 3 or len(grid) != 3 or len(rsrc) != 3:
        raise InvalidArgument(f"grid={grid!r} group_size={group_size!r} rsrc={rsrc!r}, expected three values each")
    if len(user_data) > USER_DATA_REGS:
        raise InvalidArgument(f"{len(user_data)} user data dwords, expected at most {USER_DATA_REGS}")
    rsrc1, rsrc2, rsrc3 = (check_int("rsrc", v, min_value=0, max_value=0xFFFF_FFFF) for v in rsrc)
    threads = [COMPUTE_NUM_THREAD_FULL.put(check_int("group_size", v, min_value=1)) for v in group_size]
    check_address("scratch_va", scratch_va, 1 << COMPUTE_SCRATCH_BASE_SHIFT)
    check_int("scratch_wave_bytes", scratch_wave_bytes, min_value=0)
    if scratch_wave_bytes % TMPRING_WAVESIZE_UNIT_BYTES:
        raise InvalidArgument(f"scratch_wave_bytes={scratch_wave_bytes:#x}, expected a multiple of "
                              f"{TMPRING_WAVESIZE_UNIT_BYTES:#x} (COMPUTE_TMPRING_SIZE.WAVESIZE units)")  # fmt: skip
    tmpring = COMPUTE_TMPRING_SIZE_WAVES.put(scratch_waves_per_se) | COMPUTE_TMPRING_SIZE_WAVESIZE.put(
        scratch_wave_bytes // TMPRING_WAVESIZE_UNIT_BYTES
    )
    scratch = scratch_va >> COMPUTE_SCRATCH_BASE_SHIFT
    program = entry_va >> COMPUTE_PGM_ADDR_SHIFT
    return np.concatenate(
        [
            pm4_set_sh_reg(ShReg.COMPUTE_PGM_LO, [lo32(program), hi32(program)]),
            pm4_set_sh_reg(ShReg.COMPUTE_PGM_RSRC1, [rsrc1, rsrc2]),
            pm4_set_sh_reg(ShReg.COMPUTE_PGM_RSRC3, [rsrc3]),
            pm4_set_sh_reg(ShReg.COMPUTE_RESOURCE_LIMITS, [0]),
            pm4_set_sh_reg(ShReg.COMPUTE_DISPATCH_SCRATCH_BASE_LO, [lo32(scratch), hi32(scratch)]),
            pm4_set_sh_reg(ShReg.COMPUTE_TMPRING_SIZE, [tmpring]),
            pm4_set_sh_reg(ShReg.COMPUTE_START_X, [0, 0, 0, *threads]),
            *([pm4_set_sh_reg(ShReg.COMPUTE_USER_DATA_0, list(user_data))] if len(user_data) else []),
            pm4_dispatch_direct(grid, wave32=wave32),
        ]
    )
