"""Per-lane gather and scatter: the one-translation fast path and the clustered path give the same bytes as
byte-by-byte reads and writes through the address space, and a fault names the first lane that hits nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rdna3 import make_space

from tinyhil.emulators.amdgpu.errors import GpuMemoryFault
from tinyhil.emulators.amdgpu.rdna3 import lanes

SPACE_BYTES = 4 << 20
spans = st.sampled_from([64, 4096, 1 << 16, SPACE_BYTES - 64])  # near lanes, clusters, far apart


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    nbytes=st.sampled_from([1, 2, 4, 8, 12, 16]),
    span=spans,
    count=st.integers(1, 64),
    force_clusters=st.booleans(),
)
def test_gather_and_scatter_match_the_address_space(
    data: st.DataObject, nbytes: int, span: int, count: int, force_clusters: bool
) -> None:
    space = make_space(SPACE_BYTES)
    space.write(0, np.random.default_rng(count).integers(0, 256, SPACE_BYTES, dtype=np.uint8))
    offsets = data.draw(st.lists(st.integers(0, span - nbytes), min_size=count, max_size=count))
    addrs = np.array(offsets, np.uint64)
    if force_clusters:
        lanes_fast = lanes._fast_view
        lanes._fast_view = lambda *args: None  # type: ignore[assignment]
    try:
        got = lanes.gather(space, addrs, nbytes)
        expected = np.array([np.frombuffer(bytes(space.read(int(a), nbytes)), np.uint8) for a in addrs])
        assert np.array_equal(got, expected)
        values = np.arange(count * nbytes, dtype=np.uint32).astype(np.uint8).reshape(count, nbytes)
        reference = bytearray(space.read(0, SPACE_BYTES))
        for a, row in zip(offsets, values, strict=True):  # later lanes win, as in the executor
            reference[a : a + nbytes] = row.tobytes()
        lanes.scatter(space, addrs, values)
        assert bytes(space.read(0, SPACE_BYTES)) == bytes(reference)
    finally:
        if force_clusters:
            lanes._fast_view = lanes_fast  # type: ignore[assignment]


def test_a_fault_names_the_first_lane_past_the_mapping() -> None:
    space = make_space(1 << 20)
    addrs = np.array([0x100, (1 << 20) + 0x40, 0x200, (1 << 20) - 2], np.uint64)
    with pytest.raises(GpuMemoryFault) as caught:
        lanes.gather(space, addrs, 4)
    assert caught.value.va == (1 << 20) - 2
    with pytest.raises(GpuMemoryFault):
        lanes.scatter(space, addrs, np.zeros((4, 4), np.uint8))
