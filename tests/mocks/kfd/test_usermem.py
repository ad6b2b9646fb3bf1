"""Checked access to user pointers: EFAULT for anything not mapped with the needed permissions."""

from __future__ import annotations

import ctypes
import errno
import mmap
from pathlib import Path

import numpy as np
import pytest

from tinyhil.mocks.kfd.usermem import UserMemory


@pytest.fixture
def memory() -> UserMemory:
    return UserMemory()


def test_reads_and_writes_of_mapped_memory(memory: UserMemory) -> None:
    buffer = (ctypes.c_char * 32)(*b"0123456789")
    address = ctypes.addressof(buffer)
    assert memory.read("buf", address, 4) == b"0123"
    memory.write("buf", address + 4, b"abcd")
    assert buffer.raw[:10] == b"0123abcd89"
    view = memory.view("buf", address, 32)
    view[0] = ord("Z")
    assert buffer.raw[0:1] == b"Z" and memory.read("buf", address, 0) == b""


@pytest.mark.parametrize("address", [0, 8, 0x1000, (1 << 64) - 8, 1 << 63])
def test_unmapped_addresses_are_efault(memory: UserMemory, address: int) -> None:
    with pytest.raises(OSError) as caught:
        memory.read("ptr", address, 8)
    assert caught.value.errno == errno.EFAULT


def test_ranges_must_be_mapped_throughout_with_the_needed_permissions(memory: UserMemory) -> None:
    region = mmap.mmap(-1, 3 * 4096)
    start = ctypes.addressof(ctypes.c_char.from_buffer(region))
    memory.check("inside", start, 3 * 4096, writable=True)
    with pytest.raises(OSError) as caught:
        memory.check("huge", start, 1 << 46)
    assert caught.value.errno == errno.EFAULT and "huge" in str(caught.value)
    readonly = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)
    address = np.frombuffer(readonly, np.uint8).ctypes.data
    memory.check("readonly", address, 4096)
    with pytest.raises(OSError, match="not read-write memory"):
        memory.write("readonly", address, b"x")


def test_without_proc_maps_pointers_are_trusted(tmp_path: Path) -> None:
    memory = UserMemory(str(tmp_path / "missing"))
    buffer = ctypes.create_string_buffer(b"trusted", 8)
    assert memory.read("buf", ctypes.addressof(buffer), 7) == b"trusted"
    with pytest.raises(OSError):
        memory.read("null", 0, 8)
