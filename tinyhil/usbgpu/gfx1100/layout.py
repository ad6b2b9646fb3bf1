"""The gfx1100 driver's boot memory: the top :data:`BOOT_BYTES` of VRAM, as :class:`BootLayout` lays it out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tinyhil.spec.amdgpu import PAGE_SHIFT
from tinyhil.spec.gfx1100_ih import IH_RING_BYTES
from tinyhil.spec.gfx1100_psp import PSP_CMD_BYTES

__all__ = ["BOOT_BYTES", "PSP_RING_BYTES", "BootLayout"]

BOOT_BYTES: Final = 32 << 20  # the driver's boot memory at the top of VRAM
PSP_RING_BYTES: Final = 0x10000  # section 11 step 9
_MB: Final = 1 << 20
_SMU_TABLE_BYTES: Final = 16 << 10
_MQD_BYTES: Final = 0x1000


@dataclass(frozen=True, slots=True)
class BootLayout:
    """The driver's boot memory (VRAM offsets), in the top :data:`BOOT_BYTES` of ``vram_bytes`` of VRAM.

    | offset from ``base`` | what |
    |---|---|
    | 0 | TMR (16 MB, 1 MB aligned) |
    | 16 MB | PSP "msg1" buffer (1 MB aligned) |
    | 17 MB | PSP ring (64 KB), command buffer, fence |
    | 18 MB | page tables (2 MB) |
    | 20 MB | SMU driver table (16 KB), MQD, EOP buffer |
    | 21 MB | IH rings 0 and 1 (256 KB each), ring 0's write-pointer page, the two scratch (default) pages |
    | ``BOOT_BYTES`` - 64 KB | the discovery binary (the GPU's) |
    """

    vram_bytes: int

    @property
    def base(self) -> int:
        return self.vram_bytes - BOOT_BYTES

    @property
    def tmr(self) -> int:
        return self.base

    @property
    def msg1(self) -> int:
        return self.base + 16 * _MB

    @property
    def psp_ring(self) -> int:
        return self.base + 17 * _MB

    @property
    def psp_cmd(self) -> int:
        return self.psp_ring + PSP_RING_BYTES

    @property
    def psp_fence(self) -> int:
        return self.psp_cmd + PSP_CMD_BYTES

    @property
    def page_tables(self) -> int:
        return self.base + 18 * _MB

    @property
    def page_tables_end(self) -> int:
        return self.base + 20 * _MB

    @property
    def smu_table(self) -> int:
        return self.base + 20 * _MB

    @property
    def mqd(self) -> int:
        return self.smu_table + _SMU_TABLE_BYTES

    @property
    def eop(self) -> int:
        return self.mqd + _MQD_BYTES

    def ih_ring(self, ring: int) -> int:
        return self.base + 21 * _MB + ring * IH_RING_BYTES

    @property
    def ih_wptr(self) -> int:
        return self.ih_ring(2)

    def scratch(self, page: int) -> int:
        """The default page of the system aperture (0) and of protection faults (1)."""
        return self.ih_wptr + (1 + page << PAGE_SHIFT)
