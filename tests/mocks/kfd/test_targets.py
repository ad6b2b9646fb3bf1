"""MOCKKFD+AMD target strings: arch -> gfx_target_version in the topology, GPU index, options."""

from __future__ import annotations

import errno
import os

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.kfd import KFD, read_topology
from tinyhil.kfd.over_kfd import KfdAmdDevice
from tinyhil.mocks.kfd import KfdFaultPlan, MockFileIO, exit_processes
from tinyhil.registry import default_registry, open_target
from tinyhil.spec.kfd_memory import handle_idr


@pytest.mark.parametrize(
    ("text", "arch", "version"),
    [("MOCKKFD+AMD", "gfx1100", 110000), ("MOCKKFD+AMD:LLVM:gfx1100", "gfx1100", 110000),
     ("MOCKKFD+AMD:CC:gfx1201", "gfx1201", 120001), ("MOCKKFD+AMD:CLANG:gfx950", "gfx950", 90500)],
)  # fmt: skip
def test_the_arch_is_what_the_client_reads_from_the_topology(text: str, arch: str, version: int) -> None:
    with open_target(text) as device:
        assert isinstance(device, KfdAmdDevice)
        topology = read_topology(device.kfd.fileio)
        assert [node.gfx_target_version for node in topology.gpus] == [version, version]
        assert device.node.arch == arch


def test_dev_selects_the_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEV", "MOCKKFD+AMD:CC:gfx1201")
    resolved = default_registry().resolve(os.environ["DEV"])
    assert (resolved.renderer, resolved.arch) == ("CC", "gfx1201")
    with resolved.open() as device:
        assert isinstance(device, KfdAmdDevice)
        assert device.kfd.topology.gpus[device.gpu_index].gfx_target_version == 120001


def test_the_index_selects_the_gpu_and_gpus_sizes_the_machine() -> None:
    with open_target("MOCKKFD:1+AMD") as device:
        assert isinstance(device, KfdAmdDevice)
        assert (device.gpu_index, device.gpu_count, device.node.drm_render_minor) == (1, 2, 129)
    with open_target("MOCKKFD:3+AMD") as device:
        assert isinstance(device, KfdAmdDevice)
        assert (device.gpu_index, device.gpu_count) == (3, 4)
    with open_target("MOCKKFD+AMD", gpus=1) as device:
        assert "multi-gpu" not in device.capabilities


@pytest.mark.parametrize(
    ("text", "options", "match"),
    [("MOCKKFD:2+AMD", {"gpus": 2}, "GPU index 2, expected < gpus=2"),
     ("MOCKKFD+AMD", {"gpus": 0}, "gpus=0"),
     ("MOCKKFD+AMD", {"colour": "blue"}, "valid options: faults, gpus, seed, vram_bytes"),
     ("MOCKKFD+AMD", {"vram_bytes": 12345}, "vram_bytes")],
)  # fmt: skip
def test_bad_options_are_typed_errors(text: str, options: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        open_target(text, **options)


def test_closing_the_device_keeps_the_kfd_process_and_the_next_open_shares_it() -> None:
    device = open_target("MOCKKFD+AMD", seed=41)
    assert isinstance(device, KfdAmdDevice)
    fileio = device.kfd.fileio
    assert isinstance(fileio, MockFileIO) and fileio.kfd.has_process
    gpu_id = device.node.gpu_id
    device.close()
    pdd = fileio.kfd.process.pdds[gpu_id]
    assert pdd.drm_file is not None, "the VM outlives the device, as amdkfd's outlives the file"
    assert pdd.allocations.keys() <= {handle_idr(fileio.kfd.process.signal_handle)}  # the event page at most
    with open_target("MOCKKFD+AMD", seed=41) as again:
        assert isinstance(again, KfdAmdDevice)
        assert again.kfd is device.kfd and again.kfd.fileio is fileio
        buf = again.alloc(64)
        again.copyin(buf, b"r" * 64)
        assert again.copyout(buf) == b"r" * 64
    exit_processes()
    assert not fileio.kfd.has_process and not fileio.files and device.kfd.closed
    with open_target("MOCKKFD+AMD", seed=41) as fresh:
        assert isinstance(fresh, KfdAmdDevice) and fresh.kfd.fileio is not fileio


def test_a_client_that_opened_dev_kfd_and_the_render_node_again_per_device_gets_ebusy_as_on_a_board() -> None:
    """What the served suite caught, in process: the KFD process outlives the device, so a fresh KFD connection (its
    own render node file) cannot acquire the VM the first one bound."""
    with open_target("MOCKKFD+AMD", seed=42) as device:
        assert isinstance(device, KfdAmdDevice)
        fileio = device.kfd.fileio
    with KFD(fileio) as second, pytest.raises(OSError) as refused:
        second.device(0)
    assert refused.value.errno == errno.EBUSY and "AMDKFD_IOC_ACQUIRE_VM" in str(refused.value)
    exit_processes()


def test_a_fault_plan_gets_a_machine_of_its_own_that_ends_with_the_device() -> None:
    with open_target("MOCKKFD+AMD", faults=KfdFaultPlan()) as device:
        assert isinstance(device, KfdAmdDevice)
        fileio = device.kfd.fileio
        assert isinstance(fileio, MockFileIO)
        with open_target("MOCKKFD+AMD") as shared:
            assert isinstance(shared, KfdAmdDevice) and shared.kfd is not device.kfd
    assert not fileio.kfd.has_process and not fileio.files
