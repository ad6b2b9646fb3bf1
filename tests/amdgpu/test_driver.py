"""AmdDeviceBase: engines ordered by timeline signals, ring pressure, argument memory reuse, hooks, profile ranges."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from tinyhil.amdgpu import KernelLoadError
from tinyhil.amdgpu.driver import AMD_CAPABILITIES, AmdDeviceBase
from tinyhil.amdgpu.interfaces import GpuPointer, MemoryUse
from tinyhil.device import Program
from tinyhil.errors import InvalidArgument
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.profile import ProfileRangeEvent
from tinyhil.registry import open_target
from tinyhil.spec.amdgpu import QueueKind

INCREMENT = """
void inc(unsigned long long *args, const unsigned *g, const unsigned *s) { (void)g; (void)s;
    ((unsigned *)args[0])[0] += (unsigned)args[1]; }
"""


@pytest.fixture
def device() -> Iterator[KfdAmdDevice]:
    with open_target("MOCKKFD+AMD") as dev:
        assert isinstance(dev, KfdAmdDevice)
        yield dev


def test_a_submission_waits_on_the_other_queue_only_while_it_has_unfinished_work(device: KfdAmdDevice) -> None:
    buf = device.alloc(4)
    device.fill(buf, 0)
    sdma, compute = device._timelines[QueueKind.SDMA], device._timelines[QueueKind.COMPUTE]
    assert device._dependencies(compute) != []  # the fill is not known complete: compute must wait for it
    assert device._dependencies(compute) == []  # ... once
    device.synchronize()
    assert device._dependencies(sdma) == [] and sdma.completed == sdma.submitted


def test_many_kernels_and_fills_without_synchronize_keep_their_order(device: KfdAmdDevice) -> None:
    program = device.compile(INCREMENT, "inc")
    buf = device.alloc(4)
    device.fill(buf, 0)
    for round_ in range(300):  # more than the 64 KiB argument memory and half of each ring hold
        device.exec(program, 1, 1, [buf, 1])
        if round_ == 150:
            device.fill(buf, 0, nbytes=1)  # 150 + 1 = 151 = 0x97: the low byte is cleared, the rest kept
    assert int(np.frombuffer(device.copyout(buf), np.uint32)[0]) == 151 - 0x97 + 149


def test_profile_ranges_carry_gpu_time_in_order(device: KfdAmdDevice) -> None:
    program = device.compile(INCREMENT, "inc")
    buf = device.alloc(4)
    device.fill(buf, 0)
    device.exec(program, 1, 1, [buf, 2])
    device.copy(buf, buf)
    device.synchronize()
    ranges = [event for event in device.profile_events if isinstance(event, ProfileRangeEvent)]
    assert [(event.name, event.queue) for event in ranges] == [("fill", "copy"), ("inc", "compute"), ("copy", "copy")]
    assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(ranges))
    assert ranges[1].key == program.key and ranges[0].end_ns > ranges[0].start_ns


def test_values_and_pointers_are_placed_as_the_arguments_say(device: KfdAmdDevice) -> None:
    program = device.compile(INCREMENT, "inc")
    buf = device.alloc(4)
    device.copyin(buf, np.uint32(5).tobytes())
    device.exec(program, 1, 1, [GpuPointer(buf.addr), -1])  # -1 is the u64 0xffff...: adds 0xffffffff mod 2**32
    assert device.copyout(buf) == np.uint32(4).tobytes()
    assert repr(GpuPointer(0x1000)) == "GpuPointer(0x1000)"


def test_copyout_into_sees_every_earlier_operation_without_a_synchronize(device: KfdAmdDevice) -> None:
    buf = device.alloc(4096)
    out = np.empty(1024, np.uint32)
    for value in range(1, 4):
        device.fill(buf, value)  # queued on SDMA; copyout_into must order after it
        device.copyout_into(buf, out)
        assert (out == np.uint32(value * 0x0101_0101)).all()


class _Bare(AmdDeviceBase):
    pass


@pytest.mark.parametrize(
    ("call", "hook"),
    [(lambda d: d._gpu_alloc(1, MemoryUse.BUFFER), "_gpu_alloc"), (lambda d: d._gpu_free(None), "_gpu_free"),
     (lambda d: d._host_write(None, 0, b""), "_host_write"), (lambda d: d._host_read(None, 0, 1), "_host_read"),
     (lambda d: d._create_queue(QueueKind.SDMA), "_create_queue"), (lambda d: d._wait(bool, "x"), "_wait")],
)  # fmt: skip
def test_a_path_without_a_hook_says_which(call: object, hook: str) -> None:
    bare = _Bare("BARE", frozenset())
    assert bare.capabilities == AMD_CAPABILITIES
    with pytest.raises(NotImplementedError, match=hook):
        call(bare)  # type: ignore[operator]
    assert bare._completion_event() is None
    bare.close()  # never started: closing releases nothing and does not fail


@pytest.mark.parametrize("target", ["MOCKKFD+AMD", "MOCKUSB+AMD"])
def test_a_program_that_cannot_load_is_reported_at_its_exec_with_the_loaders_message(target: str) -> None:
    with open_target(target) as device:
        assert isinstance(device, AmdDeviceBase)
        good = device.compile(INCREMENT, "inc")
        buf = device.alloc(4)
        device.fill(buf, 0)
        device.synchronize()
        before = ({kind: t.submitted for kind, t in device._timelines.items()}, dict(device._code))
        garbage = Program("k", b"\x7fELF garbage")
        with pytest.raises(
            KernelLoadError, match=r"program 'k' \(\w+\) cannot load: its shared object does not lo"
        ) as info:
            device.exec(garbage, 1, 1, [buf, 1])
        assert info.value.program == "k" and "file too short" in info.value.reason and info.value.target == target
        with pytest.raises(KernelLoadError, match=r"program 'nope' .* entry point 'nope' is not in its shared object"):
            device.exec(Program("nope", good.binary), 1, 1, [buf, 1])
        assert ({kind: t.submitted for kind, t in device._timelines.items()}, dict(device._code)) == before
        device.exec(good, 1, 1, [buf, 2])  # the device is still usable: nothing was submitted
        assert device.copyout(buf) == np.uint32(2).tobytes()


def test_a_launch_past_the_limits_submits_nothing(device: KfdAmdDevice) -> None:
    program = device.compile(INCREMENT, "inc")
    buf = device.alloc(4)
    device.fill(buf, 0)
    submitted = {kind: t.submitted for kind, t in device._timelines.items()}
    for grid, local in [((65536, 65536, 1), 1), (1.5, 1), (1, 2048), ((1 << 22) + 1, 1)]:
        with pytest.raises(InvalidArgument):
            device.exec(program, grid, local, [buf, 1])  # type: ignore[arg-type]
    assert {kind: t.submitted for kind, t in device._timelines.items()} == submitted and not device._code
    device.exec(program, 3, 1, [buf, 1])  # three workgroups each add one
    assert device.copyout(buf) == np.uint32(3).tobytes()
