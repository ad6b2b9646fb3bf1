"""The process's KFD session: /dev/kfd, each render node and each VM once per process, shared by every device."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.kernel import EventKernel
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.kfd.session import end_session, process_session
from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.kfd.fileio import FileKind

OPENS = 4


@pytest.fixture
def mock() -> Iterator[MockKFD]:
    kernel = EventKernel()
    machine = MockKFD([AmdGpu(kernel, vram_bytes=128 << 20, name=f"gpu{i}") for i in range(2)])
    yield machine
    end_session(machine.fileio)
    machine.close()


def _open(mock: MockKFD, index: int = 0) -> KfdAmdDevice:
    return KfdAmdDevice.open(f"T{index}", mock.fileio, gpu_index=index, compiler=HostCCompiler(), staging_bytes=8192)


def _files(mock: MockKFD, kind: FileKind) -> int:
    return sum(file.kind is kind for file in mock.fileio.files.values())


def test_a_device_opened_closed_and_reopened_in_one_process_copies_every_time(mock: MockKFD) -> None:
    sessions = set()
    for n in range(OPENS):
        with _open(mock, n % 2) as device:
            data = bytes([n]) * 3000
            buf = device.alloc(len(data))
            device.copyin(buf, data)
            assert device.copyout(buf) == data
            sessions.add(id(device.kfd))
        # the device freed what it allocated; the event page stays with the process, as amdkfd keeps it
        held = [a for gpu in device.kfd.devices.values() for a in gpu.allocations]
        assert all(a.handle == mock.process.signal_handle for a in held)
        assert mock.process.queues == {} and [e.event_id for e in device.kfd.events] == [
            device.kfd.memory_event.event_id,
            device.kfd.hw_exception_event.event_id,
        ]
    assert len(sessions) == 1
    assert (_files(mock, FileKind.KFD), _files(mock, FileKind.RENDER)) == (1, 2)  # each file opened once
    assert all(pdd.drm_file is not None for pdd in mock.process.pdds.values())


def test_devices_of_one_process_share_the_session_and_may_share_a_gpu(mock: MockKFD) -> None:
    with _open(mock, 0) as first, _open(mock, 1) as second, _open(mock, 0) as third:
        assert first.kfd is second.kfd is third.kfd and first.gpu is third.gpu
        bufs = [device.alloc(64) for device in (first, third)]
        for device, buf, fill in zip((first, third), bufs, b"ab", strict=True):
            device.copyin(buf, bytes([fill]) * 64)
        assert [device.copyout(buf) for device, buf in zip((first, third), bufs, strict=True)] == [b"a" * 64, b"b" * 64]
        first.close()
        assert third.copyout(bufs[1]) == b"b" * 64  # the other device of the GPU keeps its memory and queues
    assert (_files(mock, FileKind.KFD), _files(mock, FileKind.RENDER)) == (1, 2)


def test_a_forked_child_opens_a_session_of_its_own(mock: MockKFD) -> None:
    with _open(mock) as device:
        parent = process_session(mock.fileio)
        assert parent.kfd is device.kfd and parent.pid == os.getpid()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through its exit status
            code = 1
            try:
                session = process_session(mock.fileio)
                # the emulated GPUs have one address space, which MOCKKFD's processes share: the child uses GPU 1,
                # where its parent mapped nothing at the client's VAs
                with _open(mock, 1) as own:
                    buf = own.alloc(64)
                    own.copyin(buf, b"c" * 64)
                    fresh = session is not parent and session.pid == os.getpid() and own.kfd is session.kfd
                    code = 0 if fresh and own.copyout(buf) == b"c" * 64 else 2
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
        buf = device.alloc(64)
        device.copyin(buf, b"p" * 64)
        assert device.copyout(buf) == b"p" * 64  # the parent's session still works


def test_end_session_closes_the_client_side_and_the_next_open_starts_another(mock: MockKFD) -> None:
    with _open(mock) as device:
        pass
    end_session(mock.fileio)
    assert device.kfd.closed and mock.fileio.files == {}
    mock.exit_process()  # with the KFD process gone too, a new session can acquire the VM again
    with _open(mock) as again:
        assert again.kfd is not device.kfd
