"""kfd_ioctl()'s size and direction rules, for every ioctl of the uapi: what the handler sees, what comes back.

Linux looks a request up by its number, runs the handler on a buffer of ``max(caller's size, kernel's size)``
bytes and uses its own table's direction; the expected bytes below are computed from those rules (see
:mod:`tinyhil.mocks.kfd.dispatch`), never written out per ioctl.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.kfd_ioctls import (
    AMDKFD_COMMAND_END,
    AMDKFD_IOCTL_BASE,
    IOCTLS,
    KFD_IOCTL_MAJOR_VERSION,
    KFD_IOCTL_MINOR_VERSION,
    IoctlDef,
    KfdIoctl,
)
from tinyhil.spec.kfd_memory import (
    AllocMemFlags,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
)
from tinyhil.spec.kfd_process import kfd_ioctl_get_clock_counters_args
from tinyhil.spec.linux_ioctl import IOC_SIZEBITS, IocDir, ioc, ioc_dir, ioc_nr, ioc_size

K = KfdIoctl
DIRECTIONS = {
    "_IOC_NONE": IocDir.IOC_NONE,
    "_IOC_READ": IocDir.IOC_READ,
    "_IOC_WRITE": IocDir.IOC_WRITE,
    "_IOC_READ|_IOC_WRITE": IocDir.IOC_READ | IocDir.IOC_WRITE,
}
USER_BYTES = bytes(range(1, 256)) * 65  # what the caller passes: never zero, so a zero-fill shows
HANDLER_BYTES = bytes(range(255, 0, -1)) * 65  # what the spy handler writes over its whole struct
MAX_SIZE = (1 << IOC_SIZEBITS) - 1


def of(request: int) -> IoctlDef:
    return IOCTLS[ioc_nr(request)]


def kernel_size(definition: IoctlDef) -> int:
    return ioc_size(definition.request)


def caller_sizes(definition: IoctlDef) -> list[int]:
    """Smaller than the kernel's (none, half, 4 less), equal, and larger (4 and 64 more)."""
    size = kernel_size(definition)
    return sorted({0, size // 2, max(size - 4, 0), size, size + 4, size + 64})


CASES = [
    pytest.param(definition, size, direction, id=f"{definition.name}-{size}-{name}")
    for definition in IOCTLS.values()
    for size in caller_sizes(definition)
    for name, direction in DIRECTIONS.items()
]


@dataclass
class Expected:
    """What kfd_ioctl() hands the handler and copies back, from its rules."""

    seen: bytes  # the handler's struct (the kernel's size) as the handler finds it
    back: bytes  # the caller's buffer afterwards


def expected(definition: IoctlDef, user: bytes) -> Expected:
    """The kernel's rules for a caller's buffer of exactly ``len(user)`` bytes (its encoded size)."""
    usize, ksize = len(user), kernel_size(definition)
    asize = max(usize, ksize)
    kdir = ioc_dir(definition.request)
    kdata = (user if kdir & IocDir.IOC_WRITE else bytes(usize)) + bytes(asize - usize)
    seen = kdata[:ksize]
    after = HANDLER_BYTES[:ksize] + kdata[ksize:]
    back = after[:usize] if kdir & IocDir.IOC_READ else user
    return Expected(seen, back)


@dataclass
class Spy:
    """A handler that records the struct it is given, overwrites it, and optionally fails afterwards."""

    definition: IoctlDef
    fails: bool = False
    seen: list[bytes] = field(default_factory=list)

    def __call__(self, args: Any) -> None:
        assert type(args) is self.definition.args, "the handler gets the kernel's own struct type"
        view = memoryview(args).cast("B")
        self.seen.append(bytes(view))
        view[:] = HANDLER_BYTES[: len(view)]
        if self.fails:
            raise OSError(errno.EINVAL, "the spy fails after writing its struct")


@pytest.fixture(scope="module")
def kfd() -> Iterator[tuple[MockKFD, int]]:
    """One MOCKKFD for the module (the spies touch no state): the mock and its /dev/kfd fd."""
    with MockKFD([]) as mock:
        yield mock, mock.fileio.open("/dev/kfd", os.O_RDWR)


@pytest.fixture
def spy_on(kfd: tuple[MockKFD, int], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Spy]:
    """``spy_on(definition, fails=False)``: put a spy in the definition's slot of the dispatcher's table."""

    def install(definition: IoctlDef, *, fails: bool = False) -> Spy:
        spy = Spy(definition, fails)
        monkeypatch.setitem(kfd[0].dispatcher.handlers, definition.request, spy)
        return spy

    return install


def call(kfd: tuple[MockKFD, int], request: int, buf: Any) -> int:
    """The errno of one request (0 when it succeeds)."""
    mock, fd = kfd
    try:
        mock.fileio.ioctl(fd, request, buf)
    except OSError as exc:
        return int(exc.errno or 0)
    return 0


@pytest.mark.parametrize(("definition", "size", "direction"), CASES)
def test_every_ioctl_at_every_size_and_direction_follows_the_kernels_copy_rules(
    kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy], definition: IoctlDef, size: int, direction: int
) -> None:
    request = ioc(direction, AMDKFD_IOCTL_BASE, definition.nr, size)
    rule = expected(definition, USER_BYTES[:size])
    for fails in (False, True):  # the copy-back happens whether or not the handler failed
        spy = spy_on(definition, fails=fails)
        buf = bytearray(USER_BYTES[:size])
        assert call(kfd, request, buf) == (errno.EINVAL if fails else 0)
        assert spy.seen == [rule.seen], "the handler sees the caller's bytes zero-extended, or zeros"
        assert bytes(buf) == rule.back, "the caller gets back its own size, from the kernel's buffer"


def test_the_table_covers_every_kernel_direction_and_sizes_on_both_sides() -> None:
    assert {ioc_dir(d.request) for d in IOCTLS.values()} == {IocDir.IOC_READ, IocDir.IOC_WRITE, 3}
    assert all(min(caller_sizes(d)) < kernel_size(d) < max(caller_sizes(d)) for d in IOCTLS.values())


@pytest.mark.parametrize("definition", IOCTLS.values(), ids=lambda d: d.name)
def test_the_type_byte_is_not_looked_at(
    kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy], definition: IoctlDef
) -> None:
    size = kernel_size(definition)
    spy = spy_on(definition)
    buf = bytearray(USER_BYTES[:size])
    assert call(kfd, ioc(ioc_dir(definition.request), ord("X"), definition.nr, size), buf) == 0
    assert spy.seen == [expected(definition, USER_BYTES[:size]).seen]


