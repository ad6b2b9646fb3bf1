"""HSA AQL facts: the 64-byte packets a user-mode queue holds, their header, and the AMD structures the packet
processor reads (``amd_signal_t``, ``amd_queue_t``); docs/amdgpu.md "AQL packets".

Names are the HSA runtime's (``hsa.h``: ``hsa_packet_type_t``, ``hsa_packet_header_t``, ``hsa_fence_scope_t``,
``hsa_kernel_dispatch_packet_t``, ``hsa_barrier_and_packet_t``) and ROCr's (``amd_hsa_signal.h``,
``amd_hsa_queue.h``), verbatim. Offsets are bytes; every field is little-endian. An AQL queue's read and write
indices count packets, not bytes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "AQL_PACKET_BYTES",
    "BARRIER_DEP_SIGNALS",
    "HSA_PACKET_HEADER_WIDTH_BARRIER",
    "HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE",
    "HSA_PACKET_HEADER_WIDTH_TYPE",
    "HSA_SETUP_WIDTH_DIMENSIONS",
    "AmdQueueOffset",
    "AmdSignalOffset",
    "BarrierPacketOffset",
    "HsaFenceScope",
    "HsaPacketHeader",
    "HsaPacketType",
    "KernelDispatchPacketOffset",
]

AQL_PACKET_BYTES: Final = 64
BARRIER_DEP_SIGNALS: Final = 5  # dep_signal[5] of a barrier-AND / barrier-OR packet


class HsaPacketType(IntEnum):
    """``hsa_packet_type_t``: bits 0-7 of the packet header."""

    HSA_PACKET_TYPE_VENDOR_SPECIFIC = 0
    HSA_PACKET_TYPE_INVALID = 1  # the slot holds no packet yet (or the packet processor consumed it)
    HSA_PACKET_TYPE_KERNEL_DISPATCH = 2
    HSA_PACKET_TYPE_BARRIER_AND = 3
    HSA_PACKET_TYPE_AGENT_DISPATCH = 4
    HSA_PACKET_TYPE_BARRIER_OR = 5


class HsaPacketHeader(IntEnum):
    """``hsa_packet_header_t``: the shift of each field of the u16 header."""

    HSA_PACKET_HEADER_TYPE = 0
    HSA_PACKET_HEADER_BARRIER = 8
    HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE = 9
    HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE = 11


HSA_PACKET_HEADER_WIDTH_TYPE: Final = 8
HSA_PACKET_HEADER_WIDTH_BARRIER: Final = 1
HSA_PACKET_HEADER_WIDTH_FENCE_SCOPE: Final = 2  # both the acquire and the release scope
HSA_SETUP_WIDTH_DIMENSIONS: Final = 2  # ``setup`` bits 0-1 of a kernel dispatch packet: the grid's dimensions


class HsaFenceScope(IntEnum):
    """``hsa_fence_scope_t``: the acquire and release fence scopes of a packet header."""

    HSA_FENCE_SCOPE_NONE = 0
    HSA_FENCE_SCOPE_AGENT = 1
    HSA_FENCE_SCOPE_SYSTEM = 2


class KernelDispatchPacketOffset(IntEnum):
    """``hsa_kernel_dispatch_packet_t`` field offsets (64 bytes; sizes in the comments)."""

    header = 0  # u16
    setup = 2  # u16: dimensions in bits 0-1
    workgroup_size_x = 4  # u16, work-items
    workgroup_size_y = 6  # u16
    workgroup_size_z = 8  # u16
    reserved0 = 10  # u16
    grid_size_x = 12  # u32, work-items (not workgroups)
    grid_size_y = 16  # u32
    grid_size_z = 20  # u32
    private_segment_size = 24  # u32, bytes per work-item
    group_segment_size = 28  # u32, bytes per workgroup
    kernel_object = 32  # u64: the address of the 64-byte kernel descriptor
    kernarg_address = 40  # u64
    reserved2 = 48  # u64
    completion_signal = 56  # u64: an ``amd_signal_t`` address, 0 = none


class BarrierPacketOffset(IntEnum):
    """``hsa_barrier_and_packet_t`` / ``hsa_barrier_or_packet_t`` field offsets (64 bytes)."""

    header = 0  # u16
    reserved0 = 2  # u16
    reserved1 = 4  # u32
    dep_signal = 8  # u64[5]: signal handles; a null handle is satisfied for barrier-AND, never for barrier-OR
    reserved2 = 48  # u64
    completion_signal = 56  # u64


class AmdSignalOffset(IntEnum):
    """``amd_signal_t`` field offsets (64 bytes, 64-byte aligned). A signal handle is its address."""

    kind = 0  # i64: 1 user, -1 / -2 doorbell
    value = 8  # i64
    event_mailbox_ptr = 16  # u64: where the packet processor writes ``event_id`` before interrupting (0: none)
    event_id = 24  # u32: the KFD event the interrupt carries
    reserved1 = 28  # u32
    start_ts = 32  # u64
    end_ts = 40  # u64
    queue_ptr = 48  # u64
    reserved3 = 56  # u32[2]


class AmdQueueOffset(IntEnum):
    """``amd_queue_t`` field offsets (the structure ROCr gives KFD the read and write indices of).

    The queue's read pointer is ``&read_dispatch_id`` and its write pointer ``&write_dispatch_id``; the packet
    processor finds the structure's base as read pointer - ``read_dispatch_id_field_base_byte_offset``.
    """

    base_address = 8  # hsa_queue_t.base_address: the ring
    size = 24  # hsa_queue_t.size: the ring in packets
    write_dispatch_id = 56  # u64
    read_dispatch_id = 128  # u64
    read_dispatch_id_field_base_byte_offset = 136  # u32
    compute_tmpring_size = 140  # u32
    scratch_resource_descriptor = 144  # u32[4]: the private segment buffer V#
    scratch_backing_memory_location = 160  # u64
    scratch_backing_memory_byte_size = 168  # u64
