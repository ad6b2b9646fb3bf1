"""The emulated AMD GPU (docs/amdgpu.md): memory and translation, queues, SDMA and PM4 engines, kernel executor.

Modules by block: ``memory`` (the address space, VRAM, the system bus region, the translation seam),
``mappings`` (the flat translation: mappings and the system aperture), ``engine`` (what the engines share), ``sdma``,
``pm4``, ``queues`` (scheduling on the event kernel), ``model_choices`` (the engine model's own queue status and
error codes), ``executor`` (kernels), ``timing``, ``gpu`` (the core),
``pcie`` (what a GPU PCIe function behind the ASM2464 bridge shares). The GPU behind the bridge presents Navi 31's
real register interface: :mod:`tinyhil.emulators.amdgpu.gfx1100` (docs/gfx1100.md).
"""

from __future__ import annotations

from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind

from .aql import AqlEngine, serve_aql
from .engine import EngineServices, Interrupt, InterruptKind, QueueConfig, RingEngine
from .errors import GpuMemoryFault, GpuQueueError, KernelError
from .executor import HostNativeExecutor, KernelExecutor, KernelMemory, Launch
from .gpu import AmdGpu
from .mappings import FlatTranslation, Mapping
from .memory import AddressSpace, HostSpan, IoRegion, Run, Translation, Vram
from .model_choices import ErrorCode, QueueStatus
from .pcie import DEFAULT_GFX_TARGET_VERSION, BridgedFunction
from .pm4 import Pm4Engine
from .queues import Queue
from .sdma import SdmaEngine
from .system_bus import SystemBus
from .timing import DEFAULT_TIMING, GpuTiming

__all__ = [
    "DEFAULT_GFX_TARGET_VERSION",
    "DEFAULT_TIMING",
    "SYS_APERTURE",
    "AddressSpace",
    "AmdGpu",
    "AqlEngine",
    "BridgedFunction",
    "EngineServices",
    "ErrorCode",
    "FlatTranslation",
    "GpuMemoryFault",
    "GpuQueueError",
    "GpuTiming",
    "HostNativeExecutor",
    "HostSpan",
    "Interrupt",
    "InterruptKind",
    "IoRegion",
    "KernelError",
    "KernelExecutor",
    "KernelMemory",
    "Launch",
    "Mapping",
    "Pm4Engine",
    "Queue",
    "QueueConfig",
    "QueueKind",
    "QueueStatus",
    "RingEngine",
    "Run",
    "SdmaEngine",
    "SystemBus",
    "Translation",
    "Vram",
    "serve_aql",
]
