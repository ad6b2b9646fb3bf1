"""Compute-queue buffer sizes from the topology (kfd_queue.c's formula, worked by hand for two boards)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tinyhil.kfd import CwsrSizes, QueueEngine, cwsr_sizes, read_topology
from tinyhil.mocks.kfd import MockKFD


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # gfx1100: 96 CUs, 32 waves each at 12 bytes; per CU 384 KiB VGPRs + 16 KiB SGPRs + 64 KiB LDS + 4 KiB regs.
        (110000, CwsrSizes(0xA000, 0xA000 + 96 * 0x75000, 3072 * 32, 2048)),
        # gfx950 (8 XCCs): 32 CUs per XCC, min(32*40, 32*512) waves at 8 bytes; 512 KiB VGPRs, 160 KiB LDS per CU.
        (90500, CwsrSizes(0x3000, 0x3000 + 32 * 0xAD000, 1280 * 32, 2048)),
    ],
)
def test_cwsr_sizes(make_mock: Callable[..., MockKFD], version: int, expected: CwsrSizes) -> None:
    (node,) = read_topology(make_mock(version).fileio).gpus
    assert cwsr_sizes(node) == expected


def test_pointer_units() -> None:
    assert QueueEngine.SDMA.pointer_unit_bytes == 1 and QueueEngine.COMPUTE.pointer_unit_bytes == 4
