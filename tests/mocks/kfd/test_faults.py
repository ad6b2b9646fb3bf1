"""MOCKKFD fault plans: validated values, and each fault kind seen through the KFD client and the device runtime."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given, settings

from tinyhil.allocator import OutOfMemory
from tinyhil.device import Device
from tinyhil.errors import DeviceTimeout, InvalidArgument, TinyHilError
from tinyhil.kfd import KFD, KfdMemoryFault, MemoryDomain
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.mocks.kfd import MockFileIO, MockKFD
from tinyhil.mocks.kfd.faults import AllocFailure, KfdFaultPlan, MemoryFaultAt, QueueHang
from tinyhil.mocks.kfd.state import MemKind
from tinyhil.mocks.kfd.strategies import kfd_fault_plans
from tinyhil.registry import open_target
from tinyhil.spec.amdgpu import QueueKind

PAGE = 4096
PAYLOAD = bytes(range(256)) * 32  # two pages


def _open(plan: KfdFaultPlan | None = None, *, seed: int = 3) -> KfdAmdDevice:
    device = open_target("MOCKKFD+AMD", seed=seed, faults=plan)
    assert isinstance(device, KfdAmdDevice)
    return device


def _first_buffer_va() -> int:
    """Where the first user buffer lands (the client picks VAs deterministically, so a plan can name it)."""
    with _open() as device:
        return device.alloc(len(PAYLOAD)).addr


# --- values ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "match"),
    [(lambda: AllocFailure(0), "AllocFailure.occurrence=0"),
     (lambda: AllocFailure(1, gpu=-1), "AllocFailure.gpu=-1"),
     (lambda: AllocFailure(1, domain="VRAM"), r"AllocFailure.domain='VRAM', expected None or a MemKind"),
     (lambda: QueueHang(True), "QueueHang.occurrence=True"),
     (lambda: QueueHang(1, kind="sdma"), r"QueueHang.kind='sdma', expected None or a QueueKind"),
     (lambda: MemoryFaultAt(0x1001), r"MemoryFaultAt\(va=0x1001, nbytes=0x1000\), expected both multiples"),
     (lambda: MemoryFaultAt(0x1000, nbytes=0), "MemoryFaultAt.nbytes=0"),
     (lambda: MemoryFaultAt(1 << 48), "MemoryFaultAt.va"),
     (lambda: KfdFaultPlan([AllocFailure(1)]), "expected a tuple"),  # type: ignore[arg-type]
     (lambda: KfdFaultPlan((QueueHang(1), QueueHang(1))), r"rule QueueHang\(1\) appears twice"),
     (lambda: KfdFaultPlan(("stall",)), "rule 'stall', expected an AllocFailure"),  # type: ignore[arg-type]
     (lambda: MockKFD(gpus=2, faults=KfdFaultPlan((QueueHang(1, gpu=2),))), r"gpu=2, expected < 2"),
     (lambda: MockKFD(faults=(AllocFailure(1),)), "expected None or a KfdFaultPlan"),  # type: ignore[arg-type]
     (lambda: open_target("MOCKKFD+AMD", faults=AllocFailure(1)), "option faults=AllocFailure"),
     (lambda: open_target("MOCKKFD+AMD", seed="3"), "seed")],
)  # fmt: skip
def test_bad_plans_are_typed_errors_naming_the_field(build: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        build()


def test_a_plan_reads_like_the_code_that_built_it() -> None:
    plan = KfdFaultPlan((AllocFailure(3, gpu=1, domain=MemKind.VRAM), QueueHang(2, kind=QueueKind.SDMA),
                         MemoryFaultAt(0x7000_0000_0000, nbytes=2 * PAGE, gpu=0)))  # fmt: skip
    assert eval(repr(plan)) == plan
    assert repr(KfdFaultPlan((QueueHang(1),))) == "KfdFaultPlan((QueueHang(1),))"


def test_a_machine_of_n_gpus_with_a_seed_and_a_plan_is_one_call() -> None:
    plan = KfdFaultPlan((AllocFailure(1, gpu=3),))
    with MockKFD(gpus=4, arch="gfx1201", seed=3, faults=plan) as mock:
        assert (len(mock.gpus), mock.kernel.seed, mock.fault_plan) == (4, 3, plan)


# --- each fault kind, through the KFD client and the runtime ---------------------------------------------------
def _mock(device: KfdAmdDevice) -> MockKFD:
    fileio = device.kfd.fileio
    assert isinstance(fileio, MockFileIO)
    return fileio.kfd


def _vram_allocations(device: KfdAmdDevice) -> int:
    pdds = _mock(device).process.pdds.values()
    return sum(a.kind is MemKind.VRAM for pdd in pdds for a in pdd.allocations.values())


def test_an_allocation_fails_with_enomem_on_exactly_the_nth_call_of_its_domain() -> None:
    with _open() as device:
        opened = _vram_allocations(device)  # the runtime's own (queue buffers), counted like any other
    with _open(KfdFaultPlan((AllocFailure(opened + 2, domain=MemKind.VRAM),))) as device:
        device.alloc(PAGE)
        with pytest.raises(OutOfMemory, match=rf"cannot allocate 0x1000 bytes of VRAM.*AllocFailure\({opened + 2},"):
            device.alloc(PAGE)
        buf = device.alloc(len(PAYLOAD))  # only that call failed
        device.copyin(buf, PAYLOAD)
        assert device.copyout(buf) == PAYLOAD
        assert _vram_allocations(device) == opened + 2


def test_the_kfd_client_sees_the_injected_enomem_on_the_gpu_the_rule_names() -> None:
    with MockKFD(gpus=2, faults=KfdFaultPlan((AllocFailure(1, gpu=1),))) as mock:
        kfd = KFD(mock.fileio)
        try:
            kfd.device(0).free(kfd.device(0).alloc(PAGE, MemoryDomain.GTT))  # GPU 0 is not the rule's
            with pytest.raises(OSError, match="injected by AllocFailure") as info:
                kfd.device(1).alloc(PAGE, MemoryDomain.GTT)
            assert info.value.errno == errno.ENOMEM
            kfd.device(1).free(kfd.device(1).alloc(PAGE, MemoryDomain.GTT))
        finally:
            kfd.close()


def test_a_hung_queue_never_advances_and_the_wait_times_out_naming_it() -> None:
    with _open(KfdFaultPlan((QueueHang(1, kind=QueueKind.SDMA),))) as device:
        buf = device.alloc(len(PAYLOAD))
        with pytest.raises(DeviceTimeout, match=r"timed out after 30000 ms waiting for SDMA queue signal"):
            device.copyin(buf, PAYLOAD)
        mock = _mock(device)
        hung = [queue for queue in mock.process.queues.values() if queue.hung_by is not None]
        assert [queue.kind for queue in hung] == [QueueKind.SDMA]
        assert hung[0].gpu_queue.rptr == 0 and mock.queue_errors == []  # never ran; never failed either


def test_a_memory_fault_at_an_address_names_that_address() -> None:
    va = _first_buffer_va()
    with _open(KfdFaultPlan((MemoryFaultAt(va + PAGE),))) as device:
        buf = device.alloc(len(PAYLOAD))
        assert buf.addr == va
        with pytest.raises(KfdMemoryFault, match=f"at VA {va + PAGE:#x}") as info:
            device.copyin(buf, PAYLOAD)
        assert info.value.va == va + PAGE and info.value.gpu_id == device.node.gpu_id


def test_a_memory_fault_on_another_gpu_leaves_this_one_working() -> None:
    va = _first_buffer_va()
    with _open(KfdFaultPlan((MemoryFaultAt(va, nbytes=2 * PAGE, gpu=1),))) as device:
        buf = device.alloc(len(PAYLOAD))
        device.copyin(buf, PAYLOAD)
        assert device.copyout(buf) == PAYLOAD


# --- random plans ----------------------------------------------------------------------------------------------
def _workload(device: Device) -> list[str]:
    buf = device.alloc(len(PAYLOAD))
    device.copyin(buf, PAYLOAD)
    other = device.alloc(PAGE)
    device.fill(other, 7)
    return [bytes(device.copyout(buf)).hex()[:16], bytes(device.copyout(other))[:4].hex()]


def _outcome(plan: KfdFaultPlan, seed: int) -> tuple[str, ...]:
    """What a short workload did under ``plan``: its results, or the typed error that stopped it."""
    try:
        with _open(plan, seed=seed) as device:
            return ("ok", *_workload(device))
    except (TinyHilError, OSError) as error:  # OSError: the client's errno, for a failure during open
        assert isinstance(error, TinyHilError) or error.errno is not None
        return (type(error).__name__, str(error))


_VA = _first_buffer_va()


@settings(max_examples=25)  # each example opens the machine twice
@given(plan=kfd_fault_plans(gpus=2, vas=[_VA, _VA + PAGE], max_occurrence=6))
def test_random_plans_give_only_typed_errors_and_the_same_outcome_twice(plan: KfdFaultPlan) -> None:
    first = _outcome(plan, seed=5)
    assert _outcome(plan, seed=5) == first
    if not plan.rules:
        assert first[0] == "ok"


def test_given_parts_take_a_plan_too(make_mock: Any) -> None:
    mock = make_mock(110000, 120001, faults=KfdFaultPlan((AllocFailure(2, gpu=1, domain=MemKind.GTT),)))
    kfd = KFD(mock.fileio)
    try:
        gpu = kfd.device(1)
        gpu.free(gpu.alloc(PAGE, MemoryDomain.GTT))
        with pytest.raises(OSError, match=r"injected by AllocFailure\(2, gpu=1, domain=MemKind.GTT\)") as info:
            gpu.alloc(PAGE, MemoryDomain.GTT)
        assert info.value.errno == errno.ENOMEM
    finally:
        kfd.close()
