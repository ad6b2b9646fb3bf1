"""The directory the interposer redirects served paths into, rendered from MOCKKFD's own device tree.

Every file and directory of :class:`~tinyhil.mocks.kfd.topology.SysfsTree` (``/dev/kfd``, the render nodes, the KFD
topology under ``/sys/devices/virtual/kfd``) becomes a real, read-only file under the root, so a client's reads,
listings and ``fstat`` need no forwarding. Device nodes are symbolic links to ``/dev/null``, so ``stat`` reports a
character device. The DRM class entries drivers read are derived from each GPU node's properties::

    /sys/class/kfd/kfd                         -> ../../devices/virtual/kfd/kfd
    /sys/class/drm/renderD<minor>              -> ../../devices/tinyhil-pci/<domain:bus:dev.fn>/drm/renderD<minor>
    /sys/devices/tinyhil-pci/<bdf>/            vendor, device, subsystem_vendor, subsystem_device, revision, class
    /sys/devices/tinyhil-pci/<bdf>/drm/renderD<minor>/dev     "226:<minor>"; its ``device`` links to ../..
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Final

from tinyhil.kfd.topology import parse_properties
from tinyhil.mocks.kfd.topology import SysfsTree
from tinyhil.spec.kfd_topology import KFD_TOPOLOGY_PATH

__all__ = ["PCI_ROOT", "render_tree"]

PCI_ROOT: Final = "/sys/devices/tinyhil-pci"
_DRM_CLASS: Final = "/sys/class/drm"
_KFD_CLASS: Final = "/sys/class/kfd/kfd"
_KFD_DEVICE_DIR: Final = posixpath.dirname(KFD_TOPOLOGY_PATH)
_DRM_MAJOR: Final = 226
_PCI_CLASS_DISPLAY: Final = 0x030000
_READ_ONLY: Final = 0o444
_DEVICE_TARGET: Final = os.devnull


def _bdf(properties: dict[str, int]) -> str:
    location = properties.get("location_id", 0)  # bus << 8 | device << 3 | function, as amdkfd reports it
    bus, device, function = location >> 8, (location >> 3) & 0x1F, location & 0x7
    return f"{properties.get('domain', 0):04x}:{bus:02x}:{device:02x}.{function:x}"


def _write(root: Path, path: str, content: bytes) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    target.chmod(_READ_ONLY)


def _link(root: Path, path: str, points_to: str) -> None:
    link = root / path.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(points_to)


def render_tree(sysfs: SysfsTree, root: Path) -> None:
    """Write ``sysfs`` and the DRM class entries derived from it under ``root`` (an empty directory)."""
    for directory in sysfs.dirs:
        (root / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path, content in sysfs.files.items():
        if content is None:
            _link(root, path, _DEVICE_TARGET)
        else:
            _write(root, path, content)
    _link(root, _KFD_CLASS, posixpath.relpath(_KFD_DEVICE_DIR, posixpath.dirname(_KFD_CLASS)))
    (root / _DRM_CLASS.lstrip("/")).mkdir(parents=True, exist_ok=True)
    nodes = f"{KFD_TOPOLOGY_PATH}/nodes"
    for node in sorted(sysfs.dirs.get(nodes, ()), key=int):
        content = sysfs.files.get(f"{nodes}/{node}/properties")
        properties = parse_properties((content or b"").decode(), where=f"{nodes}/{node}/properties")
        if not properties.get("simd_count"):
            continue  # a CPU node has no render node
        minor = properties["drm_render_minor"]
        device_dir = f"{PCI_ROOT}/{_bdf(properties)}"
        for name, text in (("vendor", f"{properties['vendor_id']:#06x}"), ("device", f"{properties['device_id']:#06x}"),
                           ("subsystem_vendor", f"{properties['vendor_id']:#06x}"),
                           ("subsystem_device", f"{properties['device_id']:#06x}"), ("revision", "0x00"),
                           ("class", f"{_PCI_CLASS_DISPLAY:#08x}")):  # fmt: skip
            _write(root, f"{device_dir}/{name}", f"{text}\n".encode())
        render_dir = f"{device_dir}/drm/renderD{minor}"
        _write(root, f"{render_dir}/dev", f"{_DRM_MAJOR}:{minor}\n".encode())
        _link(root, f"{render_dir}/device", "../..")
        _link(root, f"{_DRM_CLASS}/renderD{minor}", posixpath.relpath(render_dir, _DRM_CLASS))
