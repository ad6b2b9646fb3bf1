"""The copyin/copyout and quirk tests of ``test_copy.py`` and ``test_quirks.py``, rerun on Navi 31's real register
interface: the same test functions, with ``board_factory`` giving boards whose GPU is a
:class:`~tinyhil.emulators.amdgpu.gfx1100.Gfx1100Function`, booted by :class:`~tinyhil.usbgpu.gfx1100_gpu.Gfx1100UsbGpu`
(the copy windows reached through system-bit PTEs). Boundary sizes stay bit-exact and the quirks still bite."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.boards import Board

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import QueueKind
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu


def _sibling(name: str) -> ModuleType:
    """Load ``tests/usbgpu/<name>.py`` under a private name (the suite imports test modules by path)."""
    spec = importlib.util.spec_from_file_location(f"_gfx1100_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_copy, _quirks = _sibling("test_copy"), _sibling("test_quirks")
test_boundary_sizes_round_trip = _copy.test_boundary_sizes_round_trip
test_multi_megabyte_round_trip = _copy.test_multi_megabyte_round_trip
test_seq_persists_across_copies_and_wraps_the_sentinel = _copy.test_seq_persists_across_copies_and_wraps_the_sentinel
test_copies_are_exact_under_landing_delays_and_reordering = (
    _copy.test_copies_are_exact_under_landing_delays_and_reordering
)
test_naive_has_no_sentinel_so_a_dropped_transfer_goes_unnoticed = (
    _copy.test_naive_has_no_sentinel_so_a_dropped_transfer_goes_unnoticed
)
test_setup_zeroing_cannot_land_after_the_first_chunks = _copy.test_setup_zeroing_cannot_land_after_the_first_chunks
test_a_dropped_sentinel_gives_the_drain_error_never_wrong_data = (
    _quirks.test_a_dropped_sentinel_gives_the_drain_error_never_wrong_data
)
test_full_window_corruption_breaks_only_full_window_images = (
    _quirks.test_full_window_corruption_breaks_only_full_window_images
)
test_full_window_corruption_hits_the_pipelined_revision_exactly_when_the_image_fills_the_window = (
    _quirks.test_full_window_corruption_hits_the_pipelined_revision_exactly_when_the_image_fills_the_window
)
test_sys_buf_collision_loses_low_sys_buf_signals_and_not_vram_ones = (
    _quirks.test_sys_buf_collision_loses_low_sys_buf_signals_and_not_vram_ones
)
test_timed_mode_catches_staging_buffer_reuse_before_reap = (
    _quirks.test_timed_mode_catches_staging_buffer_reuse_before_reap
)
test_a_copyin_after_a_drain_error_fails_cleanly_and_writes_nothing = (
    _quirks.test_a_copyin_after_a_drain_error_fails_cleanly_and_writes_nothing
)

VRAM_BYTES = 64 << 20  # the smallest gfx1100 board: the driver's boot memory takes the top 32 MB


def make_gfx1100_board(mode: str = "sync", *, ring_bytes: int = 1 << 16, **options: Any) -> Board:
    usb = MockUSB3(mode=mode, vram_bytes=VRAM_BYTES, **options)
    ctrl = Asm2464Controller(usb)
    gpu = open_usb_gpu(ctrl, firmware=GeneratedFirmware())
    assert isinstance(gpu, Gfx1100UsbGpu)
    sdma = gpu.create_queue(QueueKind.SDMA, ring_va=0x100000, ring_bytes=ring_bytes, rptr_va=0x1000, wptr_va=0x1008)
    return Board(usb, ctrl, gpu, sdma)


@pytest.fixture
def board_factory() -> Callable[..., Board]:
    """Boards with the gfx1100 register interface (overrides ``conftest.board_factory`` in this module)."""
    return make_gfx1100_board
