"""MOCKKFD's side of the file-I/O seam: its files, the fall-through rule, mmaps, and one table of bad inputs."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tinyhil.fileio import FileIO, RealFileIO
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.kfd_events import kfd_ioctl_create_event_args
from tinyhil.spec.kfd_ioctls import KFD_IOCTL_MINOR_VERSION, KfdIoctl
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_DOORBELL,
    KFD_MMAP_TYPE_EVENTS,
    KFD_MMAP_TYPE_MMIO,
    KFD_MMAP_TYPE_RESERVED_MEM,
    kfd_mmap_gpu_id,
)
from tinyhil.spec.kfd_queues import KFD_DOORBELL_PROCESS_SLICE_BYTES

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"


def test_the_mock_seam_conforms_to_the_protocol(mock: MockKFD) -> None:
    assert isinstance(mock.fileio, FileIO)


def test_device_files_and_listings(mock: MockKFD) -> None:
    io = mock.fileio
    assert io.exists("/dev/kfd") and io.exists("/dev/dri/renderD129") and not io.exists("/dev/dri/renderD130")
    assert io.listdir("/dev") == ["dri", "kfd"] and io.listdir("/dev/dri") == ["renderD128", "renderD129"]
    assert io.listdir(f"{TOPOLOGY}/nodes") == ["0", "1", "2"]
    assert io.listdir(f"{TOPOLOGY}/nodes/1") == ["caches", "gpu_id", "io_links", "mem_banks", "name", "p2p_links",
                                                 "properties"]  # fmt: skip
    assert io.read(f"{TOPOLOGY}/nodes/2/gpu_id") == f"{mock.gpus[1].gpu_id}\n".encode()
    assert io.read("//sys/devices/virtual/kfd/kfd/topology/../topology/nodes/1/name") == b"gfx1100\n"


def test_other_paths_fall_through_to_the_real_file_system_for_reads_only(mock: MockKFD, tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("real")
    io = mock.fileio
    assert io.read(str(tmp_path / "real.txt")) == b"real"
    assert io.listdir(str(tmp_path)) == ["real.txt"] and io.exists(str(tmp_path / "real.txt"))
    with pytest.raises(FileNotFoundError, match="only its own"):
        io.open(str(tmp_path / "real.txt"), os.O_RDONLY)
    assert not io.exists("/dev/null")  # /dev belongs to the mock: no fall-through for device paths


def test_file_descriptors_are_distinct_reserved_descriptors(mock: MockKFD) -> None:
    io = mock.fileio
    fds = [io.open("/dev/kfd", os.O_RDWR), io.open("/dev/kfd", os.O_RDWR), io.open("/dev/dri/renderD128", os.O_RDWR)]
    assert len(set(fds)) == 3 and all(os.fstat(fd) for fd in fds)  # each is a live descriptor of /dev/null
    io.close(fds[0])
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fds[0])
    mock.close()
    assert io.files == {}


def _fds(mock: MockKFD) -> dict[str, int]:
    io = mock.fileio
    return {
        "kfd": io.open("/dev/kfd", os.O_RDWR),
        "render": io.open("/dev/dri/renderD128", os.O_RDWR),
        "sysfs": io.open(f"{TOPOLOGY}/system_properties", os.O_RDONLY),
        "dir": io.open(f"{TOPOLOGY}/nodes", os.O_RDONLY),
    }


def _gpu(mock: MockKFD) -> int:
    return kfd_mmap_gpu_id(mock.gpus[0].gpu_id)


# One table: an operation on the mock's seam and the errno Linux would give it.
BAD_INPUTS: list[Any] = [
    pytest.param(lambda m, f: m.fileio.open("/dev/kfd2", os.O_RDWR), errno.ENOENT, id="open missing device"),
    pytest.param(lambda m, f: m.fileio.open(f"{TOPOLOGY}/nodes/9/gpu_id", 0), errno.ENOENT, id="open missing node"),
    pytest.param(lambda m, f: m.fileio.open(f"{TOPOLOGY}/generation_id", os.O_RDWR), errno.EACCES, id="write sysfs"),
    pytest.param(lambda m, f: m.fileio.open(f"{TOPOLOGY}/nodes", os.O_WRONLY), errno.EISDIR, id="write a directory"),
    pytest.param(lambda m, f: m.fileio.read("/dev/kfd"), errno.EINVAL, id="read the device"),
    pytest.param(lambda m, f: m.fileio.read(f"{TOPOLOGY}/nodes"), errno.EISDIR, id="read a directory"),
    pytest.param(lambda m, f: m.fileio.read(f"{TOPOLOGY}/nodes/0/nope"), errno.ENOENT, id="read missing"),
    pytest.param(lambda m, f: m.fileio.listdir(f"{TOPOLOGY}/system_properties"), errno.ENOTDIR, id="list a file"),
    pytest.param(lambda m, f: m.fileio.listdir("/dev/dri/by-path"), errno.ENOENT, id="list missing"),
    pytest.param(lambda m, f: m.fileio.close(123_456), errno.EBADF, id="close unknown fd"),
    pytest.param(lambda m, f: m.fileio.ioctl(123_456, 0, bytearray(8)), errno.EBADF, id="ioctl unknown fd"),
    pytest.param(lambda m, f: m.fileio.ioctl(f["render"], 0xC0084B01, bytearray(8)), errno.ENOTTY, id="render ioctl"),
    pytest.param(lambda m, f: m.fileio.ioctl(f["sysfs"], 0xC0084B01, bytearray(8)), errno.ENOTTY, id="sysfs ioctl"),
    pytest.param(lambda m, f: m.fileio.mmap(123_456, 4096, 0), errno.EBADF, id="mmap unknown fd"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 0, 0), errno.EINVAL, id="mmap zero length"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, 100), errno.EINVAL, id="mmap unaligned offset"),
    pytest.param(lambda m, f: m.fileio.mmap(f["sysfs"], 4096, 0), errno.ENODEV, id="mmap sysfs"),
    pytest.param(lambda m, f: m.fileio.mmap(f["dir"], 4096, 0), errno.ENODEV, id="mmap a directory"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 8192, KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(0xBEEF)),
                 errno.ENODEV, id="doorbells of no GPU"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, KFD_MMAP_TYPE_DOORBELL | _gpu(m)), errno.EINVAL,
                 id="half a doorbell frame"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 8192, KFD_MMAP_TYPE_MMIO | _gpu(m)), errno.EINVAL,
                 id="two MMIO pages"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, KFD_MMAP_TYPE_EVENTS), errno.EINVAL,
                 id="events before any event"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, KFD_MMAP_TYPE_RESERVED_MEM | _gpu(m)), errno.EINVAL,
                 id="reserved memory"),
    pytest.param(lambda m, f: m.fileio.mmap(f["render"], 4096, 1 << 32), errno.EINVAL, id="no buffer object there"),
]  # fmt: skip


def test_mmio_and_event_pages(mock: MockKFD, raw: Any) -> None:
    mmio = mock.fileio.mmap(raw.fd, 4096, KFD_MMAP_TYPE_MMIO | _gpu(mock))
    mmio[0:4] = b"\x01\x00\x00\x00"  # HDP_MEM_FLUSH_CNTL: accepted, no effect in the model
    assert mock.gpus[0].mmio_page[:4] == b"\x01\x00\x00\x00"
    raw.ioctl(KfdIoctl.AMDKFD_IOC_CREATE_EVENT, kfd_ioctl_create_event_args())
    events = mock.fileio.mmap(raw.fd, 4096, KFD_MMAP_TYPE_EVENTS)
    assert events[8:16] == b"\xff" * 8 and mock.process.signal_mapped_size == 4096
    mock.fileio.munmap(events)
    with pytest.raises(ValueError):
        events[0:1]


def test_render_node_mmaps_give_sub_ranges_of_a_buffer(mock: MockKFD, raw: Any) -> None:
    gpu_id = raw.acquire(0)
    args = raw.alloc(0, 0x3000, 0x1000_0000_0000)
    raw.map(args.handle, [gpu_id])
    middle = mock.fileio.mmap(raw.render_fds[0], 0x1000, args.mmap_offset + 0x1000)
    middle[0:3] = b"abc"
    fake = mock.gpus[0].port
    assert bytes(fake.read(0x1000_0000_1000, 3)) == b"abc" and fake.written == [(0x1000_0000_1000, 3)]
    with pytest.raises(OSError) as caught:
        mock.fileio.mmap(raw.render_fds[0], 0x3000, args.mmap_offset + 0x1000)  # runs past the buffer
    assert caught.value.errno == errno.EINVAL
    other_gpu = mock.fileio.open("/dev/dri/renderD129", os.O_RDWR)
    with pytest.raises(OSError):
        mock.fileio.mmap(other_gpu, 0x1000, args.mmap_offset)  # that offset is GPU 0's


def test_doorbell_frame_size(mock: MockKFD, raw: Any) -> None:
    page = mock.fileio.mmap(raw.fd, KFD_DOORBELL_PROCESS_SLICE_BYTES, KFD_MMAP_TYPE_DOORBELL | _gpu(mock))
    assert len(page) == 8192


# Arguments of the wrong type: the exception Python's own call raises before any system call, from the mock and the
# real seam alike (tinyhil.fileio.arguments). `fd` is the mock's /dev/kfd, or /dev/null for the real seam.
WRONG_TYPES: list[Any] = [
    pytest.param(lambda io, fd: io.mmap(fd, 1.5, 0), TypeError, id="mmap float length"),  # was "Unknown format code"
    pytest.param(lambda io, fd: io.mmap(fd, 4096, 1.5), TypeError, id="mmap float offset"),
    pytest.param(lambda io, fd: io.mmap(fd, "x", 0), TypeError, id="mmap str length"),
    pytest.param(lambda io, fd: io.mmap(None, 4096, 0), TypeError, id="mmap fd None"),
    pytest.param(lambda io, fd: io.ioctl(fd, "x", bytearray(8)), TypeError, id="ioctl str request"),
    pytest.param(lambda io, fd: io.ioctl(fd, None, bytearray(8)), TypeError, id="ioctl request None"),  # ioctls.py:75
    pytest.param(lambda io, fd: io.ioctl(fd, 1.5, bytearray(8)), TypeError, id="ioctl float request"),
    pytest.param(lambda io, fd: io.ioctl(None, 0xC0084B01, bytearray(8)), TypeError, id="ioctl fd None"),
    pytest.param(lambda io, fd: io.close(None), TypeError, id="close None"),
    pytest.param(lambda io, fd: io.close("3"), TypeError, id="close str"),
    pytest.param(lambda io, fd: io.munmap(None), TypeError, id="munmap None"),
    pytest.param(lambda io, fd: io.munmap(bytearray(8)), TypeError, id="munmap a bytearray"),
    pytest.param(lambda io, fd: io.open("/dev/kfd", 1.5), TypeError, id="open float flags"),
    pytest.param(lambda io, fd: io.open(None, os.O_RDONLY), TypeError, id="open None"),
    pytest.param(lambda io, fd: io.read(None), TypeError, id="read None"),
    pytest.param(lambda io, fd: io.listdir(3.5), TypeError, id="listdir float"),
    pytest.param(lambda io, fd: io.exists(None), TypeError, id="exists None"),
    pytest.param(lambda io, fd: io.read("/dev/k\0fd"), ValueError, id="read NUL path"),
    pytest.param(lambda io, fd: io.open("/dev/k\0fd", os.O_RDWR), ValueError, id="open NUL path"),
]


@pytest.mark.parametrize(("operation", "kind"), WRONG_TYPES)
def test_arguments_of_the_wrong_type_raise_what_the_real_seam_raises(
    mock: MockKFD, operation: Callable[[Any, int], Any], kind: type[Exception]
) -> None:
    fds = _fds(mock)
    before = mock.state_digest()
    with pytest.raises(kind) as from_mock:
        operation(mock.fileio, fds["kfd"])
    assert mock.state_digest() == before
    real = RealFileIO()
    null = real.open(os.devnull, os.O_RDWR)
    try:
        with pytest.raises(kind) as from_real:
            operation(real, null)
    finally:
        real.close(null)
    assert type(from_mock.value) is type(from_real.value) is kind
    assert not mock.fileio.exists("/dev/k\0fd")


# Ints and paths of any size: OSError with the errno, never a crash while formatting the message.
EXTREME_VALUES: list[Any] = [
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 10**5000, 0), errno.ENOMEM, id="mmap huge length"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, 10**5000), errno.EINVAL, id="mmap huge offset"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], -(10**5000), 0), errno.EINVAL, id="mmap hugely negative"),
    pytest.param(lambda m, f: m.fileio.mmap(f["kfd"], 4096, -4096), errno.EINVAL, id="mmap negative offset"),
    pytest.param(lambda m, f: m.fileio.mmap(10**5000, 4096, 0), errno.EBADF, id="mmap huge fd"),
    pytest.param(lambda m, f: m.fileio.mmap(-1, 4096, 0), errno.EBADF, id="mmap fd -1"),
    pytest.param(lambda m, f: m.fileio.ioctl(10**5000, 0, bytearray(8)), errno.EBADF, id="ioctl huge fd"),
    pytest.param(lambda m, f: m.fileio.ioctl(f["render"], 10**5000, bytearray(8)), errno.ENOTTY, id="huge request"),
    pytest.param(lambda m, f: m.fileio.ioctl(f["kfd"], -1, bytearray(64)), errno.ENOTTY, id="request -1"),
    pytest.param(lambda m, f: m.fileio.close(10**5000), errno.EBADF, id="close huge fd"),
    pytest.param(lambda m, f: m.fileio.read("/dev/" + "k" * 100_000), errno.ENOENT, id="read a long path"),
]  # fmt: skip


@pytest.mark.parametrize(("operation", "code"), BAD_INPUTS + EXTREME_VALUES)
def test_bad_seam_inputs(mock: MockKFD, operation: Callable[[MockKFD, dict[str, int]], Any], code: int) -> None:
    fds = _fds(mock)
    before = mock.state_digest()
    with pytest.raises(OSError) as caught:
        operation(mock, fds)
    assert caught.value.errno == code
    assert mock.state_digest() == before


def test_the_request_reaches_the_kernel_as_32_bits(mock: MockKFD, raw: Any) -> None:
    # the kernel's ioctl takes an unsigned int cmd (and Python 3.11's fcntl.ioctl truncates the same way)
    buf = bytearray(8)
    mock.fileio.ioctl(raw.fd, (7 << 32) | KfdIoctl.AMDKFD_IOC_GET_VERSION, buf)
    assert (int.from_bytes(buf[:4], "little"), int.from_bytes(buf[4:], "little")) == (1, KFD_IOCTL_MINOR_VERSION)


def test_bytes_and_path_like_paths_work_as_with_os(mock: MockKFD) -> None:
    io = mock.fileio
    assert io.read(f"{TOPOLOGY}/generation_id".encode()) == io.read(Path(TOPOLOGY) / "generation_id") == b"1\n"
    assert io.listdir(b"/dev") == ["dri", "kfd"] and io.exists(Path("/dev/kfd"))
    io.close(io.open(b"/dev/kfd", os.O_RDWR))
