"""The AMD GPU behind an ASM2464 bridge, driven over PCIe TLPs: BAR0 VRAM, BAR2 doorbells, BAR5 queue registers.

This is the USB-path reference driver (docs/amdgpu.md). The bridge side is the same code on a board
(``Usb3Transport`` over libusb) and on ``MockUSB3``; the GPU side is not yet: the BAR5 queue registers it programs
(an ID register, queue blocks at ``0x1000 + 0x100*n``) are the emulator's own layout, which no real AMD GPU has, so
it cannot bring up real silicon (docs/fidelity.md). It needs only an
:class:`~tinyhil.asm2464.controller.Asm2464Controller` and the :class:`~tinyhil.asm2464.topology.PcieTopology` the
bring-up returned::

    controller = Asm2464Controller(transport)
    gpu = UsbGpu.bring_up(controller)                     # pcie_bringup, then check BAR5 ID and read VRAM_MB
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 16, rptr_va=0x1000, wptr_va=0x1008,
                            doorbell_index=0)             # an AmdQueue whose transport is the UsbGpu
    sdma.submit(sdma_fence(0x2000, 1))
    gpu.wait(lambda: gpu.read_u32(0x2000) == 1, "the fence")    # polls; a stopped queue raises QueueStopped

GPU addresses: VRAM sits at GPU address 0, so a VRAM address is its BAR0 offset; the host reaches VRAM below the
BAR0 size. The bridge's SRAM and windows are at ``SYS_APERTURE + pcie_addr`` for the GPU; the host writes them with
the controller (``scsi_write``, XDATA), not through this class.

Waiting polls: each poll reads the condition, then (if it does not hold) every queue's STATUS, then pauses
``poll_s`` through the transport (wall time on hardware, virtual time on an emulated board), at most
``timeout_s / poll_s + 1`` times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.amdgpu._packet import check_enum, hi32, lo32
from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464.bringup import pcie_bringup
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.topology import PcieBar, PcieTopology
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument, StateError
from tinyhil.spec.amdgpu import (
    BAR5_ID_VALUE,
    COMPUTE_QUEUES,
    DOORBELL_SLOT_BYTES,
    DOORBELL_SLOTS,
    ERROR_CODE_CODE,
    ERROR_CODE_OPCODE,
    ERROR_CODE_SUB_OP,
    SDMA_QUEUE_STRIDE,
    SDMA_QUEUES,
    Bar,
    Bar5,
    ErrorCode,
    QueueKind,
    QueueReg,
    QueueStatus,
    RbCntl,
)
from tinyhil.spec.amdgpu_pm4 import Pm4Op
from tinyhil.spec.amdgpu_sdma import SdmaOp

__all__ = ["UsbGpu"]

REGISTER_BYTES: Final = 4
MB_SHIFT: Final = 20
U32_MASK: Final = 0xFFFF_FFFF
U64_MASK: Final = (1 << 64) - 1
DEFAULT_POLL_S: Final = 0.001
DEFAULT_TIMEOUT_S: Final = 10.0
_STOPPED: Final = QueueStatus.HUNG | QueueStatus.PACKET_ERROR | QueueStatus.MEMORY_FAULT
_OPCODES: Final[dict[QueueKind, type[SdmaOp] | type[Pm4Op]]] = {QueueKind.SDMA: SdmaOp, QueueKind.COMPUTE: Pm4Op}


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name}={value!r}, expected a number of seconds > 0")
    return float(value)


def _block(kind: QueueKind, index: int) -> int:
    """The BAR5 register block of queue ``index`` of ``kind``."""
    count = SDMA_QUEUES if kind is QueueKind.SDMA else COMPUTE_QUEUES
    check_int(f"{kind.name} queue index", index, min_value=0, max_value=count - 1)
    base = Bar5.SDMA0 if kind is QueueKind.SDMA else Bar5.COMPUTE0
    return base + SDMA_QUEUE_STRIDE * index


class UsbGpu:
    """The GPU's three BARs over the bridge, and the :class:`~tinyhil.amdgpu.queue.QueueTransport` its queues use.

    | BAR | what | methods |
    |---|---|---|
    | BAR0 | VRAM (GPU address = BAR0 offset) | ``write_memory``, ``read_memory``, ``read_u32/u64`` |
    | BAR2 | doorbells, 8-byte slots | ``ring_doorbell`` |
    | BAR5 | registers (ID, VRAM_MB, queue blocks at 0x1000/0x1100/0x2000) | ``read_register(s)``, ``write_registers`` |

    Raises (constructor):
        DeviceError: a BAR is missing from ``topology``, or BAR5 ID does not read ``0x48494C31``.
    """

    def __init__(
        self,
        controller: Asm2464Controller,
        topology: PcieTopology,
        *,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._attach_bars(controller, topology, poll_s=poll_s, timeout_s=timeout_s)
        identity, vram_mb = self.read_registers(Bar5.ID, 2)
        if identity != BAR5_ID_VALUE:
            raise DeviceError(
                f"BAR5 ID reads {identity:#010x}, expected {BAR5_ID_VALUE:#010x}: not the tinyhil GPU register "
                "interface (spec/amdgpu.md)",
                op="UsbGpu",
            )
        self.vram_bytes = vram_mb << MB_SHIFT
        self.heap_end = self.vram_bar.size  # the first VRAM address the device's allocator may not use

    def _attach_bars(self, controller: Asm2464Controller, topology: PcieTopology, *, poll_s: float,
                     timeout_s: float) -> None:  # fmt: skip
        """Check the arguments and take BAR0, BAR2 and BAR5 from ``topology`` (every register interface's start).

        Raises:
            InvalidArgument: a bad argument.
            DeviceError: a BAR is missing from ``topology``.
        """
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
                op="UsbGpu",
            )
        self.vram_bar: PcieBar = bars[Bar.VRAM]
        self.doorbell_bar: PcieBar = bars[Bar.DOORBELL]
        self.register_bar: PcieBar = bars[Bar.REGS]
        self._queues: dict[int, AmdQueue] = {}
        self._doorbell_high: dict[int, int] = {}  # per doorbell slot: the high dword this driver last wrote

    def close(self) -> None:
        """Leave the GPU as a later open expects it (the BAR5 layout keeps nothing between opens)."""

    @classmethod
    def bring_up(
        cls,
        controller: Asm2464Controller,
        *,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **bringup_options: Any,
    ) -> UsbGpu:
        """Run :func:`~tinyhil.asm2464.bringup.pcie_bringup` (``bringup_options`` go to it), then open the GPU."""
        return cls(controller, pcie_bringup(controller, **bringup_options), poll_s=poll_s, timeout_s=timeout_s)

    def __repr__(self) -> str:
        vram_mb, bar0_mb = self.vram_bytes >> MB_SHIFT, self.vram_bar.size >> MB_SHIFT
        return f"<UsbGpu {vram_mb} MB VRAM, BAR0 {bar0_mb} MB, {len(self._queues)} queues>"

    @property
    def queues(self) -> tuple[AmdQueue, ...]:
        return tuple(self._queues.values())

    # --- BAR5 ---
    def read_registers(self, offset: int, count: int) -> list[int]:
        """Read ``count`` consecutive 32-bit registers from BAR5 ``offset`` (one PCIe read)."""
        self._check_register(offset, count)
        data = self.controller.pcie_mem_read(self.register_bar.address + offset, count * REGISTER_BYTES)
        return [int.from_bytes(data[i : i + REGISTER_BYTES], "little") for i in range(0, len(data), REGISTER_BYTES)]

    def read_register(self, offset: int) -> int:
        """Read the 32-bit register at BAR5 ``offset``."""
        return self.read_registers(offset, 1)[0]

    def write_registers(self, offset: int, *values: int) -> None:
        """Write consecutive 32-bit registers from BAR5 ``offset`` (one PCIe write, in address order)."""
        self._check_register(offset, len(values))
        data = b"".join(
            check_int("register value", v, min_value=0, max_value=U32_MASK).to_bytes(REGISTER_BYTES, "little")
            for v in values
        )
        self.controller.pcie_mem_write(self.register_bar.address + offset, data)

    def _check_register(self, offset: int, count: int) -> None:
        check_int("count", count, min_value=1)
        check_int("offset", offset, min_value=0, max_value=self.register_bar.size - count * REGISTER_BYTES)
        if offset % REGISTER_BYTES:
            raise InvalidArgument(f"offset={offset:#x}, expected a BAR5 register offset (a multiple of 4)")

    # --- BAR0 / BAR2: the QueueTransport ---
    def _vram_address(self, va: int, nbytes: int) -> int:
        if type(va) is not int or va < 0:
            check_int("va", va, min_value=0)
        if va + nbytes > self.vram_bar.size:
            raise InvalidArgument(
                f"GPU address {va:#x}+{nbytes:#x}, expected VRAM the host reaches through BAR0 (below "
                f"{self.vram_bar.size:#x}); system-aperture addresses are the bridge's memory: use the controller"
            )
        return self.vram_bar.address + va

    def write_memory(self, va: int, data: Any) -> None:
        """Write ``data`` (bytes-like, e.g. a numpy array) to VRAM at GPU address ``va`` through BAR0."""
        if type(data) is bytes and type(va) is int and 0 <= va <= self.vram_bar.size - len(data):
            # ring writes and write pointers: the controller takes bytes as they are
            self.controller.pcie_mem_write(self.vram_bar.address + va, data)
            return
        view = as_readonly_bytes("data", data)
        self.controller.pcie_mem_write(self._vram_address(va, view.nbytes), view)

    def read_memory(self, va: int, nbytes: int) -> bytes:
        """Read ``nbytes`` of VRAM at GPU address ``va`` through BAR0."""
        check_int("nbytes", nbytes, min_value=1)
        return bytes(self.controller.pcie_mem_read(self._vram_address(va, nbytes), nbytes))

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
            and 0 <= value <= U64_MASK
        ):
            check_int("doorbell_index", doorbell_index, min_value=0, max_value=DOORBELL_SLOTS - 1)
            check_int("value", value, min_value=0, max_value=U64_MASK)
        address = self.doorbell_bar.address + doorbell_index * DOORBELL_SLOT_BYTES
        if self._doorbell_high.get(doorbell_index) == value >> 32:
            self.controller.pcie_mem_write(address, (value & U32_MASK).to_bytes(4, "little"))
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

    # --- queues (BAR5 queue blocks) ---
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
        """Set up queue ``index`` of ``kind`` through its BAR5 block and return its :class:`AmdQueue`.

        Zeroes the pointers in VRAM, disables the block if it was left enabled, writes RB_BASE, RB_SIZE_LOG2, the
        pointer addresses and DOORBELL, then sets RB_CNTL.ENABLE (which latches them) and reads it back.

        Raises:
            InvalidArgument: bad ring settings (see :class:`AmdQueue`) or queue index.
            StateError: this driver already runs a queue in that block.
            DeviceError: the GPU refused the settings (RB_CNTL reads 0; the message gives STATUS and ERROR_CODE).
        """
        kind = check_enum("kind", kind, QueueKind)
        block = _block(kind, index)
        if block in self._queues:
            raise StateError(f"{_name(kind, block)} is already set up, expected destroy_queue() first")
        queue = AmdQueue(
            self,
            kind,
            ring_va=ring_va,
            ring_bytes=ring_bytes,
            rptr_va=rptr_va,
            wptr_va=wptr_va,
            doorbell_index=check_int("doorbell_index", doorbell_index, min_value=0, max_value=DOORBELL_SLOTS - 1),
        )
        self._vram_address(ring_va, ring_bytes)
        queue.initialize()
        if self.read_register(block + QueueReg.RB_CNTL) & RbCntl.ENABLE:
            self.write_registers(block + QueueReg.RB_CNTL, 0)  # left enabled: fields latch only on a fresh enable
        self.write_registers(block + QueueReg.RB_BASE_LO, lo32(ring_va), hi32(ring_va), ring_bytes.bit_length() - 1)
        self.write_registers(
            block + QueueReg.RPTR_ADDR_LO, lo32(rptr_va), hi32(rptr_va), lo32(wptr_va), hi32(wptr_va), doorbell_index
        )
        self.write_registers(block + QueueReg.RB_CNTL, int(RbCntl.ENABLE))
        if not self.read_register(block + QueueReg.RB_CNTL) & RbCntl.ENABLE:
            status, code = self.read_registers(block + QueueReg.STATUS, 2)
            raise DeviceError(
                f"{_name(kind, block)}: the GPU refused ring {ring_va:#x}+{ring_bytes:#x}, pointers {rptr_va:#x}/"
                f"{wptr_va:#x}, doorbell {doorbell_index} (RB_CNTL reads 0, STATUS {status:#x}, ERROR_CODE "
                f"{_code_name(ERROR_CODE_CODE.get(code))})",
                op="create_queue",
            )
        self._queues[block] = queue
        return queue

    def destroy_queue(self, queue: AmdQueue) -> None:
        """Clear RB_CNTL of ``queue``'s block: the GPU stops the queue and frees its doorbell.

        Raises:
            InvalidArgument: ``queue`` is not a live queue of this driver.
        """
        self.write_registers(self._block_of(queue) + QueueReg.RB_CNTL, 0)
        del self._queues[self._block_of(queue)]

    def _block_of(self, queue: AmdQueue) -> int:
        for block, mine in self._queues.items():
            if mine is queue:
                return block
        raise InvalidArgument(f"queue={queue!r}, expected a live queue created by this UsbGpu")

    def queue_status(self, queue: AmdQueue) -> QueueStatus:
        """The queue's BAR5 STATUS."""
        return QueueStatus(self.read_register(self._block_of(queue) + QueueReg.STATUS))

    def describe_queue(self, queue: AmdQueue) -> str:
        """``"SDMA queue 0 (BAR5 0x1000): STATUS 0x1 (IDLE), rptr 0x40 of wptr 0x40"`` (reads the device)."""
        block = self._block_of(queue)
        status = QueueStatus(self.read_register(block + QueueReg.STATUS))
        pointers = f"rptr {queue.read_rptr():#x} of wptr {queue.wptr:#x}"
        return f"{_name(queue.kind, block)}: STATUS {int(status):#x} ({status.name or 'running'}), {pointers}"

    def check_queues(self) -> None:
        """Raise for the first queue whose STATUS says it stopped.

        Raises:
            QueueStopped: naming the queue, what stopped it, the opcode and the ring offset.
        """
        for block, queue in self._queues.items():
            status = QueueStatus(self.read_register(block + QueueReg.STATUS))
            if status & _STOPPED:
                raise self._stopped(block, queue, status)

    def _stopped(self, block: int, queue: AmdQueue, status: QueueStatus) -> QueueStopped:
        code, rptr, fault_lo, fault_hi = self.read_registers(block + QueueReg.ERROR_CODE, 4)
        error, opcode, sub_op = ERROR_CODE_CODE.get(code), ERROR_CODE_OPCODE.get(code), ERROR_CODE_SUB_OP.get(code)
        ring_offset = rptr * queue.unit_bytes % queue.ring_bytes
        fault = fault_lo | fault_hi << 32 if status & QueueStatus.MEMORY_FAULT else None
        known = _OPCODES[queue.kind]
        op_name = known(opcode).name if opcode in known._value2member_map_ else "unknown"
        what = "queue hung (POLL_REGMEM/WAIT_REG_MEM ran out of retries)" if status & QueueStatus.HUNG else "stopped"
        where = f" at GPU address {fault:#x}" if fault is not None else ""
        name = _name(queue.kind, block)
        return QueueStopped(
            f"{name}: {what}: {_code_name(error)}{where} in opcode {opcode:#x} ({op_name}, sub-op {sub_op}) at ring "
            f"offset {ring_offset:#x} (STATUS {int(status):#x} {status.name})",
            queue=name,
            status=int(status),
            error_code=error,
            opcode=opcode,
            sub_op=sub_op,
            ring_offset=ring_offset,
            fault_addr=fault,
        )


def _name(kind: QueueKind, block: int) -> str:
    base = Bar5.SDMA0 if kind is QueueKind.SDMA else Bar5.COMPUTE0
    return f"{kind.name} queue {(block - base) // SDMA_QUEUE_STRIDE} (BAR5 {block:#x})"


def _code_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"ERROR_CODE {code:#x}"
