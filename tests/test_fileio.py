"""The file-I/O seam: the real implementation on this machine, and MappedBuffer's slice access and write hook."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.fileio import FileIO, MappedBuffer, RealFileIO
from tinyhil.kfd import uapi
from tinyhil.kfd.ioctls import KfdIoctl
from tinyhil.kfd.kernel_abi import KFD_DEVICE_PATH, KFD_MMAP_TYPE_DOORBELL


@pytest.fixture
def real() -> RealFileIO:
    return RealFileIO()


def test_the_real_seam_conforms_to_the_protocol(real: RealFileIO) -> None:
    assert isinstance(real, FileIO)


@pytest.mark.skipif(os.path.exists(KFD_DEVICE_PATH), reason="this machine has /dev/kfd")
def test_opening_dev_kfd_without_amdkfd_is_file_not_found(real: RealFileIO) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        real.open(KFD_DEVICE_PATH, os.O_RDWR)
    assert caught.value.errno == errno.ENOENT


def test_a_kfd_ioctl_on_a_regular_file_is_enotty(real: RealFileIO, tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_bytes(b"x")
    fd = real.open(str(path), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            real.ioctl(fd, KfdIoctl.AMDKFD_IOC_GET_VERSION, uapi.kfd_ioctl_get_version_args())
        assert caught.value.errno == errno.ENOTTY
    finally:
        real.close(fd)


@pytest.mark.parametrize("make_buffer", [bytearray, lambda n: (ctypes.c_char * n)()], ids=["bytearray", "ctypes"])
def test_ioctl_fills_the_argument_in_place(real: RealFileIO, make_buffer: Callable[[int], Any]) -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"12345")
        buf = make_buffer(ctypes.sizeof(ctypes.c_int))
        assert real.ioctl(read_fd, termios.FIONREAD, buf) == 0
        assert int.from_bytes(bytes(buf), "little") == 5
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_mmap_of_a_file_reads_and_writes_through_slices(real: RealFileIO, tmp_path: Path) -> None:
    path = tmp_path / "mapped"
    path.write_bytes(bytes(range(256)) * 32)
    fd = real.open(str(path), os.O_RDWR)
    buf = real.mmap(fd, 8192, 4096)
    real.close(fd)  # the mapping outlives the descriptor, as with mmap(2)
    assert len(buf) == 8192 and buf[0:4] == bytes(range(4)) and buf[5] == 5
    buf[16:20] = b"WXYZ"
    buf[21] = 0x77
    assert np.frombuffer(buf, np.uint8)[16:22].tobytes() == b"WXYZ\x14\x77"
    real.munmap(buf)
    assert path.read_bytes()[4096 + 16 : 4096 + 22] == b"WXYZ\x14\x77"
    with pytest.raises(ValueError, match="released"):
        buf[0:1]


def test_mmap_at_a_kfd_doorbell_offset_reaches_the_kernel_and_fails_cleanly(real: RealFileIO, tmp_path: Path) -> None:
    path = tmp_path / "small"
    path.write_bytes(bytes(4096))
    fd = real.open(str(path), os.O_RDWR)
    try:
        with pytest.raises(OSError) as caught:  # offsets >= 2**63 pass through as the kernel's unsigned pgoff
            real.mmap(fd, 4096, KFD_MMAP_TYPE_DOORBELL)
        assert caught.value.errno in (errno.EINVAL, errno.EOVERFLOW, errno.ENXIO)
    finally:
        real.close(fd)


def test_read_listdir_exists(real: RealFileIO, tmp_path: Path) -> None:
    (tmp_path / "b").write_text("two")
    (tmp_path / "a").write_text("one")
    assert real.read(str(tmp_path / "a")) == b"one"
    assert real.listdir(str(tmp_path)) == ["a", "b"]
    assert real.exists(str(tmp_path / "b")) and not real.exists(str(tmp_path / "c"))


def test_slice_assignment_calls_the_write_hook_once_with_the_range() -> None:
    backing = bytearray(64)
    calls: list[tuple[int, int]] = []
    buf = MappedBuffer.over(backing, 16, 32, on_write=lambda offset, n: calls.append((offset, n)))
    buf[4:12] = np.arange(8, dtype=np.uint8)
    buf[-1] = 9
    buf[12:20:2] = b"abcd"
    buf[3:3] = b""
    assert calls == [(4, 8), (31, 1), (12, 7)]
    assert backing[20:28] == bytes(range(8)) and backing[47] == 9 and backing[28:35] == b"a\x00b\x00c\x00d"


def test_a_mapped_buffer_aliases_its_source_and_exposes_its_address() -> None:
    backing = bytearray(b"\x00" * 16)
    buf = MappedBuffer.over(backing)
    backing[3] = 0x42
    assert buf[3] == 0x42 and ctypes.string_at(buf.address + 3, 1) == b"\x42"
    assert memoryview(buf).nbytes == 16 and "16 bytes" in repr(buf)


@pytest.mark.parametrize(
    ("source", "offset", "nbytes", "match"),
    [
        (b"read-only", 0, None, "read-only"),
        (42, 0, None, "expected a writable buffer"),
        (bytearray(8), 9, None, "offset"),
        (bytearray(8), 4, 8, "ends past"),
        (bytearray(8), -1, None, "offset"),
    ],
)
def test_mapped_buffer_bad_sources(source: Any, offset: int, nbytes: int | None, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        MappedBuffer.over(source, offset, nbytes)


def test_a_wrong_size_slice_assignment_is_rejected_without_calling_the_hook() -> None:
    calls: list[tuple[int, int]] = []
    buf = MappedBuffer.over(bytearray(8), on_write=lambda offset, n: calls.append((offset, n)))
    with pytest.raises(ValueError):
        buf[0:4] = b"abc"
    assert calls == []


def test_fcntl_request_numbers_above_2_31_are_accepted(real: RealFileIO) -> None:
    # AMDKFD_IOC_WAIT_EVENTS has bit 31 set; fcntl.ioctl must take it as an unsigned request number.
    read_fd, write_fd = os.pipe()
    try:
        with pytest.raises(OSError) as caught:
            real.ioctl(read_fd, KfdIoctl.AMDKFD_IOC_WAIT_EVENTS, uapi.kfd_ioctl_wait_events_args())
        assert caught.value.errno == errno.ENOTTY
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert fcntl.ioctl is not None
