"""AQL packets and the AMD structures around them, as a runtime (ROCr) writes them, for the AQL tests.

Layouts come from ``tinyhil.spec.hsa_aql``; the builders return bytes to place in GPU memory.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from support.rdna3 import CLANG, LLD, MISSING_CLANG, compile_cl
from support.rdna3_corpus import SOURCE
from tinyhil.amdgpu.code_object import CodeObject
from tinyhil.spec.hsa_aql import (
    AQL_PACKET_BYTES,
    BARRIER_DEP_SIGNALS,
    AmdQueueOffset,
    AmdSignalOffset,
    BarrierPacketOffset,
    HsaFenceScope,
    HsaPacketHeader,
    HsaPacketType,
    KernelDispatchPacketOffset,
)

T = HsaPacketType
P = KernelDispatchPacketOffset
AMD_QUEUE_BYTES = 256
SIGNAL_BYTES = 64


def header(packet_type: int, *, barrier: bool = True) -> int:
    """A packet header with system-scope acquire and release fences."""
    system = HsaFenceScope.HSA_FENCE_SCOPE_SYSTEM
    return (
        packet_type << HsaPacketHeader.HSA_PACKET_HEADER_TYPE
        | int(barrier) << HsaPacketHeader.HSA_PACKET_HEADER_BARRIER
        | system << HsaPacketHeader.HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE
        | system << HsaPacketHeader.HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE
    )


def kernel_dispatch(
    *,
    kernel_object: int,
    kernarg: int,
    grid: Sequence[int],
    block: Sequence[int],
    completion_signal: int = 0,
    group_segment_size: int = 0,
    private_segment_size: int = 0,
    dims: int | None = None,
    packet_type: int = T.HSA_PACKET_TYPE_KERNEL_DISPATCH,
) -> bytes:
    """An ``hsa_kernel_dispatch_packet_t``; ``grid`` in work-items."""
    packet = bytearray(AQL_PACKET_BYTES)
    grid3, block3 = [*grid, 1, 1][:3], [*block, 1, 1][:3]
    struct.pack_into("<HH", packet, P.header, header(packet_type), len(grid) if dims is None else dims)
    struct.pack_into("<HHH", packet, P.workgroup_size_x, *block3)
    struct.pack_into("<III", packet, P.grid_size_x, *grid3)
    struct.pack_into("<II", packet, P.private_segment_size, private_segment_size, group_segment_size)
    struct.pack_into("<QQ", packet, P.kernel_object, kernel_object, kernarg)
    struct.pack_into("<Q", packet, P.completion_signal, completion_signal)
    return bytes(packet)


def barrier(packet_type: int, deps: Sequence[int], completion_signal: int = 0) -> bytes:
    """An ``hsa_barrier_and_packet_t`` / ``hsa_barrier_or_packet_t`` (up to five dependency handles)."""
    assert len(deps) <= BARRIER_DEP_SIGNALS
    packet = bytearray(AQL_PACKET_BYTES)
    struct.pack_into("<H", packet, BarrierPacketOffset.header, header(packet_type))
    struct.pack_into(f"<{len(deps)}Q", packet, BarrierPacketOffset.dep_signal, *deps)
    struct.pack_into("<Q", packet, BarrierPacketOffset.completion_signal, completion_signal)
    return bytes(packet)


def signal(value: int, *, mailbox: int = 0, event_id: int = 0) -> bytes:
    """An ``amd_signal_t`` of kind USER holding ``value``, with an event mailbox when given."""
    data = bytearray(SIGNAL_BYTES)
    struct.pack_into("<qq", data, AmdSignalOffset.kind, 1, value)
    struct.pack_into("<QI", data, AmdSignalOffset.event_mailbox_ptr, mailbox, event_id)
    return bytes(data)


def amd_queue(
    ring_va: int,
    ring_packets: int,
    *,
    scratch_srd: Sequence[int] = (0, 0, 0, 0),
    scratch: int = 0,
    tmpring_size: int = 0,
) -> bytes:
    """An ``amd_queue_t`` as ROCr fills it before CREATE_QUEUE (indices 0); ``scratch`` and ``tmpring_size``: the
    queue's scratch memory and its COMPUTE_TMPRING_SIZE (WAVES per SE, WAVESIZE in 256-byte units)."""
    data = bytearray(AMD_QUEUE_BYTES)
    struct.pack_into("<Q", data, AmdQueueOffset.base_address, ring_va)
    struct.pack_into("<I", data, AmdQueueOffset.size, ring_packets)
    offset = AmdQueueOffset.read_dispatch_id
    struct.pack_into("<I", data, AmdQueueOffset.read_dispatch_id_field_base_byte_offset, offset)
    struct.pack_into("<4I", data, AmdQueueOffset.scratch_resource_descriptor, *scratch_srd)
    struct.pack_into("<Q", data, AmdQueueOffset.scratch_backing_memory_location, scratch)
    struct.pack_into("<I", data, AmdQueueOffset.compute_tmpring_size, tmpring_size)
    return bytes(data)


def invalid_ring(packets: int) -> bytes:
    """A ring whose every header is INVALID (how ROCr initialises one)."""
    slot = struct.pack("<H", T.HSA_PACKET_TYPE_INVALID) + bytes(AQL_PACKET_BYTES - 2)
    return slot * packets


# A kernel that reads its own dispatch packet through the dispatch ptr.
_DISPATCH_PTR_KERNEL = """
__kernel void ids(__global ulong *out) {
  __constant uint *packet = (__constant uint *)__builtin_amdgcn_dispatch_ptr();
  if (__builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workgroup_id_x() == 1) {
    out[0] = packet[3]; out[1] = (ulong)packet; } }
"""


def kernel_source() -> str:
    """The RDNA3 executor's kernel corpus (``support.rdna3_corpus``) and ``ids``."""
    return SOURCE + _DISPATCH_PTR_KERNEL


def compile_kernels(tmp_path_factory: pytest.TempPathFactory, name: str) -> CodeObject:
    """:func:`kernel_source` built by clang-19 in a new folder ``name``; skips the test where clang-19 is missing."""
    if CLANG is None or LLD is None:
        pytest.skip(MISSING_CLANG)
    return compile_cl(kernel_source(), Path(tmp_path_factory.mktemp(name)))
