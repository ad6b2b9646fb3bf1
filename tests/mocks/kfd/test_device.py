"""MockKFD as a whole: construction rules, the sysfs text the kernel would write, state, lifetime."""

from __future__ import annotations

import errno
import os
import types
from collections.abc import Callable
from typing import Any

import pytest

from tinyhil.emulators.kernel import EventKernel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.kfd import read_topology
from tinyhil.mocks.kfd import GPU_MODELS, GpuPort, MockKFD
from tinyhil.mocks.kfd.device import PORT_MEMBERS
from tinyhil.mocks.targets import AMD_ARCHS, GFX_TARGET_VERSIONS, MOCKKFD_MAX_GPUS, MOCKKFD_VRAM_BYTES
from tinyhil.spec.amd_pci_ids import DEVICE_IDS
from tinyhil.spec.kfd_ioctls import KfdIoctl as K
from tinyhil.spec.kfd_memory import kfd_ioctl_acquire_vm_args

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
    with pytest.raises(InvalidArgument, match=r"ports\[0\]=FakeGpu lacks GpuPort members \['vram'\]"):
        MockKFD([port])


def test_the_port_check_is_the_protocol_itself() -> None:
    assert {"read", "write", "on_interrupt", "kernel", "vram", "timestamp"} <= set(PORT_MEMBERS)
    assert set(PORT_MEMBERS) == {name for name in vars(GpuPort) if not name.startswith("_")} | set(
        GpuPort.__annotations__
    )


@pytest.mark.parametrize("member", PORT_MEMBERS)
def test_a_port_missing_any_protocol_member_is_refused(helpers: Any, kernel: EventKernel, member: str) -> None:
    fake = helpers.load_fake_gpu().FakeGpu(kernel)
    port = types.SimpleNamespace(**{name: getattr(fake, name) for name in PORT_MEMBERS if name != member})
    assert not isinstance(port, GpuPort)  # the runtime protocol check and MockKFD's agree
    with pytest.raises(InvalidArgument, match=rf"ports\[0\]=SimpleNamespace lacks GpuPort members \['{member}'\]"):
        MockKFD([port])  # type: ignore[list-item]


def test_defaults_build_two_gpus_of_the_default_arch_on_one_new_kernel() -> None:
    with MockKFD() as mock:
        assert [gpu.port.gfx_target_version for gpu in mock.gpus] == [110000, 110000]
        assert {id(gpu.port.kernel) for gpu in mock.gpus} == {id(mock.kernel)} and mock.kernel.seed == 0
        assert [gpu.port.vram_bytes for gpu in mock.gpus] == [MOCKKFD_VRAM_BYTES] * 2
        assert [node.gfx_target_version for node in read_topology(mock.fileio).gpus] == [110000, 110000]
    assert AMD_ARCHS[0] == "gfx1100" and GFX_TARGET_VERSIONS["gfx1100"] == 110000


