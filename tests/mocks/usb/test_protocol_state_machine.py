"""A stateful test of the bridge's USB protocol through the emulated handle: arms, bulks and control requests in
any order against a shadow model of SRAM and the arm slots, with invariants checked after every step."""

from __future__ import annotations

import numpy as np
import usb1
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tinyhil.emulators.asm2464 import Direction
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.mocks.usb import open_emulated_board

SLOT, SRAM = 0x4000, 0x80000


class BridgeProtocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.board = open_emulated_board(function=PlainEndpoint(vram_bytes=1 << 20))
        self.handle = self.board.handle
        self.sram = np.zeros(SRAM, dtype=np.uint8)
        self.arms: dict[str, tuple[int, int] | None] = {"out": None, "in": None}
        self.released = False
        self.last_ns = 0
        self.counter = 0

    def teardown(self) -> None:
        self.board.close()

    @rule(start=st.integers(0, 33), count=st.integers(0, 33), sectors=st.integers(0, 1100), to_host=st.booleans())
    def arm(self, start: int, count: int, sectors: int, to_host: bool) -> None:
        slots = count or 1
        valid = start + slots <= 32 and 1 <= sectors <= slots * 32
        before = self.board.bridge.state_digest()
        try:
            self.handle.controlWrite(0x40, 0xF2, sectors | (0x8000 if to_host else 0), start | count << 8, b"")
        except usb1.USBErrorPipe:
            assert not valid
            assert self.board.bridge.state_digest() == before
            return
        assert valid
        self.arms["in" if to_host else "out"] = (start * SLOT, sectors * 512)
        if to_host:
            self.released = False

    @rule(data=st.data())
    def bulk_out(self, data: st.DataObject) -> None:
        armed = self.arms["out"]
        sizes = st.integers(1, 8).map(lambda n: n * 512)
        length = data.draw(st.one_of(sizes, st.just(armed[1])) if armed else sizes)
        self.counter += 1
        payload = np.random.default_rng(self.counter).integers(0, 256, length, dtype=np.uint8)
        before = self.board.bridge.state_digest()
        try:
            sent = self.handle.bulkWrite(0x02, payload.tobytes(), timeout=5)
        except usb1.USBErrorTimeout as error:
            assert armed is None or armed[1] != length
            assert error.transferred == 0 and self.board.bridge.state_digest() == before
            return
        assert armed is not None and armed[1] == length and sent == length
        self.sram[armed[0] : armed[0] + length] = payload
        self.arms["out"] = None

    @rule()
    def gpu_releases_copyout(self) -> None:
        self.board.bridge.engine.released = True  # the completion-queue write's effect (tested in the model tests)
        self.released = True

    @rule()
    def bulk_in(self) -> None:
        armed = self.arms["in"]
        length = armed[1] if armed else 512
        try:
            data = self.handle.bulkRead(0x81, length, timeout=5)
        except usb1.USBErrorTimeout:
            assert armed is None or not self.released
            return
        assert armed is not None and self.released
        assert data == self.sram[armed[0] : armed[0] + length].tobytes()
        self.arms["in"] = None

    @rule(offset=st.integers(0, 0xFFF), value=st.integers(0, 0xFF))
    def xdata_write_through_the_window(self, offset: int, value: int) -> None:
        self.handle.controlWrite(0x40, 0xE5, 0x8000 + offset, value, b"")
        self.sram[offset] = value

    @rule(offset=st.integers(0, 0xFFF), length=st.integers(1, 512))
    def xdata_read_through_the_window(self, offset: int, length: int) -> None:
        length = min(length, 0x1000 - offset)
        data = self.handle.controlRead(0xC0, 0xE4, 0xF000 + offset, 0, length)
        assert data == self.sram[offset : offset + length].tobytes()

    @precondition(lambda self: self.arms["out"] is not None or self.arms["in"] is not None)
    @rule(endpoint=st.sampled_from([0x02, 0x81]))
    def clear_halt_resets_the_engine(self, endpoint: int) -> None:
        self.handle.clearHalt(endpoint)
        self.arms = {"out": None, "in": None}

    @invariant()
    def sram_matches_the_shadow(self) -> None:
        assert np.array_equal(self.board.bridge.memory.sram, self.sram)

    @invariant()
    def virtual_time_only_moves_forward(self) -> None:
        assert self.board.kernel.now_ns >= self.last_ns
        self.last_ns = self.board.kernel.now_ns

    @invariant()
    def one_arm_slot_per_direction_mirrors_the_shadow(self) -> None:
        arms = self.board.bridge.engine.arms
        assert set(arms) == {Direction.OUT, Direction.IN}
        assert (arms[Direction.OUT] is None) == (self.arms["out"] is None)
        assert (arms[Direction.IN] is None) == (self.arms["in"] is None)


BridgeProtocol.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestBridgeProtocol = BridgeProtocol.TestCase
