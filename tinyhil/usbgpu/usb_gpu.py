"""The AMD GPU behind an ASM2464 bridge, driven over PCIe TLPs: what every USB-path GPU driver shares.

:class:`UsbGpu` is the base of the USB-path drivers (docs/amdgpu.md): BAR0 VRAM, BAR2 doorbells and BAR5 register
access over the bridge, the polling waits, and the :class:`~tinyhil.amdgpu.queue.QueueTransport` its queues use
(so :class:`~tinyhil.usbgpu.copy.UsbCopy` and :class:`~tinyhil.usbgpu.amd_device.UsbAmdDevice` run on any of them).
The chip's own side (bring-up, queue programming, what a stopped queue looks like) is the subclass's:
:class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`, opened by :func:`~tinyhil.usbgpu.gfx1100_gpu.open_usb_gpu`::

    controller = Asm2464Controller(transport)
    gpu = open_usb_gpu(controller, firmware=DirectoryFirmware())   # pcie_bringup, then the gfx1100 boot
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=1 << 16, rptr_va=0x1000, wptr_va=0x1008,
                            doorbell_index=0)             # an AmdQueue whose transport is the UsbGpu
    sdma.submit(sdma_fence(0x2000, 1))
    gpu.wait(lambda: gpu.read_u32(0x2000) == 1, "the fence")    # polls; a stopped queue raises QueueStopped

GPU addresses: VRAM sits at GPU address 0, so a VRAM address is its BAR0 offset; the host reaches VRAM below the
BAR0 size. The bridge's SRAM and windows are at ``SYS_APERTURE + pcie_addr`` for the GPU; the host writes them with
the controller (``scsi_write``, XDATA), not through this class.

Waiting polls: each poll reads the condition, then (if it does not hold) :meth:`UsbGpu.check_queues`, then pauses
``poll_s`` through the transport (wall time on hardware, virtual time on an emulated board), at most
``timeout_s / poll_s + 1`` times.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Final

from tinyhil._check import as_readonly_bytes, check_int
from tinyhil.amdgpu.queue import AmdQueue
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.asm2464.topology import PcieBar, PcieTopology
from tinyhil.errors import DeviceError, DeviceTimeout, InvalidArgument
from tinyhil.spec.amdgpu import DOORBELL_SLOT_BYTES, DOORBELL_SLOTS, Bar, QueueKind

__all__ = ["UsbGpu"]

REGISTER_BYTES: Final = 4
MB_SHIFT: Final = 20
U32_MASK: Final = 0xFFFF_FFFF
U64_MASK: Final = (1 << 64) - 1
DEFAULT_POLL_S: Final = 0.001
DEFAULT_TIMEOUT_S: Final = 10.0


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name}={value!r}, expected a number of seconds > 0")
    return float(value)


class UsbGpu(ABC):
    """The GPU's three BARs over the bridge, and the :class:`~tinyhil.amdgpu.queue.QueueTransport` its queues use.

    | BAR | what | methods |
    |---|---|---|
    | BAR0 | VRAM (GPU address = BAR0 offset) | ``write_memory``, ``read_memory``, ``read_u32/u64`` |
    | BAR2 | doorbells, 8-byte slots | ``ring_doorbell`` |
    | BAR5 | registers | ``read_register(s)``, ``write_registers`` |

    An abstract base: a subclass brings the chip up in its constructor (after :meth:`_attach_bars`, which sets
    ``vram_bytes`` to 0 and ``heap_end`` to the BAR0 size until the subclass knows better) and implements the
    queue methods, :meth:`check_queues` (what :meth:`wait` asks between polls) and :meth:`close`.

    Raises (constructor):
        InvalidArgument: a bad argument.
        DeviceError: a BAR is missing from ``topology``.
    """

    vram_bytes: int
    heap_end: int  # the first VRAM address the device's allocator may not use

    def __init__(
        self,
        controller: Asm2464Controller,
        topology: PcieTopology,
        *,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._attach_bars(controller, topology, poll_s=poll_s, timeout_s=timeout_s)

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
        self.vram_bytes = 0  # the subclass reads the chip's size during its bring-up
        self.heap_end = self.vram_bar.size

    def __repr__(self) -> str:
        vram_mb, bar0_mb = self.vram_bytes >> MB_SHIFT, self.vram_bar.size >> MB_SHIFT
        return f"<{type(self).__name__} {vram_mb} MB VRAM, BAR0 {bar0_mb} MB, {len(self._queues)} queues>"

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

    # --- the chip's side: each driver's own ---
    @abstractmethod
    def close(self) -> None:
        """Leave the GPU as a later open expects it (after the caller destroyed its queues)."""

    @abstractmethod
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
        """Program queue ``index`` of ``kind`` on the chip and return its :class:`AmdQueue` (this object is its
        transport)."""

    @abstractmethod
    def destroy_queue(self, queue: AmdQueue) -> None:
        """Stop ``queue`` on the chip and forget it.

        Raises:
            InvalidArgument: ``queue`` is not a live queue of this driver.
        """

    @abstractmethod
    def describe_queue(self, queue: AmdQueue) -> str:
        """One line on what ``queue`` is doing (reads the device): what timeouts and errors show."""

    @abstractmethod
    def check_queues(self) -> None:
        """Raise if the chip reports that a queue stopped.

        Raises:
            QueueStopped: naming the queue and what stopped it.
        """
