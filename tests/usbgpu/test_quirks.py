"""The quirk tests of issue 5: each runs with its switch on and off and asserts opposite outcomes, so each fails if
the switch is removed. A dropped sentinel gives the drain error naming the chunk; full-window corruption breaks the
full-window revision (detectably) and not the sentinel-sector one; the sys_buf collision loses GPU signals below
``0x820800`` while an 0xF2 transfer is in flight and not those in VRAM; timed mode catches a driver that reuses a
staging buffer before reaping its transfer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from support.boards import DATA, NEVER, PATTERN, Board, arm_faults, sram_bulk_out_occurrences

from tinyhil.amdgpu.sdma import sdma_poll_regmem, sdma_write
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.asm2464.sram import SramEngine
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.observe import Observer
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.asm2464 import PCIE_SYS_BUF, SECTOR_BYTES, WINDOW_BYTES, Xdata
from tinyhil.spec.copyin import CHUNK_BYTES, NAIVE_CHUNK_BYTES, POLL_INTERVAL, SECTOR_CHUNK_BYTES, sentinel, window_pcie
from tinyhil.usbgpu.copy import DrainError, UsbCopy

Factory = Callable[..., Board]
MODES = ("sync", "timed")
CHUNK = {"pipelined": CHUNK_BYTES, "sentinel-sector": SECTOR_CHUNK_BYTES, "naive": NAIVE_CHUNK_BYTES}
SENTINEL_REVISIONS = ("pipelined", "sentinel-sector")


def random_bytes(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


# --- a dropped sentinel ---
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("revision", SENTINEL_REVISIONS)
@pytest.mark.parametrize("dropped", [None, 0, 1, 3], ids=lambda k: "no-drop" if k is None else f"drop-chunk-{k}")
def test_a_dropped_sentinel_gives_the_drain_error_never_wrong_data(
    board_factory: Factory, mode: str, revision: str, dropped: int | None
) -> None:
    chunk = CHUNK[revision]
    data = random_bytes(4 * chunk - 100, 5)
    dest = DATA + 0x100001

    def copy_with(plan: FaultPlan) -> Callable[[Board], None]:
        def run(board: Board) -> None:
            copier = board.copier(revision, drain_polls=20)
            copier.copyin(DATA, b"\1")  # one-time setup first: the plan then counts only this copy's transfers
            board.guard(dest, data.size)
            arm_faults(board, plan)
            copier.copyin(dest, data)

        return run

    if dropped is None:
        with board_factory(mode) as board:
            copy_with(NEVER)(board)
            assert np.array_equal(board.vram[dest : dest + data.size], data)
        return
    occurrence = sram_bulk_out_occurrences(copy_with(NEVER), mode)[dropped]
    with board_factory(mode) as board:
        with pytest.raises(DrainError, match=f"^GPU failed to drain chunk {dropped} ") as caught:
            copy_with(FaultPlan.single(Operation.bulk_out(), occurrence, Fault.drop()))(board)
        assert (caught.value.chunk, caught.value.seq) == (dropped, 1 + dropped)
        vram = board.vram[dest : dest + data.size]
        done = dropped * chunk
        assert np.array_equal(vram[:done], data[:done])  # the chunks before it drained
        assert (vram[done:] == PATTERN).all()  # the GPU never copied the dropped chunk's stale window, nor later ones
        assert board.guards_intact(dest, data.size)


# --- full-window corruption ---
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("quirk", [False, True], ids=["quirk-off", "quirk-on"])
@pytest.mark.parametrize("revision", ["pipelined", "sentinel-sector", "naive"])
def test_full_window_corruption_breaks_only_full_window_images(
    board_factory: Factory, mode: str, quirk: bool, revision: str
) -> None:
    data = random_bytes(CHUNK_BYTES + 1000, 6)  # a full pipelined chunk, then a short one
    dest = DATA + 7
    with board_factory(mode, quirks=Quirks(full_window_corruption=quirk)) as board:
        copier = board.copier(revision, drain_polls=20)
        board.guard(dest, data.size)
        vram = board.vram[dest : dest + data.size]
        if not quirk or revision == "sentinel-sector":  # its wire images end mid-window: never full
            copier.copyin(dest, data)
            assert np.array_equal(vram, data)
        elif revision == "pipelined":  # the corrupted last sector holds the sentinel: detected, nothing copied
            with pytest.raises(DrainError, match=r"^GPU failed to drain chunk 0 "):
                copier.copyin(dest, data)
            assert (vram == PATTERN).all()
        else:  # naive: no sentinel, a full 256 KB window lands with its last sector inverted, and nobody notices
            copier.copyin(dest, data)
            last = slice(WINDOW_BYTES - SECTOR_BYTES, WINDOW_BYTES)
            assert np.array_equal(vram[last], ~data[last])
            assert np.array_equal(np.delete(vram, np.r_[last]), np.delete(data, np.r_[last]))
        assert board.guards_intact(dest, data.size)


@pytest.mark.parametrize(("size", "full"), [(CHUNK_BYTES - SECTOR_BYTES, False), (CHUNK_BYTES - 507, True)])
def test_full_window_corruption_hits_the_pipelined_revision_exactly_when_the_image_fills_the_window(
    board_factory: Factory, size: int, full: bool
) -> None:
    wire = -(-(size + 4) // SECTOR_BYTES) * SECTOR_BYTES
    assert (wire == WINDOW_BYTES) is full
    data = random_bytes(size, 7)
    with board_factory(quirks=Quirks(full_window_corruption=True)) as board:
        copier = board.copier("pipelined", drain_polls=20)
        if full:
            with pytest.raises(DrainError, match=r"^GPU failed to drain chunk 0 "):
                copier.copyin(DATA, data)
        else:
            copier.copyin(DATA, data)
            assert np.array_equal(board.vram[DATA : DATA + size], data)


# --- sys_buf collision ---
class InFlightAtDma(Observer):
    """How many 0xF2 transfers had not landed when the GPU's DMA wrote each address."""

    def __init__(self, engine: SramEngine) -> None:
        self.engine = engine
        self.in_flight: dict[int, int] = {}

    def dma_write(self, pcie_addr: int, nbytes: int) -> None:
        self.in_flight[pcie_addr] = self.engine.inflight


