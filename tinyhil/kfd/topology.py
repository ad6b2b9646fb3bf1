"""KFD topology discovery: the node tree amdkfd publishes in sysfs, read through the file-I/O seam.

Layout (``kfd_topology.c``), under ``/sys/devices/virtual/kfd/kfd/topology``::

    system_properties                  key value lines (platform_oem, platform_id, platform_rev)
    nodes/<n>/gpu_id                   0 for CPU nodes, the GPU's id (what ioctls take as gpu_id) otherwise
    nodes/<n>/name                     node name
    nodes/<n>/properties               key value lines: simd_count, gfx_target_version, drm_render_minor, ...
    nodes/<n>/mem_banks/<m>/properties heap_type, size_in_bytes, flags, width, mem_clk_max
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tinyhil.errors import InvalidArgument
from tinyhil.fileio import FileIO
from tinyhil.spec.kfd_topology import KFD_TOPOLOGY_PATH

__all__ = ["KfdNode", "Topology", "gfx_arch_name", "parse_properties", "read_topology"]

_VERSION_MAJOR = 10000
_VERSION_MINOR = 100


def gfx_arch_name(gfx_target_version: int) -> str:
    """The LLVM target name of a ``gfx_target_version``: 110000 -> ``gfx1100``, 120001 -> ``gfx1201``, 90500 ->
    ``gfx950``, 90010 -> ``gfx90a`` (major in decimal, minor and stepping as one hex digit each)."""
    if gfx_target_version <= 0:
        raise InvalidArgument(f"gfx_target_version={gfx_target_version!r}, expected a GPU's version (> 0)")
    major = gfx_target_version // _VERSION_MAJOR
    minor = gfx_target_version // _VERSION_MINOR % _VERSION_MINOR
    stepping = gfx_target_version % _VERSION_MINOR
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_properties(text: str, *, where: str = "properties") -> dict[str, int]:
    """Parse sysfs ``key value`` lines (``sysfs_show_32bit_prop`` / ``_64bit_prop`` output) into a dict.

    Raises:
        InvalidArgument: a line is not ``<name> <unsigned integer>``.
    """
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise InvalidArgument(f"{where} line {number} is {line!r}, expected '<name> <unsigned integer>'")
        found[parts[0]] = int(parts[1])
    return found


@dataclass(frozen=True, slots=True)
class KfdNode:
    """One topology node: a CPU (``gpu_id == 0``) or a GPU, with its properties file as a mapping."""

    node_id: int
    gpu_id: int
    name: str
    properties: Mapping[str, int] = field(hash=False)
    memory_bytes: int = 0

    @property
    def is_gpu(self) -> bool:
        return self.gpu_id != 0

    @property
    def gfx_target_version(self) -> int:
        return self.properties.get("gfx_target_version", 0)

    @property
    def arch(self) -> str:
        """``gfx1100`` and the like; only for GPU nodes."""
        return gfx_arch_name(self.gfx_target_version)

    @property
    def drm_render_minor(self) -> int:
        return self.properties.get("drm_render_minor", 0)

    def __repr__(self) -> str:
        if not self.is_gpu:
            return f"KfdNode({self.node_id}, CPU {self.name!r})"
        return f"KfdNode({self.node_id}, gpu_id={self.gpu_id:#x}, {self.arch}, renderD{self.drm_render_minor})"


@dataclass(frozen=True, slots=True)
class Topology:
    """Every node amdkfd reports, in node order, and the system properties."""

    system: Mapping[str, int] = field(hash=False)
    nodes: tuple[KfdNode, ...] = ()

    @property
    def gpus(self) -> tuple[KfdNode, ...]:
        return tuple(node for node in self.nodes if node.is_gpu)

    def gpu(self, gpu_id: int) -> KfdNode:
        """The GPU node with ``gpu_id``.

        Raises:
            InvalidArgument: no GPU has that id.
        """
        for node in self.gpus:
            if node.gpu_id == gpu_id:
                return node
        known = ", ".join(f"{node.gpu_id:#x}" for node in self.gpus) or "none"
        raise InvalidArgument(f"gpu_id={gpu_id:#x}, expected one of the GPUs in the topology ({known})")


def read_topology(fileio: FileIO, root: str = KFD_TOPOLOGY_PATH) -> Topology:
    """Read the topology tree under ``root`` through ``fileio``.

    Nodes the kernel hides from this process (reads fail with ``PermissionError``, as under a device cgroup) are
    left out. Raises:
        FileNotFoundError: ``root`` does not exist (no amdkfd).
        InvalidArgument: a properties file is malformed.
    """
    system = parse_properties(fileio.read(posixpath.join(root, "system_properties")).decode(), where="system")
    nodes_dir = posixpath.join(root, "nodes")
    nodes = []
    for entry in sorted((name for name in fileio.listdir(nodes_dir) if name.isdigit()), key=int):
        node_dir = posixpath.join(nodes_dir, entry)
        try:
            gpu_id = int(fileio.read(posixpath.join(node_dir, "gpu_id")).decode().strip() or 0)
            name = fileio.read(posixpath.join(node_dir, "name")).decode().strip()
            where = f"{node_dir}/properties"
            properties = parse_properties(fileio.read(where).decode(), where=where)
        except PermissionError:
            continue
        memory_bytes = 0
        banks_dir = posixpath.join(node_dir, "mem_banks")
        if fileio.exists(banks_dir):
            for bank in fileio.listdir(banks_dir):
                where = posixpath.join(banks_dir, bank, "properties")
                memory_bytes += parse_properties(fileio.read(where).decode(), where=where).get("size_in_bytes", 0)
        nodes.append(KfdNode(int(entry), gpu_id, name, MappingProxyType(properties), memory_bytes))
    return Topology(MappingProxyType(system), tuple(nodes))
