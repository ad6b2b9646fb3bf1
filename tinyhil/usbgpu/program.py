"""The SDMA side of a copyin and of a copyout, built in one go before anything is sent (docs/copyin.md).

Per chunk three packets: POLL_REGMEM on the chunk's sentinel, COPY_LINEAR from its window to VRAM, WRITE of
``seq + 1`` to the drain fence. A 64 MB copyin has 256 chunks; building 768 packets one builder call at a time costs
more wall time than the copy itself, so full chunks are stamped from a two-row template (one per window) and the
fields that change from chunk to chunk (sentinel, destination, fence value) are written as numpy columns. The
template rows come from the packet builders, and ``tests/usbgpu/test_program.py`` checks the stamped program
against one built packet by packet.

A copyout's pieces are stamped the same way: per piece a COPY_LINEAR from VRAM into the SRAM and the WRITE that
releases the bulk IN, as bytes ready for the ring (``tests/usbgpu/test_program.py`` checks them against the builders).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from tinyhil.amdgpu.sdma import sdma_copy_linear, sdma_poll_regmem, sdma_write
from tinyhil.spec.amdgpu import SYS_APERTURE, CompareFunction
from tinyhil.spec.amdgpu_sdma import SDMA_PACKET_DWORDS, SdmaCopyLinearDw, SdmaOp, SdmaPollRegmemDw, SdmaWriteDw
from tinyhil.spec.asm2464 import CPL_RELEASE_OFFSET, PCIE_CQ_WINDOW, PCIE_SRAM_BASE
from tinyhil.spec.copyin import (
    COPYOUT_PIECE_BYTES,
    FENCE_BYTES,
    FENCE_PCIE,
    POLL_INTERVAL,
    POLL_RETRY_COUNT,
    WINDOWS,
    sentinel,
    window_pcie,
)

__all__ = ["ChunkPlan", "chunk_packets", "copyin_program", "copyout_packets", "copyout_program"]

U32: Final = 0xFFFF_FFFF
# Dword positions inside one chunk's three packets (POLL_REGMEM, COPY_LINEAR, WRITE of a u64).
_POLL_DWORDS = SDMA_PACKET_DWORDS[SdmaOp.POLL_REGMEM]
_COPY_DWORDS = SDMA_PACKET_DWORDS[SdmaOp.COPY_LINEAR]
_COL_SENTINEL: Final = SdmaPollRegmemDw.REFERENCE
_COL_DST: Final = _POLL_DWORDS + SdmaCopyLinearDw.DST_ADDR_LO  # lo, then hi
_COL_FENCE: Final = _POLL_DWORDS + _COPY_DWORDS + SdmaWriteDw.DATA  # lo, then hi
_COL_COPY_SRC: Final = SdmaCopyLinearDw.SRC_ADDR_LO  # lo, then hi (the first packet of a copyout piece)
_RELEASE: Final = b"\x01\x00\x00\x00"  # the completion-queue entry that releases a copyout's bulk IN


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """Chunk ``index`` of a copyin: ``size`` payload bytes from source offset ``offset``, sequence number ``seq``,
    a wire image of ``wire`` bytes whose sentinel the GPU polls at window offset ``sentinel_offset``."""

    index: int
    seq: int
    offset: int
    size: int
    wire: int
    sentinel_offset: int

    @property
    def window(self) -> int:
        return self.seq & 1


def chunk_packets(plan: ChunkPlan, dest_va: int) -> list[npt.NDArray[np.uint32]]:
    """The three packets of one chunk, from the builders."""
    window = SYS_APERTURE + window_pcie(plan.window)
    return [
        sdma_poll_regmem(
            window + plan.sentinel_offset,
            sentinel(plan.seq),
            function=CompareFunction.EQUAL,
            interval=POLL_INTERVAL,
            retry_count=POLL_RETRY_COUNT,
        ),
        sdma_copy_linear(dest_va + plan.offset, window, plan.size),
        sdma_write(SYS_APERTURE + FENCE_PCIE, (plan.seq + 1).to_bytes(FENCE_BYTES, "little")),
    ]


def copyin_program(plans: list[ChunkPlan], dest_va: int) -> npt.NDArray[np.uint32]:
    """All packets of ``plans`` (consecutive seqs), as one dword array.

    Chunks that share the first chunk's size and sentinel offset are stamped from a template; any other (the
    short last chunk) is built by the builders.
    """
    if not plans:
        return np.zeros(0, dtype="<u4")
    first = plans[0]
    same = [p.size == first.size and p.sentinel_offset == first.sentinel_offset for p in plans]
    stamped = same.index(False) if False in same else len(plans)
    parts: list[npt.NDArray[np.uint32]] = []
    if stamped:
        templates = [np.concatenate(chunk_packets(plans[i], dest_va)) for i in range(min(WINDOWS, stamped))]
        rows = np.empty((stamped, templates[0].size), dtype="<u4")
        for parity, template in enumerate(templates):
            rows[parity::WINDOWS] = template
        seqs = first.seq + np.arange(stamped, dtype=np.uint64)
        rows[:, _COL_SENTINEL] = sentinel(seqs)
        dst = np.uint64(dest_va + first.offset) + np.arange(stamped, dtype=np.uint64) * np.uint64(first.size)
        rows[:, _COL_DST] = dst & U32
        rows[:, _COL_DST + 1] = dst >> np.uint64(32)
        fence = seqs + np.uint64(1)
        rows[:, _COL_FENCE] = fence & U32
        rows[:, _COL_FENCE + 1] = fence >> np.uint64(32)
        parts.append(rows.reshape(-1))
    parts.extend(np.concatenate(chunk_packets(plan, dest_va)) for plan in plans[stamped:])
    return np.concatenate(parts)


def copyout_packets(src_va: int, offset: int, size: int) -> list[npt.NDArray[np.uint32]]:
    """The two packets of the copyout piece of ``size`` bytes at ``offset``, from the builders."""
    return [
        sdma_copy_linear(SYS_APERTURE + PCIE_SRAM_BASE, src_va + offset, size),
        sdma_write(SYS_APERTURE + PCIE_CQ_WINDOW + CPL_RELEASE_OFFSET, _RELEASE),
    ]


def copyout_program(src_va: int, nbytes: int) -> list[bytes]:
    """Per piece of at most ``COPYOUT_PIECE_BYTES`` of a copyout of ``nbytes`` from VRAM at ``src_va``: its packets
    as little-endian bytes. Full pieces are stamped from a template (the source column patched); a short last piece
    is built by the builders."""
    full, rest = divmod(nbytes, COPYOUT_PIECE_BYTES)
    parts: list[bytes] = []
    if full:
        template = np.concatenate(copyout_packets(src_va, 0, COPYOUT_PIECE_BYTES))
        rows = np.tile(template, (full, 1))
        src = np.uint64(src_va) + np.arange(full, dtype=np.uint64) * np.uint64(COPYOUT_PIECE_BYTES)
        rows[:, _COL_COPY_SRC] = src & U32
        rows[:, _COL_COPY_SRC + 1] = src >> np.uint64(32)
        blob, row_bytes = rows.tobytes(), template.nbytes
        parts.extend(blob[i : i + row_bytes] for i in range(0, len(blob), row_bytes))
    if rest:
        parts.append(np.concatenate(copyout_packets(src_va, full * COPYOUT_PIECE_BYTES, rest)).tobytes())
    return parts
