"""MOCKKFD's sysfs: the KFD topology tree and device nodes, rendered as the kernel renders them.

Node 0 is the CPU; GPU ``n`` (0-based) is node ``n + 1`` with render node ``/dev/dri/renderD<128 + n>``. Property
files are the kernel's ``<name> <value>\\n`` lines in ``kfd_topology.c``'s order. Per-architecture values come from
:data:`GPU_MODELS` (representative boards of each gfx version; a driver should rely on the keys, not on these
particular numbers); ``gfx_target_version`` and the memory size come from the emulated GPU itself.
"""

from __future__ import annotations

import posixpath
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tinyhil.kfd.topology import gfx_arch_name
from tinyhil.spec.amd_pci_ids import DEVICE_IDS
from tinyhil.spec.kfd_topology import DRM_RENDER_MINOR_BASE, KFD_DEVICE_PATH, KFD_TOPOLOGY_PATH, render_node_path

__all__ = [
    "CPU_CORES",
    "CPU_MEMORY_BYTES",
    "CPU_NAME",
    "GPU_MODELS",
    "GpuIdentity",
    "GpuModel",
    "SysfsTree",
    "gpu_identities",
    "model_for",
]

_VENDOR_AMD: Final = 0x1002
_HEAP_TYPE_SYSTEM: Final = 0
_HEAP_TYPE_FB_PUBLIC: Final = 1
_IOLINK_TYPE_PCIEXPRESS: Final = 2
_GPU_ID_MASK: Final = 0xFFFF
_FIRST_GPU_BUS: Final = 0x03
_SIMD_ID_BASE: Final = 0x8000_1000
_FIRST_RDNA_VERSION: Final = 100100


@dataclass(frozen=True, slots=True)
class GpuModel:
    """Per-architecture node properties (``nodes/<n>/properties``) of one gfx version."""

    board: str
    device_id: int
    simd_count: int
    simd_per_cu: int
    array_count: int
    simd_arrays_per_engine: int
    cu_per_simd_array: int
    max_waves_per_simd: int
    wave_front_size: int
    lds_size_in_kb: int
    num_sdma_engines: int
    num_sdma_xgmi_engines: int
    num_sdma_queues_per_engine: int
    num_cp_queues: int
    max_engine_clk_fcompute: int
    num_xcc: int = 1
    num_gws: int = 64
    max_slots_scratch_cu: int = 32
    fw_version: int = 542
    sdma_fw_version: int = 24
    capability: int = 0x2808_0000


GPU_MODELS: Final[dict[int, GpuModel]] = {
    110000: GpuModel("Radeon RX 7900 XTX", DEVICE_IDS[110000], 192, 2, 12, 2, 8, 16, 32, 64, 2, 0, 6, 8, 2371),
    120001: GpuModel("Radeon RX 9070 XT", DEVICE_IDS[120001], 128, 2, 8, 2, 8, 16, 32, 64, 2, 0, 6, 8, 2970),
    90500: GpuModel("Instinct MI355X", DEVICE_IDS[90500], 1024, 4, 32, 1, 8, 8, 64, 160, 2, 14, 8, 24, 2400, num_xcc=8),
}


def model_for(gfx_target_version: int) -> GpuModel:
    """The model of a gfx version; unknown versions get a generic 64-CU part of that generation."""
    if gfx_target_version in GPU_MODELS:
        return GPU_MODELS[gfx_target_version]
    name = f"generic {gfx_arch_name(gfx_target_version)}"
    if gfx_target_version < _FIRST_RDNA_VERSION:  # GCN / CDNA: wave64, 4 SIMDs per CU
        return GpuModel(name, 0x7400, 256, 4, 8, 1, 8, 8, 64, 64, 2, 0, 8, 8, 2000)
    return GpuModel(name, 0x7400, 128, 2, 8, 2, 4, 16, 32, 64, 2, 0, 8, 8, 2000)


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """Where GPU ``index`` sits: its KFD node, gpu_id, render minor and PCI location."""

    index: int
    node_id: int
    gpu_id: int
    render_minor: int
    location_id: int
    unique_id: int

    @property
    def render_path(self) -> str:
        return render_node_path(self.render_minor)


