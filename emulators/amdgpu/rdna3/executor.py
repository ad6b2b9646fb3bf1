"""Run a compute dispatch of RDNA3 machine code: every wave at once, grouped by PC (docs/rdna3.md).

:func:`run_dispatch` is what the command processor calls once a dispatch's registers are set
(``COMPUTE_PGM_LO/HI``, ``COMPUTE_PGM_RSRC1/2/3``, ``COMPUTE_USER_DATA_0..15``, ``COMPUTE_NUM_THREAD_X/Y/Z`` and
the grid in workgroups, as :class:`DispatchSetup`). It loads each wave as the CP does (user SGPRs, then the
system SGPRs rsrc2 enables, work-item ids packed in v0), then repeatedly takes the lowest PC among the runnable
waves and executes that instruction once for all waves there, with numpy over waves and lanes.
Anything that cannot run is a :class:`~tinyhil.emulators.amdgpu.errors.WaveTrap` naming the PC and instruction.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from tinyhil._check import WORKGROUP_MAX_SIZE
from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_pm4 import COMPUTE_PGM_ADDR_SHIFT, USER_DATA_REGS
from tinyhil.spec.amdhsa import USER_SGPR_COUNT_MASK, VGPR_GRANULE_WAVE32, Rsrc1, Rsrc2, rsrc2_lds_bytes

from ..errors import GpuMemoryFault, WaveTrap
from ..memory import AddressSpace
from .atomics import ATOMIC_HANDLERS
from .decode import DecodeError, Inst, decode
from .division import DIVISION_HANDLERS
from .mode import MODE_HANDLERS, initial_mode, mode_written
from .opcodes import Enc
from .operands import Src
from .salu import SALU_HANDLERS
from .scratch import SCRATCH_HANDLERS
from .state import LANES, SCRATCH_LANE_STRIDE, Group, OperandError, Waves
from .valu import VALU_HANDLERS, vopd_handler
from .valu64 import VALU64_HANDLERS
from .vmem import VMEM_HANDLERS
from .vop3p import VOP3P_HANDLERS

__all__ = ["HANDLERS", "DispatchSetup", "DispatchStats", "Program", "ProgramCache", "run_dispatch"]

Handler = Callable[[Group, Inst], None]
HANDLERS: Final[dict[str, Handler]] = {
    **SALU_HANDLERS, **VALU_HANDLERS, **VALU64_HANDLERS, **VMEM_HANDLERS, **ATOMIC_HANDLERS, **SCRATCH_HANDLERS,
    **VOP3P_HANDLERS, **MODE_HANDLERS, **DIVISION_HANDLERS,
}  # fmt: skip
WORKITEM_ID_SHIFT: Final = 10  # GFX11 packs the work-item ids in v0: x | y << 10 | z << 20
DEFAULT_CODE_WINDOW_BYTES: Final = 1 << 20
DEFAULT_STEP_BUDGET: Final = 1 << 20
_FIELD_1: Final = 1
_FIELD_2: Final = 3
_FIELD_6: Final = 0x3F
_FIRST_WAVE_BIT: Final = 31
_CACHE_ENTRIES: Final = 64
_CODE_READ_BYTES: Final = 4096  # code is read a page at a time
_MAX_INST_BYTES: Final = 12  # a 64-bit encoding and its literal


@dataclass(frozen=True, slots=True)
class DispatchSetup:
    """The register values of one dispatch, as a PM4 stream or the AQL firmware leaves them.

    ``grid`` counts workgroups per dimension (DISPATCH_DIRECT's dims); ``num_thread`` is the workgroup size.
    Wave32 only (``COMPUTE_DISPATCH_INITIATOR.CS_W32_EN``); a wave64 dispatch is a :class:`WaveTrap`.
    ``scratch_base`` is the GPU address of the dispatch's scratch (private segment) memory and
    ``scratch_wave_bytes`` each wave's share of it (``COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI`` and
    ``COMPUTE_TMPRING_SIZE.WAVESIZE`` as the driver programs them): the wave in slot ``k`` owns
    ``[scratch_base + k * scratch_wave_bytes, +scratch_wave_bytes)``. Without a base, a scratch instruction traps.
    ``scratch_waves`` is the number of scratch slots (``COMPUTE_TMPRING_SIZE.WAVES`` x shader engines): a dispatch
    whose kernel enables the private segment and has more waves than that runs whole workgroups at a time, as many
    as the slots hold, each batch's wave ``k`` in slot ``k`` (0: a slot for every wave).
    """

    pgm_lo: int
    pgm_hi: int
    rsrc1: int
    rsrc2: int
    rsrc3: int = 0
    user_data: tuple[int, ...] = ()
    num_thread: tuple[int, int, int] = (1, 1, 1)
    grid: tuple[int, int, int] = (1, 1, 1)
    wave32: bool = True
    dispatch_id: int = 0
    scratch_base: int | None = None
    scratch_wave_bytes: int = 0
    scratch_waves: int = 0

    def __post_init__(self) -> None:
        if self.scratch_wave_bytes < 0 or self.scratch_wave_bytes % SCRATCH_LANE_STRIDE:
            raise InvalidArgument(
                f"scratch_wave_bytes={self.scratch_wave_bytes:#x}, expected a non-negative multiple of "
                f"{SCRATCH_LANE_STRIDE:#x} (a dword per lane)"
            )
        if len(self.user_data) > USER_DATA_REGS:
            raise InvalidArgument(f"user_data has {len(self.user_data)} dwords, expected at most {USER_DATA_REGS}")
        threads = int(np.prod(self.num_thread))
        if min(self.num_thread) < 1 or threads > WORKGROUP_MAX_SIZE:
            raise InvalidArgument(f"num_thread={self.num_thread}, expected 1..{WORKGROUP_MAX_SIZE} threads")
        if self.scratch_waves < 0:
            raise InvalidArgument(f"scratch_waves={self.scratch_waves}, expected a non-negative slot count")
        if min(self.grid) < 0:
            raise InvalidArgument(f"grid={self.grid}, expected non-negative workgroup counts")

    @property
    def pgm_addr(self) -> int:
        return ((self.pgm_hi << 32) | self.pgm_lo) << COMPUTE_PGM_ADDR_SHIFT


@dataclass(frozen=True, slots=True)
class DispatchStats:
    """What one dispatch did: groups stepped (one numpy pass each), wave and lane instructions executed, and
    instructions decoded (0 when the program came from the cache whole)."""

    waves: int
    steps: int
    wave_instructions: int
    lane_instructions: int
    decoded: int = 0


@dataclass(slots=True)
class Program:
    """The code at one GPU address: the bytes read from it so far, and what has been decoded, by byte offset.

    Bytes are read lazily (a page at a time, never past ``window_bytes`` or the end of the mapping), so an
    instruction is decoded from the bytes that were in memory when it first ran.
    """

    base: int
    window_bytes: int
    code: bytearray = field(default_factory=bytearray)
    decoded: dict[int, tuple[Inst, Handler | None]] = field(default_factory=dict)
    extent: int = 0  # bytes up to the end of the last decoded instruction
    decodes: int = 0  # instructions decoded since the program was created

    def _fill(self, space: AddressSpace, upto: int) -> None:
        """Read the code up to byte ``upto`` (rounded up to a page, capped by the window and the mapping)."""
        start = len(self.code)
        stop = min(self.window_bytes, -(-upto // _CODE_READ_BYTES) * _CODE_READ_BYTES)
        if stop <= start:
            return
        try:
            self.code += space.read(self.base + start, stop - start)
        except GpuMemoryFault as fault:
            if fault.va <= self.base:
                raise WaveTrap("the program address is not mapped", pc=self.base) from None
            if fault.va > self.base + start:
                self.code += space.read(self.base + start, fault.va - self.base - start)
            self.window_bytes = len(self.code)  # the mapping ends here

    def at(self, pc: int, space: AddressSpace) -> tuple[Inst, Handler]:
        """The instruction at ``pc`` and its handler (decoded on first use, then cached).

        Raises:
            WaveTrap: the PC is outside the code, the bytes are no instruction, or it is not implemented.
        """
        entry = self.decoded.get(pc)
        if entry is None:
            self._fill(space, pc + _MAX_INST_BYTES)
            if not 0 <= pc < len(self.code):
                where = f"{len(self.code):#x} bytes from {self.base:#x}"
                raise WaveTrap(f"PC outside the code ({where})", pc=self.base + pc)
            try:
                inst = decode(self.code, pc)
            except DecodeError as exc:
                raise WaveTrap(f"illegal instruction: {exc.reason}", pc=self.base + pc) from None
            entry = (inst, _handler(inst))
            self.decoded[pc] = entry
            self.extent = max(self.extent, pc + inst.size)
            self.decodes += 1
        inst, handler = entry
        if handler is None:
            raise WaveTrap(f"{inst.name} is not implemented by the emulator", pc=self.base + pc, text=inst.text)
        return inst, handler

    def still_in(self, space: AddressSpace) -> bool:
        """Whether every decoded instruction's bytes are still in memory at ``base`` (then the decode holds).
        Bytes read but not decoded are dropped, so that they are read afresh when they first run."""
        if not self.extent:
            return False
        try:
            same = space.read(self.base, self.extent) == self.code[: self.extent]
        except GpuMemoryFault:
            return False
        del self.code[self.extent :]
        return bool(same)


def _handler(inst: Inst) -> Handler | None:
    if inst.enc is Enc.VOPD:
        assert inst.dual is not None  # the decoder pairs every VOPD X with its Y
        return vopd_handler(inst.name, inst.dual.name)
    return HANDLERS.get(inst.name)


class ProgramCache:
    """Decoded programs by GPU address. A dispatch reuses a program when the bytes of every instruction decoded
    before are unchanged (one read and compare of the decoded extent, no hash): it then decodes nothing."""

    def __init__(self, entries: int = _CACHE_ENTRIES) -> None:
        self.entries = entries
        self.reset()

    def reset(self) -> None:
        self._programs: OrderedDict[int, Program] = OrderedDict()

    def get(self, space: AddressSpace, base: int, window_bytes: int) -> Program:
        """The program at ``base``: the cached one when its decoded bytes are still there, else a new one."""
        program = self._programs.get(base)
        if program is None or program.extent > window_bytes or not program.still_in(space):
            program = Program(base, window_bytes)
            self._programs[base] = program
            if len(self._programs) > self.entries:
                self._programs.popitem(last=False)
        program.window_bytes = window_bytes  # this dispatch's window (a mapping may have grown since)
        self._programs.move_to_end(base)
        return program


def _field(value: int, shift: int, mask: int) -> int:
    return (value >> shift) & mask


def _waves_per_group(setup: DispatchSetup) -> int:
    nx, ny, nz = setup.num_thread
    return ceil_div(nx * ny * nz, LANES)


def _batches(setup: DispatchSetup) -> list[tuple[int, int]]:
    """The workgroups run together, as (first, count): all of them, or as many as the scratch slots hold."""
    gx, gy, gz = setup.grid
    n_groups = gx * gy * gz
    per_group = _waves_per_group(setup)
    uses_scratch = _field(setup.rsrc2, Rsrc2.ENABLE_PRIVATE_SEGMENT, _FIELD_1) and setup.scratch_base is not None
    if not uses_scratch or not setup.scratch_waves or n_groups * per_group <= setup.scratch_waves:
        return [(0, n_groups)]
    fit = setup.scratch_waves // per_group
    if not fit:
        raise WaveTrap(f"{setup.scratch_waves} scratch slots (COMPUTE_TMPRING_SIZE.WAVES x shader engines) cannot "
                       f"hold one workgroup of {per_group} waves", pc=setup.pgm_addr)  # fmt: skip
    return [(first, min(fit, n_groups - first)) for first in range(0, n_groups, fit)]


def _setup_waves(setup: DispatchSetup, first_group: int, n_groups: int) -> Waves:
    """The initial registers (AMDGPUUsage "Initial Kernel Execution State") of the waves of workgroups
    ``first_group .. first_group + n_groups - 1`` (linear ids, x fastest)."""
    nx, ny, nz = setup.num_thread
    threads = nx * ny * nz
    waves_per_group = _waves_per_group(setup)
    gx, gy, _gz = setup.grid
    n_waves = n_groups * waves_per_group
    vgprs = (_field(setup.rsrc1, Rsrc1.GRANULATED_WORKITEM_VGPR_COUNT, _FIELD_6) + 1) * VGPR_GRANULE_WAVE32
    lds = rsrc2_lds_bytes(setup.rsrc2)
    w = Waves(n_waves, vgprs, n_groups, lds)
    w.scratch_base = setup.scratch_base
    w.mode[:] = initial_mode(setup.rsrc1)
    mode_written(w)
    w.scratch_wave_bytes = setup.scratch_wave_bytes
    group = np.repeat(np.arange(n_groups, dtype=np.int64), waves_per_group)
    wave_in_group = np.tile(np.arange(waves_per_group, dtype=np.int64), n_groups)
    w.group[:] = group
    w.lds_base[:] = group * lds
    user = _field(setup.rsrc2, Rsrc2.USER_SGPR_COUNT, USER_SGPR_COUNT_MASK)
    for k, value in enumerate(setup.user_data[:user]):
        w.sgpr[k] = value & 0xFFFFFFFF
    at = user
    linear = group + first_group
    ids = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
    enables = (Rsrc2.ENABLE_SGPR_WORKGROUP_ID_X, Rsrc2.ENABLE_SGPR_WORKGROUP_ID_Y, Rsrc2.ENABLE_SGPR_WORKGROUP_ID_Z)
    for enable, ids_dim in zip(enables, ids, strict=True):
        if _field(setup.rsrc2, enable, _FIELD_1):
            w.sgpr[at] = ids_dim
            at += 1
    if _field(setup.rsrc2, Rsrc2.ENABLE_SGPR_WORKGROUP_INFO, _FIELD_1):
        w.sgpr[at] = waves_per_group | ((wave_in_group == 0).astype(np.int64) << _FIRST_WAVE_BIT)
        at += 1
    if _field(setup.rsrc2, Rsrc2.ENABLE_PRIVATE_SEGMENT, _FIELD_1):
        w.sgpr[at] = (np.arange(n_waves, dtype=np.int64) * setup.scratch_wave_bytes) & 0xFFFFFFFF
    tid = np.arange(waves_per_group)[:, None] * LANES + np.arange(LANES)  # one workgroup's pattern, then tiled
    enabled = _field(setup.rsrc2, Rsrc2.ENABLE_VGPR_WORKITEM_ID, _FIELD_2)
    tx, ty, tz = tid % nx, (tid // nx) % ny, tid // (nx * ny)
    packed = tx | ((ty << WORKITEM_ID_SHIFT) if enabled >= 1 else 0)
    packed = packed | ((tz << 2 * WORKITEM_ID_SHIFT) if enabled >= _FIELD_2 - 1 else 0)
    packed = np.tile(packed.astype(np.uint32), (n_groups, 1))
    w.vgpr[0] = packed.astype(np.uint32)
    lanes_on = np.clip(threads - np.arange(waves_per_group) * LANES, 0, LANES).astype(np.uint64)
    w.sgpr[Src.EXEC_LO] = np.tile(((np.uint64(1) << lanes_on) - np.uint64(1)).astype(np.uint32), n_groups)
    return w


_DEFAULT_CACHE: Final = ProgramCache()


def run_dispatch(
    space: AddressSpace,
    setup: DispatchSetup,
    *,
    cache: ProgramCache | None = None,
    step_budget: int = DEFAULT_STEP_BUDGET,
    code_window_bytes: int = DEFAULT_CODE_WINDOW_BYTES,
) -> DispatchStats:
    """Run ``setup``'s grid to completion through ``space``.

    ``step_budget`` bounds the group steps (one instruction for the waves at one PC); ``code_window_bytes`` the
    bytes read from the program address (less where the mapping ends sooner).

    Raises:
        WaveTrap: an unimplemented or illegal instruction, a PC outside the code, the budget ran out, a wave64
            dispatch, or a scratch access in a dispatch without scratch memory.
        GpuMemoryFault: a memory instruction reached an address with nothing mapped (``va`` names it).
    """
    if not setup.wave32:
        raise WaveTrap("wave64 dispatches are not modelled (docs/rdna3.md); build the kernel for wave32 "
                       "(-mwavefrontsize64 off)", pc=setup.pgm_addr)  # fmt: skip
    base = setup.pgm_addr
    program = (cache or _DEFAULT_CACHE).get(space, base, code_window_bytes)
    decodes_before = program.decodes
    waves = steps = wave_steps = lane_steps = 0
    for first, count in _batches(setup):
        w = _setup_waves(setup, first, count)
        waves += len(w.pc)
        steps, more_waves, more_lanes = _run_waves(space, program, w, steps, step_budget)
        wave_steps += more_waves
        lane_steps += more_lanes
    return DispatchStats(waves, steps, wave_steps, lane_steps, program.decodes - decodes_before)


def _run_waves(space: AddressSpace, program: Program, w: Waves, steps: int, step_budget: int) -> tuple[int, int, int]:
    """Run ``w`` to the end; ``steps`` group steps were taken before. Returns the steps so far and the wave and
    lane instructions these waves executed."""
    base = program.base
    wave_steps = lane_steps = 0
    while True:
        runnable = w.alive & ~w.waiting
        if not runnable.any():
            if not w.waiting.any():
                break
            w.waiting[:] = False  # every live wave is at its barrier: release them all
            continue
        pcs = np.where(runnable, w.pc, np.iinfo(np.int64).max)
        pc = int(pcs.min())
        here = pcs == pc
        sel: slice | np.ndarray = slice(None) if here.all() else np.flatnonzero(here)
        n = len(w.pc) if isinstance(sel, slice) else len(sel)
        inst, handler = program.at(pc, space)
        if steps >= step_budget:
            raise WaveTrap(f"step budget of {step_budget} group steps exhausted", pc=base + pc, text=inst.text)
        g = Group(w, space, sel, n, pc, inst.size, base, inst.literal)
        try:
            handler(g, inst)
        except OperandError as exc:
            raise WaveTrap(str(exc), pc=base + pc, text=inst.text) from None
        except IndexError:
            raise WaveTrap("a register operand is past the registers the dispatch allocates", pc=base + pc,
                           text=inst.text) from None  # fmt: skip
        w.pc[sel] = g.next_pc if g.new_pc is None else g.new_pc
        steps += 1
        wave_steps += n
        lane_steps += n * LANES
    return steps, wave_steps, lane_steps
