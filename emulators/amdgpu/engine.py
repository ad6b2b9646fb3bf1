"""The ring engine the SDMA and PM4 engines share: ring and IB fetch, decode and dispatch, pointers, polls, stops.

An engine drains one queue. :meth:`RingEngine.execute` runs at most one packet and returns the units it consumed
(bytes for SDMA, dwords for PM4; 0 = stalled: idle, waiting on a poll, waiting for the rest of a packet, or
stopped). The :class:`~tinyhil.emulators.amdgpu.queues.Queue` calls it on the event kernel and charges
``cost_ns`` of virtual time per packet. Packets take effect at the instant they execute; the engine is then busy
for their cost. Queue configuration, engine services and interrupts live in ``services``; the packet vocabulary
(results, errors, IB frames, poll waits) in ``packets``.

A run of NOPs (in the ring or an IB) is one step: the engine finds where the run ends with a vectorised scan of
the packet headers (numpy, in chunks that double from 64 to 64 Ki dwords: ``nop_scan``) and charges
``packet_ns`` per NOP, as if it had run them one by one. A NOP does nothing but take time (its body is skipped,
never fetched), so the queue's state and every virtual timestamp come out the same (``bulk_nops = False`` runs
them one by one; a property test holds the two paths equal); only the read pointer moves to the end of the run at
its start, as it does for any other packet.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import IntEnum
from typing import ClassVar, Final

import numpy as np

from tinyhil.spec.amdgpu import COMPARE_OPERATORS, CompareFunction, QueueKind

from .errors import GpuMemoryFault
from .model_choices import ErrorCode, QueueStatus
from .nop_scan import NOP_SCAN_MAX_DWORDS, NOP_SCAN_MIN_DWORDS, walk_nops
from .packets import DONE, ENTER, PREFETCH_BYTES, WAIT, IbFrame, OpResult, Packet, PacketError, PollWait
from .services import EngineServices, Interrupt, InterruptKind, QueueConfig

__all__ = ["EngineServices", "Interrupt", "InterruptKind", "QueueConfig", "RingEngine"]

_NO_ERROR: Final = ErrorCode.NONE
_NO_OPCODE: Final[int | None] = None  # typed: after a reset, mypy still sees ``_opcode`` as int | None
_NATIVE_VIEWS: Final = sys.byteorder == "little"  # native "I" / "Q" memoryviews equal "<u4" / "<u8" only here


class RingEngine:
    """Base of the SDMA and PM4 engines: ring and IB fetch, pointers, polls, stops. See the module docstring."""

    KIND: ClassVar[QueueKind]
    MAX_IB_DEPTH: ClassVar[int]
    OPCODE_NAMES: ClassVar[type[IntEnum]]
    NOP_OPCODE: ClassVar[int]

    # subclasses may add a __dict__
    __slots__ = (
        "_activity",
        "_ibs",
        "_kernel",
        "_memory",
        "_opcode",
        "_ops",
        "_packet_bytes",
        "_packet_ns",
        "_ring_bytes",
        "_ring_words",
        "_rptr_word",
        "_sub_op",
        "_views_generation",
        "_wptr_word",
        "bulk_nops",
        "config",
        "cost_ns",
        "error_code",
        "error_message",
        "error_opcode",
        "error_rptr",
        "error_status",
        "error_sub_op",
        "fault_va",
        "name",
        "queue_id",
        "rptr",
        "services",
        "stall",
        "unit_bytes",
        "wait",
        "wptr",
    )

    def __init__(self, services: EngineServices, config: QueueConfig, queue_id: int, name: str) -> None:
        self.services = services
        self.config = config
        self.queue_id = queue_id
        self.name = name
        self.unit_bytes = config.kind.unit_bytes
        # what every packet uses, taken out of services / config / timing once
        self._memory = services.memory
        self._kernel = services.kernel
        self._packet_ns = services.timing.packet_ns
        self._ring_bytes = config.ring_bytes
        self.bulk_nops = True  # a model option, not state: False runs NOPs one by one (the reference path)
        self.reset()

    def reset(self) -> None:
        """Power-on state: pointers at 0, no error, nothing pending."""
        self.rptr = 0
        self.wptr = 0
        self.cost_ns = 0
        self.stall = "not started"
        self.error_status = QueueStatus(0)
        self.error_code = ErrorCode.NONE
        self.error_rptr = 0
        self.error_opcode = 0
        self.error_sub_op = 0
        self.fault_va: int | None = None
        self.error_message = ""
        self.wait: PollWait | None = None
        self._ibs: list[IbFrame] = []
        self._opcode: int | None = None  # of the packet being executed
        self._activity = "packet fetch"  # what the engine does while no opcode is decoded
        self._sub_op = 0
        self._packet_bytes = 0  # of the packet being executed
        self._ops: dict[int, Callable[[Packet], OpResult]] = self._op_table()
        # Live views of the ring and pointers (None: not one mapping); retaken when AddressSpace.generation moves.
        self._views_generation = -1
        self._ring_words: memoryview | None = None
        self._rptr_word: memoryview | None = None
        self._wptr_word: memoryview | None = None

    def _op_table(self) -> dict[int, Callable[[Packet], OpResult]]:
        raise NotImplementedError

    def _packet_dwords(self, header: int, prefetched: Packet) -> int | None:
        """Decode ``header`` into ``_opcode``/``_sub_op``; the packet's size in dwords (None: more must arrive to tell).
        ``prefetched``: the packet's first dwords (up to 8; fewer only when no more are available)."""
        raise NotImplementedError

    def _nop_dwords(self, words: np.ndarray) -> np.ndarray:
        """For each dword of ``words`` (uint32), the size in dwords of the NOP packet it would head, else 0: the
        vectorised form of :meth:`_packet_dwords` for NOP headers."""
        raise NotImplementedError

    # --- state ---
    @property
    def stopped(self) -> bool:
        return self.error_code is not ErrorCode.NONE

    @property
    def idle(self) -> bool:
        return not self.stopped and self.wait is None and not self._ibs and self.rptr == self.wptr

    @property
    def status(self) -> QueueStatus:
        return self.error_status | (QueueStatus.IDLE if self.idle else QueueStatus(0))

    def describe(self) -> str:
        """One line: what the engine is doing or why it stopped."""
        if self.stopped:
            return self.error_message
        if self.wait is not None:
            return f"{self.name}: waiting: {self._opcode_name()} at {self._where()} for {self.wait.condition}"
        doing = "idle" if self.idle else self.stall
        return f"{self.name}: {doing} (rptr {self.rptr:#x}, wptr {self.wptr:#x})"

    def _ring_offset(self) -> int:
        return (self.rptr * self.unit_bytes) % self.config.ring_bytes

    def _where(self) -> str:
        ring = f"ring offset {self._ring_offset():#x}"
        if not self._ibs:
            return ring
        frame = self._ibs[-1]
        return f"IB {frame.base_va:#x} offset {frame.pos_bytes:#x} (called from {ring})"

    def _opcode_name(self) -> str:
        if self._opcode is None:
            return self._activity
        try:
            return self.OPCODE_NAMES(self._opcode).name
        except ValueError:
            return f"opcode {self._opcode:#x}"

    # --- execution ---
    def execute(self) -> int:
        """Run at most one packet, or one run of NOPs; return the units consumed (0: stalled, see ``stall`` /
        ``wait``). The steps: :meth:`_fetch` the bytes available, re-check a pending poll, :meth:`_decode` the packet
        at the read position, :meth:`_dispatch` it."""
        self.cost_ns = 0
        if self.error_code is not _NO_ERROR:  # ``stopped``
            return 0
        try:
            available = self._fetch()
            if not available:
                return 0
            wait = self.wait
            if wait is not None and wait.packet_bytes <= available:
                return self._recheck(wait)
            prefetched = self._decode(available)
            if prefetched is None:
                return 0
            return self._dispatch(prefetched, available)
        except GpuMemoryFault as fault:
            self._stop(
                QueueStatus.MEMORY_FAULT,
                ErrorCode.MEMORY_FAULT,
                f"{fault} in {self._opcode_name()} at {self._where()}",
                fault_va=fault.va,
            )
        except PacketError as error:
            self._stop(error.status, error.code, f"{error} at {self._where()}")
        return 0

    def _fetch(self) -> int:
        """The bytes the engine can read at its position: the rest of the innermost unfinished IB (finished ones
        return to their caller), else the ring up to the write pointer, read from memory (0: idle)."""
        if self._memory.generation != self._views_generation:
            self._load_views()
        ibs = self._ibs
        while ibs and ibs[-1].pos_bytes >= ibs[-1].size_bytes:
            self._advance(ibs.pop().caller_units * self.unit_bytes)
        if ibs:
            frame = ibs[-1]
            return frame.size_bytes - frame.pos_bytes
        self._opcode, self._sub_op, self._activity = _NO_OPCODE, 0, "write pointer read"
        pointer = self._wptr_word
        wptr = pointer[0] if pointer is not None else self._memory.read_u64(self.config.wptr_va)
        rptr = self.rptr
        available = (wptr - rptr) * self.unit_bytes
        if wptr < rptr or available > self._ring_bytes or available % 4:
            raise self._bad_wptr(wptr)
        self.wptr = wptr
        if not available:
            self.stall = "idle"
        return available

    def _decode(self, available: int) -> Packet | None:
        """Read the packet's first dwords (one read covers most packets) and decode its header into ``_opcode`` /
        ``_sub_op`` and its size into ``_packet_bytes``; returns the dwords read, or None while the rest of the
        packet has not arrived (``stall`` says so)."""
        self._opcode, self._sub_op, self._activity = _NO_OPCODE, 0, "packet fetch"
        prefetched = self._read_packet(PREFETCH_BYTES if available >= PREFETCH_BYTES else available // 4 * 4)
        if not prefetched:
            raise PacketError(ErrorCode.BAD_WPTR, f"write pointer {self.wptr:#x} ends inside a dword")
        dwords = self._packet_dwords(prefetched[0], prefetched)
        if dwords is None or dwords * 4 > available:
            ibs = self._ibs
            room = ibs[-1].size_bytes - ibs[-1].pos_bytes if ibs else self._ring_bytes  # >= available
            if dwords is not None and dwords * 4 > room:
                what = "the rest of the IB" if ibs else f"the {room:#x}-byte ring"
                raise PacketError(
                    ErrorCode.BAD_PACKET, f"{self._opcode_name()} packet of {dwords} dwords is longer than {what}"
                )
            self.stall = f"waiting for the rest of a {self._opcode_name()} packet at {self._where()}"
            return None
        self._packet_bytes = dwords * 4
        return prefetched

    def _dispatch(self, prefetched: Packet, available: int) -> int:
        """Run the decoded packet (a NOP run as one step; a packet longer than ``prefetched`` is read whole first)
        and account for it: cost, read pointer, state; returns the units consumed (0: it waits on a poll)."""
        packet_bytes = self._packet_bytes
        dwords = packet_bytes // 4
        fetched = len(prefetched)
        if self._opcode == self.NOP_OPCODE:  # its body is skipped, not fetched
            if self.bulk_nops:
                return self._run_nops(packet_bytes, available)
            packet = prefetched
        elif dwords == fetched:
            packet = prefetched
        elif dwords < fetched:
            packet = prefetched[:dwords]
        else:
            packet = self._read_packet(packet_bytes)
        assert self._opcode is not None  # _decode decoded it
        result = self._ops[self._opcode](packet)
        if result is WAIT:
            return 0
        self.cost_ns += self._packet_ns
        self.wait = None
        if result is DONE:
            self._advance(packet_bytes)
        self.stall = "running"
        return packet_bytes // self.unit_bytes

    def _run_nops(self, first_bytes: int, available_bytes: int) -> int:
        """Run the NOP at the read position (``first_bytes`` long, complete) and every whole NOP right after it
        that the IB or the ring (up to its end: a run does not wrap) holds, as one step; return the units consumed.

        Costs ``packet_ns`` per NOP, and reads what one NOP at a time would have read (each header's prefetch, never
        a NOP's body): a dword the run cannot read ends it, and the packet there faults when the engine reaches it
        on its own. A ring that is not one live view (in the system aperture, or split) runs its NOPs one by one.
        """
        at, packets = first_bytes // 4, 1
        ring_words: np.ndarray | None = None
        if self._ibs:
            frame = self._ibs[-1]
            base_va, limit = frame.base_va + frame.pos_bytes, available_bytes // 4
        elif self._ring_words is not None:
            offset = (self.rptr * self.unit_bytes) % self._ring_bytes
            limit = min(available_bytes, self._ring_bytes - offset) // 4
            ring_words = np.frombuffer(self._ring_words, np.uint32)[offset // 4 : offset // 4 + limit]
        else:
            limit = at
        chunk = NOP_SCAN_MIN_DWORDS
        while at < limit:
            count = min(chunk, limit - at)
            if ring_words is not None:
                words = ring_words[at : at + count]
            else:
                # The read reaches the prefetch of the chunk's last header, as a one-by-one fetch would.
                lookahead = min(PREFETCH_BYTES // 4 - 1, limit - at - count)
                try:
                    words = np.frombuffer(self._memory.read(base_va + at * 4, (count + lookahead) * 4), "<u4")
                except GpuMemoryFault:
                    if count == 1:
                        break
                    chunk = count // 2  # close in on the first dword the run cannot read
                    continue
                words = words[:count]
            run_dwords, run_packets, more = walk_nops(self._nop_dwords(words), limit - at)
            at += run_dwords
            packets += run_packets
            if not more:
                break
            chunk = min(2 * chunk, NOP_SCAN_MAX_DWORDS)
        self.cost_ns += packets * self._packet_ns
        self.wait = None
        self._advance(at * 4)
        self.stall = "running"
        return at * 4 // self.unit_bytes

    def _bad_wptr(self, wptr: int) -> PacketError:
        return PacketError(
            ErrorCode.BAD_WPTR,
            f"write pointer {wptr:#x} at {self.config.wptr_va:#x} is unusable: read pointer {self.rptr:#x}, "
            f"expected rptr <= wptr <= rptr + ring size, whole dwords apart",
        )

    def _recheck(self, wait: PollWait) -> int:
        """Re-evaluate the poll the engine waits on (its packet stays decoded); return the units it consumed."""
        self._opcode, self._sub_op = wait.opcode, wait.sub_op
        value = self._memory.read_u32(wait.va) & wait.mask
        if not wait.compare(value, wait.reference):
            if wait.deadline_ns is not None and self._kernel.now_ns >= wait.deadline_ns:
                raise self._hung(wait, value)
            return 0
        self.cost_ns += self._packet_ns
        self.wait = None
        packet_bytes = wait.packet_bytes
        self._advance(packet_bytes)
        self.stall = "running"
        return packet_bytes // self.unit_bytes

    def _load_views(self) -> None:
        """Take live native-order views of the ring and the pointers (hot: kept until the GPU's mappings change)."""
        memory, config = self.services.memory, self.config
        ring = memory.array(config.ring_va, config.ring_bytes, "<u4") if _NATIVE_VIEWS else None
        rptr = memory.array(config.rptr_va, 8, "<u8") if _NATIVE_VIEWS else None
        wptr = memory.array(config.wptr_va, 8, "<u8") if _NATIVE_VIEWS else None
        self._ring_words = None if ring is None else ring.data.cast("B").cast("I")
        self._rptr_word = None if rptr is None else rptr.data.cast("B").cast("Q")
        self._wptr_word = None if wptr is None else wptr.data.cast("B").cast("Q")
        self._views_generation = memory.generation

    def _read_packet(self, nbytes: int) -> Packet:
        memory = self._memory
        if self._ibs:
            frame = self._ibs[-1]
            data = bytes(memory.read(frame.base_va + frame.pos_bytes, nbytes))
        else:
            size = self._ring_bytes
            offset = (self.rptr * self.unit_bytes) % size
            ring = self._ring_words
            if ring is not None and offset + nbytes <= size:  # the common case: one slice of a live view
                return ring[offset // 4 : (offset + nbytes) // 4].tolist()
            first = min(nbytes, size - offset)
            data = bytes(memory.read(self.config.ring_va + offset, first))
            if first < nbytes:
                data += bytes(memory.read(self.config.ring_va, nbytes - first))
        words: list[int] = np.frombuffer(data, "<u4").tolist()
        return words

    def _advance(self, nbytes: int) -> None:
        if self._ibs:
            self._ibs[-1].pos_bytes += nbytes
            return
        self.rptr = rptr = self.rptr + nbytes // self.unit_bytes
        self._opcode, self._sub_op, self._activity = _NO_OPCODE, 0, "read pointer write-back"
        # The engine's own bookkeeping: written without waking pollers (no queue polls another's read pointer).
        if self._memory.generation != self._views_generation:  # an op changed the mappings
            self._load_views()
        pointer = self._rptr_word
        if pointer is not None:
            pointer[0] = rptr
        else:
            self._memory.write_u64(self.config.rptr_va, rptr, notify=False)

    def _stop(self, status: QueueStatus, code: ErrorCode, message: str, *, fault_va: int | None = None) -> None:
        self.error_status = status
        self.error_code = code
        self.error_rptr = self.rptr
        self.error_opcode = self._opcode or 0
        self.error_sub_op = self._sub_op
        self.fault_va = fault_va
        self.error_message = f"{self.name}: {message}"
        self.wait = None
        kind = InterruptKind.MEMORY_FAULT if code is ErrorCode.MEMORY_FAULT else InterruptKind.QUEUE_ERROR
        now = self.services.kernel.now_ns
        self.services.interrupt(Interrupt(kind, self.queue_id, now, fault_va=fault_va, message=self.error_message))

    # --- helpers for the ops ---
    def _bad(self, message: str) -> PacketError:
        return PacketError(ErrorCode.BAD_PACKET, f"{self._opcode_name()}: {message}")

    def _aligned(self, what: str, va: int, alignment: int) -> int:
        if va % alignment:
            raise self._bad(f"{what}={va:#x}, expected a multiple of {alignment}")
        return va

    def _enter_ib(self, va: int, nbytes: int, caller_units: int) -> OpResult:
        if len(self._ibs) >= self.MAX_IB_DEPTH:
            raise self._bad(f"indirect buffers nest at most {self.MAX_IB_DEPTH} deep")
        self._aligned("IB address", va, 4)
        if not nbytes:
            return DONE
        self._ibs.append(IbFrame(va, nbytes, 0, caller_units))
        return ENTER

    def _poll(
        self, va: int, reference: int, mask: int, function: int, interval: int, retry_count: int | None
    ) -> OpResult:
        """Evaluate a memory poll; on failure wait (``retry_count`` None: forever) or, past the retries, hang."""
        if not 0 <= function < len(COMPARE_OPERATORS):
            raise self._bad(f"function={function}, expected 0..6")
        if va % 4:
            self._aligned("poll address", va, 4)
        compare = COMPARE_OPERATORS[function]
        value = self._memory.read_u32(va) & mask
        if compare(value, reference):
            return DONE
        now = self._kernel.now_ns
        ibs = self._ibs
        key = (len(ibs), self.rptr, ibs[-1].pos_bytes if ibs else 0)
        wait = self.wait
        if wait is None or wait.key != key:
            interval_ns = self.services.timing.poll_interval_ns(interval)
            deadline = None if retry_count is None else now + retry_count * interval_ns
            wait = PollWait(
                key,
                va,
                4,
                now,
                interval_ns,
                deadline,
                reference,
                mask,
                function,
                compare,
                retry_count,
                self._packet_bytes,
                self._opcode,
                self._sub_op,
            )
            self.wait = wait
        elif wait.deadline_ns is not None and now >= wait.deadline_ns:
            raise self._hung(wait, value)
        return WAIT

    def _hung(self, wait: PollWait, value: int) -> PacketError:
        """The error of a poll whose retries ran out with ``value`` (masked) still failing its condition."""
        expected = f"expected {CompareFunction(wait.function).name} {wait.reference:#x}"
        return PacketError(
            ErrorCode.POLL_TIMEOUT,
            f"queue hung: {self._opcode_name()} on {wait.va:#x} still unsatisfied after {wait.retry_count} retries "
            f"(mem & {wait.mask:#x} = {value:#x}, {expected})",
            QueueStatus.HUNG,
        )
