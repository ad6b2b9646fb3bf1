"""The AQL offsets in ``tinyhil.spec.hsa_aql`` agree with the C layout of the structures as ``hsa.h``,
``amd_hsa_signal.h`` and ``amd_hsa_queue.h`` declare them (field types in order, laid out by ctypes)."""

from __future__ import annotations

import ctypes
from enum import IntEnum

import pytest

from tinyhil.spec.hsa_aql import (
    AQL_PACKET_BYTES,
    BARRIER_DEP_SIGNALS,
    AmdQueueOffset,
    AmdSignalOffset,
    BarrierPacketOffset,
    KernelDispatchPacketOffset,
)

u16, u32, u64, i64 = ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64


class KernelDispatchPacket(ctypes.Structure):
    _fields_ = [("header", u16), ("setup", u16), ("workgroup_size_x", u16), ("workgroup_size_y", u16),
                ("workgroup_size_z", u16), ("reserved0", u16), ("grid_size_x", u32), ("grid_size_y", u32),
                ("grid_size_z", u32), ("private_segment_size", u32), ("group_segment_size", u32),
                ("kernel_object", u64), ("kernarg_address", u64), ("reserved2", u64),
                ("completion_signal", u64)]  # fmt: skip


class BarrierPacket(ctypes.Structure):
    _fields_ = [("header", u16), ("reserved0", u16), ("reserved1", u32), ("dep_signal", u64 * BARRIER_DEP_SIGNALS),
                ("reserved2", u64), ("completion_signal", u64)]  # fmt: skip


class AmdSignal(ctypes.Structure):
    _fields_ = [("kind", i64), ("value", i64), ("event_mailbox_ptr", u64), ("event_id", u32), ("reserved1", u32),
                ("start_ts", u64), ("end_ts", u64), ("queue_ptr", u64), ("reserved3", u32 * 2)]  # fmt: skip


class HsaQueue(ctypes.Structure):
    _fields_ = [("type", u32), ("features", u32), ("base_address", u64), ("doorbell_signal", u64), ("size", u32),
                ("reserved1", u32), ("id", u64)]  # fmt: skip


class AmdQueue(ctypes.Structure):
    _fields_ = [("hsa_queue", HsaQueue), ("caps", u32), ("reserved1", u32 * 3), ("write_dispatch_id", u64),
                ("group_segment_aperture_base_hi", u32), ("private_segment_aperture_base_hi", u32),
                ("max_cu_id", u32), ("max_wave_id", u32), ("max_legacy_doorbell_dispatch_id_plus_1", u64),
                ("legacy_doorbell_lock", u32), ("reserved2", u32 * 9), ("read_dispatch_id", u64),
                ("read_dispatch_id_field_base_byte_offset", u32), ("compute_tmpring_size", u32),
                ("scratch_resource_descriptor", u32 * 4), ("scratch_backing_memory_location", u64),
                ("scratch_backing_memory_byte_size", u64)]  # fmt: skip


def _offset(structure: type[ctypes.Structure], name: str) -> int:
    if hasattr(structure, name):
        return int(getattr(structure, name).offset)
    return int(getattr(HsaQueue, name).offset)  # amd_queue_t begins with its hsa_queue_t


LAYOUTS = [(KernelDispatchPacketOffset, KernelDispatchPacket), (BarrierPacketOffset, BarrierPacket),
           (AmdSignalOffset, AmdSignal), (AmdQueueOffset, AmdQueue)]  # fmt: skip


@pytest.mark.parametrize(("offsets", "structure"), LAYOUTS)
def test_offsets_match_the_c_layout(offsets: type[IntEnum], structure: type[ctypes.Structure]) -> None:
    assert {field.name: int(field) for field in offsets} == {field.name: _offset(structure, field.name)
                                                           for field in offsets}  # fmt: skip


def test_packets_and_signals_are_64_bytes() -> None:
    assert ctypes.sizeof(KernelDispatchPacket) == ctypes.sizeof(BarrierPacket) == AQL_PACKET_BYTES
    assert ctypes.sizeof(AmdSignal) == AQL_PACKET_BYTES
