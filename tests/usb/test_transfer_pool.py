"""Asynchronous transfers of Usb3Transport (tinyhil.usb.transfer_pool): tags, pooling, payload lifetime, reaping, error
latching that surfaces once and can be cleared, teardown, and a state machine over random submit/wait/fail runs."""

from __future__ import annotations

import gc
import weakref
from types import ModuleType
from typing import Any

import pytest
import usb1
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support import scripted_usb

from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.usb import ShortTransfer, Usb3Transport


class Payload(bytearray):
    """A bytearray that can be weakly referenced, to watch the transport keep it alive."""


def _setup(usb_fake: ModuleType, responder: Any = None, **context_kwargs: Any) -> tuple[Usb3Transport, Any, Any]:
    handle = usb_fake.ScriptedHandle(responder or usb_fake.ok)
    context = usb_fake.ScriptedContext(handle, **context_kwargs)
    return Usb3Transport(handle, context), handle, context


def test_tags_are_distinct_and_transfers_are_reused(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake)
    first = [transport.bulk_write_async(bytes(512)) for _ in range(3)]
    assert len(set(first)) == 3 and transport.in_flight == tuple(first)
    for tag in first:
        transport.bulk_wait(tag)
    second = [transport.bulk_write_async(bytes(512)) for _ in range(3)]
    transport.wait_all()
    assert not set(first) & set(second) and transport.in_flight == ()
    assert len(handle.transfers) == 3, "reaped transfers go back to the pool"
    assert [t.submits for t in handle.transfers] == [2, 2, 2]


def test_async_bulk_encodes_endpoint_timeout_and_payload(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake)
    transport.bulk_wait(transport.bulk_write_async(b"\x01" * 1024, timeout=1234))
    (call,) = handle.calls
    assert (call.kind, call.endpoint, call.timeout, call.is_async, call.data) == (
        "bulk_out",
        0x02,
        1234,
        True,
        b"\x01" * 1024,
    )


def test_payload_is_kept_alive_until_reaped_and_not_copied(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake)
    payload = Payload(b"A" * 512)
    alive = weakref.ref(payload)
    tag = transport.bulk_write_async(payload)
    payload[:4] = b"BBBB"  # the caller breaks the contract: the device reads the buffer at completion
    del payload
    gc.collect()
    assert alive() is not None, "the transport must keep the payload alive while the transfer is in flight"
    transport.bulk_wait(tag)
    gc.collect()
    assert alive() is None, "a reaped (pooled) transfer must not pin the payload"
    assert handle.calls[0].data == b"BBBB" + b"A" * 508, "writable payloads go out without a copy"


def test_async_control_transfers_and_their_buffers(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake, usb_fake.replies(None, b"\x07\x00\x00\x00\x00\x00\x00\x00"))
    arm = transport.control_write_async(0xF2, 0x0200, 0x1000)
    fence, buffer = transport.control_read_async(0xE4, 8, 0xA800)
    assert buffer == bytearray(8), "not filled before it is reaped"
    transport.bulk_wait(arm)
    transport.bulk_wait(fence)
    assert buffer == b"\x07" + bytes(7)
    assert handle.requests() == [(0x40, 0xF2, 0x0200, 0x1000, b""), (0xC0, 0xE4, 0xA800, 0, 8)]
    assert all(call.is_async and call.timeout == 1000 for call in handle.calls)


def test_sync_mode_completion_inside_submit_works(usb_fake: ModuleType) -> None:
    handle = usb_fake.ScriptedHandle(usb_fake.ok, complete_at_submit=True)
    context = usb_fake.ScriptedContext(handle)
    transport = Usb3Transport(handle, context)
    tags = [transport.bulk_write_async(bytes(512)) for _ in range(4)]
    for tag in tags:
        transport.bulk_wait(tag)
    assert context.pumps == [] and len(set(tags)) == 4