SIGNALS = {  # where the GPU writes a signal during the copyin, and whether the collision quirk loses it
    "sys_buf+0x100": (SYS_APERTURE + PCIE_SYS_BUF + 0x100, True),
    "sys_buf+0x7fc": (SYS_APERTURE + PCIE_SYS_BUF + 0x7FC, True),
    "sys_buf+0x900": (SYS_APERTURE + PCIE_SYS_BUF + 0x900, False),  # above the fence: stable
    "vram": (0x380000, False),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("quirk", [False, True], ids=["quirk-off", "quirk-on"])
def test_sys_buf_collision_loses_low_sys_buf_signals_and_not_vram_ones(
    board_factory: Factory, mode: str, quirk: bool
) -> None:
    # A 1 ms landing delay keeps each 0xF2 transfer in flight after its bulk completes, so the GPU's signal writes
    # (triggered by the first chunk's sentinel) happen while the next chunk's transfer is in flight.
    quirks = Quirks(sys_buf_collision=quirk, landing_delay_ns=1_000_000)
    with board_factory(mode, quirks=quirks) as board:
        signaller = board.gpu.create_queue(
            QueueKind.SDMA, ring_va=0x300000, ring_bytes=4096, rptr_va=0x2000, wptr_va=0x2008, index=1
        )
        values = {name: 0xC0DE0000 + index for index, name in enumerate(SIGNALS)}
        signaller.submit(
            sdma_poll_regmem(
                SYS_APERTURE + window_pcie(0) + CHUNK_BYTES, sentinel(0), interval=POLL_INTERVAL
            ),  # chunk 0 landed
            *(sdma_write(address, values[name].to_bytes(4, "little")) for name, (address, _) in SIGNALS.items()),
        )
        bridge = board.usb.bridge
        dma = bridge.observe(InFlightAtDma(bridge.engine)).observer
        assert isinstance(dma, InFlightAtDma)
        in_flight = dma.in_flight
        data = random_bytes(3 * CHUNK_BYTES, 8)
        copier = board.copier()
        copier.copyin(DATA, data)  # the drain fence at 0x820800 is stable: the copy succeeds either way
        signaller.wait_idle()
        assert np.array_equal(board.vram[DATA : DATA + data.size], data)
        for name, (address, lost) in SIGNALS.items():
            if address >= SYS_APERTURE:
                assert in_flight[address - SYS_APERTURE] > 0, f"{name}: no 0xF2 transfer was in flight"
                got = int.from_bytes(
                    board.ctrl.xdata_read(Xdata.SYS_BUF + address - SYS_APERTURE - PCIE_SYS_BUF, 4), "little"
                )
            else:
                got = board.gpu.read_u32(address)
            assert (got == values[name]) is not (quirk and lost), f"{name}: read {got:#x}"


# --- staging-buffer reuse before reap ---
class SharedStagingCopy(UsbCopy):
    """A deliberately buggy driver: both windows stage in one buffer, so the next chunk is staged while the previous
    chunk's bulk OUT (same buffer) may still be in flight (the driver reaps only the window's own transfer)."""

    def __init__(self, *args: object, **options: object) -> None:
        super().__init__(*args, **options)  # type: ignore[arg-type]
        self._staging = [self._staging[0]] * len(self._staging)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("driver", [UsbCopy, SharedStagingCopy], ids=["UsbCopy", "SharedStagingCopy"])
def test_timed_mode_catches_staging_buffer_reuse_before_reap(
    board_factory: Factory, mode: str, driver: type[UsbCopy]
) -> None:
    tail = 1000  # chunk 1 is short: staging it overwrites the head of chunk 0's image, not chunk 0's sentinel
    data = random_bytes(CHUNK_BYTES + tail, 9)
    with board_factory(mode) as board:
        copier = driver(board.ctrl, board.gpu, board.sdma)
        copier.copyin(DATA, data)  # the sentinels hold: no error either way
        vram = board.vram[DATA : DATA + data.size]
        if driver is UsbCopy or mode == "sync":  # sync mode sends the buffer at submit: the bug stays hidden
            assert np.array_equal(vram, data)
        else:  # timed mode reads chunk 0's payload when its transfer completes, after chunk 1 was staged
            assert np.array_equal(vram[:tail], data[CHUNK_BYTES:])
            assert np.array_equal(vram[SECTOR_BYTES * 2 : CHUNK_BYTES], data[SECTOR_BYTES * 2 : CHUNK_BYTES])
            assert np.array_equal(vram[CHUNK_BYTES:], data[CHUNK_BYTES:])


@pytest.mark.parametrize("mode", MODES)
def test_a_copyin_after_a_drain_error_fails_cleanly_and_writes_nothing(board_factory: Factory, mode: str) -> None:
    """The failed copy's program still polls for the dropped sentinel's seq; the next copyin must not reuse that seq
    (its chunk would feed the failed copy's destination) and must say that the queue is stuck."""
    first, second = random_bytes(4 * CHUNK_BYTES, 10), random_bytes(2 * CHUNK_BYTES, 11)  # drop chunk 1 of 4
    old, new = DATA + 0x100000, DATA + 0x300000

    def copies(plan: FaultPlan) -> Callable[[Board], None]:
        def run(board: Board) -> None:
            copier = board.copier(drain_polls=20)
            copier.copyin(DATA, b"\1")
            board.guard(old, first.size)
            board.guard(new, second.size)
            arm_faults(board, plan)
            with pytest.raises(DrainError, match=r"^GPU failed to drain chunk 1 \(seq 2\)"):
                copier.copyin(old, first)
            assert copier.seq == 5  # the failed copy's seqs are spent (it failed while sending chunk 3)
            with pytest.raises(DrainError, match=r"below this copyin's first seq 5; .* still stuck on seq 2 "):
                copier.copyin(new, second)

        return run

    def probe(board: Board) -> None:
        copier = board.copier()
        copier.copyin(DATA, b"\1")
        arm_faults(board, NEVER)
        copier.copyin(old, first)

    occurrence = sram_bulk_out_occurrences(probe, mode)[1]
    with board_factory(mode) as board:
        copies(FaultPlan.single(Operation.bulk_out(), occurrence, Fault.drop()))(board)
        assert np.array_equal(board.vram[old : old + CHUNK_BYTES], first[:CHUNK_BYTES])
        assert (board.vram[old + CHUNK_BYTES : old + first.size] == PATTERN).all()
        assert (board.vram[new : new + second.size] == PATTERN).all()
