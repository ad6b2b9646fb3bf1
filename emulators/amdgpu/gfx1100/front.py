"""The gfx1100 front end: the real Navi 31 register interface, mounted on an :class:`AmdGpu` core.

``docs/gfx1100.md``. The core's memory, queues and SDMA / PM4 engines execute; this front end answers the
BARs as the chip does:

| BAR | front end | what |
|---|---|---|
| 0 | :meth:`Gfx1100Front.vram_read` / :meth:`vram_write` | VRAM; the discovery binary at VRAM - 64 KB |
| 2 | :meth:`Gfx1100Front.doorbell_write` | doorbells, routed by the programmed ranges (MEC range, S2A port 2) |
| 5 | :attr:`Gfx1100Front.bar5` | 1 MB of registers (:class:`Bar5`) over the banked :class:`RegisterFile` |

Blocks: :class:`Psp`, :class:`Smu`, :class:`SdmaQueue0`, :class:`MecQueues`, :class:`IhRing` (IH ring 0),
:class:`VmFaults` (both hubs' protection-fault registers), and the GMC registers handled here (FB location, TLB
invalidate request / acknowledge / semaphore of both hubs; :class:`Gmc` reads the system apertures). A queue
the core's engine stops posts an IV (:meth:`Gfx1100Front._interrupt`, the core's ``on_interrupt``): a memory fault the
GC hub's fault IV (and latched fault registers), any other stop its engine's error IV. A register no block claims
stores what is written (section 10); of those, ``RLC_SAFE_MODE`` reads its ``cmd`` bit 0 and
``BIF_BX0_BIF_DOORBELL_INT_CNTL`` its RAS status bits 1-2 as 0. Register accesses are reported to the GPU's
observers (``gpu.observe``) as ``gpu_register`` events.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Final

from tinyhil._check import as_readonly_bytes, check_range
from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import DOORBELL_BAR_BYTES, DOORBELL_SLOT_BYTES
from tinyhil.spec.amdgpu_pm4 import Pm4Op
from tinyhil.spec.gfx1100_discovery import DISCOVERY_TMR_OFFSET
from tinyhil.spec.gfx1100_gmc import FB_BLOCK_BYTES, NAVI31_FB_BASE
from tinyhil.spec.gfx1100_ih import (
    CP_CTXID0_DOORBELL_ID,
    RING_ID_CP_ME,
    RING_ID_CP_PIPE,
    RING_ID_CP_QUEUE,
    RING_ID_SDMA_INSTANCE,
    IhClientId,
    IhSourceId,
    Utcl2ClientId,
)
from tinyhil.spec.gfx1100_psp import PspFwType
from tinyhil.spec.gfx1100_regs import (
    BIF_DOORBELL_INT_CNTL_RAS_ATHUB_ERR_EVENT_INTERRUPT_STATUS,
    BIF_DOORBELL_INT_CNTL_RAS_CNTLR_INTERRUPT_STATUS,
    INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ,
    RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN,
    S2A_DOORBELL_ENTRY_ENABLE,
    S2A_DOORBELL_ENTRY_RANGE_OFFSET,
    S2A_DOORBELL_ENTRY_RANGE_SIZE,
    Reg,
)

from ...kernel import EventKernel
from ...observe import Observation, Observed, Observer
from ...pcie import DEFAULT_VRAM_BYTES
from ..executor import KernelExecutor
from ..gpu import AmdGpu
from ..services import Interrupt, InterruptKind
from ..system_bus import SystemBus
from ..timing import DEFAULT_TIMING, GpuTiming
from .bar5 import Bar5
from .discovery import build_discovery
from .gmc import Gmc, PageTableHub
from .ih import IhRing
from .mec_queue import MecQueues
from .psp import Psp
from .regfile import RegisterFile
from .sdma_queue import SdmaQueue0
from .smu import Smu
from .vm_faults import VmFaults

__all__ = ["Gfx1100Front"]

_log = logging.getLogger("tinyhil.emulators.amdgpu.gfx1100")
_BOOTLOAD_COMPLETE: Final = 1 << 31  # RLC_RLCS_BOOTLOAD_STATUS.bootload_complete
_SAFE_MODE_CMD: Final = 1  # RLC_SAFE_MODE.cmd: the RLC clears it when it has acted
_SEM_ACQUIRED: Final = 1
_DOORBELL_UNIT_BYTES: Final = 4  # S2A ranges count dword doorbell slots
# BIF_BX0_BIF_DOORBELL_INT_CNTL: no RAS error is ever raised, so both status bits read 0 (section 10)
_RAS_STATUS: Final = (BIF_DOORBELL_INT_CNTL_RAS_CNTLR_INTERRUPT_STATUS.mask
                      | BIF_DOORBELL_INT_CNTL_RAS_ATHUB_ERR_EVENT_INTERRUPT_STATUS.mask)  # fmt: skip


class Gfx1100Front:
    """The gfx1100 register interface of ``gpu``, whose memory must be ``memory.gc``: the GC hub's address space
    of the memory controller ``memory`` (use :meth:`build`).

    Raises:
        InvalidArgument: ``gpu`` has another address space (its addresses are not the chip's).
    """

    def __init__(self, gpu: AmdGpu, memory: Gmc) -> None:
        if gpu.memory is not memory.gc:
            raise InvalidArgument(
                f"gpu={gpu!r} has {gpu.memory!r}, expected an AmdGpu on the GC hub's address space of {memory!r}: "
                "use Gfx1100Front.build(kernel)"
            )
        self.gpu = gpu
        self.memory = memory
        self.regs = regs = memory.gc_hub.regs
        regs.observed = gpu.observed
        self.bar5 = Bar5(regs, memory.vram)
        self.smu = Smu(regs, self._mode1_reset)
        self.psp = Psp(regs, memory, self._fw_loaded)
        self.sdma = SdmaQueue0(regs, gpu)
        self.sdma1 = SdmaQueue0(regs, gpu, engine=1)
        self.mec = MecQueues(regs, gpu)
        self.ih = IhRing(regs, memory, gpu.timestamp)
        self.vm_faults = VmFaults(regs, self.ih)
        gpu.on_interrupt = self._interrupt
        self._offset2rings: dict[int, tuple[Callable[[int], bool], ...]] = {}
        self._routes_generation = -1  # the register generation the routes were worked out at
        regs.set_reset_value(Reg.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE, memory.vram_bytes >> 20)
        for base, top in ((Reg.MMMC_VM_FB_LOCATION_BASE, Reg.MMMC_VM_FB_LOCATION_TOP),
                          (Reg.GCMC_VM_FB_LOCATION_BASE, Reg.GCMC_VM_FB_LOCATION_TOP)):  # fmt: skip
            regs.on_read(base, lambda: self.memory.fb_base // FB_BLOCK_BYTES)
            regs.on_read(top, lambda: self.memory.fb_top_block)
        gc_eng17 = (Reg.GCVM_INVALIDATE_ENG17_REQ, Reg.GCVM_INVALIDATE_ENG17_ACK, Reg.GCVM_INVALIDATE_ENG17_SEM)
        mm_eng17 = (Reg.MMVM_INVALIDATE_ENG17_REQ, Reg.MMVM_INVALIDATE_ENG17_ACK, Reg.MMVM_INVALIDATE_ENG17_SEM)
        for hub, (req, ack, sem) in ((memory.gc_hub, gc_eng17), (memory.mm_hub, mm_eng17)):
            regs.on_write(req, functools.partial(self._invalidate, hub, ack))
            regs.on_read(sem, functools.partial(self._acquire, sem))
            regs.on_write(sem, functools.partial(self._release, sem))
        regs.on_write(Reg.RLC_SAFE_MODE, lambda value: regs.store(Reg.RLC_SAFE_MODE, value & ~_SAFE_MODE_CMD))
        regs.on_read(Reg.RLC_RLCS_BOOTLOAD_STATUS, self._bootload_status)
        doorbell_int = Reg.BIF_BX0_BIF_DOORBELL_INT_CNTL
        regs.on_read(doorbell_int, lambda: regs.stored(doorbell_int) & ~_RAS_STATUS)
        self.reset()

    @classmethod
    def build(
        cls,
        kernel: EventKernel,
        *,
        vram_bytes: int = DEFAULT_VRAM_BYTES,
        pcie: SystemBus | None = None,
        fb_base: int = NAVI31_FB_BASE,
        name: str = "gpu0",
        timing: GpuTiming = DEFAULT_TIMING,
        executor: KernelExecutor | None = None,
    ) -> Gfx1100Front:
        """A new :class:`AmdGpu` on a :class:`Gmc`'s GC-hub address space (VRAM at MC ``fb_base``; system pages
        reach ``pcie``), with this front end mounted."""
        regs = RegisterFile(Observed())
        memory = Gmc(vram_bytes, fb_base=fb_base, regs=regs, pcie=pcie)
        return cls(AmdGpu(kernel, name=name, timing=timing, executor=executor, memory=memory.gc), memory)

    def __repr__(self) -> str:
        return f"<Gfx1100Front {self.gpu!r}>"

    def reset(self) -> None:
        """Cold power-on: the GPU core reset (VRAM zeroed, queues gone), registers at reset values, the discovery
        binary in place."""
        self.gpu.reset()
        self._cold_blocks()

    def _cold_blocks(self) -> None:
        self.regs.reset()
        for block in (self.bar5, self.smu, self.psp, self.sdma, self.sdma1, self.mec, self.ih, self.vm_faults):
            block.reset()
        self.memory.registers_reset()  # both TLBs empty, both system apertures closed again
        self._semaphores: set[int] = set()
        self.dropped_doorbells: list[int] = []  # BAR2 byte offsets of doorbells no queue took
        self._doorbell_bar = bytearray(DOORBELL_BAR_BYTES)
        blob = build_discovery()
        at = self.memory.vram_bytes - DISCOVERY_TMR_OFFSET
        self.memory.vram[at : at + len(blob)] = blob

    def _mode1_reset(self) -> None:
        """The SMU's mode-1 reset: every block cold again; VRAM keeps its contents (the discovery binary is
        rewritten)."""
        for queue in self.gpu.queues:
            self.gpu.destroy_queue(queue)
        self._cold_blocks()

    def observe(self, observer: Observer) -> Observation:
        """Report register accesses (and the core's events) to ``observer`` (``AmdGpu.observe``)."""
        return self.gpu.observe(observer)

    # --- GMC and RLC answers ---
    def _invalidate(self, hub: PageTableHub, ack: int, value: int) -> None:
        vmids = INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ.get(value)
        if vmids & 1:  # VMID 0 is the only context modelled
            hub.invalidate()
        self.regs.store(ack, vmids)

    def _acquire(self, sem: int) -> int:
        if sem in self._semaphores:
            return 0
        self._semaphores.add(sem)
        return _SEM_ACQUIRED

    def _release(self, sem: int, value: int) -> None:
        if not value & _SEM_ACQUIRED:
            self._semaphores.discard(sem)

    def _bootload_status(self) -> int:
        stored = self.regs.stored(Reg.RLC_RLCS_BOOTLOAD_STATUS)
        return stored | _BOOTLOAD_COMPLETE if self.psp.rlc_autoloaded else stored

    # --- interrupts: a stopped queue posts an IV ---
    def _interrupt(self, interrupt: Interrupt) -> None:
        """The core's ``on_interrupt``: a memory fault or queue error of a queue this front end runs posts its IV
        (TRAP and END_OF_PIPE interrupts post nothing: not modelled)."""
        kind = interrupt.kind
        if kind is not InterruptKind.MEMORY_FAULT and kind is not InterruptKind.QUEUE_ERROR:
            return
        queue = next((q for q in self.gpu.queues if q.id == interrupt.queue_id), None)
        if queue is None:
            return
        engine = next((sdma.engine for sdma in (self.sdma, self.sdma1) if sdma.queue is queue), None)
        if kind is InterruptKind.MEMORY_FAULT:
            if engine is not None:
                cid = (Utcl2ClientId.SDMA0, Utcl2ClientId.SDMA1)[engine]
            else:  # a kernel's own access is the TCP's; the CP's packet fetches and writes are the CPC's
                dispatch = queue.error_opcode == Pm4Op.DISPATCH_DIRECT
                cid = Utcl2ClientId.TCP if dispatch else Utcl2ClientId.CPC
            self.vm_faults.fault(interrupt.fault_va or 0, cid=cid)
        elif engine is not None:  # model choice: gfx11 names no SDMA illegal-instruction source (docs/gfx1100.md)
            self.ih.post(IhClientId.GFX, IhSourceId.SDMA_QUEUE_HANG, ring_id=RING_ID_SDMA_INSTANCE.put(engine))
        else:
            bank = next((b for b, q in self.mec.queues.items() if q is queue), (0, 0, 0))
            me, pipe, hqd = bank
            doorbell = queue.doorbell_index * DOORBELL_SLOT_BYTES // 4 & CP_CTXID0_DOORBELL_ID.max_value
            ring_id = RING_ID_CP_ME.put(me) | RING_ID_CP_PIPE.put(pipe) | RING_ID_CP_QUEUE.put(hqd)
            self.ih.post(IhClientId.GFX, IhSourceId.CP_BAD_OPCODE_ERROR, ring_id=ring_id, src_data=(doorbell, 0, 0, 0))

    def _fw_loaded(self, fw_type: PspFwType | int) -> None:
        if fw_type == PspFwType.SMU:
            self.smu.firmware_loaded()

    # --- BAR0: VRAM ---
    def vram_read(self, offset: int, nbytes: int) -> bytes:
        """Read VRAM through BAR0 (large BAR: all of VRAM).

        Raises:
            InvalidArgument: the range leaves VRAM.
        """
        check_range("BAR0", offset, nbytes, self.memory.vram_bytes)
        return bytes(self.memory.vram[offset : offset + nbytes])

    def vram_write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write VRAM through BAR0; queues polling the range at its MC address wake.

        Raises:
            InvalidArgument: the range leaves VRAM.
        """
        view = as_readonly_bytes("data", data)
        check_range("BAR0", offset, view.nbytes, self.memory.vram_bytes)
        self.memory.vram[offset : offset + view.nbytes] = view
        self.bus_written(offset, view.nbytes, system=False)

    def bus_written(self, address: int, nbytes: int, *, system: bool) -> None:
        """Memory behind the GPU changed (VRAM offset ``address``, or PCIe bus ``address`` when ``system``): wake
        the queues whose poll reads it, at whatever GPU address (MC or page-table VA) they poll it through."""
        gpu = self.gpu
        if not system:
            gpu.memory_written(self.memory.fb_base + address, nbytes)
        end = address + nbytes
        for queue in gpu.polling_queues():  # usually none, at most a few
            poll = queue.engine.wait
            if poll is None:
                continue
            found = self.memory.gc_hub.physical(poll.va)  # None: the poll itself faults when it next reads
            if found is not None and found[0] == system and found[1] < end and address < found[1] + poll.nbytes:
                queue.wake(poll.va, poll.nbytes)

    # --- BAR2: doorbells ---
    def doorbell_write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write BAR2; every u64 slot whose low dword the write touches is a doorbell with the slot's value.

        Raises:
            InvalidArgument: the range leaves BAR2.
        """
        view = as_readonly_bytes("data", data)
        check_range("BAR2", offset, view.nbytes, DOORBELL_BAR_BYTES)
        bar = self._doorbell_bar
        bar[offset : offset + view.nbytes] = view
        first = (offset + 4) // DOORBELL_SLOT_BYTES
        for slot in range(first, ceil_div(offset + view.nbytes, DOORBELL_SLOT_BYTES)):
            start = slot * DOORBELL_SLOT_BYTES
            self._route(start, int.from_bytes(bar[start : start + DOORBELL_SLOT_BYTES], "little"))

    def _rings_of(self, offset: int) -> tuple[Callable[[int], bool], ...]:
        """What a doorbell at BAR2 byte ``offset`` reaches as the registers stand: the MEC (its queues match their
        ``PQ_DOORBELL_CONTROL`` when rung), or the SDMA queues whose doorbell registers name ``offset`` (with their
        engine's ``F32_CNTL.halt``); none when the aperture is off or no range holds it."""
        if not RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN.get(self.regs.stored(Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN)):
            return ()
        if self.mec.in_range(offset):
            return (functools.partial(self.mec.doorbell, offset),)
        if self._sdma_range(offset):
            queues = (self.sdma, self.sdma1)
            return tuple(functools.partial(queue.ring, halted=queue.halted) for queue in queues if queue.owns(offset))
        return ()

    def _sdma_range(self, offset: int) -> bool:
        entry = self.regs.stored(Reg.S2A_DOORBELL_ENTRY_2_CTRL)
        if not S2A_DOORBELL_ENTRY_ENABLE.get(entry):
            return False
        start = S2A_DOORBELL_ENTRY_RANGE_OFFSET.get(entry) * _DOORBELL_UNIT_BYTES
        return start <= offset < start + S2A_DOORBELL_ENTRY_RANGE_SIZE.get(entry) * _DOORBELL_UNIT_BYTES

    def _route(self, offset: int, value: int) -> None:
        """Ring the doorbell at BAR2 byte ``offset``: the routes are worked out from the registers once, and again
        only after the host wrote a register (``RegisterFile.generation``), not on every doorbell of a copy."""
        if self._routes_generation != self.regs.generation:
            self._routes_generation = self.regs.generation
            self._offset2rings.clear()
        rings = self._offset2rings.get(offset)
        if rings is None:
            rings = self._offset2rings[offset] = self._rings_of(offset)
        for ring in rings:
            if ring(value):
                return
        self.dropped_doorbells.append(offset)
        _log.info("%s: doorbell at BAR2 %#x = %#x reached no queue", self.gpu.name, offset, value)