def test_wait_pumps_only_until_its_transfer_is_done(usb_fake: ModuleType) -> None:
    transport, _, context = _setup(usb_fake, per_pump=1)
    tags = [transport.bulk_write_async(bytes(512)) for _ in range(3)]
    transport.bulk_wait(tags[1])
    assert len(context.pumps) == 2 and transport.in_flight == (tags[0], tags[2])
    assert context.pumps[0] == 0.05


def test_a_failed_transfer_raises_once_at_the_next_wait_with_its_tag(usb_fake: ModuleType) -> None:
    stall = usb1.USBErrorPipe(usb1.ERROR_PIPE)
    transport, _, _ = _setup(usb_fake, usb_fake.replies(None, stall, None))
    tags = [transport.bulk_write_async(bytes(512)) for _ in range(3)]
    with pytest.raises(usb1.USBErrorPipe) as raised:
        transport.bulk_wait(tags[0])  # the pump completed all three: tag 2's stall surfaces here
    assert raised.value.tag == tags[1]
    assert any(f"tag {tags[1]}" in note for note in raised.value.__notes__)
    assert transport.latched_error is None
    transport.bulk_wait(tags[1])  # raised once already: not again
    transport.bulk_wait(tags[2])
    assert transport.in_flight == ()


def test_a_wait_on_a_tag_not_in_flight_still_surfaces_a_latched_error(usb_fake: ModuleType) -> None:
    stall = usb1.USBErrorPipe(usb1.ERROR_PIPE)
    transport, _, _ = _setup(usb_fake, usb_fake.replies(stall))
    tag = transport.bulk_write_async(bytes(512))
    transport.pause(0.05)  # the pump completes the transfer; its stall latches
    with pytest.raises(usb1.USBErrorPipe) as raised:
        transport.bulk_wait(None)
    assert raised.value.tag == tag and transport.in_flight == (tag,)
    transport.bulk_wait(tag)  # raised once already: the reap is quiet
    assert transport.in_flight == ()


def test_errors_surface_in_order_one_per_wait(usb_fake: ModuleType) -> None:
    errors = [usb1.USBErrorPipe(usb1.ERROR_PIPE), usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)]
    transport, _, _ = _setup(usb_fake, usb_fake.replies(*errors))
    tags = [transport.bulk_write_async(bytes(512)) for _ in range(2)]
    with pytest.raises(usb1.USBErrorPipe):
        transport.bulk_wait(tags[0])
    with pytest.raises(usb1.USBErrorNoDevice):
        transport.bulk_wait(tags[1])


def test_latched_errors_can_be_cleared(usb_fake: ModuleType) -> None:
    stall = usb1.USBErrorPipe(usb1.ERROR_PIPE)
    transport, handle, context = _setup(usb_fake, usb_fake.replies(stall, None))
    failed = transport.bulk_write_async(bytes(512))
    context.handleEventsTimeout(0)
    assert isinstance(transport.latched_error, usb1.USBErrorPipe)
    transport.clear_halt(0x02)
    (dropped,) = transport.clear_error()
    assert isinstance(dropped, usb1.USBErrorPipe)
    assert transport.latched_error is None and transport.clear_error() == ()
    transport.bulk_wait(failed)
    transport.bulk_wait(transport.bulk_write_async(bytes(512)))  # the transport carries on after recovery
    assert ("clear_halt", 0x02) in handle.events


def test_async_timeouts_and_short_transfers_are_typed(usb_fake: ModuleType) -> None:
    transport, _, _ = _setup(usb_fake, usb_fake.replies(usb_fake.timeout_error(1024), 100, b"\x01\x02"))
    tag = transport.bulk_write_async(bytes(4096))
    with pytest.raises(usb1.USBErrorTimeout) as timed_out:
        transport.bulk_wait(tag)
    assert timed_out.value.transferred == 1024
    with pytest.raises(ShortTransfer, match="moved 0x64 of 0x200 bytes"):
        transport.bulk_wait(transport.bulk_write_async(bytes(512)))
    tag, buffer = transport.control_read_async(0xE4, 8)
    with pytest.raises(ShortTransfer, match="moved 0x2 of 0x8 bytes"):
        transport.bulk_wait(tag)
    assert buffer[:2] == b"\x01\x02"


