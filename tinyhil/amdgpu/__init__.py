"""Reference driver pieces for AMD GPUs: SDMA and PM4 packet builders and the ring-buffer queue object.

The same code drives the emulated GPU directly, over BAR0/BAR2 on the USB path, and over mmaps on the KFD path;
only the :class:`QueueTransport` differs. On the USB path the transport is the gfx1100 driver,
:class:`tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`, which reaches the GPU's BARs over the bridge.
"""

from __future__ import annotations

from . import pm4, sdma
from .errors import KernelLoadError, QueueStopped
from .pm4 import *  # noqa: F403  (the PM4 packet builders: pm4.__all__)
from .queue import AmdQueue
from .queue_transport import QueueTransport
from .sdma import *  # noqa: F403  (the SDMA packet builders: sdma.__all__)

__all__ = ["AmdQueue", "KernelLoadError", "QueueStopped", "QueueTransport"]
__all__ += pm4.__all__
__all__ += sdma.__all__
