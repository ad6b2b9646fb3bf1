"""Fuzz: random ioctls, mmaps and file calls on every MOCKKFD file, over a fresh MockKFD per example.

Each call succeeds, or fails with ``OSError`` carrying an errno, or (only where an argument is not an int, as the
real seam does) ``TypeError``; a refused call leaves :meth:`MockKFD.state_digest` unchanged, and after the calls a
valid follow-up works (GET_VERSION, ACQUIRE_VM, an allocation mapped and freed, a doorbell mmap, every file reading
as before). The only user memory the mock sees is a scratch area (a maps file that lists nothing else), so a random
pointer is ``EFAULT`` and never this process's own memory. Run longer with ``HYPOTHESIS_PROFILE=nightly``.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from support.scripts import load_script

from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.kfd import MockKFD
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_events import KFD_EVENT_TIMEOUT_INFINITE, KFD_SIGNAL_PAGE_BYTES, kfd_ioctl_wait_events_args
from tinyhil.spec.kfd_ioctls import AMDKFD_IOCTL_BASE, IOCTLS, KFD_IOCTL_MINOR_VERSION, IoctlDef, KfdIoctl
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_DOORBELL,
    KFD_MMAP_TYPE_EVENTS,
    KFD_MMAP_TYPE_MMIO,
    KFD_MMAP_TYPE_RESERVED_MEM,
    AllocMemFlags,
    kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args,
    kfd_ioctl_free_memory_of_gpu_args,
    kfd_ioctl_get_available_memory_args,
    kfd_ioctl_map_memory_to_gpu_args,
    kfd_ioctl_unmap_memory_from_gpu_args,
    kfd_mmap_gpu_id,
)
from tinyhil.spec.kfd_process import kfd_ioctl_get_version_args
from tinyhil.spec.kfd_queues import KFD_DOORBELL_PROCESS_SLICE_BYTES
from tinyhil.spec.linux_ioctl import IOC_SIZEBITS, ioc, ioc_nr, ioc_size

K = KfdIoctl
SCRATCH_BYTES: Final = 0x4000
VRAM_BYTES: Final = 4 << 20
GTT_LIMIT_BYTES: Final = 8 << 20
VA_BASE: Final = 0x1000_0000_0000
VRAM = int(AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | AllocMemFlags.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
# Requests the kernel may refuse after part of the work is done, reporting it: MAP / UNMAP count the GPUs done in
# n_success; WAIT_EVENTS consumes an auto-reset event's signal while it reads the event list (init_event_waiter),
# before a later entry faults.
PARTIAL_PROGRESS: Final = frozenset(ioc_nr(r) for r in (K.AMDKFD_IOC_MAP_MEMORY_TO_GPU,
                                                          K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
                                                          K.AMDKFD_IOC_WAIT_EVENTS))  # fmt: skip
NOT_INTS: Final = (None, 1.5, "x", b"\x01", [1])


def _fake_gpu_module() -> ModuleType:
    """``fake_gpu.py``, shared with conftest.py under the same module name (test folders are not packages)."""
    return load_script(Path(__file__).with_name("fake_gpu.py"), "tinyhil_tests_kfd_fake_gpu")


@dataclass
class Scratch:
    """The user memory of the fuzzed process: ``SCRATCH_BYTES`` at ``address``, listed alone in ``maps_path``."""

    address: int
    maps_path: str
    area: mmap.mmap

    def reset(self, gpu_ids: list[int]) -> None:
        """Zero it, then put the GPUs' ids at offset 0 (a device-id array for MAP / UNMAP)."""
        ctypes.memset(self.address, 0, SCRATCH_BYTES)
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        ctypes.memmove(self.address, ids, ctypes.sizeof(ids))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    area = mmap.mmap(-1, SCRATCH_BYTES)
    anchor = ctypes.c_char.from_buffer(area)
    address = ctypes.addressof(anchor)
    maps = tmp_path_factory.mktemp("fuzz_kfd") / "maps"
    maps.write_text(f"{address:x}-{address + SCRATCH_BYTES:x} rw-p 00000000 00:00 0 [fuzz scratch]\n")
    yield Scratch(address, str(maps), area)
    del anchor  # the area itself stays mapped: MockKFD views of it (USERPTR) may outlive this fixture's teardown


