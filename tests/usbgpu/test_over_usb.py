"""The USB device runtime recovers its copy engine after a failed copy: the next copy works, ``seq`` carries on."""

from __future__ import annotations

import numpy as np
import pytest

from tinyhil import open_target
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.usbgpu import DrainError, UsbAmdDevice


@pytest.mark.parametrize("fault", [Fault.drop(), Fault.stall()], ids=["dropped chunk", "stalled bulk"])
def test_a_failed_copyin_leaves_a_device_whose_next_copyin_works(fault: Fault) -> None:
    data = np.random.default_rng(5).integers(0, 256, 3 << 18, dtype=np.uint8)  # three chunks
    with open_target("MOCKUSB+AMD") as device:
        assert isinstance(device, UsbAmdDevice)
        device.copier.drain_polls = 50
        buf = device.alloc(data.nbytes)
        device.copyin(buf, data[:4096])  # setup done, so the plan counts only the next copyin's transfers
        stuck_queue = device.copier.sdma
        device.transport.bridge.faults = FaultPlan.single(Operation.bulk_out(), 3, fault)
        with pytest.raises(Exception) as info:
            device.copyin(buf, data)
        if fault == Fault.drop():
            assert isinstance(info.value, DrainError) and "GPU failed to drain chunk" in str(info.value)
        seq_after_failure = device.copier.seq
        assert device.copier.sdma is not stuck_queue, "the copy queue was recreated"
        device.transport.bridge.faults = FaultPlan()
        device.copyin(buf, data)
        assert bytes(device.copyout(buf)) == data.tobytes()
        assert device.copier.seq > seq_after_failure


def test_the_recreated_copy_queue_keeps_its_own_pointers_so_kernels_still_run_after_a_failed_copy() -> None:
    with open_target("MOCKUSB+AMD") as device:
        assert isinstance(device, UsbAmdDevice)
        device.copier.drain_polls = 50
        buf = device.alloc(1 << 18)
        device.copyin(buf, bytes(4096))
        device.transport.bridge.faults = FaultPlan.single(Operation.bulk_out(), 3, Fault.drop())  # 1-2: ring streams
        with pytest.raises(DrainError):
            device.copyin(buf, bytes(1 << 18))
        device.transport.bridge.faults = FaultPlan()
        pointers = {(q.rptr_va, q.wptr_va) for q in device.gpu.queues}
        assert len(pointers) == len(device.gpu.queues) == 3, "every live queue has its own pointer pair"
        device.fill(buf, 7)
        program = device.compile(b"void k(unsigned long long *a, const unsigned *g, const unsigned *s) {}", "k")
        device.exec(program, grid=1, local=1, args=[buf])
        device.synchronize()
        assert bytes(device.copyout(buf, 16)) == b"\x07" * 16
