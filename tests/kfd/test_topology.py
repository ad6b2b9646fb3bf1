"""Topology discovery through the seam: parsing, arch names, and what the client sees of MOCKKFD's GPUs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.kfd import KFD, gfx_arch_name, parse_properties, read_topology
from tinyhil.mocks.kfd import MockKFD


@pytest.mark.parametrize(
    ("version", "name"),
    [(110000, "gfx1100"), (120001, "gfx1201"), (90500, "gfx950"), (90010, "gfx90a"), (90402, "gfx942"),
     (100300, "gfx1030"), (110501, "gfx1151")],
)  # fmt: skip
def test_gfx_arch_names(version: int, name: str) -> None:
    assert gfx_arch_name(version) == name


@pytest.mark.parametrize(
    ("text", "match"),
    [("simd_count\n", "line 1"), ("a 1\nb -2\n", "line 2 is 'b -2'"), ("a 1 2", "expected '<name>"), ("x y", "line 1")],
)
def test_malformed_properties_name_the_line(text: str, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        parse_properties(text)


def test_properties_parse_64_bit_values_and_skip_blank_lines() -> None:
    assert parse_properties("unique_id 18446744073709551615\n\nsimd_count 192\n") == {
        "unique_id": (1 << 64) - 1,
        "simd_count": 192,
    }


def test_arch_name_of_a_cpu_is_an_error() -> None:
    with pytest.raises(InvalidArgument, match="gfx_target_version=0"):
        gfx_arch_name(0)


@pytest.mark.parametrize(
    "versions",
    [(110000,), (120001,), (90500,), (110000, 120001), (110000, 110000, 90500, 120001)],
    ids=lambda v: "+".join(map(str, v)),
)
def test_the_client_sees_each_configured_gpu(make_mock: Callable[..., MockKFD], versions: tuple[int, ...]) -> None:
    mock = make_mock(*versions, vram_bytes=32 << 20)
    topology = read_topology(mock.fileio)
    assert [node.node_id for node in topology.nodes] == list(range(len(versions) + 1))
    cpu, gpus = topology.nodes[0], topology.gpus
    assert not cpu.is_gpu and cpu.gpu_id == 0 and cpu.properties["simd_count"] == 0
    assert [gpu.gfx_target_version for gpu in gpus] == list(versions)
    assert [gpu.arch for gpu in gpus] == [gfx_arch_name(v) for v in versions]
    assert [gpu.drm_render_minor for gpu in gpus] == [128 + i for i in range(len(versions))]
    assert len({gpu.gpu_id for gpu in gpus}) == len(gpus) and all(0 < gpu.gpu_id < 1 << 16 for gpu in gpus)
    assert all(gpu.memory_bytes == 32 << 20 for gpu in gpus)
    for gpu in gpus:
        assert topology.gpu(gpu.gpu_id) is gpu
        assert gpu.properties["simd_count"] > 0 and gpu.properties["num_sdma_engines"] >= 1
        assert gpu.properties["mem_banks_count"] == 1 and gpu.properties["location_id"] > 0


def test_unknown_gpu_id_lists_the_known_ones(make_mock: Callable[..., MockKFD]) -> None:
    topology = read_topology(make_mock(110000).fileio)
    with pytest.raises(InvalidArgument, match=f"{topology.gpus[0].gpu_id:#x}"):
        topology.gpu(0xBEEF)


def test_the_kfd_client_reports_version_and_gpus(make_mock: Callable[..., MockKFD]) -> None:
    with KFD(make_mock(90500, 120001).fileio) as kfd:
        assert kfd.version == (1, 11)
        assert [gpu.arch for gpu in kfd.gpus] == ["gfx950", "gfx1201"]
        assert "gfx950" in repr(kfd) and "renderD128" in repr(kfd.gpus[0])


def test_gpu_ids_are_stable_across_mocks(make_mock: Callable[..., MockKFD]) -> None:
    first = [gpu.gpu_id for gpu in read_topology(make_mock(110000, 120001).fileio).gpus]
    second = [gpu.gpu_id for gpu in read_topology(make_mock(110000, 120001).fileio).gpus]
    assert first == second
