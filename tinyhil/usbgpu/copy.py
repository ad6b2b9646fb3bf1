"""USB copyin/copyout: host memory to VRAM through the bridge's SRAM windows, and back (docs/copyin.md).

The engine cannot say when a bulk OUT has landed, so the protocol proves it in the stream: every chunk's wire image
ends in a sentinel the GPU polls for before it copies the chunk out of its window, and the GPU reports each
drained chunk by writing ``seq + 1`` to a fence the host reads. Three revisions, selectable for the throughput table
and the quirk tests:

==================  ==========================================================================================
revision            per chunk
==================  ==========================================================================================
``pipelined``       (current upstream) two windows; ``CHUNK = 0x40000 - 4``; 4-byte sentinel as the last dword of
                    ``round_up(size + 4, 512)``; the arm and the fence read go out together (one round trip), then
                    the bulk OUT asynchronously
``sentinel-sector`` two windows; ``CHUNK = 0x3C000``; payload padded to sectors then one 512 B sentinel sector;
                    a synchronous fence read (spin), then a synchronous arm, then the bulk OUT asynchronously
``naive``           one window; a synchronous ``scsi_write``, then an SDMA copy and a fence write, then the host
                    polls the fence; nothing overlaps
==================  ==========================================================================================

Invariants kept here: a window is re-armed only after its previous chunk is both reaped (fully sent) and drained
(fence >= its seq + 1); each window has its own staging buffer, reused only after its transfer is reaped; a chunk
that never drains ends the copyin with :class:`DrainError` after ``drain_polls`` fence reads, never with wrong data.
"""

from __future__ import annotations

import contextlib
import struct
from enum import StrEnum
from typing import Any, Final

import numpy as np

from tinyhil._check import as_readonly_bytes, as_writable_bytes, check_int
from tinyhil.align import round_up
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.amdgpu.sdma import sdma_const_fill, sdma_copy_linear, sdma_write
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, SECTOR_BYTES, WINDOW_BYTES, WINDOW_SLOTS
from tinyhil.spec.copyin import (
    CHUNK_BYTES,
    COPYOUT_PIECE_BYTES,
    FENCE_BYTES,
    FENCE_PCIE,
    FENCE_XDATA,
    NAIVE_CHUNK_BYTES,
    SECTOR_CHUNK_BYTES,
    SENTINEL_BYTES,
    WINDOWS,
    sentinel,
    window_pcie,
)
from tinyhil.usbgpu.usb_gpu import UsbGpu, vram_address

from .program import ChunkPlan, copyin_program, copyout_program

__all__ = ["CopyRevision", "DrainError", "UsbCopy", "chunk_plans"]

DEFAULT_DRAIN_POLLS: Final = 2000  # fence reads before giving up: ~0.2 s at a ~100 us USB control round trip
_FENCE: Final = struct.Struct("<Q")
_FENCE_UNSET: Final = (1 << 64) - 1  # the fence while the GPU zeroes the windows: above every seq (< 2**63)
_SENTINEL: Final = struct.Struct("<I")


class CopyRevision(StrEnum):
    """The protocol revisions of docs/copyin.md."""

    NAIVE = "naive"
    SENTINEL_SECTOR = "sentinel-sector"
    PIPELINED = "pipelined"


class DrainError(DeviceTimeout):
    """The GPU did not drain a chunk: its sentinel never landed, or the SDMA queue stopped short of it."""

    def __init__(self, chunk: int, seq: int, fence: int, polls: int) -> None:
        if chunk < 0:  # the fence is below this copyin's first seq: an earlier copyin's program is still stuck
            message = (
                f"GPU failed to drain: the drain fence still reads {fence} after {polls} reads, below this copyin's "
                f"first seq {seq - chunk}; the SDMA queue is still stuck on seq {seq} of an earlier copyin that "
                "failed (recreate the queue)"
            )
        else:
            message = (
                f"GPU failed to drain chunk {chunk} (seq {seq}): the drain fence still reads {fence} after {polls} "
                f"reads, expected >= {seq + 1}; the chunk's sentinel never landed in SRAM or the SDMA queue stopped"
            )
        super().__init__(message, op="copyin")
        self.chunk = chunk
        self.seq = seq
        self.fence = fence


