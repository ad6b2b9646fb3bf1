"""``UsbCopy`` end to end over MockUSB3: bit-exact round trips of every boundary size, in sync and timed mode, with
the same driver code; exact placement; ``seq`` and the fence; deterministic virtual time; properties over sizes,
seeds, destinations, landing delays, jitter and fault plans (correct data or a clean error, never wrong data)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import usb1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.boards import DATA, NEVER, Board, arm_faults, sram_bulk_out_occurrences

from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.faults import Fault, FaultKind, FaultPlan, Operation, Transfer
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.spec.copyin import CHUNK_BYTES, NAIVE_CHUNK_BYTES, SECTOR_CHUNK_BYTES
from tinyhil.usb.errors import ShortTransfer
from tinyhil.usbgpu.copy import DrainError, UsbCopy

Factory = Callable[..., Board]
REVISIONS = ("pipelined", "sentinel-sector", "naive")
MODES = ("sync", "timed")
CHUNK = {"pipelined": CHUNK_BYTES, "sentinel-sector": SECTOR_CHUNK_BYTES, "naive": NAIVE_CHUNK_BYTES}
MB = 1 << 20


def boundary_sizes(revision: str) -> list[int]:
    chunk = CHUNK[revision]
    return [0, 1, 511, 512, chunk - 1, chunk, chunk + 1, 2 * chunk + 3]


def random_bytes(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def chunks_of(revision: str, nbytes: int) -> int:
    return -(-nbytes // CHUNK[revision])


def round_trip(board: Board, copier: UsbCopy, dest: int, data: np.ndarray) -> None:
    """Copy ``data`` in at ``dest`` and back out; check VRAM, the neighbours and the copied-out bytes."""
    board.guard(dest, data.size)
    copier.copyin(dest, data)
    assert np.array_equal(board.vram[dest : dest + data.size], data), "VRAM differs from the source"
    assert board.guards_intact(dest, data.size), "a byte outside [dest, dest + n) changed"
    out = np.zeros(data.size, dtype=np.uint8)
    copier.copyout(out, dest)
    assert np.array_equal(out, data), "copyout differs from the source"


CASES = [(revision, size) for revision in REVISIONS for size in boundary_sizes(revision)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("revision", "size"), CASES, ids=[f"{r}-{s:#x}" for r, s in CASES])
@pytest.mark.parametrize("dest", [DATA, DATA + 0x1235], ids=["aligned", "odd"])
def test_boundary_sizes_round_trip(board_factory: Factory, mode: str, revision: str, size: int, dest: int) -> None:
    with board_factory(mode) as board:
        copier = board.copier(revision)
        round_trip(board, copier, dest, random_bytes(size, size))
        assert copier.seq == chunks_of(revision, size)
        if size:
            assert copier.read_fence() == copier.seq


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("revision", REVISIONS)
def test_multi_megabyte_round_trip(board_factory: Factory, mode: str, revision: str) -> None:
    nbytes = 4 * MB + 5  # 17 pipelined chunks, a short last one
    with board_factory(mode) as board:
        copier = board.copier(revision)
        round_trip(board, copier, DATA + 1, random_bytes(nbytes, 4))
        assert copier.seq == copier.read_fence() == chunks_of(revision, nbytes)


@pytest.mark.parametrize("revision", REVISIONS)
def test_seq_persists_across_copies_and_wraps_the_sentinel(board_factory: Factory, revision: str) -> None:
    start = 0xFFFFFE  # the 24-bit sentinel wraps during the second copy
    with board_factory("timed") as board:
        copier = board.copier(revision, seq=start)
        expected = start
        for index, nbytes in enumerate([1, 3 * CHUNK[revision], CHUNK[revision] + 9, 700]):
            dest = DATA + index * 0x200000 + index
            round_trip(board, copier, dest, random_bytes(nbytes, index))  # copyout in between re-zeroes windows
            expected += chunks_of(revision, nbytes)
            assert copier.seq == expected
            assert copier.read_fence() == expected
        assert copier.seq > 0x1000000


def test_one_driver_keeps_seq_when_a_second_copier_takes_over(board_factory: Factory) -> None:
    """``seq`` is per device: a new copier that starts from the old one's seq keeps the fence consistent."""
    with board_factory() as board:
        first = board.copier()
        first.copyin(DATA, random_bytes(CHUNK_BYTES + 1))
        second = board.copier(seq=first.seq)
        data = random_bytes(2 * CHUNK_BYTES, 1)
        round_trip(board, second, DATA + 0x100000, data)
        assert second.read_fence() == second.seq == first.seq + 2


def test_a_small_ring_takes_the_program_in_batches(board_factory: Factory) -> None:
    """A 256-byte SDMA ring holds one chunk's three packets at a time: the driver submits the program in parts."""
    with board_factory("timed", ring_bytes=256) as board:
        copier = board.copier()
        round_trip(board, copier, DATA + 3, random_bytes(5 * CHUNK_BYTES + 11, 2))
        assert copier.seq == 6


@pytest.mark.parametrize("revision", REVISIONS)
def test_timed_virtual_time_and_bytes_are_deterministic_for_a_seed(board_factory: Factory, revision: str) -> None:
    quirks = Quirks(landing_delay_ns=30_000, landing_jitter_ns=400_000)
    data = random_bytes(3 * CHUNK[revision] + 77, 9)

    def run() -> tuple[int, str, bytes]:
        with board_factory("timed", quirks=quirks, seed=11) as board:
            start = board.usb.kernel.now_ns
            copier = board.copier(revision)
            copier.copyin(DATA + 1, data)
            elapsed = board.usb.kernel.now_ns - start
            return elapsed, board.usb.bridge.state_digest(), board.vram[DATA : DATA + data.size + 2].tobytes()

    first, second = run(), run()
    assert first == second
    assert first[0] > 0


