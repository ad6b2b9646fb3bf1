"""The SDMA block (SDMA 6.0.0, both engines): engine setup and S2A port 2 (step 17), queue 0 of each (section 8).

``docs/gfx1100.md``, step 17 and section 8. :meth:`SdmaBlock.init` sets each engine's watchdog and UTCL1, unhalts
it and enables traps, then routes S2A doorbell port 2 to SDMA (two u64 doorbells at BAR2 bytes 0x800 / 0x808).
Queue 0 of engine ``n`` is programmed by :meth:`SdmaBlock.start_queue` and stopped by :meth:`SdmaBlock.stop_queue`.
"""

from __future__ import annotations

from typing import Final

from tinyhil.amdgpu._packet import hi32, lo32
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.errors import DeviceError
from tinyhil.spec import gfx1100_sdma as values
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, RING_BASE_SHIFT
from tinyhil.spec.gfx1100_regs import SDMA1_REGISTER_STRIDE, Reg
from tinyhil.usbgpu.gfx1100.block import BootState

__all__ = ["SDMA_DOORBELL", "SDMA_ENGINES", "SdmaBlock", "sdma_doorbell"]

SDMA_ENGINES: Final = (0, 1)
SDMA_DOORBELL: Final = 0x800  # BAR2 byte offset of SDMA0's doorbell; SDMA1's is the next u64
_DWORD_BYTES: Final = 4  # S2A ranges and doorbell offsets in dwords; rb_size = log2(ring dwords)
# S2A port 2 (section 10, AM's values): awid 0xE, awaddr[31:28] 3, the two SDMA doorbells.
_S2A_SDMA_AWID: Final = 0xE
_S2A_SDMA_AWADDR_31_28: Final = 3
_S2A_SDMA_SLOTS: Final = len(SDMA_ENGINES)
_RPTR_WRITEBACK_TIMER: Final = 4  # section 8: AM's value


def sdma_doorbell(engine: int) -> int:
    """The BAR2 byte offset of SDMA ``engine``'s queue 0 doorbell."""
    return SDMA_DOORBELL + DOORBELL_SLOT_BYTES * engine


class SdmaBlock:
    """Both SDMA engines and their queue 0: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "sdma"

    def __init__(self, state: BootState) -> None:
        self.state = state

    def init(self) -> None:
        """Step 17: watchdog, UTCL1, unhalt, trap_enable, both engines (the driver runs both); then S2A port 2."""
        regs = self.state.regs
        for engine in SDMA_ENGINES:
            regs.apply(values.SDMA_ENGINE, sdma=engine)
        regs.write_fields(Reg.S2A_DOORBELL_ENTRY_2_CTRL, s2a_doorbell_port_enable=1,
                          s2a_doorbell_port_awid=_S2A_SDMA_AWID,
                          s2a_doorbell_port_range_offset=SDMA_DOORBELL // _DWORD_BYTES,
                          s2a_doorbell_port_range_size=_S2A_SDMA_SLOTS * DOORBELL_SLOT_BYTES // _DWORD_BYTES,
                          s2a_doorbell_port_awaddr_31_28_value=_S2A_SDMA_AWADDR_31_28)  # fmt: skip

    def gate_clocks(self) -> None:
        pass  # SDMA0/1_RLC_CGCG_CTRL are written inside the MEC block's RLC safe mode

    def fini(self) -> None:
        pass  # the queues are the caller's, destroyed before the fini

    def start_queue(self, engine: int, queue: AmdQueue) -> None:
        """Section 8's sequence on SDMA ``engine`` queue 0 for ``queue``.

        Raises:
            DeviceError: RB_CNTL.rb_enable reads 0 afterwards.
        """
        regs, shift = self.state.regs, SDMA1_REGISTER_STRIDE * engine
        rb_cntl = Reg.SDMA0_QUEUE0_RB_CNTL + shift
        if regs.read(rb_cntl) & regs.merge_fields(rb_cntl, 0, rb_enable=1):
            regs.write_fields(rb_cntl, rb_enable=0)  # left enabled: settings latch on a fresh enable
        regs.write_fields(Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE + shift, enable=1)
        for reg in (Reg.SDMA0_QUEUE0_RB_RPTR, Reg.SDMA0_QUEUE0_RB_RPTR_HI, Reg.SDMA0_QUEUE0_RB_WPTR,
                    Reg.SDMA0_QUEUE0_RB_WPTR_HI):  # fmt: skip
            regs.write(reg + shift, 0)
        ring = queue.ring_va >> RING_BASE_SHIFT
        regs.write(Reg.SDMA0_QUEUE0_RB_BASE + shift, lo32(ring))
        regs.write(Reg.SDMA0_QUEUE0_RB_BASE_HI + shift, hi32(ring))
        regs.write(Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_LO + shift, lo32(queue.rptr_va))
        regs.write(Reg.SDMA0_QUEUE0_RB_RPTR_ADDR_HI + shift, hi32(queue.rptr_va))
        regs.write(Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO + shift, lo32(queue.wptr_va))
        regs.write(Reg.SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI + shift, hi32(queue.wptr_va))
        regs.write_fields(Reg.SDMA0_QUEUE0_DOORBELL_OFFSET + shift, offset=sdma_doorbell(engine) // _DWORD_BYTES)
        regs.write_fields(Reg.SDMA0_QUEUE0_DOORBELL + shift, enable=1)
        regs.write_fields(Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE + shift, enable=0)
        rb_size = (queue.ring_bytes // _DWORD_BYTES).bit_length() - 1
        regs.write_fields(rb_cntl, rb_enable=1, rb_size=rb_size, wptr_poll_enable=0, f32_wptr_poll_enable=1,
                          rptr_writeback_enable=1, rptr_writeback_timer=_RPTR_WRITEBACK_TIMER, rb_priv=1,
                          rb_vmid=0)  # fmt: skip
        regs.write_fields(Reg.SDMA0_QUEUE0_IB_CNTL + shift, ib_enable=1)
        if not regs.read(rb_cntl) & regs.merge_fields(rb_cntl, 0, rb_enable=1):
            raise DeviceError(
                f"SDMA{engine} queue 0: rb_enable reads 0 after enabling ring {queue.ring_va:#x}+{queue.ring_bytes:#x}"
                f" (pointers {queue.rptr_va:#x}/{queue.wptr_va:#x}): the GPU refused the settings",
                op="create_queue",
            )

    def stop_queue(self, engine: int) -> None:
        """Section 8's disable: RB and IB off, doorbell off, its offset 0."""
        regs, shift = self.state.regs, SDMA1_REGISTER_STRIDE * engine
        regs.write_fields(Reg.SDMA0_QUEUE0_RB_CNTL + shift, rb_enable=0)
        regs.write_fields(Reg.SDMA0_QUEUE0_IB_CNTL + shift, ib_enable=0)
        regs.write_fields(Reg.SDMA0_QUEUE0_DOORBELL + shift, enable=0)
        regs.write_fields(Reg.SDMA0_QUEUE0_DOORBELL_OFFSET + shift, offset=0)