@pytest.mark.parametrize("definition", IOCTLS.values(), ids=lambda d: d.name)
def test_an_argument_shorter_than_the_encoded_size_faults(
    kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy], definition: IoctlDef
) -> None:
    size = kernel_size(definition)
    spy = spy_on(definition)
    buf = bytearray(USER_BYTES[: size - 1])
    assert call(kfd, definition.request, buf) == errno.EFAULT
    # copy_from_user faults before the handler; a read-only request's copy_to_user would fault after it, which
    # MOCKKFD knows beforehand: the handler does not run, so the refused request changes nothing
    assert spy.seen == []
    assert bytes(buf) == USER_BYTES[: size - 1], "a copy that faults writes nothing"


@pytest.mark.parametrize("definition", IOCTLS.values(), ids=lambda d: d.name)
def test_a_read_only_argument_serves_a_write_only_request_and_faults_on_copy_back(
    kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy], definition: IoctlDef
) -> None:
    size = kernel_size(definition)
    spy = spy_on(definition, fails=True)
    reads = ioc_dir(definition.request) & IocDir.IOC_READ
    # the copy-back's EFAULT replaces the handler's own errno (EINVAL here); MOCKKFD answers it before the handler
    assert call(kfd, definition.request, USER_BYTES[:size]) == (errno.EFAULT if reads else errno.EINVAL)
    assert spy.seen == ([] if reads else [expected(definition, USER_BYTES[:size]).seen])


@pytest.mark.parametrize("argument", [None, 7, object()], ids=["None", "int", "object"])
def test_what_is_no_buffer_is_memory_of_no_bytes(
    kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy], argument: Any
) -> None:
    definition = of(K.AMDKFD_IOC_CREATE_EVENT)
    spy = spy_on(definition)
    assert call(kfd, ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, definition.nr, 0), argument) == 0
    assert spy.seen == [bytes(kernel_size(definition))]
    assert call(kfd, definition.request, argument) == errno.EFAULT


def test_bytes_past_the_encoded_size_are_left_alone(kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy]) -> None:
    definition = of(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU)
    spy_on(definition)
    size = kernel_size(definition) - 8
    buf = bytearray(USER_BYTES[: size + 16])
    assert call(kfd, ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, definition.nr, size), buf) == 0
    assert bytes(buf) == HANDLER_BYTES[:size] + USER_BYTES[size : size + 16]


def test_the_largest_encodable_size_works(kfd: tuple[MockKFD, int], spy_on: Callable[..., Spy]) -> None:
    definition = of(K.AMDKFD_IOC_GET_CLOCK_COUNTERS)
    spy_on(definition)
    buf = bytearray(USER_BYTES[:MAX_SIZE])
    assert call(kfd, ioc(IocDir.IOC_NONE, AMDKFD_IOCTL_BASE, definition.nr, MAX_SIZE), buf) == 0
    assert bytes(buf) == expected(definition, USER_BYTES[:MAX_SIZE]).back


@pytest.mark.parametrize("nr", [0x00, AMDKFD_COMMAND_END, 0x25, 0xFF])
@pytest.mark.parametrize("direction", DIRECTIONS.values(), ids=DIRECTIONS.keys())
def test_a_number_outside_the_table_is_enotty_at_any_size_and_direction(
    kfd: tuple[MockKFD, int], nr: int, direction: int
) -> None:
    for size in (0, 8, MAX_SIZE):
        buf = bytearray(USER_BYTES[:size])
        assert call(kfd, ioc(direction, AMDKFD_IOCTL_BASE, nr, size), buf) == errno.ENOTTY
        assert bytes(buf) == USER_BYTES[:size]