def gpu_identities(gfx_target_versions: Sequence[int]) -> tuple[GpuIdentity, ...]:
    """Deterministic identities: gpu_id is a non-zero 16-bit hash of the PCI location and version, unique."""
    taken: set[int] = set()
    identities = []
    for index, version in enumerate(gfx_target_versions):
        location_id = (_FIRST_GPU_BUS + index) << 8
        gpu_id = zlib.crc32(f"{location_id}:{version}".encode()) & _GPU_ID_MASK
        while gpu_id == 0 or gpu_id in taken:
            gpu_id = (gpu_id + 1) & _GPU_ID_MASK
        taken.add(gpu_id)
        unique_id = zlib.crc32(f"unique:{index}".encode()) << 32 | zlib.crc32(f"{version}".encode())
        identities.append(GpuIdentity(index, index + 1, gpu_id, DRM_RENDER_MINOR_BASE + index, location_id, unique_id))
    return tuple(identities)


CPU_NAME: Final = "MOCKKFD virtual CPU"
CPU_CORES: Final = 16
CPU_MEMORY_BYTES: Final = 64 << 30


def _lines(pairs: Sequence[tuple[str, int]]) -> bytes:
    return "".join(f"{key} {value}\n" for key, value in pairs).encode()


def _cpu_properties(gpu_count: int) -> list[tuple[str, int]]:
    zeros = ("simd_id_base", "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws", "wave_front_size",
             "array_count", "simd_arrays_per_engine", "cu_per_simd_array", "simd_per_cu", "max_slots_scratch_cu",
             "gfx_target_version", "vendor_id", "device_id", "location_id", "domain", "drm_render_minor", "hive_id",
             "num_sdma_engines", "num_sdma_xgmi_engines", "num_sdma_queues_per_engine", "num_cp_queues")  # fmt: skip
    head = [("cpu_cores_count", CPU_CORES), ("simd_count", 0), ("mem_banks_count", 1), ("caches_count", 0),
            ("io_links_count", gpu_count), ("p2p_links_count", 0), ("cpu_core_id_base", 0)]  # fmt: skip
    return [*head, *((key, 0) for key in zeros), ("max_engine_clk_ccompute", 4000)]


def _gpu_properties(gpu: GpuIdentity, version: int, model: GpuModel) -> list[tuple[str, int]]:
    return [
        ("cpu_cores_count", 0), ("simd_count", model.simd_count), ("mem_banks_count", 1), ("caches_count", 0),
        ("io_links_count", 1), ("p2p_links_count", 0), ("cpu_core_id_base", 0),
        ("simd_id_base", _SIMD_ID_BASE + 0x1000 * gpu.index), ("max_waves_per_simd", model.max_waves_per_simd),
        ("lds_size_in_kb", model.lds_size_in_kb), ("gds_size_in_kb", 0), ("num_gws", model.num_gws),
        ("wave_front_size", model.wave_front_size), ("array_count", model.array_count),
        ("simd_arrays_per_engine", model.simd_arrays_per_engine), ("cu_per_simd_array", model.cu_per_simd_array),
        ("simd_per_cu", model.simd_per_cu), ("max_slots_scratch_cu", model.max_slots_scratch_cu),
        ("gfx_target_version", version), ("vendor_id", _VENDOR_AMD), ("device_id", model.device_id),
        ("location_id", gpu.location_id), ("domain", 0), ("drm_render_minor", gpu.render_minor), ("hive_id", 0),
        ("num_sdma_engines", model.num_sdma_engines), ("num_sdma_xgmi_engines", model.num_sdma_xgmi_engines),
        ("num_sdma_queues_per_engine", model.num_sdma_queues_per_engine), ("num_cp_queues", model.num_cp_queues),
        ("max_engine_clk_fcompute", model.max_engine_clk_fcompute), ("local_mem_size", 0),
        ("fw_version", model.fw_version), ("capability", model.capability), ("debug_prop", 0),
        ("sdma_fw_version", model.sdma_fw_version), ("unique_id", gpu.unique_id), ("num_xcc", model.num_xcc),
        ("max_engine_clk_ccompute", 4000),
    ]  # fmt: skip


