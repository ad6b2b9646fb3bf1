"""The USB-path driver of a gfx1100 (Navi 31) behind the bridge: the real bring-up, page tables, real queues.

docs/gfx1100.md, "The USB-path driver". :class:`Gfx1100UsbGpu` is a :class:`~tinyhil.usbgpu.usb_gpu.UsbGpu`
(the same BAR0 / BAR2 access, waits and :class:`~tinyhil.amdgpu.queue.QueueTransport`, so :class:`UsbCopy` and
:class:`UsbAmdDevice` run on it unchanged) whose register side is the chip's: it boots the GPU
(:class:`~tinyhil.usbgpu.gfx1100.boot.Gfx1100Boot`, the IP blocks of :mod:`tinyhil.usbgpu.gfx1100` in order),
writes the VMID 0 page tables, and programs queues through the SDMA block (RB registers) and the MEC block (HQD
registers). :func:`open_usb_gpu` opens it after checking that BAR5 answers as a gfx1100 does (its VRAM size at
dword 0xDE3).

GPU address layout (VMID 0, one page table for both hubs):

| GPU address | what | PTEs |
|---|---|---|
| ``0 .. vram_bytes`` (no ``heap_va``) | VRAM (GPU address = VRAM offset = BAR0 offset) | 2 MB leaves (PDE-is-PTE) |
| with ``heap_va``: ``0 .. heap_va`` | VRAM the device's rings and pointers use | 2 MB leaves where aligned |
| with ``heap_va``: ``heap_va .. heap_end`` | the heap: unmapped until :meth:`~Gfx1100UsbGpu.map` | 2 MB / 4 KB |
| ``SYS_APERTURE + 0x200000 ..`` (512 KB) | the bridge's SRAM (the copy windows) | 4 KB system pages |
| ``SYS_APERTURE + 0x800000 .. 0x823000`` | the admin window, sys_buf, the completion-queue window | 4 KB system pages |

Opened with ``heap_va`` (as :class:`~tinyhil.usbgpu.amd_device.UsbAmdDevice` does), the driver maps only the VRAM
below it at boot, and :meth:`~Gfx1100UsbGpu.map` / :meth:`~Gfx1100UsbGpu.unmap` set and clear the heap's entries
per allocation (:mod:`tinyhil.usbgpu.gfx1100.page_tables`), each followed by one TLB flush.

Queues: SDMA queue ``index`` 0 / 1 is queue 0 of SDMA0 / SDMA1 (doorbells at BAR2 bytes 0x800 / 0x808, inside
the S2A port 2 range), the compute queue is HQD me 1 pipe 0 queue 0 (doorbell byte 0x18, inside the MEC range);
``create_queue``'s ``doorbell_index`` is ignored because the routing fixes each queue's doorbell.

A stopped queue reaches the driver as an interrupt vector on IH ring 0 (:mod:`tinyhil.usbgpu.gfx1100.ih`):
:meth:`Gfx1100UsbGpu.check_queues` (between the polls of every wait) reads ``IH_RB_WPTR`` and, when IVs arrived,
raises :class:`QueueStopped` naming the queue, the packet at its read pointer and the ring offset, or the faulting
page of a VM fault. A queue stays reported as stopped until it is destroyed.
"""

from __future__ import annotations

from typing import Any, Final

from tinyhil.amdgpu._packet import check_enum
from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.firmware import FirmwareSource
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464.bringup import pcie_bringup
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.topology import PcieTopology
from tinyhil.errors import DeviceError, InvalidArgument, StateError
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, SYS_APERTURE, ErrorCode, QueueKind, QueueStatus
from tinyhil.spec.amdgpu_pm4 import PM4_HEADER_OPCODE, PM4_HEADER_TYPE, PM4_TYPE_3, Pm4Op
from tinyhil.spec.amdgpu_sdma import SDMA_HEADER_OP, SDMA_HEADER_SUB_OP, SdmaOp
from tinyhil.spec.asm2464 import CQ_WINDOW_BYTES, PCIE_ADMIN_WINDOW, PCIE_CQ_WINDOW, PCIE_SRAM_BASE, SRAM_BYTES
from tinyhil.spec.gfx1100_ih import IH_RING_BYTES
from tinyhil.usbgpu.gfx1100.boot import Gfx1100Boot
from tinyhil.usbgpu.gfx1100.ih import IhReader, IvMeaning, Report, queue_of
from tinyhil.usbgpu.gfx1100.mec import MEC_DOORBELL
from tinyhil.usbgpu.gfx1100.page_tables import PAGE_BYTES, PageTables, check_range
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers
from tinyhil.usbgpu.gfx1100.sdma import sdma_doorbell
from tinyhil.usbgpu.usb_gpu import DEFAULT_POLL_S, DEFAULT_TIMEOUT_S, UsbGpu