@dataclass
class Machine:
    """A fresh MockKFD, its open files, and the handles made before the random calls."""

    mock: MockKFD
    fds: dict[str, int]
    handles: list[int]

    @property
    def gpu_ids(self) -> list[int]:
        return [gpu.gpu_id for gpu in self.mock.gpus]


def _machine(scratch: Scratch, prepared: bool) -> Machine:
    fake_gpu = _fake_gpu_module()
    kernel = EventKernel(seed=3)
    gpus = [fake_gpu.FakeGpu(kernel, gfx_target_version=v, vram_bytes=VRAM_BYTES) for v in (110000, 120001)]
    mock = MockKFD(gpus, gtt_limit_bytes=GTT_LIMIT_BYTES, maps_path=scratch.maps_path)
    io = mock.fileio
    topology = "/sys/devices/virtual/kfd/kfd/topology"
    fds = {
        "kfd": io.open("/dev/kfd", os.O_RDWR),
        "render0": io.open(mock.gpus[0].identity.render_path, os.O_RDWR),
        "render1": io.open(mock.gpus[1].identity.render_path, os.O_RDWR),
        "sysfs": io.open(f"{topology}/nodes/1/properties", os.O_RDONLY),
        "dir": io.open(f"{topology}/nodes", os.O_RDONLY),
    }
    scratch.reset([gpu.gpu_id for gpu in mock.gpus])
    machine = Machine(mock, fds, [])
    if prepared:  # a VM on GPU 0 and two buffers, so random requests can name real handles and offsets
        gpu_id = mock.gpus[0].gpu_id
        io.ioctl(fds["kfd"], K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=fds["render0"], gpu_id=gpu_id))
        for index in range(2):
            args = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=VA_BASE + index * 0x2000, size=0x2000,
                                                           gpu_id=gpu_id, flags=VRAM)  # fmt: skip
            io.ioctl(fds["kfd"], K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
            machine.handles.append(args.handle)
    return machine


# --- the calls ----------------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One call on the seam; ``wrong_type`` when an argument that must be an int is not one."""

    label: str
    run: Callable[[Any], Any]
    wrong_type: bool
    nr: int | None = None

    def __repr__(self) -> str:
        return self.label


def _mostly(usual: st.SearchStrategy[Any], *unusual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five, else one of ``unusual``: most calls get far enough to reach a handler."""
    return st.sampled_from([True, True, True, True, False]).flatmap(
        lambda common: usual if common else st.one_of(*unusual)
    )


def _int_like(value: Any) -> bool:
    return isinstance(value, int)


def _fd_choices(machine: Machine) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(sorted(machine.fds.values())),
        st.sampled_from([-1, 0, 99_999, 1 << 31, 10**30]),
        st.sampled_from(NOT_INTS),
    )


def _values(machine: Machine, scratch: Scratch) -> st.SearchStrategy[int]:
    """Field values that mean something to some handler, and any 64-bit value."""
    pointers = [scratch.address, scratch.address + 0x100, scratch.address + SCRATCH_BYTES - 4]
    meaningful = [0, 1, 2, 3, 7, 8, 0x10, PAGE_BYTES, 0x2000, 0x8000, VA_BASE, VA_BASE + 0x2000, 0xFFFF_FFFF,
                  KFD_EVENT_TIMEOUT_INFINITE, (1 << 64) - 1, 1 << 63, VRAM, *pointers, *machine.gpu_ids,
                  *machine.handles, *machine.fds.values()]  # fmt: skip
    return st.one_of(st.sampled_from(meaningful), st.integers(0, (1 << 64) - 1))


def _structured(definition: IoctlDef, values: st.SearchStrategy[int]) -> st.SearchStrategy[bytearray]:
    """The request's structure, each plain field drawn from ``values`` (truncated to the field, as C would)."""
    fields = [(name, ctype) for name, ctype in definition.args._fields_  # type: ignore[attr-defined]
              if issubclass(ctype, ctypes._SimpleCData)]  # type: ignore[attr-defined]  # fmt: skip

    def build(drawn: tuple[int, ...]) -> bytearray:
        args = definition.args()
        for (name, ctype), value in zip(fields, drawn, strict=True):
            setattr(args, name, ctype(value).value)
        return bytearray(bytes(args))

    return st.tuples(*[values] * len(fields)).map(build)


def _arguments(definition: IoctlDef, size: int, values: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """What the caller passes: the structure, random bytes, short / read-only / non-contiguous buffers, no buffer."""
    structured = _structured(definition, values)
    return st.one_of(
        structured,
        structured,
        structured.map(lambda b: definition.args.from_buffer_copy(b)),
        st.binary(min_size=size, max_size=size).map(bytearray),
        st.binary(max_size=64).map(bytearray),
        structured.map(bytes),
        structured.map(lambda b: memoryview(b + b)[::2]),
        st.sampled_from([None, 7, "not a buffer", object()]),
    )


@st.composite
def ioctl_calls(draw: st.DrawFn, machine: Machine, scratch: Scratch) -> Call:
    definition = draw(st.sampled_from(list(IOCTLS.values())), label="ioctl")
    sizes = st.integers(0, (1 << IOC_SIZEBITS) - 1)
    request = draw(
        _mostly(
            st.just(int(definition.request)),
            st.builds(ioc, st.integers(0, 3), st.just(AMDKFD_IOCTL_BASE), st.just(definition.nr), sizes),
            st.builds(ioc, st.integers(0, 3), st.integers(0, 0xFF), st.integers(0, 0xFF), sizes),
            st.integers(-(1 << 40), 1 << 70),
            st.sampled_from(NOT_INTS),
        ),
        label="request",
    )
    size = ioc_size(definition.request)
    argument = draw(_arguments(definition, size, _values(machine, scratch)), label="argument")
    if isinstance(argument, bytearray) and ioc_nr(definition.request) == ioc_nr(K.AMDKFD_IOC_WAIT_EVENTS):
        timeout_at = kfd_ioctl_wait_events_args.timeout.offset
        if len(argument) >= timeout_at + 4:  # an infinite wait with nothing pending is EDEADLK at once; keep it
            timeout = draw(st.sampled_from([0, 1, 5, KFD_EVENT_TIMEOUT_INFINITE]), label="timeout_ms")
            argument[timeout_at : timeout_at + 4] = timeout.to_bytes(4, "little")
    fd = draw(_mostly(st.just(machine.fds["kfd"]), _fd_choices(machine)), label="fd")
    nr = ioc_nr(request) if isinstance(request, int) else None
    return Call(
        f"ioctl(fd={fd!r}, request={request!r}, {type(argument).__name__} argument)",
        lambda io: io.ioctl(fd, request, argument),
        not (_int_like(fd) and _int_like(request)),
        nr,
    )


@st.composite
def mmap_calls(draw: st.DrawFn, machine: Machine) -> Call:
    mock = machine.mock
    gpu = kfd_mmap_gpu_id(draw(st.sampled_from([*machine.gpu_ids, 0, 0xBEEF]), label="gpu_id"))
    # (length, offset, file) pairs that a driver may accept, then the same values mixed up
    pairs = [
        (KFD_DOORBELL_PROCESS_SLICE_BYTES, KFD_MMAP_TYPE_DOORBELL | gpu, "kfd"),
        (PAGE_BYTES, KFD_MMAP_TYPE_MMIO | gpu, "kfd"),
        (PAGE_BYTES, KFD_MMAP_TYPE_EVENTS, "kfd"),
        (KFD_SIGNAL_PAGE_BYTES, KFD_MMAP_TYPE_EVENTS, "kfd"),
    ]
    for index, pdd in enumerate(mock.process.pdds.values()):
        for allocation in pdd.allocations.values():
            pairs += [(PAGE_BYTES, allocation.mmap_offset, f"render{index}"),
                      (allocation.size, allocation.mmap_offset, f"render{index}"),
                      (PAGE_BYTES, allocation.mmap_offset + PAGE_BYTES, f"render{index}")]  # fmt: skip
    paired_length, paired_offset, file = draw(st.sampled_from(pairs), label="mapping")
    offsets = [paired_offset, 0, PAGE_BYTES, 100, KFD_MMAP_TYPE_RESERVED_MEM | gpu, 1 << 32, -PAGE_BYTES, 1 << 64,
               (1 << 64) - PAGE_BYTES]  # fmt: skip
    offset = draw(
        _mostly(st.just(paired_offset), st.sampled_from(offsets),
                st.integers(0, (1 << 64) - 1).map(lambda o: o & ~(PAGE_BYTES - 1)), st.integers(),
                st.sampled_from(NOT_INTS)),
        label="offset",
    )  # fmt: skip
    lengths = [paired_length, 0, 1, PAGE_BYTES, 0x2000, KFD_SIGNAL_PAGE_BYTES + 1, -1, 1 << 64, 10**30]
    length = draw(
        _mostly(st.just(paired_length), st.sampled_from(lengths), st.integers(), st.sampled_from(NOT_INTS)),
        label="length",
    )
    fd = draw(_mostly(st.just(machine.fds[file]), st.sampled_from(sorted(machine.fds.values())), _fd_choices(machine)))
    store = draw(st.tuples(st.integers(0, 1 << 14), st.binary(max_size=16)), label="store")

    def run(io: Any) -> None:
        buf = io.mmap(fd, length, offset)
        start, data = store
        start %= len(buf)
        buf[start : start + len(data)] = data[: len(buf) - start]  # a doorbell ring, a CPU store into a buffer
        io.munmap(buf)

    return Call(
        f"mmap(fd={fd!r}, length={length!r}, offset={offset!r}), store {store!r}",
        run,
        not all(_int_like(v) for v in (fd, length, offset)),
    )


@st.composite
def file_calls(draw: st.DrawFn, machine: Machine) -> Call:
    tree = machine.mock.sysfs
    sysfs = "/sys/devices/virtual/kfd/kfd"
    odd = ["/dev/kfd2", "/dev/dri/renderD200", "//dev//kfd", "/dev/./kfd", "/dev/kfd/", "/dev",
           f"{sysfs}/topology/nodes/9/name", f"{sysfs}/../kfd/topology"]  # fmt: skip
    paths = [*tree.files, *tree.dirs, *odd]
    path = draw(st.sampled_from(sorted(paths)) | st.sampled_from(sorted(paths)).map(str.encode), label="path")
    flags = draw(st.sampled_from([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_CLOEXEC, 1.5]))
    kind = draw(st.sampled_from(["read", "listdir", "exists", "open", "close"]), label="file call")
    if kind == "open":
        return Call(f"open({path!r}, {flags!r})", lambda io: io.close(io.open(path, flags)), not _int_like(flags))
    if kind == "close":
        fd = draw(_fd_choices(machine), label="fd")
        return Call(f"close({fd!r})", lambda io: io.close(fd), not _int_like(fd))
    return Call(f"{kind}({path!r})", lambda io: getattr(io, kind)(path), False)


# --- the checks ---------------------------------------------------------------------------------------------------


def _check(machine: Machine, call: Call) -> str:
    """Run ``call``; its outcome must be a documented one. Returns the outcome's name."""
    mock = machine.mock
    before = mock.state_digest()
    try:
        call.run(mock.fileio)
    except OSError as exc:
        assert isinstance(exc.errno, int) and exc.errno > 0, f"{call!r}: OSError without an errno: {exc!r}"
        outcome = errno.errorcode.get(exc.errno, str(exc.errno))
    except TypeError as exc:
        assert call.wrong_type, f"{call!r}: TypeError although every int argument is an int: {exc}"
        outcome = "TypeError"
    else:
        assert not call.wrong_type, f"{call!r} succeeded with an argument that is not an int"
        return "ok"
    if call.nr not in PARTIAL_PROGRESS:
        assert mock.state_digest() == before, f"{call!r} was refused ({outcome}) but changed MOCKKFD's state"
    return outcome


def _ioctl(machine: Machine, fd: int, request: KfdIoctl, args: Any) -> Any:
    machine.mock.fileio.ioctl(fd, request, args)
    return args


def _free_va(machine: Machine, gpu_id: int) -> int:
    """A VA on ``gpu_id`` that no mapped allocation overlaps."""
    mapped = [
        a for pdd in machine.mock.process.pdds.values() for a in pdd.allocations.values() if gpu_id in a.mapped_on
    ]
    return next(va for va in range(VA_BASE, VA_BASE + 64 * 0x10_0000_0000, 0x10_0000_0000)
                if not any(a.overlaps(va, PAGE_BYTES) for a in mapped))  # fmt: skip


def _follow_up(machine: Machine, scratch: Scratch, files_before: dict[str, bytes]) -> None:
    """Valid requests after the random ones: each must work."""
    mock, io = machine.mock, machine.mock.fileio
    fd = io.open("/dev/kfd", os.O_RDWR)
    version = _ioctl(machine, fd, K.AMDKFD_IOC_GET_VERSION, kfd_ioctl_get_version_args())
    assert (version.major_version, version.minor_version) == (1, KFD_IOCTL_MINOR_VERSION)
    gpu = mock.gpus[0]
    if mock.process.pdds[gpu.gpu_id].drm_file is None:
        render = io.open(gpu.identity.render_path, os.O_RDWR)
        _ioctl(machine, fd, K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=render, gpu_id=gpu.gpu_id))
    available = _ioctl(machine, fd, K.AMDKFD_IOC_AVAILABLE_MEMORY,
                       kfd_ioctl_get_available_memory_args(gpu_id=gpu.gpu_id)).available  # fmt: skip
    alloc = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=_free_va(machine, gpu.gpu_id), size=PAGE_BYTES,
                                                    gpu_id=gpu.gpu_id, flags=VRAM)  # fmt: skip
    if available < PAGE_BYTES:  # random allocations took all VRAM: then the answer must be ENOMEM
        with pytest.raises(OSError) as caught:
            io.ioctl(fd, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, alloc)
        assert caught.value.errno == errno.ENOMEM
    else:
        _ioctl(machine, fd, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, alloc)
        scratch.reset([gpu.gpu_id])
        mapping = kfd_ioctl_map_memory_to_gpu_args(handle=alloc.handle, device_ids_array_ptr=scratch.address,
                                                        n_devices=1)  # fmt: skip
        assert _ioctl(machine, fd, K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, mapping).n_success == 1
        unmapping = kfd_ioctl_unmap_memory_from_gpu_args(handle=alloc.handle, device_ids_array_ptr=scratch.address,
                                                              n_devices=1)  # fmt: skip
        assert _ioctl(machine, fd, K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, unmapping).n_success == 1
        _ioctl(machine, fd, K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd_ioctl_free_memory_of_gpu_args(handle=alloc.handle))
    doorbells = io.mmap(fd, KFD_DOORBELL_PROCESS_SLICE_BYTES, KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(gpu.gpu_id))
    assert len(doorbells) == KFD_DOORBELL_PROCESS_SLICE_BYTES
    io.munmap(doorbells)
    assert _file_contents(machine) == files_before, "a sysfs file or listing changed"


def _file_contents(machine: Machine) -> dict[str, bytes]:
    io, tree = machine.mock.fileio, machine.mock.sysfs
    contents = {path: io.read(path) for path, content in tree.files.items() if content is not None}
    contents.update({path: "\n".join(io.listdir(path)).encode() for path in tree.dirs})
    return contents


@pytest.mark.fuzz
@given(data=st.data(), prepared=st.booleans())
def test_random_calls_on_every_mockkfd_file_get_an_errno_and_change_nothing_when_refused(
    scratch: Scratch, data: st.DataObject, prepared: bool
) -> None:
    machine = _machine(scratch, prepared)
    try:
        files_before = _file_contents(machine)
        calls = st.one_of(ioctl_calls(machine, scratch), ioctl_calls(machine, scratch), mmap_calls(machine),
                          file_calls(machine))  # fmt: skip
        for _ in range(data.draw(st.integers(1, 4), label="number of calls")):
            call = data.draw(calls, label="call")
            event(f"{call.label.partition('(')[0]}: {_check(machine, call)}")
        _follow_up(machine, scratch, files_before)
    finally:
        machine.mock.close()