# --- the real handlers, reached with another uapi's struct sizes ------------------------------------------------------
def version(buf: bytes) -> tuple[int, int]:
    return int.from_bytes(buf[:4], "little"), int.from_bytes(buf[4:8], "little")


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(ioc(IocDir.IOC_READ | IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, 0x01, 8), id="_IOWR"),
        pytest.param(ioc(IocDir.IOC_WRITE, AMDKFD_IOCTL_BASE, 0x01, 8), id="_IOW"),
        pytest.param(ioc(IocDir.IOC_NONE, AMDKFD_IOCTL_BASE, 0x01, 8), id="_IO with a size"),
        pytest.param(ioc(IocDir.IOC_READ, ord("X"), 0x01, 8), id="type X"),
    ],
)
def test_get_version_answers_whatever_direction_and_type_the_caller_encodes(raw: Any, request_: int) -> None:
    buf = bytearray(b"\xaa" * 8)
    raw.ioctl(request_, buf)
    assert version(buf) == (KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION)


def test_get_version_with_a_12_byte_size_returns_the_version_and_zeros(raw: Any) -> None:
    buf = bytearray(b"\xaa" * 12)
    raw.ioctl(ioc(IocDir.IOC_READ, AMDKFD_IOCTL_BASE, 0x01, 12), buf)
    assert version(buf) == (KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION)
    assert buf[8:] == bytes(4), "a read-only request's buffer beyond its struct is zeros, copied back too"


def test_get_version_with_a_4_byte_size_returns_the_major_version_only(raw: Any) -> None:
    buf = bytearray(b"\xaa" * 8)
    raw.ioctl(ioc(IocDir.IOC_READ, AMDKFD_IOCTL_BASE, 0x01, 4), buf)
    assert int.from_bytes(buf[:4], "little") == KFD_IOCTL_MAJOR_VERSION and buf[4:] == b"\xaa" * 4


def sized(request: int, size: int) -> int:
    return ioc(ioc_dir(request), AMDKFD_IOCTL_BASE, ioc_nr(request), size)


def test_clock_counters_from_an_older_smaller_struct(raw: Any, mock: MockKFD) -> None:
    args = kfd_ioctl_get_clock_counters_args(gpu_id=raw.acquire(0))
    old = bytearray(bytes(args)[: kfd_ioctl_get_clock_counters_args.gpu_id.offset])  # no gpu_id field yet
    raw.ioctl(sized(K.AMDKFD_IOC_GET_CLOCK_COUNTERS, len(old)), old)
    back = kfd_ioctl_get_clock_counters_args.from_buffer_copy(old + bytes(ctypes.sizeof(args) - len(old)))
    assert back.gpu_clock_counter == 0, "gpu_id reads as 0 (zero-filled): no GPU's clock"
    assert back.cpu_clock_counter == back.system_clock_counter == mock.kernel.now_ns
    assert back.system_clock_freq == 1_000_000_000


def test_clock_counters_from_a_newer_bigger_struct(raw: Any) -> None:
    args = kfd_ioctl_get_clock_counters_args(gpu_id=raw.acquire(0))
    new = bytearray(bytes(args) + b"\x5a" * 16)
    raw.ioctl(sized(K.AMDKFD_IOC_GET_CLOCK_COUNTERS, len(new)), new)
    back = kfd_ioctl_get_clock_counters_args.from_buffer_copy(new[: ctypes.sizeof(args)])
    assert back.gpu_id == args.gpu_id and back.system_clock_freq == 1_000_000_000
    assert new[ctypes.sizeof(args) :] == b"\x5a" * 16, "the new fields come back as the caller wrote them"


def test_acquire_vm_and_alloc_with_bigger_structs_work_and_a_smaller_one_misses_its_gpu_id(raw: Any) -> None:
    gpu = raw.mock.gpus[0]
    fd = raw.mock.fileio.open(gpu.identity.render_path, os.O_RDWR)
    acquire = bytes(kfd_ioctl_acquire_vm_args(drm_fd=fd, gpu_id=gpu.gpu_id))
    assert raw.errno(sized(K.AMDKFD_IOC_ACQUIRE_VM, 4), bytearray(acquire[:4])) == errno.EINVAL  # gpu_id 0
    raw.ioctl(sized(K.AMDKFD_IOC_ACQUIRE_VM, len(acquire) + 8), bytearray(acquire + bytes(8)))
    vram = int(AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
    alloc = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=0x1000_0000_0000, size=0x2000, gpu_id=gpu.gpu_id, flags=vram)
    bigger = bytearray(bytes(alloc) + b"\x77" * 8)
    raw.ioctl(sized(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, len(bigger)), bigger)
    back = kfd_ioctl_alloc_memory_of_gpu_args.from_buffer_copy(bigger[: ctypes.sizeof(alloc)])
    assert back.handle != 0 and bigger[ctypes.sizeof(alloc) :] == b"\x77" * 8
    free = kfd_ioctl_free_memory_of_gpu_args(handle=back.handle)
    raw.ioctl(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, free)
