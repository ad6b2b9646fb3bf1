"""The types the AMD device runtime (:mod:`tinyhil.amdgpu.driver`) shares with the paths that implement its hooks
(KFD, USB) and with tests: GPU memory a path allocated and what it is for, the completion event a path may offer, the
ring the runtime submits to, a raw GPU pointer argument, and the multi-GPU device protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from tinyhil.device import Device

__all__ = ["AmdRing", "CompletionEvent", "GpuPointer", "GpuRegion", "MemoryUse", "MultiGpuDevice"]


class GpuPointer(int):
    """A raw GPU address passed to :meth:`~tinyhil.device.Device.exec` as a *pointer* argument (a plain ``int``
    is passed as a value). Lets a test hand a kernel an address no buffer covers, e.g. to provoke a memory fault."""

    def __repr__(self) -> str:
        return f"GpuPointer({int(self):#x})"


class MemoryUse(Enum):
    """What a GPU allocation is for; the path picks the memory (VRAM, GTT, ...) from it."""

    BUFFER = "buffer"  # a user buffer: device memory, reached by the host only through copyin / copyout
    SIGNAL = "signal"  # timelines and timestamps: small, written by the GPU, read by the host (_host_read)
    KERNEL = "kernel"  # code objects and kernel arguments: written by the host (_host_write), read by the GPU


@dataclass(frozen=True, slots=True)
class GpuRegion:
    """GPU memory a path allocated: ``nbytes`` (page multiple) at GPU address ``va``; ``handle`` is the path's own."""

    va: int
    nbytes: int
    use: MemoryUse
    handle: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CompletionEvent:
    """An interrupt the host can sleep on: the GPU writes ``mailbox_va`` (a u64 slot), then interrupts with
    ``event_id`` as its context (KFD: a signal event and its event-page slot)."""

    mailbox_va: int
    event_id: int


@runtime_checkable
class AmdRing(Protocol):
    """A queue as the runtime submits to it (``tinyhil.amdgpu.AmdQueue``, ``tinyhil.kfd.KfdQueue``)."""

    ring_bytes: int

    def submit(self, packets: bytes, /) -> int:
        """Copy ``packets`` (whole dwords) into the ring, publish the write pointer, ring the doorbell."""
        ...


@runtime_checkable
class MultiGpuDevice(Protocol):
    """A device whose machine has several GPUs it can open side by side (capability ``multi-gpu``)."""

    @property
    def gpu_index(self) -> int: ...

    @property
    def gpu_count(self) -> int: ...

    def open_peer(self, index: int) -> Device:
        """Open GPU ``index`` of the same machine (and process) as another device; close it separately."""
        ...