def chunk_plans(revision: CopyRevision, nbytes: int, seq: int) -> list[ChunkPlan]:
    """The chunks of an ``nbytes`` copyin under ``revision``, numbered from sequence number ``seq`` (docs/copyin.md)."""
    chunk = {
        CopyRevision.PIPELINED: CHUNK_BYTES,
        CopyRevision.SENTINEL_SECTOR: SECTOR_CHUNK_BYTES,
        CopyRevision.NAIVE: NAIVE_CHUNK_BYTES,
    }[revision]
    plans = []
    size2shape: dict[int, tuple[int, int]] = {}  # every full chunk has the same wire size and sentinel offset
    for index, offset in enumerate(range(0, nbytes, chunk)):
        size = min(chunk, nbytes - offset)
        shape = size2shape.get(size)
        if shape is None:
            shape = size2shape[size] = _shape(revision, size)
        plans.append(ChunkPlan(index, seq + index, offset, size, *shape))
    return plans


def _shape(revision: CopyRevision, size: int) -> tuple[int, int]:
    """The wire bytes of a ``size``-byte chunk's image and the offset of its sentinel."""
    if revision is CopyRevision.PIPELINED:
        wire = round_up(size + SENTINEL_BYTES, SECTOR_BYTES)
        return wire, wire - SENTINEL_BYTES
    if revision is CopyRevision.SENTINEL_SECTOR:
        at = round_up(size, SECTOR_BYTES)
        return at + SECTOR_BYTES, at
    wire = round_up(size, SECTOR_BYTES)
    return wire, wire