def test_one_call_builds_n_gpus_of_an_arch_with_a_seed() -> None:
    with MockKFD(gpus=4, arch="gfx1201", seed=3, vram_bytes=64 << 20) as mock:
        assert [gpu.port.gfx_target_version for gpu in mock.gpus] == [120001] * 4
        assert [gpu.port.vram_bytes for gpu in mock.gpus] == [64 << 20] * 4 and mock.kernel.seed == 3
        assert len({id(gpu.port.kernel) for gpu in mock.gpus}) == 1
        assert [node.gfx_target_version for node in read_topology(mock.fileio).gpus] == [120001] * 4


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"gpus": 0}, rf"gpus=0, expected 1\.\.{MOCKKFD_MAX_GPUS}"),
        ({"gpus": MOCKKFD_MAX_GPUS + 1}, rf"gpus={MOCKKFD_MAX_GPUS + 1}, expected 1\.\.{MOCKKFD_MAX_GPUS}"),
        ({"gpus": True}, r"gpus=True, expected an int"),
        ({"gpus": [object()]}, r"expected an int \(the GPU count\); pass given ports as MockKFD\(ports\)"),
        ({"arch": "gfx908"}, r"arch='gfx908', expected one of gfx1100, gfx1201, gfx950"),
        ({"arch": ["gfx1100"]}, r"arch=\['gfx1100'\], expected one of gfx1100, gfx1201, gfx950"),
        ({"seed": "3"}, r"seed='3', expected an int"),
        ({"vram_bytes": 0}, r"vram_bytes=0, expected"),
    ],
)
def test_bad_build_options_are_invalid_arguments_naming_the_choices(options: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        MockKFD(**options)


def test_given_parts_and_build_options_together_are_refused(helpers: Any, kernel: EventKernel) -> None:
    port = helpers.load_fake_gpu().FakeGpu(kernel)
    with pytest.raises(InvalidArgument, match=r"MockKFD\(ports, gpus=\.\.\., seed=\.\.\.\).*not both"):
        MockKFD([port], gpus=2, seed=1)
    with pytest.raises(InvalidArgument, match=r"ports=4, expected a sequence of GpuPorts \(n fresh GPUs: gpus=n\)"):
        MockKFD(4)  # type: ignore[arg-type]


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


@pytest.mark.parametrize("arch", AMD_ARCHS)
def test_each_node_names_its_board_by_the_one_device_id_table(arch: str) -> None:
    version = GFX_TARGET_VERSIONS[arch]
    with MockKFD(gpus=1, arch=arch) as mock:
        text = mock.fileio.read(f"{TOPOLOGY}/nodes/1/properties").decode()
    values = dict(line.split() for line in text.splitlines())
    assert values["device_id"] == str(DEVICE_IDS[version]) == str(GPU_MODELS[version].device_id)
    assert DEVICE_IDS[90500] == 0x75A3  # gfx950 is modelled as the Instinct MI355X (mesa/drm data/amdgpu.ids)


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


def test_tinyhil_mocks_exports_the_mocks_lazily() -> None:
    import subprocess
    import sys

    import tinyhil.mocks
    from tinyhil.mocks.targets import open_mock_usb3
    from tinyhil.mocks.usb3 import MockUSB3

    assert sorted(tinyhil.mocks.__all__) == ["MockKFD", "MockUSB3", "open_mock_usb3"]
    assert (tinyhil.mocks.MockKFD, tinyhil.mocks.MockUSB3, tinyhil.mocks.open_mock_usb3) == (
        MockKFD,
        MockUSB3,
        open_mock_usb3,
    )
    with pytest.raises(AttributeError, match="has no attribute 'MockNothing'"):
        _ = tinyhil.mocks.MockNothing  # type: ignore[attr-defined]
    # The registry's entry point imports tinyhil.mocks.targets: that must not load the mocks or the emulators.
    prefixes = ("tinyhil.mocks.", "tinyhil.emulators")
    probe = f"import sys, tinyhil.mocks.targets; print(sorted(m for m in sys.modules if m.startswith({prefixes})))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['tinyhil.mocks.targets']"


# --- process lifetime ----------------------------------------------------------------------------------------------
def _acquire_errno(mock: MockKFD, kfd_fd: int, index: int) -> int:
    """Open GPU ``index``'s render node afresh and ACQUIRE_VM with it; the errno (0 for success)."""
    gpu = mock.gpus[index]
    render = mock.fileio.open(gpu.identity.render_path, os.O_RDWR)
    try:
        mock.fileio.ioctl(kfd_fd, K.AMDKFD_IOC_ACQUIRE_VM, kfd_ioctl_acquire_vm_args(drm_fd=render, gpu_id=gpu.gpu_id))
    except OSError as exc:
        return int(exc.errno or 0)
    return 0


def test_a_second_acquire_vm_with_a_new_render_node_file_is_ebusy_even_after_reopening_dev_kfd(
    mock: MockKFD, raw: Any
) -> None:
    assert _acquire_errno(mock, raw.fd, 0) == 0
    assert _acquire_errno(mock, raw.fd, 0) == errno.EBUSY
    for fd in list(mock.fileio.files):  # every file of the process closed, /dev/kfd too: the process stays
        mock.fileio.close(fd)
    assert mock.fileio.files == {} and mock.has_process
    kfd_fd = mock.fileio.open("/dev/kfd", os.O_RDWR)
    assert _acquire_errno(mock, kfd_fd, 0) == errno.EBUSY
    assert _acquire_errno(mock, kfd_fd, 1) == 0  # a GPU the process never acquired takes any render node file


def test_exit_process_frees_what_the_process_held_and_the_next_open_starts_afresh(mock: MockKFD, raw: Any) -> None:
    empty = mock.gpus[0].vram.free_bytes
    gpu_id = raw.acquire(0)
    handle = raw.alloc(0, 0x4000, 0x1000_0000_0000).handle
    raw.map(handle, [gpu_id])
    assert mock.gpus[0].vram.free_bytes < empty and mock.gpus[0].port.mappings
    mock.exit_process()
    assert not mock.has_process and mock.fileio.files == {}
    assert mock.gpus[0].vram.free_bytes == empty and mock.gpus[0].port.mappings == {}
    mock.exit_process()  # idempotent
    kfd_fd = mock.fileio.open("/dev/kfd", os.O_RDWR)
    assert _acquire_errno(mock, kfd_fd, 0) == 0


def test_a_forked_child_is_a_kfd_process_of_its_own(mock: MockKFD, raw: Any) -> None:
    raw.acquire(0)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            wrong_process = _acquire_errno(mock, raw.fd, 1)  # the parent's /dev/kfd file: EBADF, as kfd_ioctl says
            if not mock.has_process and wrong_process == errno.EBADF:
                kfd_fd = mock.fileio.open("/dev/kfd", os.O_RDWR)
                code = 0 if _acquire_errno(mock, kfd_fd, 0) == 0 and mock.has_process else 2
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
    assert mock.process.pdds[mock.gpus[0].gpu_id].drm_file is not None  # the parent's VM is untouched
