"""The invariant "a window is never re-armed while its previous chunk is undrained or unsent", checked by an observer
on the emulated bridge's 0xF2 engine over hypothesis-generated sizes, landing delays and jitter, in timed mode.

The observer watches one board's bridge through its observer hook (``usb.bridge.observe``,
``tinyhil.emulators.observe``): each 0xF2 OUT arm, each transfer that starts moving into a window (``arm_claimed``),
each transfer's wire completion (``arm_given_back``) and landing (``arm_finished``), and it reads the drain fence (XDATA
``0xA800``) at each of those moments. Chunk ``i`` of the observed copyin is the ``i``-th transfer claimed, with ``seq =
seq0 + i``. It checks:

- every chunk moves into window ``seq & 1`` (one window for the naive revision);
- when a chunk starts moving into its window, the window's previous chunk has landed and drained
  (fence >= its seq + 1): nothing overwrites a window the GPU has not copied out yet;
- when a window is armed, its previous transfer is fully sent (on the wire), and no armed transfer is replaced
  before a bulk consumed it;
- for the sentinel-sector and naive revisions, also drained when the window is armed (they wait for the fence before
  the arm). The pipelined revision batches the arm with the fence read (docs/copyin.md), so its arm goes out before
  the host knows the previous chunk drained; its bulk OUT, the only thing that writes the window, waits. The test
  shows that this happens, so the weaker check there is a deliberate reading of the spec, not a blind spot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.boards import DATA, Board

from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.asm2464.sram import Arm, ArmKind, Direction
from tinyhil.emulators.observe import Observer
from tinyhil.spec.asm2464 import WINDOW_BYTES, WINDOW_SLOTS
from tinyhil.spec.copyin import CHUNK_BYTES, FENCE_BYTES, FENCE_XDATA, SECTOR_CHUNK_BYTES
from tinyhil.usbgpu.copy import UsbCopy

Factory = Callable[..., Board]


@dataclass
class _Chunk:
    seq: int
    window: int
    sent: bool = False
    landed: bool = False


@dataclass(eq=False)
class WindowObserver(Observer):
    """Watches one board's bridge from ``attach`` on; ``violations`` says what went wrong, ``early_arms``
    counts arms sent before the window's previous chunk drained."""

    board: Board
    seq0: int
    arm_needs_drain: bool
    violations: list[str] = field(default_factory=list)
    chunks: list[_Chunk] = field(default_factory=list)
    early_arms: int = 0
    _by_arm: dict[int, tuple[Arm, _Chunk]] = field(default_factory=dict)  # the arm is kept: ids stay unique

    def fence(self) -> int:
        return int.from_bytes(self.board.usb.bridge.read_xdata(FENCE_XDATA, FENCE_BYTES), "little")

    def _last_in(self, window: int) -> _Chunk | None:
        return next((chunk for chunk in reversed(self.chunks) if chunk.window == window), None)

    def attach(self) -> WindowObserver:
        self.board.usb.bridge.observe(self)
        return self

    def sram_armed(self, direction: Direction, slot_start: int, arm: Arm, replaced: Arm | None) -> None:
        if direction is Direction.OUT:
            self._armed(slot_start // WINDOW_SLOTS, replaced)

    def arm_claimed(self, arm: Arm) -> None:
        if arm.kind is ArmKind.SRAM and arm.direction is Direction.OUT:
            self._claimed(arm)

    def arm_given_back(self, arm: Arm, moved: int) -> None:
        if id(arm) in self._by_arm and arm.remaining == 0:
            self._by_arm[id(arm)][1].sent = True

    def arm_finished(self, arm: Arm) -> None:
        """Landed (or lost by a DROP fault): reported before the give-back when nothing delays the landing."""
        if id(arm) in self._by_arm:
            self._by_arm[id(arm)][1].landed = True

    def _armed(self, window: int, unconsumed: Arm | None) -> None:
        if unconsumed is not None:
            self.violations.append(f"an arm of window {window} replaced an unconsumed arm of {unconsumed.nbytes} bytes")
        previous = self._last_in(window)
        if previous is None:
            return
        if not previous.sent:
            self.violations.append(f"window {window} armed while chunk seq {previous.seq} is still on the wire")
        if self.fence() < previous.seq + 1:
            self.early_arms += 1
            if self.arm_needs_drain:
                self.violations.append(f"window {window} armed before chunk seq {previous.seq} drained")

    def _claimed(self, armed: Arm) -> None:
        seq = self.seq0 + len(self.chunks)
        window = armed.sram_offset // WINDOW_BYTES
        previous = self._last_in(window)
        if previous is not None:
            if not previous.landed:
                self.violations.append(f"chunk seq {seq} moves into window {window} before seq {previous.seq} landed")
            if self.fence() < previous.seq + 1:
                self.violations.append(
                    f"chunk seq {seq} moves into window {window} before seq {previous.seq} drained "
                    f"(fence {self.fence()})"
                )
        chunk = _Chunk(seq, window)
        self.chunks.append(chunk)
        self._by_arm[id(armed)] = (armed, chunk)


CHUNK = {"pipelined": CHUNK_BYTES, "sentinel-sector": SECTOR_CHUNK_BYTES, "naive": WINDOW_BYTES}


def observed_copy(
    board: Board, copier: UsbCopy, nbytes: int, seed: int = 0, *, arm_needs_drain: bool | None = None
) -> WindowObserver:
    copier.copyin(DATA, b"\1")  # one-time setup first: the observer sees only the copy's own chunks
    if arm_needs_drain is None:
        arm_needs_drain = copier.revision != "pipelined"
    observer = WindowObserver(board, copier.seq, arm_needs_drain).attach()
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    dest = DATA + 0x1001
    copier.copyin(dest, data)
    assert np.array_equal(board.vram[dest : dest + nbytes], data)
    expected = -(-nbytes // CHUNK[copier.revision])
    assert [chunk.seq for chunk in observer.chunks] == [observer.seq0 + i for i in range(expected)]
    naive = copier.revision == "naive"
    assert [chunk.window for chunk in observer.chunks] == [0 if naive else c.seq & 1 for c in observer.chunks]
    return observer


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    revision=st.sampled_from(["pipelined", "sentinel-sector"]),
    chunks=st.integers(1, 6),
    tail=st.integers(1, CHUNK_BYTES),
    delay_ns=st.sampled_from([0, 20_000, 300_000, 2_000_000]),
    jitter_ns=st.sampled_from([0, 100_000, 3_000_000]),
    seed=st.integers(0, 2**32 - 1),
)
def test_no_window_is_rearmed_early(
    board_factory: Factory, revision: str, chunks: int, tail: int, delay_ns: int, jitter_ns: int, seed: int
) -> None:
    nbytes = (chunks - 1) * CHUNK[revision] + min(tail, CHUNK[revision])
    quirks = Quirks(landing_delay_ns=delay_ns, landing_jitter_ns=jitter_ns)
    with board_factory("timed", quirks=quirks, seed=seed) as board:
        observer = observed_copy(board, board.copier(revision), nbytes, seed)
        assert observer.violations == []


def test_naive_revision_keeps_the_invariant_on_its_one_window(board_factory: Factory) -> None:
    with board_factory("timed") as board:
        observer = observed_copy(board, board.copier("naive"), 3 * WINDOW_BYTES + 5)
        assert observer.violations == []


def test_the_pipelined_arm_goes_out_before_the_drain_is_known_and_its_bulk_waits(board_factory: Factory) -> None:
    """With slow landings the batched arm + fence read finds the previous chunk undrained; the host then spins on
    the fence and only sends the bulk OUT after it (the claim checks pass)."""
    with board_factory("timed", quirks=Quirks(landing_delay_ns=2_000_000)) as board:
        observer = observed_copy(board, board.copier("pipelined"), 6 * CHUNK_BYTES)
        assert observer.violations == []
        assert observer.early_arms > 0
    with board_factory("timed", quirks=Quirks(landing_delay_ns=2_000_000)) as board:
        strict = observed_copy(board, board.copier("pipelined"), 6 * CHUNK_BYTES, arm_needs_drain=True)
        assert any("armed before chunk" in v for v in strict.violations)


class NoDrainWaitCopy(UsbCopy):
    """A deliberately buggy driver: it never waits for the previous chunk of a window to drain before reusing it
    (only the final wait of a copyin remains)."""

    def _wait_drained(self, seq: int, seq_start: int, fence: int | None = None) -> int:
        if seq != self.seq:
            return seq
        return super()._wait_drained(seq, seq_start, fence)


def test_the_observer_catches_a_driver_that_rearms_undrained_windows(board_factory: Factory) -> None:
    with board_factory("timed", quirks=Quirks(landing_delay_ns=2_000_000)) as board:
        copier = NoDrainWaitCopy(board.ctrl, board.gpu, board.sdma, drain_polls=50)
        copier.copyin(DATA, b"\1")
        observer = WindowObserver(board, copier.seq, arm_needs_drain=False).attach()
        copier.copyin(DATA + 0x1001, np.ones(6 * CHUNK_BYTES, dtype=np.uint8))
        assert any("before seq" in v for v in observer.violations), observer.violations
