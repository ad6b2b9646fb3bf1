"""KfdAmdDevice over the KFD client: staging chunks, peers on one connection, faults routed to their GPU, KFD+AMD."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import numpy as np
import pytest

from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.interfaces import GpuPointer
from tinyhil.amdgpu.pm4 import pm4_header
from tinyhil.builtin_targets import NO_KFD_REASON, kfd_probe
from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument, TargetUnavailable
from tinyhil.kfd import KfdMemoryFault
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.mocks.kfd import MockKFD
from tinyhil.registry import default_registry
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.spec.amdgpu_pm4 import Pm4Op

LOAD = """
void load(unsigned long long *args, const unsigned *g, const unsigned *s) { (void)g; (void)s;
    ((unsigned *)args[1])[0] = ((const unsigned *)args[0])[0]; }
"""


def _mock(count: int = 2) -> MockKFD:
    kernel = EventKernel()
    return MockKFD([AmdGpu(kernel, vram_bytes=64 << 20, name=f"gpu{i}") for i in range(count)])


@pytest.fixture
def device() -> Iterator[KfdAmdDevice]:
    mock = _mock()
    dev = KfdAmdDevice.open("T", mock.fileio, compiler=HostCCompiler(), staging_bytes=8192, on_close=mock.close)
    yield dev
    dev.close()


def test_copies_larger_than_the_staging_buffer_go_in_chunks(device: KfdAmdDevice) -> None:
    data = np.random.default_rng(1).integers(0, 256, 3 * 8192 + 5, dtype=np.uint8)
    buf = device.alloc(data.nbytes)
    device.copyin(buf, data)
    assert device.copyout(buf) == data.tobytes()
    assert device.copyout(buf, nbytes=9000, offset=8000) == data[8000:17000].tobytes()
    device.synchronize()
    names = [event.name for event in device.profile_events]
    assert names.count("copyin") == 4 and names.count("copyout") == 4 + 2


def test_copyout_into_goes_in_chunks_straight_into_the_callers_memory(
    device: KfdAmdDevice, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = np.random.default_rng(2).integers(0, 256, 3 * 8192 + 8, dtype=np.uint8)
    buf = device.alloc(data.nbytes)
    device.copyin(buf, data)
    handed: list[object] = []
    copyout = device._copyout
    monkeypatch.setattr(device, "_copyout", lambda b, out, offset: (handed.append(out.obj), copyout(b, out, offset)))
    out = np.zeros((2, 2 * 8192 // 8), np.uint32)  # 2 x 8192 bytes: two staging chunks, from offset 4
    device.copyout_into(buf, out, offset=4)
    assert out.tobytes() == data[4 : 4 + 2 * 8192].tobytes()
    assert len(handed) == 1 and handed[0] is out, "the path wrote the caller's array, not a temporary"
    device.synchronize()
    assert [event.name for event in device.profile_events].count("copyout") == 2


def test_peers_share_one_connection_and_it_closes_with_the_last(device: KfdAmdDevice) -> None:
    mock = device.kfd.fileio.kfd  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match="already open"):
        device.open_peer(0)
    with pytest.raises(InvalidArgument, match="gpu_index=5"):
        device.open_peer(5)
    peer = device.open_peer(1)
    assert peer.kfd is device.kfd and peer.node.gpu_id != device.node.gpu_id
    device.close()
    assert mock.has_process and not device.kfd.closed
    buf = peer.alloc(64)
    peer.copyin(buf, b"z" * 64)
    assert peer.copyout(buf) == b"z" * 64
    peer.close()
    assert device.kfd.closed and not mock.has_process


def test_a_fault_on_one_gpu_reaches_that_gpu_even_when_its_peer_waits_first(device: KfdAmdDevice) -> None:
    with device.open_peer(1) as peer:
        program = device.compile(LOAD, "load")
        out = device.alloc(4)
        device.exec(program, 1, 1, [out, out])  # code object and argument memory exist before the victim goes
        victim = device.alloc(4096)
        address = victim.addr
        device.free(victim)
        device.exec(program, 1, 1, [GpuPointer(address), out])
        buf = peer.alloc(16)
        peer.fill(buf, 1)  # the peer's wait sees the process's memory event first
        assert peer.copyout(buf) == b"\x01" * 16
        with pytest.raises(KfdMemoryFault, match=f"{address:#x}") as info:
            device.synchronize()
        assert info.value.gpu_id == device.node.gpu_id
        device.fill(out, 0)  # the runtime replaced the faulted compute queue: the device runs on
        device.exec(program, 1, 1, [out, out])
        device.synchronize()


def test_a_stopped_queue_on_one_gpu_reaches_that_gpu_as_queue_stopped(device: KfdAmdDevice) -> None:
    with device.open_peer(1) as peer:
        bad = pm4_header(Pm4Op.NOP, 1) & ~(0xFF << 8) | 0xFF << 8  # a type-3 packet of opcode 0xff
        device._submit(QueueKind.COMPUTE, [np.array([bad, 0], np.uint32)])
        buf = peer.alloc(16)
        peer.fill(buf, 1)  # the peer's wait sees the process's hardware-exception event first
        assert peer.copyout(buf) == b"\x01" * 16
        with pytest.raises(QueueStopped) as info:
            device.synchronize()
        assert info.value.queue.startswith("compute queue") and info.value.opcode == 0xFF
        out = device.alloc(4)
        device.fill(out, 0)  # the runtime replaced the stopped compute queue: the device runs on
        program = device.compile(LOAD, "load")
        device.exec(program, 1, 1, [out, out])
        device.synchronize()


def test_timestamps_are_the_gpu_counter_in_nanoseconds(device: KfdAmdDevice) -> None:
    first = device.timestamp()
    second = device.timestamp()
    assert first % 10 == 0 and first < second
    counter = device.kfd.clock_counters(device.gpu).gpu_clock_counter
    assert second // 10 <= counter


class _Missing:
    def open(self, path: str, flags: int) -> int:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)


class _Denied:
    def open(self, path: str, flags: int) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)


def test_kfd_amd_probe_reports_why_it_cannot_run() -> None:
    assert kfd_probe(fileio=_Missing()) == NO_KFD_REASON  # type: ignore[arg-type]
    assert "render" in str(kfd_probe(fileio=_Denied()))  # type: ignore[arg-type]
    assert kfd_probe(fileio=_mock().fileio) is None


def test_kfd_amd_is_unavailable_here_with_no_dev_kfd() -> None:
    resolved = default_registry().resolve("KFD+AMD")
    reason = resolved.unavailable_reason()
    if reason is None:
        pytest.skip("this machine has a usable /dev/kfd")
    assert reason.startswith("no /dev/kfd")
    with pytest.raises(TargetUnavailable, match="no /dev/kfd"):
        resolved.open()


def test_an_allocation_larger_than_vram_is_out_of_memory_and_changes_nothing(device: KfdAmdDevice) -> None:
    from tinyhil.allocator import OutOfMemory

    live = dict(device._live)
    with pytest.raises(OutOfMemory, match=r"T: cannot allocate 0x10000000 bytes of VRAM: .*ENOMEM") as info:
        device.alloc(256 << 20)  # the mock GPUs have 64 MB of VRAM
    assert isinstance(info.value, MemoryError) and isinstance(info.value, InvalidArgument)
    assert dict(device._live) == live
    buf = device.alloc(4096)  # a valid follow-up works
    device.copyin(buf, b"\x5a" * 4096)
    assert device.copyout(buf) == b"\x5a" * 4096
