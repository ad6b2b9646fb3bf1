"""The MEC block (GC 11.0.0: GRBM, RLC, CP/MEC): the compute pipe, GFX misc and clock gating, the compute HQD.

``docs/gfx1100.md``, steps 12-16 and 19, and section 9 for the queue. :meth:`MecBlock.init` waits for the RLC
autoload (cold) or dequeues the HQD and pulses the CP soft reset (partial), sets up the GC hub (the GMC block),
then the MEC start address and pipe reset, the GFX misc registers (TCP, RLC, the CP's S2A doorbell ports, GRBM,
``SH_MEM_*`` of every VMID, the MEC doorbell range) and enables the MEC. The compute queue is HQD me 1 pipe 0
queue 0, programmed by :meth:`MecBlock.map_queue` and dequeued by :meth:`MecBlock.dequeue`.
"""

from __future__ import annotations

from typing import Final

from tinyhil.amdgpu._packet import hi32, lo32
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.errors import DeviceError
from tinyhil.spec import gfx1100_mec as values
from tinyhil.spec.amdgpu import RING_BASE_SHIFT
from tinyhil.spec.gfx1100_regs import Reg
from tinyhil.usbgpu.gfx1100.block import BootState
from tinyhil.usbgpu.gfx1100.gmc import GmcBlock

__all__ = ["MEC_DOORBELL", "MecBlock"]

MEC_DOORBELL: Final = 0x18  # section 9: BAR2 byte offset of the compute queue's doorbell (index 3)
_U32: Final = 0xFFFF_FFFF
_DWORD_BYTES: Final = 4  # the doorbell fields hold a BAR2 byte offset in dwords
_MEC: Final = 1  # GRBM_GFX_CNTL.meid of the MEC
_VMIDS: Final = 16
_CP_IDLE: Final = 0
_BOOTLOAD_COMPLETE: Final = 1 << 31  # RLC_RLCS_BOOTLOAD_STATUS bit 31: bootload_complete
# Section 9: AM's values
_SH_MEM_CONFIG: Final = {"address_mode": 0, "alignment_mode": 3, "initial_inst_prefetch": 3}  # 64-bit, unaligned
_SH_MEM_BASES: Final = {"private_base": 2, "shared_base": 1}
_S2A_CP_PORTS: Final = ((Reg.S2A_DOORBELL_ENTRY_0_CTRL, 0x3), (Reg.S2A_DOORBELL_ENTRY_3_CTRL, 0x6))  # awid
_MEC_DOORBELL_UPPER: Final = 0xF8  # AM's MEC doorbell range 0 .. 0xF8 (BAR2 bytes)
_RPTR_BLOCK_SIZE: Final = 5
_MIN_IB_AVAIL_SIZE: Final = 3
_EOP_SIZE: Final = 9  # 2 ** (9 + 1) dwords: 4 KB
_DEQUEUE_RESET_WAVES: Final = 2  # CP_HQD_DEQUEUE_REQUEST.dequeue_req: reset waves


