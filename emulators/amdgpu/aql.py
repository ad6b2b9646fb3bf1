"""The AQL packet processor: the compute queue engine that reads HSA packets (docs/amdgpu.md "AQL packets").

An AQL queue is a compute queue whose packet processor reads 64-byte HSA packets instead of PM4 (the hardware
selects the format per queue, in its queue descriptor): :func:`serve_aql` turns a freshly created compute
:class:`~tinyhil.emulators.amdgpu.queues.Queue` into one. The ring holds packets; the read and write pointers are
packet indices (u64 each; ROCr's ``amd_queue_t.read_dispatch_id`` / ``write_dispatch_id``). The header marks a
slot valid: :meth:`AqlEngine.execute` runs the packet at the read index if its type is not INVALID, then sets the
header back to INVALID and advances the read index; an INVALID header stalls the queue there until the next
doorbell.

| type | packet | model |
|---|---|---|
| 2 | KERNEL_DISPATCH | run the grid on the RDNA3 executor, then decrement the completion signal |
| 3 | BARRIER_AND | wait until every non-null dependency signal is 0, then decrement the completion signal |
| 5 | BARRIER_OR | wait until one non-null dependency signal is 0 (null ones never are), then decrement it |
| 0, 4, 6.. | vendor-specific, agent dispatch, reserved | queue error (UNKNOWN_OPCODE) |

A completion signal is an ``amd_signal_t``: the engine decrements its i64 ``value`` and, when
``event_mailbox_ptr`` is set, writes ``event_id`` there and raises an END_OF_PIPE interrupt carrying it, as the
firmware does for ROCr's interrupt signals. A barrier that cannot complete leaves the queue waiting (``execute``
returns 0) until memory under a dependency is written. A wave trap stops the queue with a queue error naming the
PC and the instruction; a memory fault (the packet, the descriptor, the kernel's accesses) stops it with the
MEMORY_FAULT interrupt, as on the PM4 and SDMA queues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final

import numpy as np

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import COMPARE_OPERATORS, CompareFunction, QueueKind
from tinyhil.spec.hsa_aql import (
    AQL_PACKET_BYTES,
    BARRIER_DEP_SIGNALS,
    HSA_PACKET_HEADER_WIDTH_TYPE,
    AmdQueueOffset,
    AmdSignalOffset,
    BarrierPacketOffset,
    HsaPacketType,
)

from .aql_dispatch import KernelDispatch, dispatch_setup
from .engine import RingEngine
from .errors import GpuMemoryFault, WaveTrap
from .model_choices import ErrorCode, QueueStatus
from .packets import DONE, WAIT, OpResult, Packet, PacketError, PollWait
from .queues import Queue
from .rdna3 import run_dispatch
from .rdna3.executor import DEFAULT_STEP_BUDGET
from .services import EngineServices, Interrupt, InterruptKind, QueueConfig

__all__ = ["AqlEngine", "serve_aql"]

_T = HsaPacketType
_TYPE_MASK: Final = (1 << HSA_PACKET_HEADER_WIDTH_TYPE) - 1
_INVALID_HEADER: Final = int(_T.HSA_PACKET_TYPE_INVALID).to_bytes(2, "little")
_U64: Final = (1 << 64) - 1
# amd_queue_t: the field after read_dispatch_id (the read pointer) gives the structure's base
_BASE_OFFSET_FIELD: Final = AmdQueueOffset.read_dispatch_id_field_base_byte_offset - AmdQueueOffset.read_dispatch_id
_NO_WAIT: Final[PollWait | None] = None
AqlOp = Callable[[bytes], OpResult]


def _i64(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


class AqlEngine(RingEngine):
    """One AQL queue's packet processor (pointers in packets). See the module docstring.

    ``step_budget`` (a model option) bounds each dispatch's group steps; a dispatch past it is a wave trap.
    ``dispatches`` counts the kernel dispatches that completed.
    """

    KIND: ClassVar[QueueKind] = QueueKind.COMPUTE
    MAX_IB_DEPTH: ClassVar[int] = 0
    OPCODE_NAMES: ClassVar[type[HsaPacketType]] = HsaPacketType
    NOP_OPCODE: ClassVar[int] = -1  # AQL has no NOP packet

    def __init__(self, services: EngineServices, config: QueueConfig, queue_id: int, name: str) -> None:
        self.step_budget = DEFAULT_STEP_BUDGET
        super().__init__(services, config, queue_id, name)

    def reset(self) -> None:
        super().reset()
        self.unit_bytes = AQL_PACKET_BYTES
        self.dispatches = 0
        self._barrier_deps: list[int] = []
        self._aql_ops: dict[int, AqlOp] = {
            _T.HSA_PACKET_TYPE_KERNEL_DISPATCH: self._op_kernel_dispatch,
            _T.HSA_PACKET_TYPE_BARRIER_AND: self._op_barrier_and,
            _T.HSA_PACKET_TYPE_BARRIER_OR: self._op_barrier_or,
        }

    def _op_table(self) -> dict[int, Callable[[Packet], OpResult]]:
        return {}  # AQL ops take the packet's 64 bytes: ``_aql_ops``

    # --- where the engine is ---
    @property
    def _slots(self) -> int:
        return self.config.ring_bytes // AQL_PACKET_BYTES

    def _packet_va(self) -> int:
        return self.config.ring_va + (self.rptr % self._slots) * AQL_PACKET_BYTES

    def _where(self) -> str:
        return f"packet index {self.rptr:#x} (ring offset {(self.rptr % self._slots) * AQL_PACKET_BYTES:#x})"

    def describe(self) -> str:
        if self.wait is not None and not self.stopped:
            return f"{self.name}: waiting: {self._opcode_name()} at {self._where()} for {self._barrier_text()}"
        return super().describe()

    # --- execution ---
    def execute(self) -> int:
        """Run the packet at the read index, if it is written; return the packets consumed (0: stalled)."""
        self.cost_ns = 0
        if self.stopped:
            return 0
        try:
            return self._step()
        except GpuMemoryFault as fault:
            self._stop(QueueStatus.MEMORY_FAULT, ErrorCode.MEMORY_FAULT,
                       f"{fault} in {self._opcode_name()} at {self._where()}", fault_va=fault.va)  # fmt: skip
        except WaveTrap as trap:
            self._stop(QueueStatus.PACKET_ERROR, ErrorCode.KERNEL_ERROR, f"{trap} in {self._opcode_name()} at "
                       f"{self._where()}")  # fmt: skip
        except PacketError as error:
            self._stop(error.status, error.code, f"{error} at {self._where()}")
        return 0

    def _step(self) -> int:
        memory = self._memory
        self._opcode, self._activity = None, "write index read"
        wptr = memory.read_u64(self.config.wptr_va)
        if wptr < self.rptr or wptr - self.rptr > self._slots:
            raise PacketError(
                ErrorCode.BAD_WPTR,
                f"write index {wptr:#x} at {self.config.wptr_va:#x} is unusable: read index {self.rptr:#x}, "
                f"expected read index <= write index <= read index + {self._slots} packets",
            )
        self.wptr = wptr
        if wptr == self.rptr:
            self.stall = "idle"
            return 0
        self._activity = "packet fetch"
        packet = bytes(memory.read(self._packet_va(), AQL_PACKET_BYTES))
        packet_type = packet[0] & _TYPE_MASK
        if packet_type == _T.HSA_PACKET_TYPE_INVALID:
            self.stall = f"waiting for the packet at {self._where()} to be written (its header is INVALID)"
            return 0
        self._opcode = packet_type
        op = self._aql_ops.get(packet_type)
        if op is None:
            raise PacketError(ErrorCode.UNKNOWN_OPCODE, f"{self._opcode_name()} packets are not processed "
                              f"(header {int.from_bytes(packet[:2], 'little'):#06x})")  # fmt: skip
        if op(packet) is WAIT:
            return 0
        self.wait = _NO_WAIT
        self.cost_ns += self._packet_ns
        memory.write(self._packet_va(), _INVALID_HEADER)
        self.rptr += 1
        self._opcode, self._activity = None, "read index write-back"
        memory.write_u64(self.config.rptr_va, self.rptr, notify=False)
        self.stall = "running"
        return 1

    # --- signals ---
    def _signal_value(self, handle: int) -> int:
        return _i64(self._memory.read_u64(handle + AmdSignalOffset.value))

    def _complete(self, handle: int) -> None:
        """Decrement the completion signal ``handle`` (0: none); wake its KFD event if it has a mailbox."""
        if not handle:
            return
        memory = self._memory
        value = memory.read_u64(handle + AmdSignalOffset.value)
        memory.write_u64(handle + AmdSignalOffset.value, (value - 1) & _U64)
        mailbox = memory.read_u64(handle + AmdSignalOffset.event_mailbox_ptr)
        if mailbox:
            event_id = memory.read_u32(handle + AmdSignalOffset.event_id)
            memory.write_u32(mailbox, event_id)
            now = self._kernel.now_ns
            self.services.interrupt(Interrupt(InterruptKind.END_OF_PIPE, self.queue_id, now, context=event_id))

    # --- ops ---
    def _op_kernel_dispatch(self, packet: bytes) -> OpResult:
        dispatch = KernelDispatch.decode(packet)
        rptr_va = self.config.rptr_va
        queue_va = rptr_va - self._memory.read_u32(rptr_va + _BASE_OFFSET_FIELD)
        setup = dispatch_setup(self._memory, dispatch, packet_va=self._packet_va(), queue_va=queue_va,
                               dispatch_id=self.rptr)  # fmt: skip
        run_dispatch(self._memory, setup, step_budget=self.step_budget)
        groups = setup.grid[0] * setup.grid[1] * setup.grid[2]
        self.cost_ns += self.services.timing.dispatch_cost_ns(groups)
        self.dispatches += 1
        self._complete(dispatch.completion_signal)
        return DONE

    def _op_barrier_and(self, packet: bytes) -> OpResult:
        return self._barrier(packet, all)

    def _op_barrier_or(self, packet: bytes) -> OpResult:
        return self._barrier(packet, any)

    def _dependencies(self, packet: bytes) -> list[int]:
        start = BarrierPacketOffset.dep_signal
        handles = np.frombuffer(packet[start : start + 8 * BARRIER_DEP_SIGNALS], "<u8")
        return [int(handle) for handle in handles if handle]

    def _barrier(self, packet: bytes, combine: Callable[[list[bool]], bool]) -> OpResult:
        deps = self._dependencies(packet)
        if not combine([self._signal_value(handle) == 0 for handle in deps]):  # all([]) holds, any([]) never
            self._arm(deps)
            return WAIT
        self._complete(int.from_bytes(packet[BarrierPacketOffset.completion_signal :][:8], "little"))
        return DONE

    def _arm(self, deps: list[int]) -> None:
        """Wait on the dependencies' values: the queue re-runs the barrier when memory under any of them is
        written (the span from the first to the last value; a write between them only costs a re-check)."""
        key = (0, self.rptr, 0)
        if self.wait is not None and self.wait.key == key:
            return
        first = min(deps) + AmdSignalOffset.value if deps else 0
        span = max(deps) + AmdSignalOffset.value + 8 - first if deps else 0  # no dependency: nothing can release it
        equal = CompareFunction.EQUAL
        self.wait = PollWait(key, first, span, self._kernel.now_ns, 0, None, 0, _U64, equal, COMPARE_OPERATORS[equal],
                             None, AQL_PACKET_BYTES, self._opcode, 0)  # fmt: skip
        self._barrier_deps = deps

    def _barrier_text(self) -> str:
        try:
            values = ", ".join(f"{handle:#x}={self._signal_value(handle)}" for handle in self._barrier_deps)
        except GpuMemoryFault as fault:
            values = f"a value is unreadable: {fault}"
        return f"dependency signals to reach 0 ({values})"


def serve_aql(queue: Queue) -> AqlEngine:
    """Make ``queue``, a compute queue that has not run yet, an AQL queue: from now on its packet processor reads
    AQL packets (its ring and pointers stay where they are; the pointers count packets). Returns the engine.

    Raises:
        InvalidArgument: not a compute queue, already started, or a ring that holds no whole packet.
    """
    engine = queue.engine
    if queue.kind is not QueueKind.COMPUTE or engine.stall != "not started" or isinstance(engine, AqlEngine):
        raise InvalidArgument(f"queue={queue!r}, expected a compute queue that has not run yet")
    if queue.config.ring_bytes % AQL_PACKET_BYTES:
        raise InvalidArgument(f"ring of {queue.config.ring_bytes:#x} bytes, expected whole {AQL_PACKET_BYTES}-byte "
                              "packets")  # fmt: skip
    aql = AqlEngine(engine.services, queue.config, queue.id, f"AQL queue {queue.id}")
    queue.engine = aql
    return aql
