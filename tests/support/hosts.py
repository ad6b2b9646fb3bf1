"""Fake host trees for the farm's discovery tests: the sysfs and procfs files a host with boards has."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@dataclass(frozen=True)
class FakeHost:
    """Builds a host tree: one CPU node and two gfx1100 GPUs under KFD, one NVIDIA GPU in procfs and sysfs."""

    nv_pci: str = "0000:41:00.0"
    nv_uuid: str = "GPU-5f2c7a10-9e1b-4c33-8d2e-0a1b2c3d4e5f"
    kfd_gpus: tuple[tuple[int, int, int], ...] = ((4660, 0x03, 11), (8738, 0x83, 22))  # gpu_id, PCI bus, unique_id

    def _kfd_node(self, root: Path, node: int, gpu_id: int, properties: dict[str, int]) -> None:
        base = root / "sys/devices/virtual/kfd/kfd/topology/nodes" / str(node)
        _write(base / "gpu_id", f"{gpu_id}\n")
        _write(base / "name", "gfx1100\n" if gpu_id else "\n")
        _write(base / "properties", "".join(f"{key} {value}\n" for key, value in properties.items()))

    def build(self, root: Path) -> Path:
        _write(root / "sys/devices/virtual/kfd/kfd/topology/system_properties", "platform_oem 0\n")
        self._kfd_node(root, 0, 0, {"cpu_cores_count": 8})
        for node, (gpu_id, bus, unique) in enumerate(self.kfd_gpus, start=1):
            properties = {"gfx_target_version": 110000, "location_id": bus << 8, "domain": 0, "unique_id": unique}
            self._kfd_node(root, node, gpu_id, {**properties, "drm_render_minor": 127 + node})
        info = f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t {self.nv_uuid}\nBus Location: \t {self.nv_pci}\n"
        _write(root / "proc/driver/nvidia/gpus" / self.nv_pci / "information", info)
        for name, vendor, pci_class in [(self.nv_pci, "0x10de", "0x030200"), ("0000:00:1f.3", "0x8086", "0x040300")]:
            _write(root / "sys/bus/pci/devices" / name / "vendor", f"{vendor}\n")
            _write(root / "sys/bus/pci/devices" / name / "class", f"{pci_class}\n")
        return root