class MecBlock:
    """The CP's compute engine and the GFX registers around it: an :class:`~tinyhil.usbgpu.gfx1100.block.IpBlock`."""

    name = "mec"

    def __init__(self, state: BootState, gmc: GmcBlock) -> None:
        self.state = state
        self.gmc = gmc

    def init(self) -> None:
        """Steps 12-16 (section 12 on the partial path: dequeue, then the cp + cpc soft-reset pulse first)."""
        regs = self.state.regs
        if self.state.partial:
            self.dequeue()
            regs.write_fields(Reg.GRBM_SOFT_RESET, soft_reset_cp=1, soft_reset_cpc=1)
            regs.pause(values.CP_SOFT_RESET_S)
            regs.write_fields(Reg.GRBM_SOFT_RESET, soft_reset_cp=0, soft_reset_cpc=0)
        else:
            regs.poll_reg(Reg.CP_STAT, _U32, _CP_IDLE, "GFX idle")
            regs.poll_reg(Reg.RLC_RLCS_BOOTLOAD_STATUS, _BOOTLOAD_COMPLETE, _BOOTLOAD_COMPLETE, "RLC autoload")
        self.gmc.hub("GC")
        self._start()
        self._gfx_misc()
        regs.write_fields(Reg.CP_MEC_RS64_CNTL, mec_pipe0_reset=0, mec_pipe0_active=1, mec_halt=0)  # step 16

    def gate_clocks(self) -> None:
        """Step 19: the GFX clock gating, inside RLC safe mode."""
        regs = self.state.regs
        regs.write_fields(Reg.RLC_SAFE_MODE, cmd=1, message=1)
        regs.poll_reg(Reg.RLC_SAFE_MODE, regs.merge_fields(Reg.RLC_SAFE_MODE, 0, cmd=1), 0, "RLC safe mode entered")
        regs.apply(values.CLOCK_GATING_GFX)
        regs.write_fields(Reg.RLC_SAFE_MODE, cmd=1)
        regs.poll_reg(Reg.RLC_SAFE_MODE, regs.merge_fields(Reg.RLC_SAFE_MODE, 0, cmd=1), 0, "RLC safe mode left")

    def fini(self) -> None:
        self.dequeue()

    def _select(self, *, vmid: int = 0, me: int = 0) -> None:
        self.state.regs.write_fields(Reg.GRBM_GFX_CNTL, meid=me, pipeid=0, queueid=0, vmid=vmid)

    def _start(self) -> None:
        """Step 14: the MEC firmware's start address (kept from the cold boot's on the partial path), pipe reset."""
        regs = self.state.regs
        self._select(me=_MEC)
        start = regs.read(Reg.CP_MEC_RS64_PRGRM_CNTR_START) if self.state.mec_start is None else self.state.mec_start
        regs.write(Reg.CP_MEC_RS64_PRGRM_CNTR_START, start & _U32)
        regs.write(Reg.CP_MEC_RS64_PRGRM_CNTR_START_HI, start >> 32)
        self._select()
        regs.write_fields(Reg.CP_MEC_RS64_CNTL, mec_pipe0_reset=1)
        regs.write_fields(Reg.CP_MEC_RS64_CNTL, mec_pipe0_reset=0)

    def _gfx_misc(self) -> None:
        """Step 15."""
        regs = self.state.regs
        regs.apply(values.GFX_MISC)
        for port, awid in _S2A_CP_PORTS:
            regs.write_fields(port, s2a_doorbell_port_enable=1, s2a_doorbell_port_awid=awid)
        regs.apply((values.GRBM_CNTL_READ_TIMEOUT,))
        for vmid in range(_VMIDS):
            self._select(vmid=vmid)
            regs.write_fields(Reg.SH_MEM_CONFIG, **_SH_MEM_CONFIG)
            regs.write_fields(Reg.SH_MEM_BASES, **_SH_MEM_BASES)
        self._select()
        regs.write_fields(Reg.CP_MEC_DOORBELL_RANGE_LOWER, doorbell_range=0)
        regs.write_fields(Reg.CP_MEC_DOORBELL_RANGE_UPPER, doorbell_range=_MEC_DOORBELL_UPPER // _DWORD_BYTES)

    def map_queue(self, queue: AmdQueue) -> None:
        """Section 9: the HQD registers of me 1 pipe 0 queue 0 for ``queue``, then CP_HQD_ACTIVE.

        Raises:
            DeviceError: CP_HQD_ACTIVE reads 0 afterwards.
        """
        state = self.state
        regs, layout = state.regs, state.layout
        mqd, eop = state.mc(layout.mqd), state.mc(layout.eop)
        queue_size = (queue.ring_bytes // _DWORD_BYTES).bit_length() - 2  # ring = 2 ** (queue_size + 1) dwords
        ring, eop_base = queue.ring_va >> RING_BASE_SHIFT, eop >> RING_BASE_SHIFT
        self._select(me=_MEC)
        try:
            for reg, value in (
                (Reg.CP_MQD_BASE_ADDR, lo32(mqd)), (Reg.CP_MQD_BASE_ADDR_HI, hi32(mqd)), (Reg.CP_HQD_VMID, 0),
                (Reg.CP_HQD_PQ_BASE, lo32(ring)), (Reg.CP_HQD_PQ_BASE_HI, hi32(ring)),
                (Reg.CP_HQD_PQ_RPTR_REPORT_ADDR, lo32(queue.rptr_va)),
                (Reg.CP_HQD_PQ_RPTR_REPORT_ADDR_HI, hi32(queue.rptr_va)),
                (Reg.CP_HQD_PQ_WPTR_POLL_ADDR, lo32(queue.wptr_va)),
                (Reg.CP_HQD_PQ_WPTR_POLL_ADDR_HI, hi32(queue.wptr_va)),
            ):  # fmt: skip
                regs.write(reg, value)
            doorbell = MEC_DOORBELL // _DWORD_BYTES
            regs.write_fields(Reg.CP_HQD_PQ_DOORBELL_CONTROL, doorbell_offset=doorbell, doorbell_en=1)
            regs.write_fields(Reg.CP_HQD_PQ_CONTROL, queue_size=queue_size, rptr_block_size=_RPTR_BLOCK_SIZE)
            regs.write_fields(Reg.CP_HQD_IB_CONTROL, min_ib_avail_size=_MIN_IB_AVAIL_SIZE)
            regs.write_fields(Reg.CP_MQD_CONTROL, priv_state=1)
            regs.write(Reg.CP_HQD_EOP_BASE_ADDR, lo32(eop_base))
            regs.write(Reg.CP_HQD_EOP_BASE_ADDR_HI, hi32(eop_base))
            regs.write_fields(Reg.CP_HQD_EOP_CONTROL, eop_size=_EOP_SIZE)
            regs.write(Reg.CP_HQD_PQ_WPTR_LO, 0)
            regs.write(Reg.CP_HQD_PQ_WPTR_HI, 0)
            regs.write_fields(Reg.CP_HQD_ACTIVE, active=1)
            regs.hdp_flush()
            active = regs.read(Reg.CP_HQD_ACTIVE) & regs.merge_fields(Reg.CP_HQD_ACTIVE, 0, active=1)
        finally:
            self._select()
        if not active:
            raise DeviceError(
                f"compute HQD me 1 pipe 0 queue 0: CP_HQD_ACTIVE reads 0 after mapping ring {queue.ring_va:#x}+"
                f"{queue.ring_bytes:#x}: the GPU refused the settings",
                op="create_queue",
            )

    def dequeue(self) -> None:
        """Dequeue the HQD this driver uses (me 1, pipe 0, queue 0) if it is active (section 9)."""
        regs = self.state.regs
        active = regs.merge_fields(Reg.CP_HQD_ACTIVE, 0, active=1)
        self._select(me=_MEC)
        if regs.read(Reg.CP_HQD_ACTIVE) & active:
            regs.write_fields(Reg.CP_HQD_DEQUEUE_REQUEST, dequeue_req=_DEQUEUE_RESET_WAVES)
            regs.write_fields(Reg.SPI_COMPUTE_QUEUE_RESET, reset=1)
            regs.poll_reg(Reg.CP_HQD_ACTIVE, active, 0, "HQD dequeued")
        self._select()