def _iolink(node_from: int, node_to: int) -> list[tuple[str, int]]:
    return [("type", _IOLINK_TYPE_PCIEXPRESS), ("version_major", 0), ("version_minor", 0), ("node_from", node_from),
            ("node_to", node_to), ("weight", 20), ("min_latency", 0), ("max_latency", 0), ("min_bandwidth", 312),
            ("max_bandwidth", 64000), ("recommended_transfer_size", 0), ("flags", 1)]  # fmt: skip


class SysfsTree:
    """The files and directories MOCKKFD owns: ``/dev`` and ``/sys/devices/virtual/kfd``, all read-only.

    ``files`` maps absolute paths to contents; device nodes map to ``None`` (they have no readable content).
    """

    OWNED_ROOTS: Final = ("/dev", posixpath.dirname(posixpath.dirname(KFD_TOPOLOGY_PATH)))

    def __init__(self, gpus: Sequence[GpuIdentity], versions: Sequence[int], vram_sizes: Sequence[int]) -> None:
        self.files: dict[str, bytes | None] = {}
        self.dirs: dict[str, set[str]] = {}
        self._add(KFD_DEVICE_PATH, None)
        for gpu in gpus:
            self._add(gpu.render_path, None)
        self._add(f"{KFD_TOPOLOGY_PATH}/generation_id", b"1\n")
        self._add(f"{KFD_TOPOLOGY_PATH}/system_properties", _lines([("platform_oem", 0), ("platform_id", 0),
                                                                     ("platform_rev", 0)]))  # fmt: skip
        cpu = f"{KFD_TOPOLOGY_PATH}/nodes/0"
        self._add(f"{cpu}/gpu_id", b"0\n")
        self._add(f"{cpu}/name", f"{CPU_NAME}\n".encode())
        self._add(f"{cpu}/properties", _lines(_cpu_properties(len(gpus))))
        self._add(f"{cpu}/mem_banks/0/properties", _lines([("heap_type", _HEAP_TYPE_SYSTEM),
                  ("size_in_bytes", CPU_MEMORY_BYTES), ("flags", 0), ("width", 64),
                  ("mem_clk_max", 3200)]))  # fmt: skip
        for gpu, version, vram in zip(gpus, versions, vram_sizes, strict=True):
            self._add(f"{cpu}/io_links/{gpu.index}/properties", _lines(_iolink(0, gpu.node_id)))
            node = f"{KFD_TOPOLOGY_PATH}/nodes/{gpu.node_id}"
            self._add(f"{node}/gpu_id", f"{gpu.gpu_id}\n".encode())
            self._add(f"{node}/name", f"{gfx_arch_name(version)}\n".encode())
            self._add(f"{node}/properties", _lines(_gpu_properties(gpu, version, model_for(version))))
            self._add(f"{node}/mem_banks/0/properties", _lines([("heap_type", _HEAP_TYPE_FB_PUBLIC),
                      ("size_in_bytes", vram), ("flags", 0), ("width", 256), ("mem_clk_max", 1250)]))  # fmt: skip
            self._add(f"{node}/io_links/0/properties", _lines(_iolink(gpu.node_id, 0)))
            for empty in ("caches", "p2p_links"):
                self._add_dir(f"{node}/{empty}")

    def _add_dir(self, path: str) -> None:
        while path != "/":
            parent, name = posixpath.split(path)
            self.dirs.setdefault(path, set())
            self.dirs.setdefault(parent, set()).add(name)
            path = parent

    def _add(self, path: str, content: bytes | None) -> None:
        self.files[path] = content
        parent, name = posixpath.split(path)
        self._add_dir(parent)
        self.dirs[parent].add(name)

    @classmethod
    def owns(cls, path: str) -> bool:
        """Whether ``path`` (normalized, absolute) lies in a subtree the mock owns (no fall-through there)."""
        return any(path == root or path.startswith(root + "/") for root in cls.OWNED_ROOTS)
