"""Where amdkfd's devices are: ``/dev/kfd``, the sysfs topology tree (``kfd_topology.c``) and the DRM render nodes,
and how many GPUs one process sees (``NUM_OF_SUPPORTED_GPUS`` of ``linux/kfd_ioctl.h``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DRM_RENDER_MINOR_BASE",
    "KFD_DEVICE_PATH",
    "KFD_TOPOLOGY_PATH",
    "NUM_OF_SUPPORTED_GPUS",
    "render_node_path",
]

NUM_OF_SUPPORTED_GPUS: Final = 7

KFD_DEVICE_PATH: Final = "/dev/kfd"

KFD_TOPOLOGY_PATH: Final = "/sys/devices/virtual/kfd/kfd/topology"

# /dev/dri/renderD<minor>; the first render node is minor 128 (drm_render_minor in the node properties).
DRM_RENDER_MINOR_BASE: Final = 128


def render_node_path(minor: int) -> str:
    """The DRM render node of ``drm_render_minor`` ``minor``: ``/dev/dri/renderD<minor>``."""
    return f"/dev/dri/renderD{minor}"
