"""PCIe memory through Asm2464Controller against the emulated bridge, on the wire: single TLPs in their byte lanes,
0xF0 streams (mode, dword count, bulk data), round trips at any alignment below and above 4 GB, requests identical to
the reference encoder's, and UR for an address no BAR claims. Memory is the plain GPU endpoint's BAR5 (32-bit) and
BAR0 (above 4 GB) after bring-up."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.wire import Recorded, WireRecorder, recorded_board

from tinyhil.asm2464 import Asm2464Controller, PcieError, PcieTopology, pcie_bringup
from tinyhil.asm2464.controller import SINGLE_TLP_MAX_BYTES
from tinyhil.asm2464.stream import plan_mem_access
from tinyhil.asm2464.tlp import encode_tlp, lane_offset
from tinyhil.spec.asm2464 import CplStatus, FmtType

OUT, IN = 0x40, 0xC0
CPL_READ = (IN, 0xF0, 0, 0, 8)


def _tlp(fmt_type: int, enables: int, mode: int, lo: int, hi: int, word: int) -> tuple[Any, ...]:
    return (OUT, 0xF0, fmt_type | enables << 8, mode, struct.pack("<III", lo, hi, word))


def test_single_tlp_read_and_posted_write(
    controller: Asm2464Controller, wire: WireRecorder, topology: PcieTopology
) -> None:
    mem = topology.bar(5).address  # plain memory behind the GPU's BAR5
    controller.pcie_mem_write(mem, b"\x11\x22\x33\x44")
    wire.clear()
    assert controller.pcie_request(FmtType.MRD32, mem + 2, size=2) == 0x4433
    controller.pcie_request(FmtType.MWR32, mem + 1, 0xAA, size=1)
    assert controller.pcie_mem_read(mem, 4) == b"\x11\xaa\x33\x44"
    assert wire.requests()[:3] == [_tlp(0x00, 0b1100, 0, mem, 0, 0), CPL_READ, _tlp(0x40, 0b0010, 0, mem, 0, 0xAA00)]
    assert wire.transfers[1].received is not None and wire.transfers[1].received[:4] == b"\x00\x00\x33\x44"


def test_a_tlp_to_an_unmapped_address_raises_ur(controller: Asm2464Controller, topology: PcieTopology) -> None:
    with pytest.raises(PcieError, match=r"MRD32 at 0x20000000\+0x2 completed with UR") as raised:
        controller.pcie_mem_read(0x2000_0000, 2)
    assert raised.value.cpl_status is CplStatus.UR


def test_memory_streams_encode_mode_dword_count_and_bulk(
    controller: Asm2464Controller, wire: WireRecorder, topology: PcieTopology
) -> None:
    mem = topology.bar(5).address
    data = bytes(range(256)) * 9  # 2304 bytes: two 1024-byte streams and a 256-byte one with a small chunk size
    controller.stream_chunk_bytes = 1024
    controller.pcie_mem_write(mem + 0x100, data)
    assert wire.requests() == [
        _tlp(0x40, 0xF, 1, mem + 0x100, 0, 256),
        _tlp(0x40, 0xF, 1, mem + 0x500, 0, 256),
        _tlp(0x40, 0xF, 1, mem + 0x900, 0, 64),
    ]
    assert [t.out for t in wire.of("bulk_out")] == [data[:1024], data[1024:2048], data[2048:]]
    wire.clear()
    assert controller.pcie_mem_read(mem + 0x100, len(data)) == data
    assert wire.requests()[0] == _tlp(0x00, 0xF, 2, mem + 0x100, 0, 256)
    assert [t.length for t in wire.of("bulk_in")] == [1024, 1024, 256]
    assert b"".join(t.received or b"" for t in wire.of("bulk_in")) == data


@contextmanager
def _brought_up(chunk: int) -> Iterator[tuple[Recorded, Asm2464Controller, PcieTopology]]:
    with recorded_board() as recorded:
        controller = recorded.controller(stream_chunk_bytes=chunk)
        topology = pcie_bringup(controller)
        recorded.wire.clear()
        yield recorded, controller, topology


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bar=st.sampled_from([5, 0]), offset=st.integers(0, 0xF000), size=st.integers(1, 3000), data=st.data())
def test_memory_round_trips_at_any_alignment(bar: int, offset: int, size: int, data: st.DataObject) -> None:
    """BAR5 (32-bit) and BAR0 (above 4 GB); a piece straddling 4 GB is covered by the planner's tests."""
    with _brought_up(2048) as (recorded, controller, topology):
        base = topology.bar(bar).address
        payload = data.draw(st.binary(min_size=size, max_size=size))
        before = controller.pcie_mem_read(base, 0x10000)
        recorded.wire.clear()
        controller.pcie_mem_write(base + offset, payload)
        writes = recorded.wire.requests(("control_out",))
        after = controller.pcie_mem_read(base, 0x10000)
        assert after[offset : offset + size] == payload
        assert after[:offset] == before[:offset] and after[offset + size :] == before[offset + size :]
        assert controller.pcie_mem_read(base + offset, size) == payload
        for _, _, value, mode, raw in writes:
            lo, hi, word = struct.unpack("<III", raw)
            start = hi << 32 | lo
            if mode:  # a stream of `word` dwords
                end = start + 4 * word
            else:
                lane, nbytes = lane_offset(value >> 8)
                start += lane
                end = start + nbytes
            assert bool(value & 0x20) == (end > 1 << 32), "64-bit TLPs exactly for pieces reaching above 4 GB"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bar=st.sampled_from([5, 0]), offset=st.integers(0, 0xF000), size=st.integers(1, 2100), data=st.data())
def test_memory_writes_send_what_the_reference_encoder_builds(
    bar: int, offset: int, size: int, data: st.DataObject
) -> None:
    """pcie_mem_write encodes its requests itself (cached per lane and size, on every ring write and doorbell): they
    must be exactly what plan_mem_access + encode_tlp (pcie_request's encoder) build for the same write."""
    with _brought_up(1024) as (recorded, controller, topology):
        base = topology.bar(bar).address
        payload = data.draw(st.binary(min_size=size, max_size=size))
        controller.pcie_mem_write(base + offset, payload)
        expected = []
        for piece in plan_mem_access(
            base + offset, size, stream_chunk_bytes=1024, single_max_bytes=SINGLE_TLP_MAX_BYTES
        ):
            fmt_type = piece.fmt_type(write=True)
            if piece.stream:
                address = piece.address
                expected.append(_tlp(fmt_type, 0xF, 1, address & 0xFFFF_FFFF, address >> 32, piece.size // 4))
            else:
                value = int.from_bytes(payload[piece.offset : piece.offset + piece.size], "little")
                wvalue, raw = encode_tlp(fmt_type, piece.address, piece.size, value)
                expected.append((OUT, 0xF0, wvalue, 0, raw))
        assert recorded.wire.requests(("control_out",)) == expected
        assert controller.pcie_mem_read(base + offset, size) == payload
