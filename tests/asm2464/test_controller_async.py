"""Asm2464Controller's asynchronous arm, XDATA read and bulk OUT (what the copyin's one round trip per chunk uses),
at the wire level against the emulated bridge: they put on the wire exactly what the transport's own asynchronous
calls do, the arm's fields come from the controller's one arm cache, and a synchronous transport refuses them by
name. Their bad inputs are rows of the controller's one table (``test_controller.py``'s ``BAD_CALLS``)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from support.wire import Recorded, WireRecorder, recorded_board

from tinyhil.asm2464 import Asm2464Controller, SramArm
from tinyhil.asm2464.sram import arm_request
from tinyhil.emulators.asm2464 import Asm2464, Direction
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.spec.asm2464 import Request, Xdata
from tinyhil.usb import Usb3Transport

OUT, IN = 0x40, 0xC0
FENCE = int(Xdata.DRAIN_FENCE)
IMAGE = np.arange(2048, dtype=np.uint32).astype(np.uint8)  # four sectors


def _through_controller(board: Recorded) -> bytearray:
    controller = board.controller()
    arm_tag = controller.scsi_write_arm_async(IMAGE.nbytes, 16)
    fence_tag, fence = controller.xdata_read_async(FENCE, 8)
    controller.reap(arm_tag, fence_tag)
    controller.reap(controller.scsi_write_async(IMAGE.data))
    return fence


def _through_the_transport(board: Recorded) -> bytearray:
    transport = board.transport
    arm = SramArm.for_bytes(IMAGE.nbytes, 16)
    arm_tag = transport.control_write_async(Request.SRAM_ARM, arm.value, arm.index)
    fence_tag, fence = transport.control_read_async(Request.XDATA_READ, 8, FENCE, 0)
    transport.bulk_wait(arm_tag)
    transport.bulk_wait(fence_tag)
    transport.bulk_wait(transport.bulk_write_async(IMAGE.data))
    return fence


def test_the_async_arm_fence_read_and_bulk_put_the_transports_own_traffic_on_the_wire() -> None:
    """Same transfers (setup, data, timeout, asynchronous) as the transport's calls: the copy path's wire is unchanged
    by going through the controller. The fence bytes arrive once reaped, and the image lands where it was armed."""
    results = []
    for send in (_through_controller, _through_the_transport):
        with recorded_board() as board:
            board.bridge.write_xdata(FENCE, struct.pack("<Q", 41))
            fence = send(board)
            assert struct.unpack("<Q", fence) == (41,)
            assert board.bridge.read_sram(16 * 0x4000, IMAGE.nbytes) == IMAGE.tobytes()
            results.append(board.wire.transfers)
    via_controller, via_transport = results
    assert via_controller == via_transport
    assert [(t.kind, t.is_async) for t in via_controller] == [
        ("control_out", True),
        ("control_in", True),
        ("bulk_out", True),
    ]
    assert via_controller[0].setup == (OUT, 0xF2, 4, 16 | 1 << 8, b"")
    assert via_controller[1].setup == (IN, 0xE4, FENCE, 0, 8)


def test_the_sync_arm_sends_the_same_request_synchronously(
    controller: Asm2464Controller, wire: WireRecorder, bridge: Asm2464
) -> None:
    arm = controller.scsi_write_arm(0x40000 - 4, 16)
    assert (arm.sectors, arm.slot_count) == (512, 16)
    (request,) = wire.transfers
    assert request.setup == (OUT, 0xF2, 512, 0x1010, b"") and not request.is_async
    armed = bridge.engine.arms[Direction.OUT]
    assert armed is not None and (armed.nbytes, armed.sram_offset) == (0x40000, 16 * 0x4000)


def test_the_arm_is_validated_once_and_cached() -> None:
    """The controller's one cache of arms: a plain-int shape is one frozen arm; other types are rejected by name."""
    assert arm_request(1024, 16, False) is arm_request(1024, 16, False)
    assert arm_request(1024, 16, False)[1:] == (2, 16 | 1 << 8, 1024)
    with pytest.raises(InvalidArgument, match="nbytes=True"):
        arm_request(True, 0, False)


class _SyncOnly:
    """A BridgeIO without the asynchronous half (a transport that has only synchronous transfers)."""

    def __init__(self, transport: Usb3Transport) -> None:
        self.control_write = transport.control_write
        self.control_read = transport.control_read
        self.bulk_write = transport.bulk_write
        self.bulk_read = transport.bulk_read
        self.pause = transport.pause


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("xdata_read_async", (FENCE, 8)),
        ("scsi_write_arm_async", (1024, 0)),
        ("scsi_write_async", (bytes(512),)),
        ("reap", (1,)),
        ("clear_error", ()),
    ],
)
def test_a_synchronous_transport_refuses_the_async_calls_by_name(
    recorded: Recorded, op: str, args: tuple[Any, ...]
) -> None:
    controller = Asm2464Controller(_SyncOnly(recorded.transport))
    assert not controller.asynchronous and recorded.controller().asynchronous
    with pytest.raises(StateError, match=rf"Asm2464Controller\.{op} needs asynchronous transfers"):
        getattr(controller, op)(*args)
    assert recorded.wire.transfers == []
