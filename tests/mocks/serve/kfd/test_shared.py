"""Shared host memory: what MOCKKFD hands out is found again as a memfd and offset another process can map."""

from __future__ import annotations

import errno
import gc
import mmap
import os

import pytest

from tinyhil.mocks.serve.kfd import SharedMemory
from tinyhil.mocks.serve.kfd.shared import address_of


def test_a_view_inside_an_allocation_is_located_and_its_memfd_shows_the_stores() -> None:
    memory = SharedMemory()
    first, second = memory.allocate(2 * mmap.PAGESIZE), memory.allocate(mmap.PAGESIZE)
    second[:5] = b"hello"
    fd, offset = memory.locate(address_of(memoryview(second)[:5]), 5)
    assert offset == 0
    assert os.pread(fd, 5, 0) == b"hello"
    fd, offset = memory.locate(address_of(first) + mmap.PAGESIZE, mmap.PAGESIZE)
    assert offset == mmap.PAGESIZE
    with pytest.raises(OSError) as failure:
        memory.locate(address_of(first) + mmap.PAGESIZE, mmap.PAGESIZE + 1)  # runs past the allocation's end
    assert failure.value.errno == errno.ENODEV
    memory.close()


def test_a_collected_allocation_is_forgotten() -> None:
    memory = SharedMemory()
    mapping = memory.allocate(mmap.PAGESIZE)
    address = address_of(mapping)
    mapping.close()
    del mapping
    gc.collect()
    with pytest.raises(OSError):
        memory.locate(address, 1)
