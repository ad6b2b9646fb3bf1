"""The file-I/O seam: the real implementation on this machine, and MappedBuffer's slice access and write hook."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.errors import InvalidArgument
from tinyhil.fileio import FileIO, MappedBuffer, RealFileIO
from tinyhil.spec.kfd_events import kfd_ioctl_wait_events_args
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_memory import KFD_MMAP_TYPE_DOORBELL
from tinyhil.spec.kfd_process import kfd_ioctl_get_version_args
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH


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


# AMDKFD_IOC_WAIT_EVENTS has bit 31 set: fcntl.ioctl must take it as an unsigned request number.
@pytest.mark.parametrize(
    ("ioctl", "args"),
    [
        (KfdIoctl.AMDKFD_IOC_GET_VERSION, kfd_ioctl_get_version_args),
        (KfdIoctl.AMDKFD_IOC_WAIT_EVENTS, kfd_ioctl_wait_events_args),
    ],
    ids=["get_version", "wait_events_above_2_31"],
)
def test_a_kfd_ioctl_on_a_regular_file_is_enotty(
    real: RealFileIO, tmp_path: Path, ioctl: KfdIoctl, args: Callable[[], Any]
) -> None:
    path = tmp_path / "plain"
    path.write_bytes(b"x")
    fd = real.open(str(path), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            real.ioctl(fd, ioctl, args())
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
        (42, 0, None, "source=int object, expected a writable bytes-like object"),
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
    backing = bytearray(8)
    buf = MappedBuffer.over(backing, on_write=lambda offset, n: calls.append((offset, n)))
    with pytest.raises(IndexError, match="slice assignment is wrong size: the slice selects 0x4 of the buffer's 0x8"):
        buf[0:4] = b"abc"
    with pytest.raises(IndexError, match="wrong size: the slice selects 0x2 of the buffer's 0x8 bytes, the value"):
        buf[6:12] = b"abcdef"  # past the end: the slice is clipped, as mmap's is
    assert calls == [] and backing == bytearray(8)


# MappedBuffer indexes as mmap.mmap does: each access runs on both, and both give the same result or exception class.
MMAP_LIKE_ACCESSES: list[Any] = [
    pytest.param(lambda b: b[3], id="index"),
    pytest.param(lambda b: b[-16], id="negative index"),
    pytest.param(lambda b: b[16], id="index at the end"),
    pytest.param(lambda b: b[-17], id="negative index before the start"),
    pytest.param(lambda b: b[1 << 70], id="huge index"),
    pytest.param(lambda b: b["x"], id="str key"),
    pytest.param(lambda b: b[1.5], id="float key"),
    pytest.param(lambda b: b[10:20], id="slice past the end reads what there is"),
    pytest.param(lambda b: b[20:30], id="slice wholly past the end"),
    pytest.param(lambda b: b[::-3], id="negative step"),
    pytest.param(lambda b: b.__setitem__(16, 1), id="store at the end"),
    pytest.param(lambda b: b.__setitem__(0, 256), id="store 256"),
    pytest.param(lambda b: b.__setitem__(0, -1), id="store -1"),
    pytest.param(lambda b: b.__setitem__(0, b"a"), id="store bytes as an item"),
    pytest.param(lambda b: b.__setitem__(0, np.uint8(7)), id="store a numpy int"),
    pytest.param(lambda b: b.__setitem__(slice(10, 20), b"x" * 10), id="slice store past the end, value too long"),
    pytest.param(lambda b: b.__setitem__(slice(10, 20), b"x" * 6), id="slice store past the end, clipped length"),
    pytest.param(lambda b: b.__setitem__(slice(0, 4), b"abc"), id="slice store too short"),
    pytest.param(lambda b: b.__setitem__(slice(0, 8, 2), b"abcd"), id="stepped slice store"),
    pytest.param(lambda b: b.__setitem__(slice(0, 8, 2), b"abc"), id="stepped slice store, wrong size"),
    pytest.param(lambda b: b.__setitem__(slice(1 << 70, 1 << 71), b""), id="huge slice bounds, empty value"),
    pytest.param(lambda b: b.__setitem__(slice(0, 3), "abc"), id="slice store of a str"),
    pytest.param(lambda b: b.__setitem__(slice(0, 3), None), id="slice store of None"),
    pytest.param(lambda b: b.__setitem__(slice(0, 2), memoryview(bytearray(4))[::2]), id="non-contiguous value"),
    pytest.param(lambda b: b.__setitem__(slice(0, 4), memoryview(bytearray(4)).cast("H")), id="u16 view, bytes"),
    pytest.param(lambda b: b.__setitem__(slice("a", None), b""), id="str slice bound"),
]


def _outcome(access: Callable[[Any], Any], target: Any) -> tuple[str, Any]:
    try:
        result = access(target)
    except Exception as exc:
        return type(exc).__name__, None
    return "ok", result


@pytest.mark.parametrize("access", MMAP_LIKE_ACCESSES)
def test_mapped_buffer_indexing_matches_mmap(access: Callable[[Any], Any]) -> None:
    pattern = bytes(range(1, 17))
    reference = mmap.mmap(-1, len(pattern))
    reference[:] = pattern
    backing = bytearray(pattern)
    calls: list[tuple[int, int]] = []
    buf = MappedBuffer.over(backing, on_write=lambda offset, n: calls.append((offset, n)))
    expected, got = _outcome(access, reference), _outcome(access, buf)
    assert got == expected
    assert bytes(backing) == reference[:], "the same bytes changed"
    if got[0] != "ok":
        assert calls == [] and bytes(backing) == pattern, "a rejected access writes nothing and calls no hook"
    reference.close()


@given(
    start=st.none() | st.integers(-40, 40),
    stop=st.none() | st.integers(-40, 40),
    step=st.none() | st.integers(-5, 5).filter(bool),
    size=st.integers(0, 40),
)
def test_mapped_buffer_slice_stores_match_mmap(
    start: int | None, stop: int | None, step: int | None, size: int
) -> None:
    key, data = slice(start, stop, step), bytes(range(100, 100 + size))
    reference = mmap.mmap(-1, 16)
    backing = bytearray(16)
    buf = MappedBuffer.over(backing)
    assert _outcome(lambda b: b.__setitem__(key, data), buf) == _outcome(lambda b: b.__setitem__(key, data), reference)
    assert bytes(backing) == reference[:] and buf[key] == reference[key]
    reference.close()


# The real seam's argument rules (tinyhil.fileio.arguments): the exception Python's own call raises for a wrong type,
# else OSError with Linux's errno. `fd` is a descriptor of /dev/null.
REAL_BAD_ARGUMENTS: list[Any] = [
    pytest.param(lambda r, fd: r.mmap(fd, 1.5, 0), TypeError, None, id="mmap float length"),
    pytest.param(lambda r, fd: r.mmap(fd, 4096, "0"), TypeError, None, id="mmap str offset"),
    pytest.param(lambda r, fd: r.mmap(None, 4096, 0), TypeError, None, id="mmap fd None"),  # was ctypes.ArgumentError
    pytest.param(lambda r, fd: r.mmap(fd, 0, 0), OSError, errno.EINVAL, id="mmap zero length"),  # was InvalidArgument
    pytest.param(lambda r, fd: r.mmap(fd, -1, 0), OSError, errno.EINVAL, id="mmap negative length"),
    pytest.param(lambda r, fd: r.mmap(fd, 4096, 100), OSError, errno.EINVAL, id="mmap unaligned offset"),
    pytest.param(lambda r, fd: r.mmap(fd, 4096, -4096), OSError, errno.EINVAL, id="mmap negative offset"),
    pytest.param(lambda r, fd: r.mmap(fd, 4096, 1 << 64), OSError, errno.EINVAL, id="mmap offset past 64 bits"),
    pytest.param(lambda r, fd: r.mmap(fd, 10**5000, 0), OSError, errno.ENOMEM, id="mmap huge length"),
    pytest.param(lambda r, fd: r.mmap(-1, 4096, 0), OSError, errno.EBADF, id="mmap fd -1"),
    pytest.param(lambda r, fd: r.ioctl(fd, None, bytearray(8)), TypeError, None, id="ioctl request None"),
    pytest.param(lambda r, fd: r.ioctl(fd, "x", bytearray(8)), TypeError, None, id="ioctl str request"),
    pytest.param(lambda r, fd: r.ioctl(fd, 1.5, bytearray(8)), TypeError, None, id="ioctl float request"),
    pytest.param(lambda r, fd: r.ioctl(None, 0x5401, bytearray(8)), TypeError, None, id="ioctl fd None"),
    pytest.param(lambda r, fd: r.ioctl(10**5000, 0x5401, bytearray(8)), OSError, errno.EBADF, id="ioctl huge fd"),
    pytest.param(lambda r, fd: r.ioctl(fd, termios.TCGETS, bytearray(64)), OSError, errno.ENOTTY, id="not a tty"),
    pytest.param(lambda r, fd: r.close(None), TypeError, None, id="close None"),
    pytest.param(lambda r, fd: r.close(-1), OSError, errno.EBADF, id="close -1"),
    pytest.param(lambda r, fd: r.munmap(None), TypeError, None, id="munmap None"),  # was AttributeError
    pytest.param(lambda r, fd: r.open("/dev/null", 1.5), TypeError, None, id="open float flags"),
    pytest.param(lambda r, fd: r.open(None, os.O_RDONLY), TypeError, None, id="open None path"),
    pytest.param(lambda r, fd: r.read("/dev/\0null"), ValueError, None, id="read NUL path"),
    pytest.param(lambda r, fd: r.listdir(None), TypeError, None, id="listdir None"),  # os.listdir(None) lists "."
]


@pytest.mark.parametrize(("call", "kind", "code"), REAL_BAD_ARGUMENTS)
def test_the_real_seam_answers_bad_arguments_as_python_and_linux_do(
    real: RealFileIO, call: Callable[[RealFileIO, int], Any], kind: type[Exception], code: int | None
) -> None:
    fd = real.open(os.devnull, os.O_RDWR)
    try:
        with pytest.raises(kind) as caught:
            call(real, fd)
        assert type(caught.value) is kind or kind is OSError
        if code is not None:
            assert isinstance(caught.value, OSError) and caught.value.errno == code
    finally:
        real.close(fd)
    assert real.exists(b"/dev/null") and not real.exists("/dev/\0null")


TIOCGPTN = 0x80045430  # _IOR('T', 0x30, unsigned int): the pty's number, copied out to the caller
TIOCSPTLCK = 0x40045431  # _IOW('T', 0x31, int): (un)lock the pty, copied in from the caller


@pytest.fixture
def pty_master() -> Any:
    try:
        master, slave = os.openpty()
    except OSError as exc:
        pytest.skip(f"this machine cannot open a pseudo-terminal (os.openpty: {exc})")
    yield master
    os.close(master)
    os.close(slave)


@pytest.mark.parametrize(
    ("request_", "argument", "code"),
    [
        pytest.param(TIOCGPTN, bytearray(2), errno.EFAULT, id="copy out past a short buffer"),
        pytest.param(TIOCGPTN, bytes(4), errno.EFAULT, id="copy out into read-only memory"),
        pytest.param(TIOCGPTN, None, errno.EFAULT, id="copy out to no memory"),
        pytest.param(TIOCSPTLCK, b"\x00\x00", errno.EFAULT, id="copy in past a short buffer"),
        pytest.param(TIOCSPTLCK, bytes(4), 0, id="copy in from read-only memory"),
        pytest.param(TIOCGPTN, bytearray(4), 0, id="a buffer of the encoded size"),
    ],
)
def test_the_real_seam_gives_the_kernel_exactly_the_callers_memory(
    real: RealFileIO, pty_master: int, request_: int, argument: Any, code: int
) -> None:
    # The user-memory rule MOCKKFD models: the kernel's copies fault where the caller's memory ends (they used to
    # run on fcntl's 1 KiB stack copy, and a read-only argument crashed in int(bytes)).
    if code:
        with pytest.raises(OSError) as caught:
            real.ioctl(pty_master, request_, argument)
        assert caught.value.errno == code
    else:
        assert real.ioctl(pty_master, request_, argument) == 0
