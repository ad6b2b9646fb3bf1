"""The range allocator never hands out overlapping ranges, and frees exactly what it gave."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tinyhil.allocator import OutOfMemory, RangeAllocator
from tinyhil.errors import InvalidArgument

SPACE = 1 << 20


class AllocatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.allocator = RangeAllocator(0x10000, SPACE, alignment=0x100)
        self.live: dict[int, int] = {}

    @rule(nbytes=st.integers(0, SPACE // 4))
    def alloc(self, nbytes: int) -> None:
        try:
            addr = self.allocator.alloc(nbytes)
        except OutOfMemory:
            return
        assert addr % 0x100 == 0
        assert addr >= 0x10000 and addr + nbytes <= 0x10000 + SPACE
        self.live[addr] = max(nbytes, 1)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        addr = data.draw(st.sampled_from(sorted(self.live)))
        self.allocator.free(addr)
        del self.live[addr]

    @invariant()
    def no_overlap(self) -> None:
        spans = sorted(self.live.items())
        for (a, n), (b, _) in itertools.pairwise(spans):
            assert a + n <= b
        for addr, n in spans:
            assert self.allocator.find(addr + n - 1) is not None


TestAllocator = AllocatorMachine.TestCase


def test_bad_frees_and_alignment_are_rejected() -> None:
    allocator = RangeAllocator(0, 0x10000)
    addr = allocator.alloc(10)
    with pytest.raises(InvalidArgument, match="not the start of a live allocation"):
        allocator.free(addr + 1)
    allocator.free(addr)
    with pytest.raises(InvalidArgument, match="not the start"):
        allocator.free(addr)
    with pytest.raises(InvalidArgument, match="power of two"):
        RangeAllocator(0, 100, alignment=3)


def test_out_of_memory_names_the_request() -> None:
    allocator = RangeAllocator(0, 0x2000)
    allocator.alloc(0x1000)
    with pytest.raises(OutOfMemory, match="cannot allocate 0x1001 bytes"):
        allocator.alloc(0x1001)
