"""Fuzzing the ASM2464 client over MockUSB3 (issue 14, "Fuzzing in the project"): short sequences of random controller
calls (XDATA, 0xF2 SRAM transfers, PCIe TLPs and memory streams, power, the link wait) with arguments in and out
of their documented limits and of the wrong types, under random fault plans, in both transfer modes.

Each call must succeed or raise its documented error: ``InvalidArgument`` for bad arguments, raised before the first
request goes out (the state digest unchanged, no virtual time passed), or what the device answered (a
``usb1.USBError``, ``ShortTransfer``, ``PcieError``, or ``DeviceTimeout`` from the link wait); never anything else.
No transfer is left in flight after a call; afterwards, faults off, a valid scsi_write lands the right bytes. The
arguments keep every wait short in virtual time and every allocation small, so an example costs milliseconds;
``max_examples`` comes from the profile (``HYPOTHESIS_PROFILE=nightly`` runs 50 times more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pytest
import usb1
from hypothesis import given
from hypothesis import strategies as st
from support.boards import recover_and_write

from tinyhil.asm2464 import Asm2464Controller, PcieError
from tinyhil.asm2464.stream import MAX_MEM_ACCESS_BYTES
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.faults import FaultPlan
from tinyhil.emulators.kernel import VirtualTimeout
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.asm2464 import SECTOR_BYTES, FmtType
from tinyhil.usb import MAX_TIMEOUT_MS, ShortTransfer

pytestmark = pytest.mark.fuzz

_ODD: Final = [None, 1.5, True, "1", b"\x01", [1]]
_SLOTS: Final = st.one_of(st.integers(0, 31), st.sampled_from([32, -1, 1 << 40]), st.sampled_from(_ODD))
_TIMEOUTS: Final = st.one_of(
    st.none(),
    st.sampled_from([1, 5, 1000, MAX_TIMEOUT_MS]),
    st.sampled_from([0, -1, MAX_TIMEOUT_MS + 1, 1 << 32, 1.5, "100", float("nan")]),
)
_SIZES: Final = st.one_of(
    st.integers(1, 2100),
    st.sampled_from([SECTOR_BYTES, 2 * SECTOR_BYTES, 0x4000]),
    st.sampled_from([0, -1, MAX_MEM_ACCESS_BYTES + 1, 1 << 40, 1 << 62]),
    st.sampled_from(_ODD),
)
_ADDRESSES: Final = st.one_of(
    st.sampled_from([0, 0x200000, 0x820000, 0xE000_0000, (1 << 32) - 2, 0x8_0000_0000, (1 << 64) - 2]),
    st.integers(0, 1 << 40),
    st.sampled_from([-1, 1 << 64, *_ODD]),
)
_XDATA: Final = st.one_of(st.integers(0, 0xFFFF), st.sampled_from([0x10000, -1, *_ODD]))
_BUFFERS: Final = st.one_of(
    st.binary(min_size=1, max_size=2100),
    st.integers(1, 3).map(lambda n: b"\x5a" * (SECTOR_BYTES * n)),
    st.sampled_from([b"", "abc", None, 5, np.zeros((2, 4), dtype=np.uint8)[:, ::2]]),
)
_SECONDS: Final = st.one_of(
    st.sampled_from([0.001, 0.01, 0.05]),
    st.sampled_from([0, -1, 61, 1e-9, float("inf"), float("nan"), True, "1"]),
)


@dataclass(frozen=True)
class Call:
    """One controller method and its arguments."""

    method: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()


def _call(method: str, *args: st.SearchStrategy[Any], **kwargs: st.SearchStrategy[Any]) -> st.SearchStrategy[Call]:
    return st.tuples(st.tuples(*args), st.fixed_dictionaries(kwargs)).map(
        lambda drawn: Call(method, drawn[0], tuple(drawn[1].items()))
    )


CALLS: Final = st.one_of(
    _call("xdata_read", _XDATA, st.one_of(st.integers(1, 600), st.sampled_from([0, -1, 0x10001, None]))),
    _call("xdata_write", _XDATA, st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from([b"", "ab", None]))),
    _call("scsi_write", _BUFFERS, _SLOTS, timeout=_TIMEOUTS),
    _call("scsi_read_arm", _SIZES, _SLOTS),
    _call("scsi_read", _SIZES, _SLOTS, arm=st.booleans(), timeout=_TIMEOUTS),
    _call("scsi_read_into", st.integers(1, 2100).map(bytearray), _SLOTS, arm=st.booleans(), timeout=_TIMEOUTS),
    _call("pcie_mem_read", _ADDRESSES, _SIZES),
    _call("pcie_mem_write", _ADDRESSES, _BUFFERS),
    _call(
        "pcie_request",
        st.one_of(st.sampled_from([int(f) for f in FmtType]), st.sampled_from([0x100, -1, None])),
        _ADDRESSES,
        st.one_of(st.none(), st.integers(0, 0xFFFF_FFFF), st.sampled_from([1 << 32, -1, 1.5])),
        st.one_of(st.integers(1, 4), st.sampled_from([0, 5, 8, None])),
    ),
    _call(
        "pcie_cfg_read",
        st.one_of(st.integers(0, 5), st.sampled_from([256, -1])),
        st.one_of(st.integers(0, 1), st.sampled_from([32, None])),
        st.one_of(st.just(0), st.sampled_from([8, 1.5])),
        st.one_of(st.integers(0, 0xFFF), st.sampled_from([0x1000, -4])),
        st.one_of(st.sampled_from([1, 2, 4]), st.sampled_from([3, 0, None])),
    ),
    _call("set_pcie_power", st.one_of(st.booleans(), st.sampled_from([1, None]))),
    _call("wait_pcie_link", _SECONDS, _SECONDS),
)
# What the device (or the link wait) may answer; anything else is a crash.
DEVICE_ERRORS: Final = (usb1.USBError, ShortTransfer, PcieError, DeviceTimeout)


def _check_call(usb: MockUSB3, ctrl: Asm2464Controller, call: Call) -> None:
    bridge, front = usb.bridge, usb.bridge.front
    before, start_ns = bridge.state_digest(), usb.kernel.now_ns
    try:
        getattr(ctrl, call.method)(*call.args, **dict(call.kwargs))
    except InvalidArgument:
        assert bridge.state_digest() == before, f"{call}: refused, but the emulator changed"
        assert usb.kernel.now_ns == start_ns, f"{call}: refused after a request went out"
    except DEVICE_ERRORS as error:
        assert not isinstance(error, VirtualTimeout), f"{call}: the emulator's own wait leaked out: {error!r}"
        if isinstance(error, DeviceTimeout):
            assert call.method == "wait_pcie_link", f"{call}: {error!r}, expected a usb1 error from a transfer"
    assert not front.busy and not any(front.queues.values()), f"{call}: left a transfer in flight"
    assert usb.in_flight == (), f"{call}: left an asynchronous transfer unreaped"


@given(
    calls=st.lists(CALLS, min_size=1, max_size=4),
    plan=fault_plans(max_occurrence=3),
    mode=st.sampled_from(["sync", "timed"]),
    power=st.booleans(),
    seed=st.integers(0, 3),
)
def test_random_controller_calls_raise_only_documented_errors_and_refusals_change_nothing(
    calls: list[Call], plan: FaultPlan, mode: str, power: bool, seed: int
) -> None:
    with MockUSB3.over(Asm2464(seed=seed, function=PlainEndpoint(vram_bytes=1 << 20)), mode=mode) as usb:
        ctrl = Asm2464Controller(usb, retry_delay_s=0)
        if power:
            ctrl.set_pcie_power(True)
        usb.bridge.faults = plan  # after the set-up, so the plan's occurrences count the fuzzed calls
        for call in calls:
            _check_call(usb, ctrl, call)
        recover_and_write(usb, seed)
