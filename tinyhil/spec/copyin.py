"""The pipelined USB copyin/copyout protocol's constants (docs/copyin.md), shared by the driver and the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, overload

from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, PCIE_SYS_BUF_STABLE, SECTOR_BYTES, SRAM_BYTES, WINDOW_BYTES, Xdata

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CHUNK_BYTES",
    "COPYOUT_PIECE_BYTES",
    "FENCE_BYTES",
    "FENCE_PCIE",
    "FENCE_XDATA",
    "HARDWARE_COPYIN_MBPS",
    "NAIVE_CHUNK_BYTES",
    "POLL_INTERVAL",
    "POLL_RETRY_COUNT",
    "SDMA_RING_BYTES",
    "SECTOR_CHUNK_BYTES",
    "SENTINEL_BYTES",
    "SENTINEL_TAG",
    "SEQ_MASK",
    "WINDOWS",
    "sentinel",
    "window_pcie",
]

WINDOWS: Final = 2  # window 0 = slots 0-15 (SRAM 0x000000), window 1 = slots 16-31 (0x040000); chunk seq uses seq & 1
SENTINEL_BYTES: Final = 4
CHUNK_BYTES: Final = WINDOW_BYTES - SENTINEL_BYTES  # current revision: a full chunk's wire image fills its window
SECTOR_CHUNK_BYTES: Final = 0x3C000  # sentinel-sector revision: 15 slots of payload, then one 512 B sentinel sector
NAIVE_CHUNK_BYTES: Final = WINDOW_BYTES  # naive revision: one window, no sentinel
SENTINEL_TAG: Final = 0x5100_0000
SEQ_MASK: Final = 0xFF_FFFF  # the sentinel carries seq's low 24 bits
FENCE_PCIE: Final = PCIE_SYS_BUF_STABLE  # u64 drain fence at 0x820800: above the sys_buf-collision range
FENCE_XDATA: Final = int(Xdata.DRAIN_FENCE)  # the same bytes as the host reads them (0xA800)
FENCE_BYTES: Final = 8
POLL_INTERVAL: Final = 4  # POLL_REGMEM interval on the sentinel (x 16 clock cycles)
POLL_RETRY_COUNT: Final = 0xFFF  # retry forever: a sentinel that never lands shows up as the host's drain error
SDMA_RING_BYTES: Final = 1 << 20  # 3 packets per chunk; upstream used 1 MB for USB
COPYOUT_PIECE_BYTES: Final = SRAM_BYTES  # copyout moves at most 512 KB per arm (the whole SRAM)
# Measured on hardware (docs/copyin.md "Three revisions"), MB/s of copyin by protocol revision; the timing model must
# land within 15% of each from one parameter set.
HARDWARE_COPYIN_MBPS: Final = {"naive": 107, "sentinel-sector": 276, "pipelined": 323}
assert CHUNK_BYTES % SECTOR_BYTES == SECTOR_BYTES - SENTINEL_BYTES


@overload
def sentinel(seq: int) -> int: ...
@overload
def sentinel(seq: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]: ...
def sentinel(seq: Any) -> Any:
    """The u32 that marks chunk ``seq`` as landed: ``0x51000000 | (seq & 0xFFFFFF)``; of each element when ``seq``
    is a numpy array of seqs (the driver's chunk images and the SDMA program's polls use this one formula)."""
    return SENTINEL_TAG | (seq & SEQ_MASK)


def window_pcie(window: int) -> int:
    """PCIe address of copyin window ``window`` (0 or 1) in the bridge's SRAM."""
    return PCIE_SRAM_BASE + window * WINDOW_BYTES
