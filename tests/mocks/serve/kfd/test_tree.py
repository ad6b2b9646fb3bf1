"""The served tree holds MOCKKFD's sysfs byte for byte, device nodes as character devices, and the DRM class links."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tinyhil.kfd.topology import parse_properties
from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.serve.kfd.tree import PCI_ROOT, render_tree
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH, KFD_TOPOLOGY_PATH


def test_every_sysfs_file_and_the_drm_class_are_rendered(tmp_path: Path) -> None:
    sysfs = MockKFD(gpus=3).sysfs
    render_tree(sysfs, tmp_path)
    for path, content in sysfs.files.items():
        rendered = tmp_path / path.lstrip("/")
        if content is None:
            assert stat.S_ISCHR(rendered.stat().st_mode), path
        else:
            assert rendered.read_bytes() == content, path
    assert stat.S_ISCHR((tmp_path / KFD_DEVICE_PATH.lstrip("/")).stat().st_mode)
    for node in range(1, 4):
        properties = parse_properties(sysfs.files[f"{KFD_TOPOLOGY_PATH}/nodes/{node}/properties"].decode())
        minor = properties["drm_render_minor"]
        render = tmp_path / f"sys/class/drm/renderD{minor}"
        assert (render / "dev").read_text() == f"226:{minor}\n"
        device = Path(os.path.realpath(render / "device"))
        assert device.parent == tmp_path / PCI_ROOT.lstrip("/")
        assert int((device / "vendor").read_text(), 16) == properties["vendor_id"]
        assert int((device / "device").read_text(), 16) == properties["device_id"]
    assert sorted(os.listdir(tmp_path / "sys/class/kfd/kfd/topology/nodes")) == ["0", "1", "2", "3"]
