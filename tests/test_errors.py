"""Errors keep their message, fields and class through pickling (errors cross process pools), and the errors with
typed fields share one implementation (:class:`~tinyhil.errors.DetailedDeviceError`)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.asm2464.errors import PcieError
from tinyhil.emulators.amdgpu.errors import GpuQueueError
from tinyhil.errors import CompileError, DetailedDeviceError, DeviceError, DeviceTimeout
from tinyhil.spec.asm2464 import CplStatus

_STOPPED_FIELDS: dict[str, Any] = dict(
    queue="SDMA queue 0", status=2, error_code=7, opcode=8, sub_op=1, ring_offset=0x40, fault_addr=0xDEAD000
)


def _detailed() -> list[DetailedDeviceError]:
    return [
        QueueStopped("SDMA queue 0 stopped", **_STOPPED_FIELDS),
        PcieError("UR for MRd at 0x200000+0x4", fmt_type=0x20, address=0x200000, size=4, cpl_status=CplStatus.UR),
        GpuQueueError("queue 3 hung", queue_id=3, status=2, error_code=1, error_rptr=0x80, fault_va=None),
    ]


@pytest.mark.parametrize("error", _detailed(), ids=lambda error: type(error).__name__)
def test_detailed_errors_pickle_with_their_message_and_every_field(error: DetailedDeviceError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error) and copy.op == type(error).OP and copy.target == ""


def test_detailed_errors_store_their_keyword_fields_and_report_their_op() -> None:
    stopped, pcie, queue = _detailed()
    assert {name: getattr(stopped, name) for name in _STOPPED_FIELDS} == _STOPPED_FIELDS and stopped.op == "queue"
    assert (pcie.fmt_type, pcie.address, pcie.size, pcie.cpl_status) == (0x20, 0x200000, 4, CplStatus.UR)
    assert (pcie.ret_status, pcie.attempts, pcie.op) == (None, 1, "pcie_request")
    assert (queue.queue_id, queue.error_rptr, queue.fault_va, queue.op) == (3, 0x80, None, "queue")
    assert all(isinstance(error, DeviceError) and isinstance(error, RuntimeError) for error in _detailed())
    assert repr(pcie) == "PcieError('UR for MRd at 0x200000+0x4')"


def test_detailed_errors_need_their_fields_and_compare_by_identity() -> None:
    with pytest.raises(TypeError, match="fmt_type"):
        PcieError("no fields")  # type: ignore[call-arg]
    first, second = _detailed()[1], _detailed()[1]
    assert first != second and len({first, second}) == 2


@pytest.mark.parametrize(
    "error",
    [DeviceError("lost", target="MOCKUSB", op="copyin"), DeviceTimeout("late", op="wait"), CompileError("cc", "x")],
    ids=lambda error: type(error).__name__,
)
def test_the_other_errors_pickle_as_before(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and vars(copy) == vars(error)


@pytest.mark.parametrize("error", [DeviceTimeout("late", op="wait"), DeviceError("lost", op="copyin")], ids=repr)
def test_errors_survive_tblib_pickling_as_dask_ships_them(error: Exception) -> None:
    """Dask installs tblib's exception pickling for every class; its rebuild calls ``cls.__new__(cls, *args)``."""
    tblib = pytest.importorskip("tblib.pickling_support", reason="tblib comes with the farm extra (distributed)")
    rebuild, args = tblib.pickle_exception(error)[:2]
    copy = rebuild(*args)
    assert type(copy) is type(error) and str(copy) == str(error) and vars(copy) == vars(error)
