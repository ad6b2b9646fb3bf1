"""The USB-path driver of a gfx1100 (Navi 31) behind the bridge: BAR access, the real bring-up, page tables, queues.

docs/gfx1100.md, "The USB-path driver". :class:`Gfx1100UsbGpu` reaches the GPU's three BARs over the bridge (BAR0
VRAM, BAR2 doorbells, BAR5 Navi 31's registers), is the :class:`~tinyhil.amdgpu.queue.QueueTransport` of its queues
and the :class:`~tinyhil.usbgpu.usb_gpu.UsbGpu` that :class:`~tinyhil.usbgpu.copy.UsbCopy` drives, boots the GPU
(:class:`~tinyhil.usbgpu.gfx1100.boot.Gfx1100Boot`, the IP blocks of :mod:`tinyhil.usbgpu.gfx1100` in order), writes
the VMID 0 page tables, and programs queues through the SDMA block (RB registers) and the MEC block (HQD registers).
:func:`open_usb_gpu` opens it after checking that BAR5 answers as a gfx1100 does (its VRAM size at dword 0xDE3)::

    gpu = open_usb_gpu(Asm2464Controller(transport), firmware=DirectoryFirmware())  # pcie_bringup, then the boot
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 16, rptr_va=0x1000, wptr_va=0x1008)
    sdma.submit(sdma_fence(0x2000, 1))
    gpu.wait(lambda: gpu.read_u32(0x2000) == 1, "the fence")    # polls; a stopped queue raises QueueStopped

GPU address layout (VMID 0, one page table for both hubs):

| GPU address | what | PTEs |
|---|---|---|
| ``0 .. vram_bytes`` (no ``heap_va``) | VRAM (GPU address = VRAM offset = BAR0 offset) | 2 MB leaves (PDE-is-PTE) |
| with ``heap_va``: ``0 .. heap_va`` | VRAM the device's rings and pointers use | 2 MB leaves where aligned |
| with ``heap_va``: ``heap_va .. heap_end`` | the heap: unmapped until :meth:`~Gfx1100UsbGpu.map` | 2 MB / 4 KB |
| ``SYS_APERTURE + 0x200000 ..`` (512 KB) | the bridge's SRAM (the copy windows) | 4 KB system pages |
| ``SYS_APERTURE + 0x800000 .. 0x823000`` | the admin window, sys_buf, the completion-queue window | 4 KB system pages |

The host reaches VRAM below the BAR0 size through BAR0; the bridge's SRAM and windows (the system aperture for the
GPU) it writes with the controller (``scsi_write``, XDATA), not through this class. Opened with ``heap_va`` (as
:class:`~tinyhil.usbgpu.over_usb.UsbAmdDevice` does), the driver maps only the VRAM below it at boot, and
:meth:`~Gfx1100UsbGpu.map` / :meth:`~Gfx1100UsbGpu.unmap` set and clear the heap's entries per allocation
(:mod:`tinyhil.usbgpu.gfx1100.page_tables`), each followed by one TLB flush.

Queues: SDMA queue ``index`` 0 / 1 is queue 0 of SDMA0 / SDMA1 (doorbells at BAR2 bytes 0x800 / 0x808, inside
the S2A port 2 range), the compute queue is HQD me 1 pipe 0 queue 0 (doorbell byte 0x18, inside the MEC range): the
routing the boot programs fixes each queue's doorbell.

A stopped queue reaches the driver as an interrupt vector on IH ring 0 (:mod:`tinyhil.usbgpu.gfx1100.ih`):
:meth:`Gfx1100UsbGpu.check_queues` (between the polls of every wait) reads ``IH_RB_WPTR`` and, when IVs arrived,
raises :class:`QueueStopped` naming the queue, the packet at its read pointer and the ring offset, or the faulting
page of a VM fault; its ``status`` and ``error_code`` are the IV's client id and source id. A queue stays reported
as stopped until it is destroyed.

Waiting polls: each poll reads the condition, then (if it does not hold) :meth:`Gfx1100UsbGpu.check_queues`, then
pauses ``poll_s`` through the transport (wall time on hardware, virtual time on an emulated board), at most
``timeout_s / poll_s + 1`` times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.amdgpu._packet import check_enum
from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.firmware import FirmwareSource
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464.bringup import pcie_bringup
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.topology import PcieBar, PcieTopology
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument, StateError
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, DOORBELL_SLOTS, PAGE_BYTES, SYS_APERTURE, Bar, QueueKind
from tinyhil.spec.amdgpu_pm4 import PM4_HEADER_OPCODE, PM4_HEADER_TYPE, PM4_TYPE_3, Pm4Op
from tinyhil.spec.amdgpu_sdma import SDMA_HEADER_OP, SDMA_HEADER_SUB_OP, SdmaOp
from tinyhil.spec.asm2464 import CQ_WINDOW_BYTES, PCIE_ADMIN_WINDOW, PCIE_CQ_WINDOW, PCIE_SRAM_BASE, SRAM_BYTES
from tinyhil.spec.gfx1100_ih import IH_RING_BYTES, InterruptVector
from tinyhil.usbgpu.gfx1100.boot import Gfx1100Boot
from tinyhil.usbgpu.gfx1100.ih import IhReader, IvMeaning, Report, queue_of
from tinyhil.usbgpu.gfx1100.mec import MEC_DOORBELL
from tinyhil.usbgpu.gfx1100.page_tables import PageTables, check_range
from tinyhil.usbgpu.gfx1100.registers import Gfx1100Registers
from tinyhil.usbgpu.gfx1100.sdma import sdma_doorbell
from tinyhil.usbgpu.usb_gpu import vram_address

__all__ = ["DEFAULT_POLL_S", "DEFAULT_TIMEOUT_S", "Gfx1100UsbGpu", "open_usb_gpu"]

DEFAULT_POLL_S: Final = 0.001
DEFAULT_TIMEOUT_S: Final = 10.0
_REGISTER_BYTES: Final = 4
_U32_MASK: Final = 0xFFFF_FFFF
_U64_MASK: Final = (1 << 64) - 1

# The bridge's memory the copy protocol reaches (docs/asm2464.md): SRAM, and the admin window .. CQ window.
BRIDGE_RANGES: Final = (
    (PCIE_SRAM_BASE, SRAM_BYTES),
    (PCIE_ADMIN_WINDOW, PCIE_CQ_WINDOW + CQ_WINDOW_BYTES - PCIE_ADMIN_WINDOW),
)


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name}={value!r}, expected a number of seconds > 0")
    return float(value)


class Gfx1100UsbGpu:
    """A gfx1100 behind the bridge, booted and mapped (see the module docstring).

    | BAR | what | methods |
    |---|---|---|
    | BAR0 | VRAM (GPU address = BAR0 offset) | ``write_memory``, ``read_memory``, ``read_u32/u64`` |
    | BAR2 | doorbells, 8-byte slots | ``ring_doorbell`` |
    | BAR5 | Navi 31's registers | ``read_register(s)``, ``write_registers`` (the boot's are :attr:`regs`) |

    Raises (constructor):
        InvalidArgument: a bad argument.
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
        if not isinstance(controller, Asm2464Controller):
            raise InvalidArgument(f"controller={controller!r}, expected an Asm2464Controller")
        if not isinstance(topology, PcieTopology):
            raise InvalidArgument(f"topology={topology!r}, expected the PcieTopology pcie_bringup returned")
        self.controller = controller
        self.topology = topology
        self.poll_s = _check_seconds("poll_s", poll_s)
        self.timeout_s = _check_seconds("timeout_s", timeout_s)
        bars = topology.bar_map
        missing = [f"BAR{b.value}" for b in Bar if b not in bars]
        if missing:
            raise DeviceError(
                f"the GPU at {topology.bus}:00.0 lacks {', '.join(missing)} (assigned: {sorted(bars)}), expected "
                "BAR0 VRAM, BAR2 doorbells and BAR5 registers",
                op="open_usb_gpu",
            )
        self.vram_bar: PcieBar = bars[Bar.VRAM]
        self.doorbell_bar: PcieBar = bars[Bar.DOORBELL]
        self.register_bar: PcieBar = bars[Bar.REGS]
        self._queues: dict[int, AmdQueue] = {}
        self._doorbell_high: dict[int, int] = {}  # per doorbell slot: the high dword this driver last wrote
        self.vram_bytes = 0  # the boot reads the chip's size (_map_memory)
        self.heap_end = self.vram_bar.size  # the first VRAM address the device's allocator may not use
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

    @property
    def queues(self) -> tuple[AmdQueue, ...]:
        return tuple(self._queues.values())

    # --- BAR5 ---
    def read_registers(self, offset: int, count: int) -> list[int]:
        """Read ``count`` consecutive 32-bit registers from BAR5 ``offset`` (one PCIe read)."""
        self._check_register(offset, count)
        data = self.controller.pcie_mem_read(self.register_bar.address + offset, count * _REGISTER_BYTES)
        return [int.from_bytes(data[i : i + _REGISTER_BYTES], "little") for i in range(0, len(data), _REGISTER_BYTES)]

    def read_register(self, offset: int) -> int:
        """Read the 32-bit register at BAR5 ``offset``."""
        return self.read_registers(offset, 1)[0]

    def write_registers(self, offset: int, *values: int) -> None:
        """Write consecutive 32-bit registers from BAR5 ``offset`` (one PCIe write, in address order)."""
        self._check_register(offset, len(values))
        data = b"".join(
            check_int("register value", v, min_value=0, max_value=_U32_MASK).to_bytes(_REGISTER_BYTES, "little")
            for v in values
        )
        self.controller.pcie_mem_write(self.register_bar.address + offset, data)

    def _check_register(self, offset: int, count: int) -> None:
        check_int("count", count, min_value=1)
        check_int("offset", offset, min_value=0, max_value=self.register_bar.size - count * _REGISTER_BYTES)
        if offset % _REGISTER_BYTES:
            raise InvalidArgument(f"offset={offset:#x}, expected a BAR5 register offset (a multiple of 4)")

    # --- BAR0 / BAR2: the QueueTransport ---
    def write_memory(self, va: int, data: Any) -> None:
        """Write ``data`` (bytes-like, e.g. a numpy array) to VRAM at GPU address ``va`` through BAR0."""
        if type(data) is bytes and type(va) is int and 0 <= va <= self.vram_bar.size - len(data):
            # ring writes and write pointers: the controller takes bytes as they are
            self.controller.pcie_mem_write(self.vram_bar.address + va, data)
            return
        view = as_readonly_bytes("data", data)
        self.controller.pcie_mem_write(vram_address(self.vram_bar, "va", va, view.nbytes), view)

    def read_memory(self, va: int, nbytes: int) -> bytes:
        """Read ``nbytes`` of VRAM at GPU address ``va`` through BAR0."""
        check_int("nbytes", nbytes, min_value=1)
        return bytes(self.controller.pcie_mem_read(vram_address(self.vram_bar, "va", va, nbytes), nbytes))

    def read_u32(self, va: int) -> int:
        return int.from_bytes(self.read_memory(va, 4), "little")

    def read_u64(self, va: int) -> int:
        return int.from_bytes(self.read_memory(va, 8), "little")

    def ring_doorbell(self, doorbell_index: int, value: int) -> None:
        """Write the u64 ``value`` to doorbell slot ``doorbell_index`` in BAR2.

        A write to a slot's low dword rings it with the whole slot, so while the high dword is what this driver last
        wrote there only the low dword goes out (one TLP instead of two)."""
        if not (
            type(doorbell_index) is type(value) is int
            and 0 <= doorbell_index < DOORBELL_SLOTS
            and 0 <= value <= _U64_MASK
        ):
            check_int("doorbell_index", doorbell_index, min_value=0, max_value=DOORBELL_SLOTS - 1)
            check_int("value", value, min_value=0, max_value=_U64_MASK)
        address = self.doorbell_bar.address + doorbell_index * DOORBELL_SLOT_BYTES
        if self._doorbell_high.get(doorbell_index) == value >> 32:
            self.controller.pcie_mem_write(address, (value & _U32_MASK).to_bytes(4, "little"))
        else:
            self.controller.pcie_mem_write(address, value.to_bytes(DOORBELL_SLOT_BYTES, "little"))
            self._doorbell_high[doorbell_index] = value >> 32

    def wait(self, condition: Callable[[], bool], what: str, *, timeout_s: float | None = None) -> None:
        """Poll until ``condition()`` holds; a queue that stops meanwhile ends the wait at once.

        Raises:
            QueueStopped: a queue of this GPU stopped (hung, bad packet, memory fault) before the condition held.
            DeviceTimeout: the condition did not hold within ``timeout_s`` (default: ``self.timeout_s``).
        """
        limit_s = self.timeout_s if timeout_s is None else _check_seconds("timeout_s", timeout_s)
        polls = int(limit_s / self.poll_s) + 1
        for poll in range(polls):
            if condition():
                return
            self.check_queues()
            if poll + 1 < polls:
                self.controller.transport.pause(self.poll_s)
        states = "; ".join(self.describe_queue(q) for q in self.queues) or "no queues"
        raise DeviceTimeout(f"{what}: not reached after {polls} polls over {limit_s}s ({states})", op="wait")

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
        index: int = 0,
    ) -> AmdQueue:
        """Program queue ``index`` of ``kind`` (SDMA: engine 0 or 1; compute: 0) and return its :class:`AmdQueue`, whose
        transport is this driver and whose doorbell is the one the boot routed to that queue.

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
        vram_address(self.vram_bar, "ring_va", ring_va, ring_bytes)
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

    def stop_of(self, queue: AmdQueue) -> QueueStopped | None:
        """What the IH reported about ``queue`` since it was created (None: nothing; reads the IH's write pointer).

        Raises:
            InvalidArgument: ``queue`` is not a live queue of this driver.
        """
        key = self._key_of(queue)
        self._take_interrupts()
        return self._stops.get(key)

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
                key, error = self._stopped(iv, meaning)
                self._stops.setdefault(key, error)

    def _stopped(self, iv: InterruptVector, meaning: IvMeaning) -> tuple[int, QueueStopped]:
        """The QueueStopped ``iv`` (about a queue: ``meaning``) means, and the queue's key (-1: none of this driver's).
        Its ``status`` / ``error_code`` are the IV's client id / source id, what the chip reported."""
        key, status, code = meaning.key, iv.client_id, iv.source_id
        detail = ""
        if meaning.report is Report.VM_FAULT:
            fault_status, key = self.boot.gmc.clear_fault(mm_hub=meaning.mm_hub)
            hub = "MM hub" if meaning.mm_hub else "GC hub"
            detail = (f"{hub} protection fault at GPU address {meaning.fault_addr:#x} (the page of the access; "
                      f"{hub[:2]}VM_L2_PROTECTION_FAULT_STATUS {fault_status:#x}): no valid PTE there")  # fmt: skip
        queue = self._queues.get(key) if key is not None else None
        if key is None or queue is None:
            return -1, QueueStopped(f"{detail or meaning.report.value}, from no queue of this driver", queue="",
                                    status=status, error_code=code, opcode=0, sub_op=0, ring_offset=0,
                                    fault_addr=meaning.fault_addr)  # fmt: skip
        kind, index = self._kinds[key]
        ring_offset = queue.read_rptr() * queue.unit_bytes % queue.ring_bytes
        header = self.read_u32(queue.ring_va + ring_offset)
        if kind is QueueKind.SDMA:
            opcode, sub_op = SDMA_HEADER_OP.get(header), SDMA_HEADER_SUB_OP.get(header)
            known = opcode in SdmaOp._value2member_map_
            op_name = SdmaOp(opcode).name if known else "unknown"
            hung = opcode == SdmaOp.POLL_REGMEM and meaning.report is Report.SDMA_STOPPED
        else:
            opcode, sub_op = PM4_HEADER_OPCODE.get(header), 0
            known = PM4_HEADER_TYPE.get(header) == PM4_TYPE_3 and opcode in Pm4Op._value2member_map_
            op_name = Pm4Op(opcode).name if known else "unknown"
            hung = False
        name = self._name(kind, index)
        what = detail or f"{meaning.report.value}: {'hung' if hung else 'stopped'}"
        return key, QueueStopped(
            f"{name}: {what} in opcode {opcode:#x} ({op_name}, header {header:#010x}) at ring offset {ring_offset:#x}",
            queue=name,
            status=status,
            error_code=code,
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
