"""Reference driver pieces for AMD GPUs: SDMA and PM4 packet builders and the ring-buffer queue object.

The same code drives the emulated GPU directly, over BAR0/BAR2 on the USB path, and over mmaps on the KFD path;
only the :class:`QueueTransport` differs. On the USB path the transport is the gfx1100 driver,
:class:`tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`, which reaches the GPU's BARs over the bridge.
"""

from __future__ import annotations

from .errors import KernelLoadError, QueueStopped
from .pm4 import (
    pm4_acquire_mem,
    pm4_dispatch_direct,
    pm4_header,
    pm4_indirect_buffer,
    pm4_launch,
    pm4_launch_kernel,
    pm4_nop,
    pm4_release_mem,
    pm4_set_sh_reg,
    pm4_set_uconfig_reg,
    pm4_wait_reg_mem,
    pm4_write_data,
)
from .queue import AmdQueue
from .queue_transport import QueueTransport
from .sdma import (
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_header,
    sdma_indirect,
    sdma_nop,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_trap,
    sdma_write,
)

__all__ = [
    "AmdQueue",
    "KernelLoadError",
    "QueueStopped",
    "QueueTransport",
    "pm4_acquire_mem",
    "pm4_dispatch_direct",
    "pm4_header",
    "pm4_indirect_buffer",
    "pm4_launch",
    "pm4_launch_kernel",
    "pm4_nop",
    "pm4_release_mem",
    "pm4_set_sh_reg",
    "pm4_set_uconfig_reg",
    "pm4_wait_reg_mem",
    "pm4_write_data",
    "sdma_const_fill",
    "sdma_copy_linear",
    "sdma_fence",
    "sdma_header",
    "sdma_indirect",
    "sdma_nop",
    "sdma_poll_regmem",
    "sdma_timestamp",
    "sdma_trap",
    "sdma_write",
]