__all__ = ["Gfx1100UsbGpu", "open_usb_gpu"]

# The bridge's memory the copy protocol reaches (spec/asm24.md): SRAM, and the admin window .. CQ window.
BRIDGE_RANGES: Final = (
    (PCIE_SRAM_BASE, SRAM_BYTES),
    (PCIE_ADMIN_WINDOW, PCIE_CQ_WINDOW + CQ_WINDOW_BYTES - PCIE_ADMIN_WINDOW),
)


class Gfx1100UsbGpu(UsbGpu):
    """A gfx1100 behind the bridge, booted and mapped (see the module docstring).

    Raises (constructor):
        DeviceError: a BAR is missing, the discovery binary is not there, or a boot step failed.
        DeviceTimeout: a boot wait did not finish.
    """

    def __init__(
        self,
        controller: Asm2464Controller,
        topology: PcieTopology,
        *,
        firmware: FirmwareSource,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        heap_va: int | None = None,
    ) -> None:
        self._attach_bars(controller, topology, poll_s=poll_s, timeout_s=timeout_s)
        if heap_va is not None and (type(heap_va) is not int or heap_va <= 0 or heap_va % PAGE_BYTES):
            raise InvalidArgument(f"heap_va={heap_va!r}, expected None or a positive multiple of {PAGE_BYTES:#x}")
        self.heap_va = heap_va
        function = (topology.bus, topology.dev, topology.fn)
        self.regs = Gfx1100Registers(controller, self.register_bar.address, self.vram_bar.address, poll_s=self.poll_s,
                                     timeout_s=self.timeout_s, function=function)  # fmt: skip
        self.boot = Gfx1100Boot(self.regs, firmware)
        self._kinds: dict[int, tuple[QueueKind, int]] = {}  # queue key -> (kind, index)
        self._stops: dict[int, QueueStopped] = {}  # queue key (-1: no queue of this driver) -> what stopped it
        self.boot.boot(self._map_memory)
        self.boot.gmc.flush_tlb()  # step 21: the mappings are live for both hubs
        self.ih = IhReader(self.regs, self.boot.layout.ih_ring(0), IH_RING_BYTES)

    def __repr__(self) -> str:
        path = "partial" if self.boot.partial else "cold"
        return f"<Gfx1100UsbGpu {self.vram_bytes >> 20} MB VRAM, {path} boot, {len(self._queues)} queues>"

    def _map_memory(self) -> None:
        """After discovery: VRAM size and heap end, then the page tables (the boot's step 6 points both hubs at
        them): VRAM below ``heap_va`` (all of it when None) and the bridge ranges."""
        layout = self.boot.layout
        self.vram_bytes = layout.vram_bytes
        self.heap_end = min(self.vram_bar.size, layout.base)
        if self.heap_va is not None and self.heap_va >= self.heap_end:
            raise DeviceError(
                f"heap_va={self.heap_va:#x}, expected it below the heap end {self.heap_end:#x} (BAR0 size or boot "
                "memory)",
                op="open_usb_gpu",
            )
        self._tables = PageTables(layout.page_tables, layout.page_tables_end)
        self._tables.map(0, 0, self.vram_bytes if self.heap_va is None else self.heap_va, system=False)
        for pcie_addr, nbytes in BRIDGE_RANGES:
            self._tables.map(SYS_APERTURE + pcie_addr, pcie_addr, nbytes, system=True)
        self._tables.write(self.regs.vram_write)
        self.regs.hdp_flush()

    # --- the heap's mappings ---
    def map(self, va: int, nbytes: int) -> None:
        """Map VRAM ``[va, va + nbytes)`` at GPU address ``va`` (whole 2 MB slots as 2 MB leaves, the rest as 4 KB
        PTEs), write the changed entries through BAR0, then flush the TLBs (section 4; HDP flush first).

        Raises:
            InvalidArgument: not whole pages in ``[heap_va, heap_end)``, or the driver maps all of VRAM at boot
                (``heap_va`` None).
            StateError: a page of the range is mapped already.
            DeviceError: the page-table region is full.
        """
        self._check_heap("map", va, nbytes)
        try:
            self._tables.map(va, va, nbytes, system=False)
        finally:
            self._commit()

    def unmap(self, va: int, nbytes: int) -> None:
        """Clear the entries of ``[va, va + nbytes)`` (valid bit 0), write them, then flush the TLBs: a later
        access there faults (QueueStopped with ``fault_addr`` the page).

        Raises:
            InvalidArgument: as :meth:`map`.
            StateError: a page of the range is not mapped, or the range splits a 2 MB leaf.
        """
        self._check_heap("unmap", va, nbytes)
        try:
            self._tables.unmap(va, nbytes)
        finally:
            self._commit()

    def _check_heap(self, op: str, va: int, nbytes: int) -> None:
        if self.heap_va is None:
            raise InvalidArgument(f"{op}: this driver mapped all of VRAM at boot, expected one opened with heap_va=")
        check_range(op, va, nbytes, self.heap_end)
        if va < self.heap_va:
            raise InvalidArgument(f"{op}(va={va:#x}, ...), expected a heap address from heap_va={self.heap_va:#x}")

    def _commit(self) -> None:
        """Write the entries changed since the last commit (none: nothing happens), then the TLB handshake."""
        if self._tables.write(self.regs.vram_write):
            self.boot.gmc.flush_tlb()  # its HDP flush makes the BAR0 writes visible before the invalidation

    def close(self) -> None:
        """Section 12 fini (after the caller destroyed its queues): the board is left for a partial re-open."""
        for queue in reversed(self.queues):
            self.destroy_queue(queue)
        self.boot.shutdown()

    # --- queues ---
    def create_queue(
        self,
        kind: QueueKind,
        *,
        ring_va: int,
        ring_bytes: int,
        rptr_va: int,
        wptr_va: int,
        doorbell_index: int,
        index: int = 0,
    ) -> AmdQueue:
        """Program queue ``index`` of ``kind`` (SDMA: engine 0 or 1; compute: 0) and return its :class:`AmdQueue`.

        Raises:
            InvalidArgument: bad ring settings or queue index.
            StateError: this driver already runs that queue.
            DeviceError: the GPU did not take the queue (RB_CNTL.rb_enable or CP_HQD_ACTIVE reads 0).
        """
        kind = check_enum("kind", kind, QueueKind)
        limit = 1 if kind is QueueKind.SDMA else 0
        if type(index) is not int or not 0 <= index <= limit:
            raise InvalidArgument(f"{kind.name} queue index={index!r}, expected 0..{limit} on gfx1100")
        key = (0 if kind is QueueKind.SDMA else 2) + index
        if key in self._queues:
            raise StateError(f"{self._name(kind, index)} is already set up, expected destroy_queue() first")
        doorbell = sdma_doorbell(index) if kind is QueueKind.SDMA else MEC_DOORBELL
        queue = AmdQueue(self, kind, ring_va=ring_va, ring_bytes=ring_bytes, rptr_va=rptr_va, wptr_va=wptr_va,
                         doorbell_index=doorbell // DOORBELL_SLOT_BYTES)  # fmt: skip
        self._vram_address(ring_va, ring_bytes)
        queue.initialize()
        self.regs.hdp_flush()
        if kind is QueueKind.SDMA:
            self.boot.sdma.start_queue(index, queue)
        else:
            self.boot.mec.map_queue(queue)
        self._queues[key] = queue
        self._kinds[key] = (kind, index)
        return queue

    def destroy_queue(self, queue: AmdQueue) -> None:
        """Stop ``queue`` as section 8 (SDMA: RB and IB off, doorbell off) or 9 (dequeue the HQD) says.

        Raises:
            InvalidArgument: ``queue`` is not a live queue of this driver.
        """
        key = self._key_of(queue)
        kind, index = self._kinds[key]
        if kind is QueueKind.SDMA:
            self.boot.sdma.stop_queue(index)
        else:
            self.boot.mec.dequeue()
        del self._queues[key], self._kinds[key]
        self._stops.pop(key, None)

    def _key_of(self, queue: AmdQueue) -> int:
        for key, mine in self._queues.items():
            if mine is queue:
                return key
        raise InvalidArgument(f"queue={queue!r}, expected a live queue created by this Gfx1100UsbGpu")

    @staticmethod
    def _name(kind: QueueKind, index: int) -> str:
        return f"SDMA{index} queue 0" if kind is QueueKind.SDMA else "compute HQD me 1 pipe 0 queue 0"

    def queue_status(self, queue: AmdQueue) -> QueueStatus:
        """What the IH reported for ``queue`` (``PACKET_ERROR``, ``MEMORY_FAULT`` or ``HUNG``), else ``IDLE`` when
        its read pointer reached the write pointer (reads the IH's write pointer and the queue's read pointer).

        Raises:
            InvalidArgument: ``queue`` is not a live queue of this driver.
        """
        key = self._key_of(queue)
        self._take_interrupts()
        stopped = self._stops.get(key)
        if stopped is not None:
            return QueueStatus(stopped.status)
        return QueueStatus.IDLE if queue.read_rptr() == queue.wptr else QueueStatus(0)

    def describe_queue(self, queue: AmdQueue) -> str:
        """``"SDMA1 queue 0: rptr 0x40 of wptr 0x40"`` (reads the device)."""
        kind, index = self._kinds[self._key_of(queue)]
        return f"{self._name(kind, index)}: rptr {queue.read_rptr():#x} of wptr {queue.wptr:#x}"

    def check_queues(self) -> None:
        """Raise if IH ring 0 reported a stopped queue or a VM fault (one ``IH_RB_WPTR`` read when it did not).

        Raises:
            QueueStopped: naming the queue, the packet at its read pointer and the ring offset (``opcode``,
                ``ring_offset``), or for a VM fault the faulting page (``fault_addr``).
        """
        self._take_interrupts()
        if self._stops:
            raise next(iter(self._stops.values()))

    def _take_interrupts(self) -> None:
        for iv in self.ih.poll():
            meaning = queue_of(iv)
            if meaning is not None:
                key, error = self._stopped(meaning)
                self._stops.setdefault(key, error)

    def _stopped(self, meaning: IvMeaning) -> tuple[int, QueueStopped]:
        """The QueueStopped an IV about a queue means, and the queue's key (-1: none of this driver's)."""
        key, status, code = meaning.key, QueueStatus.PACKET_ERROR, ErrorCode.BAD_PACKET
        detail = ""
        if meaning.report is Report.VM_FAULT:
            fault_status, key = self.boot.gmc.clear_fault(mm_hub=meaning.mm_hub)
            status, code = QueueStatus.MEMORY_FAULT, ErrorCode.MEMORY_FAULT
            hub = "MM hub" if meaning.mm_hub else "GC hub"
            detail = (f"{hub} protection fault at GPU address {meaning.fault_addr:#x} (the page of the access; "
                      f"{hub[:2]}VM_L2_PROTECTION_FAULT_STATUS {fault_status:#x}): no valid PTE there")  # fmt: skip
        queue = self._queues.get(key) if key is not None else None
        if key is None or queue is None:
            return -1, QueueStopped(f"{detail or meaning.report.value}, from no queue of this driver", queue="",
                                    status=int(status), error_code=int(code), opcode=0, sub_op=0, ring_offset=0,
                                    fault_addr=meaning.fault_addr)  # fmt: skip
        kind, index = self._kinds[key]
        ring_offset = queue.read_rptr() * queue.unit_bytes % queue.ring_bytes
        header = self.read_u32(queue.ring_va + ring_offset)
        if kind is QueueKind.SDMA:
            opcode, sub_op = SDMA_HEADER_OP.get(header), SDMA_HEADER_SUB_OP.get(header)
            known = opcode in SdmaOp._value2member_map_
            op_name = SdmaOp(opcode).name if known else "unknown"
            if opcode == SdmaOp.POLL_REGMEM and meaning.report is Report.SDMA_STOPPED:
                status, code = QueueStatus.HUNG, ErrorCode.POLL_TIMEOUT
        else:
            opcode, sub_op = PM4_HEADER_OPCODE.get(header), 0
            known = PM4_HEADER_TYPE.get(header) == PM4_TYPE_3 and opcode in Pm4Op._value2member_map_
            op_name = Pm4Op(opcode).name if known else "unknown"
        if not known and status is QueueStatus.PACKET_ERROR:
            code = ErrorCode.UNKNOWN_OPCODE
        name = self._name(kind, index)
        what = detail or f"{meaning.report.value}: stopped ({code.name})"
        return key, QueueStopped(
            f"{name}: {what} in opcode {opcode:#x} ({op_name}, header {header:#010x}) at ring offset {ring_offset:#x}",
            queue=name,
            status=int(status),
            error_code=int(code),
            opcode=opcode,
            sub_op=sub_op,
            ring_offset=ring_offset,
            fault_addr=meaning.fault_addr,
        )


def open_usb_gpu(
    controller: Asm2464Controller,
    *,
    firmware: FirmwareSource,
    poll_s: float = DEFAULT_POLL_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    heap_va: int | None = None,
    **bringup_options: Any,
) -> Gfx1100UsbGpu:
    """Bring the PCIe side up, then boot the gfx1100 behind the bridge (:class:`Gfx1100UsbGpu`).

    The boot's first read is ``RCC_CONFIG_MEMSIZE`` (BAR5 dword 0xDE3), which a gfx1100 answers with its VRAM size
    in MB from power-on; a GPU that reads 0 there is not one, and is refused before anything is written
    (:meth:`~tinyhil.usbgpu.gfx1100.boot.Gfx1100Boot.discover`).
    ``heap_va``: map only VRAM below it at boot, and the heap above it per allocation (:meth:`Gfx1100UsbGpu.map`);
    None maps all of VRAM.

    Raises:
        DeviceError: ``RCC_CONFIG_MEMSIZE`` reads 0 (not a gfx1100), a BAR is missing, or a boot step failed.
        DeviceTimeout: a boot wait did not finish.
    """
    topology = pcie_bringup(controller, **bringup_options)
    return Gfx1100UsbGpu(controller, topology, firmware=firmware, poll_s=poll_s, timeout_s=timeout_s, heap_va=heap_va)
