"""MockKFD as a whole: construction rules, the sysfs text the kernel would write, state, lifetime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.kfd import read_topology
from tinyhil.mocks.kfd import GPU_MODELS, GpuPort, MockKFD

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"


def test_fake_gpus_implement_the_port(helpers: Any, kernel: EventKernel) -> None:
    assert isinstance(helpers.load_fake_gpu().FakeGpu(kernel), GpuPort)


def test_all_gpus_must_share_one_event_kernel(helpers: Any) -> None:
    fake = helpers.load_fake_gpu()
    with pytest.raises(InvalidArgument, match="different EventKernels"):
        MockKFD([fake.FakeGpu(EventKernel()), fake.FakeGpu(EventKernel())])


def test_a_port_missing_part_of_the_api_is_named(helpers: Any, kernel: EventKernel) -> None:
    port = helpers.load_fake_gpu().FakeGpu(kernel)
    del port.vram
    with pytest.raises(InvalidArgument, match=r"gpus\[0\]=FakeGpu lacks GpuPort members \['vram'\]"):
        MockKFD([port])


def test_a_mock_without_gpus_has_only_the_cpu_node() -> None:
    with MockKFD([]) as mock:
        topology = read_topology(mock.fileio)
        assert len(topology.nodes) == 1 and topology.gpus == () and not mock.fileio.exists("/dev/dri")
        assert repr(mock) == "MockKFD(no GPUs)"


def test_gpu_properties_are_the_kernels_lines_in_the_kernels_order(mock: MockKFD) -> None:
    text = mock.fileio.read(f"{TOPOLOGY}/nodes/1/properties").decode()
    keys = [line.split()[0] for line in text.splitlines()]
    assert keys[:6] == ["cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count",
                        "p2p_links_count"]  # fmt: skip
    for required in ("gfx_target_version", "location_id", "domain", "drm_render_minor", "unique_id",
                     "num_sdma_engines", "num_sdma_queues_per_engine", "max_engine_clk_fcompute"):  # fmt: skip
        assert required in keys
    assert keys[-1] == "max_engine_clk_ccompute" and text.endswith("\n")
    assert keys.index("gfx_target_version") < keys.index("drm_render_minor") < keys.index("num_sdma_engines")
    values = dict(line.split() for line in text.splitlines())
    model = GPU_MODELS[110000]
    assert values["simd_count"] == str(model.simd_count) and values["gfx_target_version"] == "110000"
    assert values["drm_render_minor"] == "128" and values["vendor_id"] == str(0x1002)


def test_memory_banks_io_links_and_system_properties(mock: MockKFD) -> None:
    read = mock.fileio.read
    bank = read(f"{TOPOLOGY}/nodes/2/mem_banks/0/properties").decode()
    assert bank.splitlines() == ["heap_type 1", f"size_in_bytes {64 << 20}", "flags 0", "width 256", "mem_clk_max 1250"]
    assert "node_to 0" in read(f"{TOPOLOGY}/nodes/2/io_links/0/properties").decode()
    assert read(f"{TOPOLOGY}/system_properties") == b"platform_oem 0\nplatform_id 0\nplatform_rev 0\n"
    cpu = dict(line.split() for line in read(f"{TOPOLOGY}/nodes/0/properties").decode().splitlines())
    assert cpu["simd_count"] == "0" and cpu["io_links_count"] == "2" and cpu["gfx_target_version"] == "0"


def test_unknown_architectures_get_a_generic_model(make_mock: Callable[..., MockKFD]) -> None:
    (node,) = read_topology(make_mock(100300).fileio).gpus
    assert node.arch == "gfx1030" and node.properties["wave_front_size"] == 32
    (gcn,) = read_topology(make_mock(90000).fileio).gpus
    assert gcn.properties["wave_front_size"] == 64


def test_the_process_exists_from_the_first_open_of_dev_kfd(mock: MockKFD) -> None:
    with pytest.raises(StateError, match="open /dev/kfd"):
        mock.process  # noqa: B018
    empty = mock.state_digest()
    fd = mock.fileio.open("/dev/kfd", 2)
    mock.fileio.close(fd)
    assert mock.has_process and mock.state_digest() != empty  # the process outlives the file, as in the kernel


def test_close_detaches_nothing_but_resets_the_gpus(mock: MockKFD, raw: Any) -> None:
    raw.acquire(0)
    raw.alloc(0, 0x4000, 0x1000_0000_0000)
    mock.close()
    assert mock.gpus[0].vram.free_bytes == mock.gpus[0].port.vram_bytes and mock.fileio.files == {}
    assert "renderD128=110000" in repr(mock)