class UsbCopy:
    """Copies between host memory and VRAM over the bridge, with one SDMA queue of the GPU behind it.

    ``seq`` persists across copyins (the sentinel carries its low 24 bits; the fence holds it whole). The first
    copy does the one-time setup: both windows zeroed by the GPU, then fence := ``seq``, so stale bytes never match
    a sentinel. A copyout leaves device data in the SRAM that could alias a future sentinel, so the next copyin
    zeroes the windows again first. A failed copyin still spends its seqs.

    Attributes:
        revision: the protocol revision copyins use.
        drain_polls: fence reads before a chunk that does not drain raises :class:`DrainError`.
    """

    def __init__(
        self,
        controller: Asm2464Controller,
        gpu: UsbGpu,
        sdma: AmdQueue,
        *,
        revision: CopyRevision | str = CopyRevision.PIPELINED,
        drain_polls: int = DEFAULT_DRAIN_POLLS,
        seq: int = 0,
    ) -> None:
        if not isinstance(controller, Asm2464Controller):
            raise InvalidArgument(f"controller={controller!r}, expected an Asm2464Controller")
        if not isinstance(gpu, UsbGpu):
            raise InvalidArgument(f"gpu={gpu!r}, expected a UsbGpu")
        if not isinstance(sdma, AmdQueue) or sdma.kind is not QueueKind.SDMA:
            raise InvalidArgument(f"sdma={sdma!r}, expected the AmdQueue of an SDMA queue")
        try:
            self.revision = CopyRevision(revision)
        except ValueError:
            raise InvalidArgument(f"revision={revision!r}, expected one of {[r.value for r in CopyRevision]}") from None
        self.controller = controller
        self.gpu = gpu
        self.sdma = sdma
        self.drain_polls = check_int("drain_polls", drain_polls, min_value=1)
        self.seq = check_int("seq", seq, min_value=0, max_value=(1 << 63) - 1)
        if self.revision is not CopyRevision.NAIVE and not controller.asynchronous:
            raise InvalidArgument(
                f"the {self.revision.value} revision needs asynchronous transfers, and {controller.transport!r} is "
                "not an AsyncBridgeIO (bulk_write_async, control_write_async, control_read_async, bulk_wait)"
            )
        self._staging = [np.zeros(WINDOW_BYTES, dtype=np.uint8) for _ in range(WINDOWS)]
        self._inflight: list[int | None] = [None] * WINDOWS
        self._windows_clean = False

    def __repr__(self) -> str:
        return f"<UsbCopy {self.revision.value} seq={self.seq}>"

    # --- setup ---
    def _prepare(self) -> None:
        """One-time setup: fence := ``seq``, both windows zeroed, before any chunk is sent.

        The GPU zeroes the windows (CONST_FILL over PCIe, then its fence write), not 0xF2 transfers: nothing proves
        when a bulk OUT has landed, and landings may reorder across transfers, so a zeroing transfer could land
        after the first chunks and wipe their sentinels (a drain error on a healthy board) or their payload. The
        GPU's writes are done when its fence write, which follows them on the queue, is visible; the host first sets
        the fence to a value no ``seq`` can have, so it sees that write.
        """
        if self._windows_clean:
            return
        self.controller.xdata_write(FENCE_XDATA, _FENCE.pack(_FENCE_UNSET))
        self.sdma.submit(
            sdma_const_fill(SYS_APERTURE + window_pcie(0), 0, WINDOWS * WINDOW_BYTES),
            sdma_write(SYS_APERTURE + FENCE_PCIE, _FENCE.pack(self.seq)),
        )
        self.gpu.wait(
            lambda: self.read_fence() == self.seq,
            f"the GPU to zero the copy windows and set the drain fence to seq {self.seq:#x}",
        )
        self._windows_clean = True

    def read_fence(self) -> int:
        """The drain fence as the host reads it (0xE4 at XDATA 0xA800)."""
        return int(_FENCE.unpack(self.controller.xdata_read(FENCE_XDATA, FENCE_BYTES))[0])

    def _wait_drained(self, seq: int, seq_start: int, fence: int | None = None) -> int:
        """Read the fence until it is at least ``seq`` (chunk ``seq - 1`` drained); returns the fence."""
        for _ in range(self.drain_polls):
            if fence is not None and fence >= seq:
                return fence
            fence = self.read_fence()
        if fence is not None and fence >= seq:
            return fence
        self.gpu.check_queues()  # a stopped queue says why (QueueStopped) better than the fence does
        stuck = fence if fence is not None else seq - 1  # fence = seq of the first chunk not drained
        raise DrainError(stuck - seq_start, stuck, stuck, self.drain_polls)

    # --- copyin ---
    def copyin(self, dest_va: int, src: Any) -> None:
        """Copy ``src`` (bytes-like) to VRAM at GPU address ``dest_va``; every byte is in VRAM on return.

        Raises:
            InvalidArgument: ``src`` is not bytes-like, or the range leaves VRAM.
            DrainError: a chunk never drained (its sentinel never landed).
            usb1.USBError / ShortTransfer: a transfer failed.
        """
        view = as_readonly_bytes("src", src)
        vram_address(self.gpu.vram_bar, "dest_va", dest_va, view.nbytes)
        if not view.nbytes:
            return
        self._prepare()
        plans = chunk_plans(self.revision, view.nbytes, self.seq)
        if self.revision is CopyRevision.NAIVE:
            self._copyin_naive(dest_va, view, plans)
        else:
            self._copyin_pipelined(dest_va, view, plans)

    def _copyin_naive(self, dest_va: int, src: memoryview, plans: list[ChunkPlan]) -> None:
        seq_start = self.seq
        window = SYS_APERTURE + PCIE_SRAM_BASE
        for plan in plans:
            self.controller.scsi_write(src[plan.offset : plan.offset + plan.size], 0)
            self.sdma.submit(
                sdma_copy_linear(dest_va + plan.offset, window, plan.size),
                sdma_write(SYS_APERTURE + FENCE_PCIE, _FENCE.pack(plan.seq + 1)),
            )
            self._wait_drained(plan.seq + 1, seq_start)
            self.seq = plan.seq + 1

    def _copyin_pipelined(self, dest_va: int, src: memoryview, plans: list[ChunkPlan]) -> None:
        seq_start = self.seq
        per_chunk = copyin_program(plans[:1], dest_va).nbytes
        batch = max(1, self.sdma.ring_bytes // 2 // per_chunk)  # leave the ring room for the next batch
        batched = self.revision is CopyRevision.PIPELINED
        images = [image.data for image in self._staging]
        controller = self.controller
        try:
            for first in range(0, len(plans), batch):
                part = plans[first : first + batch]
                self.sdma.submit(copyin_program(part, dest_va))  # built before anything is sent, one doorbell
                for plan in part:
                    self._send_chunk(controller, plan, src, images, seq_start, batched=batched)
            self._reap_all(controller)
        except BaseException:
            self._abandon(controller)
            # The failed copy's seqs are spent: its program may still poll for one of their sentinels, and a later
            # copyin that reused that seq would feed this copy's destination with its data.
            self.seq = plans[-1].seq + 1
            raise
        self.seq = plans[-1].seq + 1
        self._wait_drained(self.seq, seq_start)

    def _send_chunk(
        self,
        c: Asm2464Controller,
        plan: ChunkPlan,
        src: memoryview,
        images: list[memoryview],
        seq_start: int,
        *,
        batched: bool,
    ) -> None:
        seq, size, wire = plan.seq, plan.size, plan.wire
        window = plan.window
        inflight = self._inflight
        tag = inflight[window]
        if tag is not None:  # the window's previous chunk must be fully sent before its staging buffer is reused
            inflight[window] = None
            c.reap(tag)
        image = images[window]
        offset = plan.offset
        image[:size] = src[offset : offset + size]
        if wire - size > SENTINEL_BYTES:  # padding to zero (a full pipelined chunk's sentinel directly follows)
            self._staging[window][size:wire] = 0
        _SENTINEL.pack_into(image, plan.sentinel_offset, sentinel(seq))
        slot_start = window * WINDOW_SLOTS
        if batched:  # arm and fence read in one round trip
            arm_tag = c.scsi_write_arm_async(wire, slot_start)
            fence_tag, fence_buffer = c.xdata_read_async(FENCE_XDATA, FENCE_BYTES)
            c.reap(arm_tag, fence_tag)
            fence: int = _FENCE.unpack(fence_buffer)[0]
            if fence < seq - 1:  # usually the fence read already shows the previous chunk drained
                self._wait_drained(seq - 1, seq_start, fence)
        else:  # spin on the fence, then arm: two synchronous round trips
            self._wait_drained(seq - 1, seq_start)
            c.scsi_write_arm(wire, slot_start)
        inflight[window] = c.scsi_write_async(image[:wire])

    def _reap_all(self, controller: Asm2464Controller) -> None:
        for window, tag in enumerate(self._inflight):
            if tag is not None:
                self._inflight[window] = None
                controller.reap(tag)

    def _abandon(self, controller: Asm2464Controller) -> None:
        """After a failure: reap what is still in flight, dropping its errors (the first error is what raised)."""
        for window, tag in enumerate(self._inflight):
            self._inflight[window] = None
            if tag is not None:
                with contextlib.suppress(Exception):  # the copyin already failed with a better error
                    controller.reap(tag)
        controller.clear_error()

    # --- copyout ---
    def copyout(self, dest: Any, src_va: int) -> None:
        """Copy ``len(dest)`` bytes of VRAM at GPU address ``src_va`` into ``dest`` (a writable buffer).

        Per piece of at most 512 KB: arm a device-to-host transfer, have the SDMA copy VRAM into SRAM and write the
        completion-queue entry that releases the bulk IN, then read the bulk IN.
        """
        out = as_writable_bytes("dest", dest)
        vram_address(self.gpu.vram_bar, "src_va", src_va, out.nbytes)
        if not out.nbytes:
            return
        self._prepare()
        self._windows_clean = False  # device data in the SRAM could alias a later sentinel
        controller, sdma, nbytes = self.controller, self.sdma, out.nbytes
        for offset, packets in zip(range(0, nbytes, COPYOUT_PIECE_BYTES), copyout_program(src_va, nbytes), strict=True):
            size = min(COPYOUT_PIECE_BYTES, nbytes - offset)
            controller.scsi_read_arm(size, 0)
            sdma.submit(packets)
            controller.scsi_read_into(out[offset : offset + size], 0, arm=False)
