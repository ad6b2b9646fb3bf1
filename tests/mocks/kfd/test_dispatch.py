"""The /dev/kfd ioctl entry: request decoding, argument copy in/out, bad requests, and fuzzing."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.kfd.dispatch import DEPRECATED
from tinyhil.spec.kfd_events import kfd_ioctl_create_event_args, kfd_ioctl_set_event_args
from tinyhil.spec.kfd_ioctls import AMDKFD_IOCTL_BASE, IOCTLS, KfdIoctl
from tinyhil.spec.kfd_memory import kfd_ioctl_acquire_vm_args, kfd_ioctl_alloc_memory_of_gpu_args
from tinyhil.spec.linux_ioctl import IocDir, ioc, ioc_nr, ioc_size

K = KfdIoctl
RW = IocDir.IOC_READ | IocDir.IOC_WRITE
EMULATED = {
    K.AMDKFD_IOC_GET_VERSION, K.AMDKFD_IOC_CREATE_QUEUE, K.AMDKFD_IOC_DESTROY_QUEUE, K.AMDKFD_IOC_SET_MEMORY_POLICY,
    K.AMDKFD_IOC_GET_CLOCK_COUNTERS, K.AMDKFD_IOC_GET_PROCESS_APERTURES, K.AMDKFD_IOC_CREATE_EVENT,
    K.AMDKFD_IOC_DESTROY_EVENT, K.AMDKFD_IOC_SET_EVENT, K.AMDKFD_IOC_RESET_EVENT, K.AMDKFD_IOC_WAIT_EVENTS,
    K.AMDKFD_IOC_SET_SCRATCH_BACKING_VA, K.AMDKFD_IOC_SET_TRAP_HANDLER, K.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
    K.AMDKFD_IOC_ACQUIRE_VM, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, K.AMDKFD_IOC_FREE_MEMORY_OF_GPU,
    K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, K.AMDKFD_IOC_SET_XNACK_MODE,
    K.AMDKFD_IOC_AVAILABLE_MEMORY,
}  # fmt: skip


def _args(request: int, nbytes: int | None = None) -> bytearray:
    return bytearray(ioc_size(request) if nbytes is None else nbytes)


# One table: a bad request, the argument it carries, and the errno amdkfd (or, where noted, MOCKKFD) answers. A
# request whose encoded size or direction differs from the kernel's is not bad: test_ioctl_sizes.py covers those.
BAD_REQUESTS = [
    pytest.param(ioc(RW, AMDKFD_IOCTL_BASE, 0x00, 8), _args(0, 8), errno.ENOTTY, id="nr 0 is no command"),
    pytest.param(ioc(RW, AMDKFD_IOCTL_BASE, 0x24, 8), _args(0, 8), errno.ENOTTY, id="nr past the table"),
    pytest.param(ioc(RW, AMDKFD_IOCTL_BASE, 0x25, 16), _args(0, 16), errno.ENOTTY, id="RUNTIME_ENABLE is not in 1.11"),
    pytest.param(0xFFFFFFFF, _args(0, 64), errno.ENOTTY, id="all ones"),
    pytest.param(K.AMDKFD_IOC_GET_VERSION, _args(0, 4), errno.EFAULT, id="argument shorter than the encoded size"),
    pytest.param(K.AMDKFD_IOC_CREATE_EVENT, _args(0, 16), errno.EFAULT, id="short argument of a write request"),
    pytest.param(K.AMDKFD_IOC_GET_VERSION, bytes(8), errno.EFAULT, id="read-only argument"),
    pytest.param(K.AMDKFD_IOC_DBG_REGISTER_DEPRECATED, _args(K.AMDKFD_IOC_DBG_REGISTER_DEPRECATED), errno.EPERM,
                 id="deprecated debugger"),
    pytest.param(K.AMDKFD_IOC_UPDATE_QUEUE, _args(K.AMDKFD_IOC_UPDATE_QUEUE), errno.ENOTTY, id="not emulated"),
    pytest.param(K.AMDKFD_IOC_SVM, _args(K.AMDKFD_IOC_SVM), errno.ENOTTY, id="SVM not emulated"),
    pytest.param(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, _args(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU), errno.EINVAL,
                 id="free of handle 0"),
    pytest.param(K.AMDKFD_IOC_DESTROY_QUEUE, _args(K.AMDKFD_IOC_DESTROY_QUEUE), errno.EINVAL, id="no such queue"),
    pytest.param(K.AMDKFD_IOC_SET_EVENT, _args(K.AMDKFD_IOC_SET_EVENT), errno.EINVAL, id="no such event"),
    pytest.param(K.AMDKFD_IOC_ACQUIRE_VM, _args(K.AMDKFD_IOC_ACQUIRE_VM), errno.EINVAL, id="drm_fd 0 is not ours"),
    pytest.param(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, _args(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU), errno.EINVAL,
                 id="alloc of 0 bytes"),
    pytest.param(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, _args(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU), errno.EINVAL,
                 id="map to 0 devices"),
    pytest.param(K.AMDKFD_IOC_AVAILABLE_MEMORY, _args(K.AMDKFD_IOC_AVAILABLE_MEMORY), errno.EINVAL, id="gpu_id 0"),
]  # fmt: skip


@pytest.mark.parametrize(("request_", "buf", "code"), BAD_REQUESTS)
def test_bad_requests_get_the_kernels_errno_and_change_nothing(
    mock: MockKFD, raw: Any, request_: int, buf: Any, code: int
) -> None:
    before, argument = mock.state_digest(), bytes(buf)
    assert raw.errno(request_, buf) == code
    assert mock.state_digest() == before
    assert bytes(buf) == argument


def test_get_version_fills_a_bytearray_in_place(raw: Any) -> None:
    buf = bytearray(b"\xaa" * 8)
    assert raw.mock.fileio.ioctl(raw.fd, K.AMDKFD_IOC_GET_VERSION, buf) == 0
    assert (int.from_bytes(buf[:4], "little"), int.from_bytes(buf[4:], "little")) == (1, 11)


def test_a_longer_argument_buffer_is_fine_and_only_the_struct_is_written(raw: Any) -> None:
    buf = bytearray(b"\xaa" * 12)
    raw.mock.fileio.ioctl(raw.fd, K.AMDKFD_IOC_GET_VERSION, buf)
    assert buf[8:] == b"\xaa" * 4


def test_the_handler_table_is_keyed_by_the_specs_request_names(mock: MockKFD) -> None:
    assert set(mock.dispatcher.handlers) == EMULATED
    assert DEPRECATED.isdisjoint(EMULATED)


def test_unknown_errors_carry_the_request_name(raw: Any) -> None:
    with pytest.raises(OSError, match=r"AMDKFD_IOC_SET_EVENT: event_id=77 names no event"):
        raw.ioctl(K.AMDKFD_IOC_SET_EVENT, kfd_ioctl_set_event_args(event_id=77))


# --- fuzzing -------------------------------------------------------------------------------------------------------
def _mapped_allocations_agree(mock: MockKFD) -> None:
    """Invariants: every GPU maps exactly what MOCKKFD thinks it maps, without overlaps; ids are consistent."""
    process = mock.process
    for gpu in mock.gpus:
        mapped = sorted(
            (a.va, a.size)
            for pdd in process.pdds.values()
            for a in pdd.allocations.values()
            if gpu.gpu_id in a.mapped_on
        )
        assert mapped == sorted((va, len(view)) for va, view in gpu.port.mappings.items())
        assert all(
            end <= start for (_, end), (start, _) in zip(((v, v + s) for v, s in mapped), mapped[1:], strict=False)
        )
        assert {q.doorbell_id for q in process.queues.values() if q.gpu_id == gpu.gpu_id} == set(
            process.pdds[gpu.gpu_id].doorbells
        )
    assert len(process.queues) == sum(len(gpu.port.queues) for gpu in mock.gpus)
    assert all(e.event_id == i for i, e in process.events.items())


def _interesting(mock: MockKFD, handles: list[int]) -> st.SearchStrategy[int]:
    gpu_ids = [gpu.gpu_id for gpu in mock.gpus]
    values = [0, 1, 2, 7, 8, 0x1000, 0x2000, 0x8000, 0x1000_0000_0000, 0xFFFF_FFFF, (1 << 64) - 1, *gpu_ids, *handles]
    return st.one_of(st.sampled_from(values), st.integers(0, (1 << 64) - 1))


def _structured(definition: Any, values: st.SearchStrategy[int]) -> st.SearchStrategy[bytearray]:
    def build(draw: Any) -> bytearray:
        args = definition.args()
        for name, ctype in definition.args._fields_:
            if issubclass(ctype, ctypes._SimpleCData):  # type: ignore[attr-defined]
                width = ctypes.sizeof(ctype) * 8
                value = draw(values) & ((1 << width) - 1)
                setattr(args, name, value - (1 << width) if ctype is ctypes.c_int32 and value >> (width - 1) else value)
        return bytearray(bytes(args))

    return st.composite(lambda draw: build(draw))()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_requests_raise_only_oserror_and_keep_the_state_consistent(helpers: Any, data: st.DataObject) -> None:
    kernel = EventKernel(seed=2)
    fake = helpers.load_fake_gpu()
    mock = MockKFD([fake.FakeGpu(kernel, vram_bytes=8 << 20), fake.FakeGpu(kernel, gfx_target_version=120001)])
    try:
        fd = mock.fileio.open("/dev/kfd", os.O_RDWR)
        render = mock.fileio.open(mock.gpus[0].identity.render_path, os.O_RDWR)
        mock.fileio.ioctl(
            fd, K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=render, gpu_id=mock.gpus[0].gpu_id)
        )
        handles = []
        for index in range(2):
            args = kfd_ioctl_alloc_memory_of_gpu_args(va_addr=0x1000_0000_0000 + index * 0x2000, size=0x2000,
                                                           gpu_id=mock.gpus[0].gpu_id, flags=1)  # fmt: skip
            mock.fileio.ioctl(fd, K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
            handles.append(args.handle)
        values = _interesting(mock, handles)
        for _ in range(data.draw(st.integers(1, 6), label="requests")):
            definition = data.draw(st.sampled_from(list(IOCTLS.values())), label="ioctl")
            request = data.draw(
                st.one_of(
                    st.just(int(definition.request)),
                    st.just(int(definition.request)),
                    st.just(int(definition.request)),
                    st.integers(0, (1 << 32) - 1),
                    st.builds(
                        ioc, st.integers(0, 3), st.just(AMDKFD_IOCTL_BASE), st.just(definition.nr), st.integers(0, 512)
                    ),
                ),
                label="request",
            )
            size = ioc_size(request)
            buf = data.draw(
                st.one_of(_structured(definition, values), st.binary(min_size=size, max_size=size).map(bytearray),
                          st.binary(max_size=64).map(bytearray)),
                label="argument",
            )  # fmt: skip
            if ioc_nr(request) == ioc_nr(K.AMDKFD_IOC_WAIT_EVENTS) and len(buf) >= 20:
                buf[16:20] = data.draw(st.sampled_from([0, 1, 5]), label="timeout_ms").to_bytes(4, "little")
            try:
                mock.fileio.ioctl(fd, request, buf)
                outcome = "ok"
            except OSError as exc:
                outcome = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            event(f"{definition.name if request == definition.request else 'other request'}: {outcome}")
            _mapped_allocations_agree(mock)
    finally:
        mock.close()


@pytest.mark.parametrize(
    "argument",
    [bytes(ioc_size(K.AMDKFD_IOC_CREATE_EVENT)), bytearray(ioc_size(K.AMDKFD_IOC_CREATE_EVENT) - 1), None],
    ids=["read-only", "short", "no buffer"],
)
def test_a_request_whose_result_cannot_be_copied_back_changes_nothing(mock: MockKFD, raw: Any, argument: Any) -> None:
    # Linux would create the event and then fail the copy-back with EFAULT; MOCKKFD refuses first (fuzz-found)
    before = mock.state_digest()
    assert raw.errno(K.AMDKFD_IOC_CREATE_EVENT, argument) == errno.EFAULT
    assert mock.state_digest() == before and mock.process.events == {}
    created = raw.ioctl(K.AMDKFD_IOC_CREATE_EVENT, kfd_ioctl_create_event_args())
    assert created.event_id in mock.process.events
