"""The AMD device runtime shared by every path to an AMD GPU (KFD, USB): SDMA and PM4 work, signals, timestamps.

:class:`AmdDeviceBase` implements the device runtime seam (:class:`tinyhil.device.DeviceBase`) with GPU work:

| operation | how | queue |
|---|---|---|
| ``fill`` | SDMA CONST_FILL (byte fill) | SDMA |
| ``copy`` | SDMA COPY_LINEAR, split at 1 GB | SDMA |
| ``exec`` | code object and kernel arguments in GPU memory, PM4 SET_SH_REG + DISPATCH_DIRECT | compute |
| ``timestamp`` | SDMA TIMESTAMP (100 MHz GPU counter), read back | SDMA |
| ``synchronize`` | wait for every queue's timeline signal | - |

Programs: the first ``exec`` of a program loads its shared object on the host, as the host-native executor of
the emulated GPUs will (and as ROCr loads a code object before its first dispatch); one that cannot load raises
:class:`~tinyhil.amdgpu.KernelLoadError` naming the program and the loader's message, before anything is submitted.

Signals: each queue has a *timeline*: a u64 in GPU memory the engine writes after every submission (SDMA FENCE /
PM4 RELEASE_MEM) with the submission's sequence number. Work is ordered across queues: a submission that follows
unfinished work on another queue first waits on that queue's timeline on the GPU (SDMA POLL_REGMEM / PM4
WAIT_REG_MEM, greater-or-equal on the low dword: 2**32 submissions per queue). When the path offers a completion
event (:meth:`AmdDeviceBase._completion_event`, KFD: a signal event), every fence is followed by a write of the
event's mailbox and an interrupt naming it (SDMA TRAP / RELEASE_MEM int_sel), so the host sleeps instead of
polling. Profile events carry GPU timestamps written before and after each operation (SDMA TIMESTAMP, RELEASE_MEM
TIMESTAMP), read when the work is known complete.

Hooks a path implements (all ``_``-prefixed; see each docstring): ``_gpu_alloc``, ``_gpu_free``, ``_host_write``,
``_host_read``, ``_create_queue``, ``_completion_event``, ``_wait``, ``_release``, plus ``_copyin`` / ``_copyout``
of :class:`~tinyhil.device.DeviceBase` (use :meth:`AmdDeviceBase._dma` to run a copy on the SDMA queue and wait)
and optionally ``_copyout_bytes``. ``copyout_into`` hands ``_copyout`` the caller's own memory, so a path's
``_copyout`` should write ``out`` straight from its staging memory (one host copy per byte, no temporary).
A subclass calls :meth:`AmdDeviceBase._start` at the end of its ``__init__``, once its hooks can run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from tinyhil.align import round_up
from tinyhil.amdgpu._loader import load_error
from tinyhil.amdgpu.errors import KernelLoadError
from tinyhil.amdgpu.gpu_kernel import GpuKernel, is_amdgpu_code_object, load_program_kernel
from tinyhil.amdgpu.interfaces import AmdRing, CompletionEvent, GpuPointer, GpuRegion, MemoryUse
from tinyhil.amdgpu.pm4 import pm4_launch, pm4_release_mem, pm4_wait_reg_mem
from tinyhil.amdgpu.sdma import (
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
)
from tinyhil.compiler import Compiler
from tinyhil.device import Buffer, DeviceBase, Dim3, KernelArg, Program, requires_open
from tinyhil.errors import DeviceError, StateError
from tinyhil.spec.amdgpu import PAGE_BYTES, TIMESTAMP_PERIOD_NS, CompareFunction, QueueKind
from tinyhil.spec.amdgpu_pm4 import ReleaseMemDataSel, ReleaseMemIntSel
from tinyhil.spec.amdgpu_sdma import SDMA_COPY_LINEAR_MAX_BYTES, FillSize
from tinyhil.spec.code_object import CODE_OBJECT_ALIGN, ArgKind, CodeObject, pack_code_object

__all__ = [
    "AMD_CAPABILITIES",
    "COMPILER_CAPABILITIES",
    "WAIT_TIMEOUT_MS",
    "AmdDeviceBase",
]

# What every AMD runtime does; "compile" and "exec" join when the device has a compiler its GPU can run.
AMD_CAPABILITIES: Final = frozenset({"copyin", "copyout", "copy", "fill", "timestamps", "sdma", "signals"})
COMPILER_CAPABILITIES: Final = frozenset({"compile", "exec", "compute"})
# The default bound of every wait (fence, signal, queue idle) of an AMD device runtime, on every path.
WAIT_TIMEOUT_MS: Final = 30_000
_U32_MASK: Final = 0xFFFF_FFFF
_U64_MASK: Final = (1 << 64) - 1
_SLOT_BYTES: Final = 8
_TIMESTAMP_SLOT: Final = 2  # slots 0/1: SDMA / compute timelines; 2: timestamp() scratch
_PROFILE_BYTES: Final = 64 << 10  # 4096 start/end pairs of GPU timestamps between reads
_KERNARG_BYTES: Final = 64 << 10
_KERNARG_ALIGN: Final = 256
_FILL_MAX_BYTES: Final = 1 << 31
_POLL_INTERVAL: Final = 1  # x 16 GPU clocks between re-checks of a cross-queue wait


@dataclass(slots=True)
class _Timeline:
    kind: QueueKind
    ring: AmdRing
    signal_va: int
    slot: int
    submitted: int = 0
    completed: int = 0
    bytes_since_completed: int = 0
    waited: dict[QueueKind, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _PendingProfile:
    name: str
    queue: str
    key: str | None
    start_slot: int
    args: tuple[tuple[str, Any], ...]
    sequence: int  # the submission's timeline value


class AmdDeviceBase(DeviceBase):
    """SDMA / PM4 device runtime over path hooks; see the module docstring. ``wait_timeout_ms`` bounds every wait."""

    def __init__(
        self,
        name: str,
        capabilities: frozenset[str],
        *,
        compiler: Compiler | None = None,
        wait_timeout_ms: int = WAIT_TIMEOUT_MS,
    ) -> None:
        caps = set(AMD_CAPABILITIES | capabilities)
        if compiler is not None:
            caps |= COMPILER_CAPABILITIES
        super().__init__(name, frozenset(caps))
        self.compiler = compiler
        self.wait_timeout_ms = wait_timeout_ms
        self.failure: DeviceError | None = None
        self._started = False
        self._buffers: dict[int, GpuRegion] = {}
        self._code: dict[tuple[str, str, tuple[ArgKind, ...]], GpuRegion] = {}
        self._gpu_kernels: dict[tuple[str, str], GpuKernel] = {}
        self._timelines: dict[QueueKind, _Timeline] = {}
        self._pending: list[_PendingProfile] = []

    # --- hooks a path implements ---------------------------------------------------------------------------------
    def _gpu_alloc(self, nbytes: int, use: MemoryUse) -> GpuRegion:
        """Allocate at least ``nbytes`` (> 0) of GPU memory for ``use``, mapped on this GPU (page aligned)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _gpu_alloc")

    def _gpu_free(self, region: GpuRegion) -> None:
        """Free a region :meth:`_gpu_alloc` returned (no GPU work uses it any more)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _gpu_free")

    def _host_write(self, region: GpuRegion, offset: int, data: bytes | memoryview) -> None:
        """Write ``data`` into a ``SIGNAL``/``KERNEL`` region at byte ``offset`` from the host (small writes)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _host_write")

    def _host_read(self, region: GpuRegion, offset: int, nbytes: int) -> bytes:
        """Read ``nbytes`` of a ``SIGNAL``/``KERNEL`` region at byte ``offset`` from the host (small reads)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _host_read")

    def _create_queue(self, kind: QueueKind) -> AmdRing:
        """Create and return a queue of ``kind`` (SDMA, or COMPUTE for PM4), ready for submissions."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _create_queue")

    def _completion_event(self) -> CompletionEvent | None:
        """An interrupt to raise after each fence, or ``None`` when the host polls (called once, from _start)."""
        return None

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        """Block until ``condition()`` holds, sleeping on the completion event if any, for at most
        ``wait_timeout_ms``. Raises the path's ``DeviceError`` for a GPU fault (naming the address) and
        ``DeviceTimeout`` naming ``what`` when the time runs out."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _wait")

    def _release(self) -> None:
        """Release the path's resources (queues, events, files) when the device closes; regions are freed first."""
        return None

    def _replace_queue(self, kind: QueueKind, ring: AmdRing) -> AmdRing | None:
        """A fresh ``kind`` queue for the stopped ``ring`` (destroyed), or ``None``: the device stays failed."""
        return None

    # --- start and stop ------------------------------------------------------------------------------------------
    def _start(self) -> None:
        """Create the queues, signal memory and profile memory (a subclass calls this at the end of ``__init__``)."""
        self._signals = self._gpu_alloc(PAGE_BYTES, MemoryUse.SIGNAL)
        self._profile_region = self._gpu_alloc(_PROFILE_BYTES, MemoryUse.SIGNAL)
        self._host_write(self._signals, 0, bytes(PAGE_BYTES))
        self._completion = self._completion_event()
        kinds = [QueueKind.SDMA, QueueKind.COMPUTE] if "exec" in self.capabilities else [QueueKind.SDMA]
        for slot, kind in enumerate(kinds):
            self._timelines[kind] = _Timeline(
                kind, self._create_queue(kind), self._signals.va + slot * _SLOT_BYTES, slot
            )
        self._kernargs: GpuRegion | None = None
        self._scratch_region: GpuRegion | None = None
        self._kernarg_offset = 0
        self._profile_next = 0
        self._started = True

    def _close(self) -> None:
        if self._started:
            if self.failure is None:
                self._synchronize()
            regions = [*self._code.values(), self._kernargs, self._scratch_region, self._profile_region, self._signals]
            for region in regions:
                if region is not None:
                    self._gpu_free(region)
            self._code.clear()
        self._release()

    # --- signals -------------------------------------------------------------------------------------------------
    def _signal_value(self, timeline: _Timeline) -> int:
        return int.from_bytes(self._host_read(self._signals, timeline.slot * _SLOT_BYTES, _SLOT_BYTES), "little")

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise StateError(f"{self.name}: the GPU stopped after an earlier error ({self.failure}); reopen the device")

    def _wait_timeline(self, timeline: _Timeline, value: int) -> None:
        self._check_usable()
        if timeline.completed >= value:
            return
        what = f"{timeline.kind.name} queue signal at {timeline.signal_va:#x} to reach {value}"
        seen = timeline.completed

        def reached() -> bool:  # the value the last poll read is the one kept: no second read once it holds
            nonlocal seen
            seen = self._signal_value(timeline)
            return seen >= value

        try:
            self._wait(reached, what)
        except DeviceError as error:
            if not self._recover(timeline):
                self.failure = error
            raise
        timeline.completed = max(timeline.completed, seen)
        if timeline.completed >= timeline.submitted:
            timeline.bytes_since_completed = 0

    def _recover(self, timeline: _Timeline) -> bool:
        """A stopped compute queue replaced, its unfinished work abandoned (timeline marked complete); False: none."""
        ring = self._replace_queue(timeline.kind, timeline.ring) if timeline.kind is QueueKind.COMPUTE else None
        if ring is None:
            return False
        timeline.ring = ring
        done = self._signal_value(timeline)  # abandoned submissions have no end timestamp: no range to record
        self._pending = [e for e in self._pending if e.queue != "compute" or e.sequence <= done]
        timeline.completed = timeline.submitted
        timeline.bytes_since_completed = 0
        self._host_write(self._signals, timeline.slot * _SLOT_BYTES, timeline.submitted.to_bytes(_SLOT_BYTES, "little"))
        return True

    def _fence(self, timeline: _Timeline, value: int) -> list[np.ndarray]:
        event = self._completion
        if timeline.kind is QueueKind.SDMA:
            packets = [sdma_fence(timeline.signal_va, value & _U32_MASK), sdma_fence(timeline.signal_va + 4, 0)]
            if event is not None:
                packets += [sdma_fence(event.mailbox_va, value & _U32_MASK), sdma_trap(event.event_id)]
            return packets
        packets = [pm4_release_mem(timeline.signal_va, value, data_sel=ReleaseMemDataSel.VALUE_64)]
        if event is not None:
            interrupt = ReleaseMemIntSel.INTERRUPT
            data_sel = ReleaseMemDataSel.VALUE_64
            packets.append(pm4_release_mem(event.mailbox_va, value, data_sel=data_sel, int_sel=interrupt,
                                           ctx_id=event.event_id))  # fmt: skip
        return packets

    def _dependencies(self, timeline: _Timeline) -> list[np.ndarray]:
        """GPU-side waits for unfinished work on the other queues, so operations run in program order."""
        packets = []
        for other in self._timelines.values():
            if other is timeline or other.submitted <= max(other.completed, timeline.waited.get(other.kind, 0)):
                continue
            reference = other.submitted & _U32_MASK
            if timeline.kind is QueueKind.SDMA:
                wait = sdma_poll_regmem(other.signal_va, reference, function=CompareFunction.GREATER_EQUAL,
                                        interval=_POLL_INTERVAL)  # fmt: skip
            else:
                wait = pm4_wait_reg_mem(other.signal_va, reference, function=CompareFunction.GREATER_EQUAL,
                                        interval=_POLL_INTERVAL)  # fmt: skip
            packets.append(wait)
            timeline.waited[other.kind] = other.submitted
        return packets

    def _submit(self, kind: QueueKind, packets: Sequence[np.ndarray]) -> int:
        """Submit ``packets`` on the ``kind`` queue behind the cross-queue waits, then its fence; return its value."""
        self._check_usable()
        timeline = self._timelines[kind]
        value = timeline.submitted + 1
        data = b"".join(p.tobytes() for p in [*self._dependencies(timeline), *packets, *self._fence(timeline, value)])
        if timeline.bytes_since_completed + len(data) > timeline.ring.ring_bytes // 2:
            self._wait_timeline(timeline, timeline.submitted)  # keep the ring from overrunning unread packets
        timeline.ring.submit(data)
        timeline.submitted = value
        timeline.bytes_since_completed += len(data)
        return value

    def _submit_profiled(self, kind: QueueKind, packets: Sequence[np.ndarray], name: str, **args: Any) -> int:
        """:meth:`_submit` between two GPU timestamps, recorded as a profile range once the work is complete."""
        key = args.pop("key", None)
        if self._profile_next + 2 * _SLOT_BYTES > self._profile_region.nbytes:
            self._synchronize()
        slot = self._profile_next
        self._profile_next += 2 * _SLOT_BYTES
        start, end = self._profile_region.va + slot, self._profile_region.va + slot + _SLOT_BYTES
        if kind is QueueKind.SDMA:
            stamps = (sdma_timestamp(start), sdma_timestamp(end))
        else:
            stamp = ReleaseMemDataSel.TIMESTAMP
            stamps = (pm4_release_mem(start, data_sel=stamp), pm4_release_mem(end, data_sel=stamp))
        queue = "copy" if kind is QueueKind.SDMA else "compute"
        sequence = self._timelines[kind].submitted + 1  # the value _submit fences this work with
        self._pending.append(_PendingProfile(name, queue, key, slot, tuple(sorted(args.items())), sequence))
        return self._submit(kind, [stamps[0], *packets, stamps[1]])

    def _resolve_profile(self) -> None:
        if not self._pending:
            return
        raw = self._host_read(self._profile_region, 0, self._profile_next)
        ticks = np.frombuffer(raw, "<u8")
        for entry in self._pending:
            index = entry.start_slot // _SLOT_BYTES
            start_ns, end_ns = (int(t) * TIMESTAMP_PERIOD_NS for t in ticks[index : index + 2])
            self._record_range(entry.name, start_ns, end_ns, key=entry.key, queue=entry.queue, **dict(entry.args))
        self._pending.clear()
        self._profile_next = 0

    def _dma(self, dst_va: int, src_va: int, nbytes: int, *, name: str) -> None:
        """Copy ``nbytes`` from GPU address ``src_va`` to ``dst_va`` on the SDMA queue and wait for it (ordered
        after all earlier work); what a path's ``_copyin`` / ``_copyout`` use with their staging memory."""
        self._submit_profiled(QueueKind.SDMA, self._copy_packets(dst_va, src_va, nbytes), name, nbytes=nbytes)
        self._synchronize()

    # --- the seam ------------------------------------------------------------------------------------------------
    @requires_open
    def copyout(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> bytearray:
        """:meth:`DeviceBase.copyout <tinyhil.device.DeviceBase.copyout>`, building the result with
        :meth:`_copyout_bytes` (a path can fill a fresh ``bytearray`` in one pass instead of zeroing it first).
        ``copyout_into`` is :class:`~tinyhil.device.DeviceBase`'s: it runs ``_copyout`` into the caller's memory."""
        self._require("copyout")
        self._check_buffer("buf", buf)
        count = self._span("copyout", buf, nbytes, offset)
        return self._copyout_bytes(buf, count, offset) if count else bytearray()

    def _copyout_bytes(self, buf: Buffer, nbytes: int, offset: int) -> bytearray:
        """``nbytes`` of ``buf`` from ``offset`` as a new bytearray; default: :meth:`_copyout` into a zeroed one."""
        out = bytearray(nbytes)
        self._copyout(buf, memoryview(out), offset)
        return out

    def _alloc(self, nbytes: int) -> int:
        region = self._gpu_alloc(max(nbytes, 1), MemoryUse.BUFFER)
        self._buffers[region.va] = region
        return region.va

    def _free(self, buf: Buffer) -> None:
        region = self._buffers.pop(buf.addr)
        if self.failure is None:
            self._synchronize()  # no queued work may touch memory once it is freed
        self._gpu_free(region)

    @staticmethod
    def _copy_packets(dst_va: int, src_va: int, nbytes: int) -> list[np.ndarray]:
        steps = range(0, nbytes, SDMA_COPY_LINEAR_MAX_BYTES)
        return [
            sdma_copy_linear(dst_va + at, src_va + at, min(SDMA_COPY_LINEAR_MAX_BYTES, nbytes - at)) for at in steps
        ]

    def _fill(self, buf: Buffer, value: int, nbytes: int, offset: int) -> None:
        dst = buf.addr + offset
        steps = range(0, nbytes, _FILL_MAX_BYTES)
        packets = [sdma_const_fill(dst + at, value, min(_FILL_MAX_BYTES, nbytes - at), fill_size=FillSize.BYTE)
                   for at in steps]  # fmt: skip
        self._submit_profiled(QueueKind.SDMA, packets, "fill", nbytes=nbytes)

    def _copy(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        self._submit_profiled(QueueKind.SDMA, self._copy_packets(dst.addr, src.addr, nbytes), "copy", nbytes=nbytes)

    def _compile(self, source: bytes, name: str) -> bytes:
        assert self.compiler is not None  # "compile" is a capability only when a compiler is set
        return self.compiler.compile(source)

    def _code_object(self, program: Program, signature: tuple[ArgKind, ...]) -> GpuRegion:
        key = (program.key, program.name, signature)
        region = self._code.get(key)
        if region is None:
            container = pack_code_object(CodeObject(program.name, signature, program.binary))
            reason = load_error(program.binary, program.name)  # as ROCr loads a code object before its dispatch
            if reason is not None:
                raise KernelLoadError(
                    f"{self.name}: program {program.name!r} ({program.key}) cannot load: {reason}",
                    program=program.name,
                    reason=reason,
                    target=self.name,
                )
            region = self._gpu_alloc(round_up(len(container), CODE_OBJECT_ALIGN), MemoryUse.KERNEL)
            self._host_write(region, 0, container)
            self._code[key] = region
        return region

    def _kernarg_slot(self, nbytes: int) -> int:
        size = round_up(max(nbytes, _SLOT_BYTES), _KERNARG_ALIGN)
        if self._kernargs is None:
            self._kernargs = self._gpu_alloc(_KERNARG_BYTES, MemoryUse.KERNEL)
        if self._kernarg_offset + size > self._kernargs.nbytes:
            self._synchronize()  # every earlier dispatch has read its arguments
            self._kernarg_offset = 0
        offset = self._kernarg_offset
        self._kernarg_offset += size
        return offset

    def _gpu_kernel(self, program: Program) -> GpuKernel:
        """An AMDGPU code object's kernel, loaded and its image in GPU memory (once per program)."""
        key = (program.key, program.name)
        if key not in self._gpu_kernels:
            kernel = load_program_kernel(self.name, program)
            self._code[(*key, ())] = region = self._gpu_alloc(len(kernel.image), MemoryUse.KERNEL)  # page aligned
            self._host_write(region, 0, kernel.image)
            self._gpu_kernels[key] = GpuKernel(kernel.kd, region.va, kernel.image)
        return self._gpu_kernels[key]

    def _scratch(self, nbytes: int) -> int:
        """The GPU address of at least ``nbytes`` of scratch for the next dispatch (0 for none): one buffer, grown
        once earlier dispatches are done with it (docs/amdgpu.md "Scratch")."""
        if not nbytes:
            return 0
        if self._scratch_region is None or self._scratch_region.nbytes < nbytes:
            if self._scratch_region is not None:
                self._synchronize()
                self._gpu_free(self._scratch_region)
                self._scratch_region = None
            self._scratch_region = self._gpu_alloc(nbytes, MemoryUse.BUFFER)
        return self._scratch_region.va

    def _exec(self, program: Program, grid: Dim3, local: Dim3, args: tuple[KernelArg, ...]) -> None:
        words = [(a.addr if isinstance(a, Buffer) else int(a)) & _U64_MASK for a in args]
        if is_amdgpu_code_object(program.binary):  # GPU machine code: tinyhil.amdgpu.gpu_kernel
            kernel = self._gpu_kernel(program)
            offset = self._kernarg_slot(kernel.kernarg_bytes())
            assert self._kernargs is not None  # allocated by _kernarg_slot
            scratch = self._scratch(kernel.scratch_bytes(grid, local))
            data, launch = kernel.launch(self._kernargs.va + offset, words, grid, local, scratch)
        else:
            signature = tuple(ArgKind.POINTER if isinstance(a, Buffer | GpuPointer) else ArgKind.VALUE for a in args)
            code = self._code_object(program, signature)
            data = np.array(words, "<u8").tobytes()
            offset = self._kernarg_slot(len(data))
            assert self._kernargs is not None  # allocated by _kernarg_slot
            launch = pm4_launch(code.va, self._kernargs.va + offset, grid, local)
        if data:
            self._host_write(self._kernargs, offset, data)
        self._submit_profiled(QueueKind.COMPUTE, [launch], program.name, key=program.key, grid=list(grid),
                              local=list(local))  # fmt: skip

    def _synchronize(self) -> None:
        for timeline in self._timelines.values():
            self._wait_timeline(timeline, timeline.submitted)
        self._resolve_profile()

    def _now_ns(self) -> int:
        slot = _TIMESTAMP_SLOT * _SLOT_BYTES
        self._submit(QueueKind.SDMA, [sdma_timestamp(self._signals.va + slot)])
        self._synchronize()
        return int.from_bytes(self._host_read(self._signals, slot, _SLOT_BYTES), "little") * TIMESTAMP_PERIOD_NS
