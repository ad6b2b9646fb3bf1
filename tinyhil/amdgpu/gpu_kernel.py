"""GPU machine code on the AMD runtime: load an AMDHSA code object, lay out its kernarg segment, emit its dispatch.

What :meth:`~tinyhil.amdgpu.driver.AmdDeviceBase.exec` does with a program whose binary is an AMDGPU ELF
(``e_machine`` EM_AMDGPU, e.g. from the ``LLVM`` renderer, ``tinyhil.compiler_amdgpu``), as ROCr or a PM4
driver does on a board (docs/amdgpu.md "Kernel executor"):

- load the object once (:func:`~tinyhil.amdgpu.code_object.load_code_object`: a malformed object, one built for
  another processor or one without the named kernel is a :class:`~tinyhil.amdgpu.KernelLoadError` before anything
  is submitted) and copy its image to GPU memory;
- per dispatch, the kernarg segment (:func:`kernarg_segment`): the explicit arguments where the metadata puts
  them, the hidden arguments (block counts, group sizes, grid dimensions), then a 64-byte HSA kernel dispatch
  packet for a kernel that enables the dispatch pointer;
- the registers and DISPATCH_DIRECT (:func:`~tinyhil.amdgpu.pm4.pm4_launch_kernel`), with the user SGPRs the
  descriptor enables (:func:`~tinyhil.amdgpu.code_object.user_sgprs`);
- for a kernel with a private segment, its scratch (docs/amdgpu.md "Scratch"): :meth:`GpuKernel.scratch_bytes`
  sizes the buffer the runtime provides (a slot of :meth:`GpuKernel.scratch_wave_bytes` per wave, for the
  dispatch's waves but at most :data:`MAX_SCRATCH_WAVES`), and the launch programs its GFX11 registers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tinyhil.align import ceil_div, round_up
from tinyhil.amdgpu.code_object import (
    PGM_ALIGN,
    KernelDescriptor,
    grid_dims,
    hidden_kernargs,
    load_code_object,
    user_sgprs,
)
from tinyhil.amdgpu.errors import CodeObjectError, KernelLoadError
from tinyhil.amdgpu.pm4 import pm4_launch_kernel
from tinyhil.device import Program
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu_pm4 import GFX1100_SHADER_ENGINES, TMPRING_WAVESIZE_UNIT_BYTES
from tinyhil.spec.amdhsa import ELF_MAGIC, EM_AMDGPU, KernelCodeProperty, Rsrc2

from ._packet import Packet

__all__ = ["DISPATCH_PACKET_BYTES", "MAX_SCRATCH_WAVES", "GpuKernel", "is_amdgpu_code_object", "kernarg_segment",
           "load_gpu_kernel", "load_program_kernel"]  # fmt: skip

_E_MACHINE: Final = struct.Struct("<H")
_E_MACHINE_OFFSET: Final = 18
# hsa_kernel_dispatch_packet_t: header, setup, workgroup size x/y/z, reserved, grid size x/y/z (work-items),
# private and group segment sizes, kernel object, kernarg address, reserved, completion signal.
_DISPATCH_PACKET: Final = struct.Struct("<HHHHHHIIIIIQQQQ")
DISPATCH_PACKET_BYTES: Final = _DISPATCH_PACKET.size
_HIDDEN_PREFIX: Final = "hidden_"
# Scratch slots a dispatch gets at most: what Navi 31 keeps in flight (32 waves per CU x 96 CUs); a larger grid
# reuses the slots as its waves finish, as the hardware does.
MAX_SCRATCH_WAVES: Final = 32 * 96
_SCRATCH_FIELDS: Final = (
    KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER | KernelCodeProperty.ENABLE_SGPR_FLAT_SCRATCH_INIT
)
_DWORD: Final = 4
_WAVE32_LANES: Final = 32
_WAVE64_LANES: Final = 64
_MAX_ARG_BYTES: Final = 8


def is_amdgpu_code_object(binary: bytes) -> bool:
    """Whether ``binary`` is an ELF for the AMDGPU machine (GPU code), not a host-native shared object."""
    head = binary[: _E_MACHINE_OFFSET + _E_MACHINE.size]
    return (
        len(head) == _E_MACHINE_OFFSET + _E_MACHINE.size
        and head[:4] == ELF_MAGIC
        and _E_MACHINE.unpack_from(head, _E_MACHINE_OFFSET)[0] == EM_AMDGPU
    )


@dataclass(frozen=True, slots=True)
class GpuKernel:
    """One kernel of a code object loaded at ``base`` in GPU memory: its descriptor and entry address."""

    kd: KernelDescriptor
    base: int
    image: bytes

    @property
    def entry_va(self) -> int:
        return self.base + self.kd.entry_vaddr

    def kernarg_bytes(self) -> int:
        """The kernarg slot one dispatch needs: the segment, then the dispatch packet (64-byte aligned)."""
        return round_up(self.kd.kernarg_size, DISPATCH_PACKET_BYTES) + DISPATCH_PACKET_BYTES

    @property
    def uses_scratch(self) -> bool:
        """Whether the kernel has a private segment: a fixed size, rsrc2's ENABLE_PRIVATE_SEGMENT (GFX11's
        architected flat scratch) or the private segment buffer / flat scratch init user SGPRs."""
        kd = self.kd
        return bool(
            kd.private_segment_fixed_size
            or kd.compute_pgm_rsrc2 >> Rsrc2.ENABLE_PRIVATE_SEGMENT & 1
            or kd.kernel_code_properties & _SCRATCH_FIELDS
        )

    def scratch_wave_bytes(self) -> int:
        """One wave's scratch slot: the private segment per lane (whole dwords, the hardware interleaves lanes a
        dword at a time) for every lane, in COMPUTE_TMPRING_SIZE.WAVESIZE units (at least one); 0 without scratch."""
        if not self.uses_scratch:
            return 0
        lanes = _WAVE32_LANES if self.kd.wave32 else _WAVE64_LANES
        per_wave = round_up(self.kd.private_segment_fixed_size, _DWORD) * lanes
        return max(round_up(per_wave, TMPRING_WAVESIZE_UNIT_BYTES), TMPRING_WAVESIZE_UNIT_BYTES)

    def scratch_waves_per_se(self, grid: Sequence[int], block: Sequence[int]) -> int:
        """COMPUTE_TMPRING_SIZE.WAVES for a dispatch: slots for its waves (at most :data:`MAX_SCRATCH_WAVES`),
        counted per shader engine as GFX11 counts them; 0 without scratch."""
        if not self.uses_scratch:
            return 0
        lanes = _WAVE32_LANES if self.kd.wave32 else _WAVE64_LANES
        waves = (
            int(grid[0]) * int(grid[1]) * int(grid[2]) * ceil_div(int(block[0]) * int(block[1]) * int(block[2]), lanes)
        )
        return ceil_div(min(waves, MAX_SCRATCH_WAVES), GFX1100_SHADER_ENGINES)

    def scratch_bytes(self, grid: Sequence[int], block: Sequence[int]) -> int:
        """The scratch buffer a dispatch over ``grid`` x ``block`` needs (0 without a private segment)."""
        return self.scratch_waves_per_se(grid, block) * GFX1100_SHADER_ENGINES * self.scratch_wave_bytes()

    def launch(
        self,
        kernarg_va: int,
        words: Sequence[int],
        grid: Sequence[int],
        block: Sequence[int],
        scratch_va: int = 0,
    ) -> tuple[bytes, Packet]:
        """The kernarg slot's bytes (for ``kernarg_va``) and the PM4 packets that dispatch this kernel; a kernel
        with a private segment uses :meth:`scratch_bytes` of GPU memory at ``scratch_va``."""
        g = (int(grid[0]), int(grid[1]), int(grid[2]))
        b = (int(block[0]), int(block[1]), int(block[2]))
        segment = kernarg_segment(self.kd, words, g, b)
        packet_va = kernarg_va + self.kernarg_bytes() - DISPATCH_PACKET_BYTES
        packet = _DISPATCH_PACKET.pack(0, grid_dims(g, b), *b, 0, *(n * k for n, k in zip(g, b, strict=True)),
                                       self.kd.private_segment_fixed_size, self.kd.group_segment_fixed_size,
                                       self.base + self.kd.descriptor_vaddr, kernarg_va, 0, 0)  # fmt: skip
        slot = segment.ljust(self.kernarg_bytes() - DISPATCH_PACKET_BYTES, b"\0") + packet
        user = user_sgprs(self.kd, {
            KernelCodeProperty.ENABLE_SGPR_KERNARG_SEGMENT_PTR: kernarg_va,
            KernelCodeProperty.ENABLE_SGPR_DISPATCH_PTR: packet_va,
            KernelCodeProperty.ENABLE_SGPR_QUEUE_PTR: 0,  # no AQL queue behind a PM4 dispatch
            KernelCodeProperty.ENABLE_SGPR_DISPATCH_ID: 0,
            KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: 0,
            KernelCodeProperty.ENABLE_SGPR_FLAT_SCRATCH_INIT: scratch_va,
            KernelCodeProperty.ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: self.kd.private_segment_fixed_size,
        })  # fmt: skip
        rsrc = (self.kd.compute_pgm_rsrc1, self.kd.dispatch_rsrc2(), self.kd.compute_pgm_rsrc3)
        return slot, pm4_launch_kernel(self.entry_va, rsrc, user, g, b, wave32=self.kd.wave32, scratch_va=scratch_va,
                                       scratch_waves_per_se=self.scratch_waves_per_se(g, b),
                                       scratch_wave_bytes=self.scratch_wave_bytes())  # fmt: skip


def load_gpu_kernel(binary: bytes, name: str, base: int) -> GpuKernel:
    """Kernel ``name`` of the code object ``binary``, to be placed at the 256-byte aligned GPU address ``base``.

    Raises:
        CodeObjectError: the object is malformed, built for another processor, or has no kernel ``name``.
    """
    co = load_code_object(binary)
    kd = co.kernels.get(name)
    if kd is None:
        raise CodeObjectError(f"no kernel {name!r} in the code object (kernels: {', '.join(sorted(co.kernels))})")
    if base % PGM_ALIGN:
        raise CodeObjectError(f"base={base:#x}, expected a {PGM_ALIGN}-byte aligned GPU address")
    return GpuKernel(kd, base, co.image)


def load_program_kernel(target: str, program: Program) -> GpuKernel:
    """:func:`load_gpu_kernel` of ``program`` at base 0, as the runtime loads it before its first dispatch.

    Raises:
        KernelLoadError: the code object cannot load (the reason names why), as for a host-native program.
    """
    try:
        return load_gpu_kernel(program.binary, program.name, 0)
    except CodeObjectError as error:
        raise KernelLoadError(f"{target}: program {program.name!r} ({program.key}) cannot load: {error}",
                              program=program.name, reason=str(error), target=target) from None  # fmt: skip


def kernarg_segment(
    kd: KernelDescriptor, words: Sequence[int], grid: tuple[int, int, int], block: tuple[int, int, int]
) -> bytes:
    """``kd``'s kernarg segment: the hidden arguments (:func:`~tinyhil.amdgpu.code_object.hidden_kernargs`) and the
    explicit ones. ``words`` are the launch's 64-bit arguments: with one explicit argument per word, word ``i``
    goes to argument ``i``'s metadata offset, cut to its size (a 4-byte ``int`` takes the low half); a kernel with
    one by-value block (the portable form's ``th_args``) takes the words in order from its offset.

    Raises:
        InvalidArgument: the words fit neither form.
    """
    data = bytearray(hidden_kernargs(kd, grid, block))
    explicit = [a for a in kd.metadata.get(".args", []) if not str(a.get(".value_kind", "")).startswith(_HIDDEN_PREFIX)]
    spans = [(int(a.get(".offset", -1)), int(a.get(".size", 0))) for a in explicit]
    if len(spans) == len(words) and all(0 < size <= _MAX_ARG_BYTES for _, size in spans):
        placed = [(offset, (int(w) & ((1 << 8 * size) - 1)).to_bytes(size, "little"))
                  for (offset, size), w in zip(spans, words, strict=True)]  # fmt: skip
    elif len(spans) == 1 and spans[0][1] >= _MAX_ARG_BYTES * len(words):
        packed = b"".join((int(w) & ((1 << 64) - 1)).to_bytes(_MAX_ARG_BYTES, "little") for w in words)
        placed = [(spans[0][0], packed)]
    else:
        raise InvalidArgument(
            f"{kd.name}: {len(words)} arguments, expected {len(spans)} (one per explicit kernel argument, each at "
            f"most {_MAX_ARG_BYTES} bytes) or a kernel with one by-value block of at least {8 * len(words)} bytes"
        )
    for offset, raw in placed:
        if offset < 0 or offset + len(raw) > len(data):
            raise InvalidArgument(f"{kd.name}: argument at {offset:#x}+{len(raw):#x} lies past kernarg_size "
                                  f"{len(data):#x}")  # fmt: skip
        data[offset : offset + len(raw)] = raw
    return bytes(data)
