"""An HSA kernel dispatch packet and its kernel descriptor, turned into the dispatch the wave executor runs.

What the AQL packet processor does between reading a KERNEL_DISPATCH packet and starting waves
(docs/amdgpu.md "AQL packets"): decode the packet, read the 64-byte kernel descriptor at ``kernel_object``, check
both, and build the :class:`~tinyhil.emulators.amdgpu.rdna3.DispatchSetup` (program address, rsrc1/2/3 with the
packet's group segment as LDS, the user SGPRs the descriptor enables, the grid in workgroups, and for a kernel
with a private segment the queue's scratch: ``scratch_backing_memory_location`` as the scratch base and
``compute_tmpring_size`` as the slots and their size, docs/amdgpu.md "Scratch"). A value the
hardware could not run is a :class:`~tinyhil.emulators.amdgpu.packets.PacketError` (BAD_PACKET) naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tinyhil._check import WORKGROUP_MAX_SIZE
from tinyhil.spec.amdgpu_pm4 import (
    COMPUTE_PGM_ADDR_SHIFT,
    COMPUTE_TMPRING_SIZE_WAVES,
    COMPUTE_TMPRING_SIZE_WAVESIZE,
    GFX1100_SHADER_ENGINES,
    TMPRING_WAVESIZE_UNIT_BYTES,
    USER_DATA_REGS,
)
from tinyhil.spec.amdhsa import (
    KD_BYTES,
    USER_SGPR_COUNT_MASK,
    KdOffset,
    KernelCodeProperty,
    Rsrc2,
    rsrc2_with_lds,
    user_sgpr_dwords,
)
from tinyhil.spec.hsa_aql import (
    AQL_PACKET_BYTES,
    HSA_SETUP_WIDTH_DIMENSIONS,
    AmdQueueOffset,
    KernelDispatchPacketOffset,
)

from .memory import AddressSpace
from .model_choices import ErrorCode
from .packets import PacketError
from .rdna3 import DispatchSetup

__all__ = ["KernelDispatch", "dispatch_setup"]

_P = KernelDispatchPacketOffset
_K = KdOffset
_KD_ALIGN: Final = 64  # a kernel descriptor is 64-byte aligned (AMDGPUUsage "Kernel Descriptor")
_PGM_ALIGN: Final = 1 << COMPUTE_PGM_ADDR_SHIFT  # COMPUTE_PGM_LO/HI hold the entry address >> 8
_MAX_GROUP_SEGMENT_BYTES: Final = 64 << 10  # LDS per workgroup on GFX11
_DIMS_MASK: Final = (1 << HSA_SETUP_WIDTH_DIMENSIONS) - 1
_DWORD: Final = 0xFFFF_FFFF


def _bad(message: str) -> PacketError:
    return PacketError(ErrorCode.BAD_PACKET, f"KERNEL_DISPATCH: {message}")


def _field(data: bytes, offset: int, nbytes: int, *, signed: bool = False) -> int:
    return int.from_bytes(data[offset : offset + nbytes], "little", signed=signed)


@dataclass(frozen=True, slots=True)
class KernelDispatch:
    """The fields of one ``hsa_kernel_dispatch_packet_t``."""

    header: int
    dimensions: int
    workgroup_size: tuple[int, int, int]
    grid_size: tuple[int, int, int]  # work-items
    private_segment_size: int
    group_segment_size: int
    kernel_object: int
    kernarg_address: int
    completion_signal: int

    @classmethod
    def decode(cls, packet: bytes) -> KernelDispatch:
        if len(packet) != AQL_PACKET_BYTES:
            raise _bad(f"a kernel dispatch packet of {len(packet)} bytes, expected {AQL_PACKET_BYTES}")
        u16 = [_field(packet, offset, 2) for offset in (_P.workgroup_size_x, _P.workgroup_size_y, _P.workgroup_size_z)]
        u32 = [_field(packet, offset, 4) for offset in (_P.grid_size_x, _P.grid_size_y, _P.grid_size_z)]
        return cls(
            _field(packet, _P.header, 2),
            _field(packet, _P.setup, 2) & _DIMS_MASK,
            (u16[0], u16[1], u16[2]),
            (u32[0], u32[1], u32[2]),
            _field(packet, _P.private_segment_size, 4),
            _field(packet, _P.group_segment_size, 4),
            _field(packet, _P.kernel_object, 8),
            _field(packet, _P.kernarg_address, 8),
            _field(packet, _P.completion_signal, 8),
        )

    def workgroups(self) -> tuple[int, int, int]:
        """The grid in workgroups (whole workgroups only: a partial last workgroup is refused).

        Raises:
            PacketError: no dimensions, an empty workgroup or grid, more than 1024 work-items per workgroup, or a
                grid size that is not a multiple of the workgroup size.
        """
        if not 1 <= self.dimensions <= 3:
            raise _bad(f"setup.dimensions={self.dimensions}, expected 1, 2 or 3")
        size, grid = self.workgroup_size, self.grid_size
        if min(size) < 1 or size[0] * size[1] * size[2] > WORKGROUP_MAX_SIZE:
            raise _bad(f"workgroup_size={size}, expected 1..{WORKGROUP_MAX_SIZE} work-items, each size >= 1")
        if min(grid) < 1:
            raise _bad(f"grid_size={grid}, expected at least 1 work-item per dimension")
        for axis, (items, group) in enumerate(zip(grid, size, strict=True)):
            if items % group:
                raise _bad(
                    f"grid_size_{'xyz'[axis]}={items} is not a multiple of workgroup_size_{'xyz'[axis]}={group}: "
                    "partial workgroups are not modelled"
                )
        return (grid[0] // size[0], grid[1] // size[1], grid[2] // size[2])


def dispatch_setup(
    memory: AddressSpace, dispatch: KernelDispatch, *, packet_va: int, queue_va: int, dispatch_id: int
) -> DispatchSetup:
    """The dispatch the firmware starts for ``dispatch`` (the packet at ``packet_va`` of the queue whose
    ``amd_queue_t`` is at ``queue_va``; ``dispatch_id``: the packet's index).

    Raises:
        PacketError: a malformed packet or kernel descriptor (see :meth:`KernelDispatch.workgroups`; also a
            misaligned descriptor or code entry, wave64, too much LDS, more user SGPRs than rsrc2 declares).
        GpuMemoryFault: the descriptor (or the queue's scratch fields, when the descriptor asks for them) is not
            mapped.
    """
    grid = dispatch.workgroups()
    kernel_object = dispatch.kernel_object
    if not kernel_object or kernel_object % _KD_ALIGN:
        raise _bad(f"kernel_object={kernel_object:#x}, expected a {_KD_ALIGN}-byte aligned descriptor address")
    kd = bytes(memory.read(kernel_object, KD_BYTES))
    entry = kernel_object + _field(kd, _K.KERNEL_CODE_ENTRY_BYTE_OFFSET, 8, signed=True)
    if entry % _PGM_ALIGN or entry < 0:
        raise _bad(
            f"kernel descriptor at {kernel_object:#x}: code entry {entry:#x}, expected a {_PGM_ALIGN}-byte aligned "
            "address (kernel_code_entry_byte_offset)"
        )
    properties = _field(kd, _K.KERNEL_CODE_PROPERTIES, 2)
    if not properties & KernelCodeProperty.ENABLE_WAVEFRONT_SIZE32:
        raise _bad(f"kernel descriptor at {kernel_object:#x} asks for wave64, expected wave32 (not modelled)")
    rsrc1, rsrc2 = _field(kd, _K.COMPUTE_PGM_RSRC1, 4), _field(kd, _K.COMPUTE_PGM_RSRC2, 4)
    lds_bytes = max(dispatch.group_segment_size, _field(kd, _K.GROUP_SEGMENT_FIXED_SIZE, 4))
    if lds_bytes > _MAX_GROUP_SEGMENT_BYTES:
        raise _bad(f"group segment of {lds_bytes:#x} bytes, expected at most {_MAX_GROUP_SEGMENT_BYTES:#x}")
    rsrc2 = rsrc2_with_lds(rsrc2, lds_bytes)
    scratch_fields = (
        KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER | KernelCodeProperty.ENABLE_SGPR_FLAT_SCRATCH_INIT
    )
    srd = scratch_base = wave_bytes = slots = 0
    if properties & scratch_fields or rsrc2 >> Rsrc2.ENABLE_PRIVATE_SEGMENT & 1:
        srd = _field(bytes(memory.read(queue_va + AmdQueueOffset.scratch_resource_descriptor, 16)), 0, 16)
        scratch_base = memory.read_u64(queue_va + AmdQueueOffset.scratch_backing_memory_location)
        tmpring = memory.read_u32(queue_va + AmdQueueOffset.compute_tmpring_size)
        wave_bytes = COMPUTE_TMPRING_SIZE_WAVESIZE.get(tmpring) * TMPRING_WAVESIZE_UNIT_BYTES
        slots = COMPUTE_TMPRING_SIZE_WAVES.get(tmpring) * GFX1100_SHADER_ENGINES  # WAVES counts per SE on GFX11
    values = {
        KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: srd,
        KernelCodeProperty.ENABLE_SGPR_DISPATCH_PTR: packet_va,
        KernelCodeProperty.ENABLE_SGPR_QUEUE_PTR: queue_va,
        KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: dispatch.kernarg_address,
        KernelCodeProperty.ENABLE_SGPR_DISPATCH_ID: dispatch_id,
        KernelCodeProperty.ENABLE_SGPR_FLAT_SCRATCH_INIT: scratch_base,
        KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: dispatch.private_segment_size,
    }
    user = user_sgpr_dwords(properties, values)
    declared = (rsrc2 >> Rsrc2.USER_SGPR_COUNT) & USER_SGPR_COUNT_MASK
    if len(user) > min(declared, USER_DATA_REGS):
        raise _bad(
            f"kernel descriptor at {kernel_object:#x} enables {len(user)} user SGPRs, but rsrc2.USER_SGPR_COUNT is "
            f"{declared}"
        )
    pgm = entry >> COMPUTE_PGM_ADDR_SHIFT
    return DispatchSetup(
        pgm & _DWORD, pgm >> 32, rsrc1, rsrc2, _field(kd, _K.COMPUTE_PGM_RSRC3, 4), tuple(user),
        dispatch.workgroup_size, grid, dispatch_id=dispatch_id,
        scratch_base=scratch_base if scratch_base and wave_bytes and slots else None,
        scratch_wave_bytes=wave_bytes if slots else 0, scratch_waves=slots,
    )  # fmt: skip