def test_async_control_read_timeout_reports_what_was_received(usb_fake: ModuleType) -> None:
    transport, _, _ = _setup(usb_fake, usb_fake.replies(usb_fake.timeout_error(0)))
    tag, _ = transport.control_read_async(0xE4, 8)
    with pytest.raises(usb1.USBErrorTimeout) as raised:
        transport.bulk_wait(tag)
    assert (raised.value.transferred, raised.value.received) == (0, b"")


def test_a_submit_that_fails_passes_through_and_leaves_nothing_in_flight(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake)
    handle.submit_error = usb1.USBErrorNoDevice(usb1.ERROR_NO_DEVICE)
    with pytest.raises(usb1.USBErrorNoDevice):
        transport.bulk_write_async(bytes(512))
    assert transport.in_flight == ()
    transport.bulk_wait(transport.bulk_write_async(bytes(512)))
    assert len(handle.transfers) == 1, "the transfer of the failed submit went back to the pool"


def test_max_in_flight_is_enforced(usb_fake: ModuleType) -> None:
    handle = usb_fake.ScriptedHandle()
    transport = Usb3Transport(handle, usb_fake.ScriptedContext(handle), max_in_flight=2)
    transport.bulk_write_async(b"x")
    transport.bulk_write_async(b"x")
    with pytest.raises(StateError, match=r"2 transfers are in flight \(max_in_flight=2\)"):
        transport.bulk_write_async(b"x")


def test_no_cap_by_default_and_strict_mode_caps_at_64(usb_fake: ModuleType) -> None:
    transport, _, _ = _setup(usb_fake)
    tags = [transport.bulk_write_async(b"x") for _ in range(65)]
    assert transport.in_flight == tuple(tags)
    handle = usb_fake.ScriptedHandle()
    strict = Usb3Transport(handle, usb_fake.ScriptedContext(handle), strict=True)
    for _ in range(64):
        strict.bulk_write_async(b"x")
    with pytest.raises(StateError, match=r"64 transfers are in flight \(max_in_flight=64\)"):
        strict.bulk_write_async(b"x")


def test_waiting_twice_returns_and_strict_mode_names_the_reaped_tag(usb_fake: ModuleType) -> None:
    transport, _, _ = _setup(usb_fake)
    tag = transport.bulk_write_async(b"x")
    transport.bulk_wait(tag)
    transport.bulk_wait(tag)  # nothing to wait for, as on a board
    handle = usb_fake.ScriptedHandle(usb_fake.ok)
    strict = Usb3Transport(handle, usb_fake.ScriptedContext(handle), strict=True)
    tag = strict.bulk_write_async(b"x")
    strict.bulk_wait(tag)
    with pytest.raises(InvalidArgument, match=rf"bulk_wait\(tag={tag}\): strict mode, expected a tag in flight \(\) "
                       r"\(already reaped\)"):  # fmt: skip
        strict.bulk_wait(tag)


def test_a_pump_that_never_completes_times_out_instead_of_hanging(usb_fake: ModuleType) -> None:
    transport, _, context = _setup(usb_fake, stuck=True)
    tag = transport.bulk_write_async(b"x", timeout=100)
    with pytest.raises(DeviceTimeout, match=rf"tag {tag}\) did not complete after 19 event-pump rounds"):
        transport.bulk_wait(tag)
    assert len(context.pumps) == 19  # ceil(0.1 s / 0.05 s) + 1 in flight + 16 slack


def test_close_cancels_in_flight_transfers_and_frees_every_transfer(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake, usb_fake.replies())  # any completed call would fail the test
    for _ in range(3):
        transport.bulk_write_async(bytes(512))
    transport.close()
    assert all(t.status == usb1.TRANSFER_CANCELLED and t.closed and not t.submitted for t in handle.transfers)
    assert handle.calls == [] and handle.events[-2:] == [("release", 0), ("close", None)]


def test_close_reports_a_transfer_that_never_completes(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake, stuck=True)
    transport.bulk_write_async(b"x", timeout=50)
    with pytest.raises(DeviceTimeout):
        transport.close()
    assert handle.closed and not handle.transfers[0].closed, "a still-submitted transfer is abandoned, not freed"


