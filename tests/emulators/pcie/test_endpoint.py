"""PlainEndpoint: identity, BAR layout, lazily committed VRAM, plain MMIO memory, DMA through its host."""

from __future__ import annotations

import pytest

from tinyhil.emulators.pcie import PcieFunction, PlainEndpoint
from tinyhil.errors import InvalidArgument, StateError

MB = 1 << 20


def test_is_a_pcie_function_with_the_spec_bars() -> None:
    endpoint = PlainEndpoint()
    assert isinstance(endpoint, PcieFunction)
    config = endpoint.config
    assert config.config_read(0) & 0xFFFF == 0x1002
    assert {i: config.bar_size(i) for i in config.bar_specs} == {0: 256 * MB, 2: 8 << 10, 5: 2 * MB}
    assert config.bar_specs[0].is_64bit and config.bar_specs[0].prefetchable and not config.bar_specs[5].is_64bit
    assert config.bar_specs[0].resizable_sizes == (256 * MB,)


def test_bar0_resizes_up_to_the_vram_size() -> None:
    endpoint = PlainEndpoint(vram_bytes=1 << 30)
    assert endpoint.config.bar_specs[0].resizable_sizes == (256 * MB, 512 * MB, 1024 * MB)
    endpoint.config_write(0x108, 10 << 8, 0xF)
    assert endpoint.config.bar_size(0) == 1 << 30
    endpoint.mmio_write(0, (1 << 30) - 4, b"\x01\x02\x03\x04")
    assert endpoint.mmio_read(0, (1 << 30) - 4, 4) == b"\x01\x02\x03\x04"


def test_mmio_is_plain_memory_and_bounds_checked() -> None:
    endpoint = PlainEndpoint(vram_bytes=MB)
    endpoint.mmio_write(2, 0x10, b"\xaa\xbb")
    endpoint.mmio_write(5, 2 * MB - 4, b"\x11\x22\x33\x44")
    assert endpoint.mmio_read(2, 0x10, 2) == b"\xaa\xbb" and endpoint.registers[-4:].tobytes() == b"\x11\x22\x33\x44"
    with pytest.raises(InvalidArgument, match="past the end"):
        endpoint.mmio_read(2, 8 << 10, 1)
    with pytest.raises(InvalidArgument, match="bar=1"):
        endpoint.mmio_read(1, 0, 1)


def test_dma_needs_a_host() -> None:
    with pytest.raises(StateError, match="no host attached"):
        PlainEndpoint(vram_bytes=MB).dma_to_vram(0x200000, 4, 0)


def test_bad_vram_size() -> None:
    with pytest.raises(InvalidArgument, match="power of two"):
        PlainEndpoint(vram_bytes=3 * MB)