# --- properties ---
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def copy_sizes(draw: st.DrawFn, revision: str) -> int:
    chunk = CHUNK[revision]
    special = st.sampled_from([0, 1, 511, 512, 513, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1])
    return draw(st.one_of(special, st.integers(0, 3 * chunk + 1000)))


@st.composite
def copy_cases(draw: st.DrawFn) -> tuple[str, str, int]:
    revision = draw(st.sampled_from(REVISIONS))
    return draw(st.sampled_from(MODES)), revision, draw(copy_sizes(revision))


@PROPERTY
@given(
    case=copy_cases(),
    offset=st.integers(0, 0x3FFF),
    seed=st.integers(0, 2**32 - 1),
    delay_ns=st.sampled_from([0, 1_000, 50_000, 700_000, 3_000_000]),
    jitter_ns=st.sampled_from([0, 10_000, 500_000, 4_000_000]),
)
def test_copies_are_exact_under_landing_delays_and_reordering(
    board_factory: Factory, case: tuple[str, str, int], offset: int, seed: int, delay_ns: int, jitter_ns: int
) -> None:
    mode, revision, size = case
    if revision == "naive":  # it trusts a completed bulk OUT to have landed: only a board without delays keeps that
        delay_ns = jitter_ns = 0
    quirks = Quirks(landing_delay_ns=delay_ns, landing_jitter_ns=jitter_ns)
    with board_factory(mode, quirks=quirks, seed=seed) as board:
        round_trip(board, board.copier(revision), DATA + offset, random_bytes(size, seed))


CLEAN_ERRORS = (DrainError, usb1.USBError, ShortTransfer, QueueStopped)


@PROPERTY
@given(
    mode=st.sampled_from(MODES),
    revision=st.sampled_from(REVISIONS),
    chunks=st.integers(1, 4),
    plan=fault_plans(transfers=(Transfer.CONTROL_OUT, Transfer.CONTROL_IN, Transfer.BULK_OUT), max_occurrence=12),
    seed=st.integers(0, 2**16),
)
def test_faults_give_correct_data_or_a_clean_error(
    board_factory: Factory, mode: str, revision: str, chunks: int, plan: FaultPlan, seed: int
) -> None:
    dropping = any(rule.fault.kind is FaultKind.DROP for rule in plan.rules)
    if revision == "naive" and dropping:
        plan = FaultPlan(tuple(rule for rule in plan.rules if rule.fault.kind is not FaultKind.DROP))  # no sentinel
    data = random_bytes(chunks * CHUNK[revision] - 100, seed)
    with board_factory(mode, seed=seed) as board:
        copier = board.copier(revision, drain_polls=30)
        dest = DATA + 1
        board.guard(dest, data.size)
        arm_faults(board, plan)
        try:
            copier.copyin(dest, data)
        except CLEAN_ERRORS:
            pass  # a clean error; what VRAM holds is not claimed to be the data
        else:
            assert np.array_equal(board.vram[dest : dest + data.size], data), f"wrong data under {plan!r}"
        assert board.guards_intact(dest, data.size)


def test_naive_has_no_sentinel_so_a_dropped_transfer_goes_unnoticed(board_factory: Factory) -> None:
    """Why the sentinel exists: the naive revision trusts a completed bulk OUT, so a transfer whose bytes never land
    is copied from a stale window without any error. (The sentinel revisions raise DrainError: test_quirks.py.)"""
    data = random_bytes(2 * NAIVE_CHUNK_BYTES, 3)

    def setup_then(plan: FaultPlan) -> Callable[[Board], None]:
        def run(board: Board) -> None:
            copier = board.copier("naive")
            copier.copyin(DATA, b"\0")  # one-time setup first
            arm_faults(board, plan)
            copier.copyin(DATA, data)

        return run

    chunk_1 = sram_bulk_out_occurrences(setup_then(NEVER))[1]  # the copy's second 0xF2 bulk OUT
    with board_factory() as board:
        setup_then(FaultPlan.single(Operation.bulk_out(), chunk_1, Fault.drop()))(board)
        vram = board.vram[DATA : DATA + data.size]
        assert np.array_equal(vram[:NAIVE_CHUNK_BYTES], data[:NAIVE_CHUNK_BYTES])
        assert np.array_equal(vram[NAIVE_CHUNK_BYTES:], data[:NAIVE_CHUNK_BYTES])  # chunk 0 again: wrong data


@pytest.mark.parametrize(("mode", "seed"), [("timed", 19), ("timed", 41), ("sync", 59)])
def test_setup_zeroing_cannot_land_after_the_first_chunks(board_factory: Factory, mode: str, seed: int) -> None:
    """Regression: with landings reordered across transfers, zeroing the windows with 0xF2 transfers let a zeroing
    transfer land after chunk 1 and wipe its sentinel (a drain error on a healthy board, at these seeds). The GPU
    zeroes them now, and its fence proves it before any chunk is sent."""
    with board_factory(mode, quirks=Quirks(landing_jitter_ns=4_000_000), seed=seed) as board:
        round_trip(board, board.copier(drain_polls=200), DATA, random_bytes(2 * CHUNK_BYTES, seed))