class AsyncTransfers(RuleBasedStateMachine):
    """Random submits (some failing), waits and clears; every failure surfaces at most once, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.fake: ModuleType = scripted_usb
        self.outcomes: dict[bytes, BaseException | None] = {}
        self.handle = self.fake.ScriptedHandle(self._respond)
        self.context = self.fake.ScriptedContext(self.handle, per_pump=1)
        self.transport = Usb3Transport(self.handle, self.context, max_in_flight=8)
        self.tag2fails: dict[int, bool] = {}
        self.raised: list[int] = []
        self.cleared: list[int] = []
        self.seen_tags: set[int] = set()
        self.serial = 0

    def _respond(self, call: Any) -> Any:
        error = self.outcomes[call.data]
        if error is not None:
            raise error
        return None

    @precondition(lambda self: len(self.transport.in_flight) < 8)
    @rule(fail=st.booleans(), kind=st.sampled_from(["bulk", "control"]))
    def submit(self, fail: bool, kind: str) -> None:
        self.serial += 1
        payload = self.serial.to_bytes(4, "little")
        self.outcomes[payload] = usb1.USBErrorPipe(usb1.ERROR_PIPE) if fail else None
        if kind == "bulk":
            tag = self.transport.bulk_write_async(bytearray(payload))
        else:
            tag = self.transport.control_write_async(0xF2, 1, 0, payload)
        assert tag not in self.seen_tags
        self.seen_tags.add(tag)
        self.tag2fails[tag] = fail

    @precondition(lambda self: bool(self.transport.in_flight))
    @rule(data=st.data())
    def wait(self, data: st.DataObject) -> None:
        tag = data.draw(st.sampled_from(self.transport.in_flight))
        try:
            self.transport.bulk_wait(tag)
        except usb1.USBErrorPipe as exc:
            assert self.tag2fails[exc.tag] and exc.tag not in self.raised
            self.raised.append(exc.tag)
        assert tag not in self.transport.in_flight

    @rule()
    def clear(self) -> None:
        dropped = self.transport.clear_error()
        assert all(isinstance(e, usb1.USBErrorPipe) for e in dropped)
        self.cleared.extend(e.tag for e in dropped)
        assert self.transport.latched_error is None

    def teardown(self) -> None:
        for tag in self.transport.in_flight:
            try:
                self.transport.bulk_wait(tag)
            except usb1.USBErrorPipe as exc:
                self.raised.append(exc.tag)
        while self.transport.latched_error is not None:  # failures latched after the last in-flight wait
            self.cleared.extend(e.tag for e in self.transport.clear_error())
        failed = sorted(tag for tag, fails in self.tag2fails.items() if fails)
        assert sorted(self.raised + self.cleared) == failed, "every failure surfaces exactly once or is cleared"
        self.transport.close()

    @invariant()
    def raised_in_tag_order(self) -> None:
        assert self.raised == sorted(self.raised), "failures surface oldest first"

    @invariant()
    def pool_stays_bounded(self) -> None:
        assert len(self.handle.transfers) <= 8


def test_async_state_machine() -> None:
    AsyncTransfers.TestCase.settings = settings(max_examples=60, stateful_step_count=30)
    AsyncTransfers.TestCase().runTest()


def test_a_setup_that_fails_returns_the_transfer_to_the_pool(usb_fake: ModuleType) -> None:
    transport, handle, _ = _setup(usb_fake)
    transport.bulk_wait(transport.bulk_write_async(b"x"))
    pooled = handle.transfers[0]

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise usb1.USBErrorNoMem(usb1.ERROR_NO_MEM)

    pooled.setBulk = refuse
    with pytest.raises(usb1.USBErrorNoMem):
        transport.bulk_write_async(b"y")
    assert transport.in_flight == ()
    del pooled.setBulk
    transport.bulk_wait(transport.bulk_write_async(b"z"))
    assert handle.transfers == [pooled] and handle.calls[-1].data == b"z"
