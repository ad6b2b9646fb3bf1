"""The GPU address space over the flat translation: lazily committed VRAM, mappings, the system aperture, fills."""

from __future__ import annotations

import mmap
import os
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.scripts import load_benchmark
from support.system_bus import FakePcie

from tinyhil.emulators.amdgpu import (
    SYS_APERTURE,
    AddressSpace,
    FlatTranslation,
    GpuMemoryFault,
    IoRegion,
    SystemBus,
    Vram,
)
from tinyhil.errors import InvalidArgument


def flat(
    vram_bytes: int = 1 << 20, *, system_bus: SystemBus | None = None, vram_at_zero: bool = True
) -> tuple[AddressSpace, FlatTranslation]:
    """An address space over a flat translation (the system aperture on when a bus is given), and the translation."""
    vram = Vram(vram_bytes)
    mappings = FlatTranslation(vram, vram_at_zero=vram_at_zero, aperture=system_bus is not None)
    return AddressSpace(vram, mappings, IoRegion("system bus", system_bus)), mappings


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_vram_is_lazily_committed_and_reset_gives_the_pages_back() -> None:
    before = _rss_bytes()
    memory, _mappings = flat(2 << 30, vram_at_zero=True)
    assert _rss_bytes() - before < 64 << 20, "2 GB of untouched VRAM costs (almost) no RAM"
    memory.fill(1 << 30, 32 << 20, 0xAB, dword=False)
    touched = _rss_bytes()
    assert touched - before >= 30 << 20
    memory.reset()
    assert _rss_bytes() < touched - (30 << 20) and bytes(memory.read(1 << 30, 16)) == bytes(16)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd_create is Linux's")
def test_vram_over_a_shared_backing_is_seen_through_its_file_and_reset_zeroes_it() -> None:
    fd = os.memfd_create("vram")
    os.ftruncate(fd, 1 << 20)
    vram = Vram(1 << 20, mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED))
    memory = AddressSpace(vram, FlatTranslation(vram, vram_at_zero=True, aperture=False), IoRegion("system bus", None))
    memory.write(0x1000, b"shared")
    assert os.pread(fd, 6, 0x1000) == b"shared"  # another process mapping the file sees the GPU's stores
    memory.reset()
    assert bytes(memory.read(0x1000, 6)) == bytes(6)
    assert os.pread(fd, 6, 0x1000) == bytes(6)
    with pytest.raises(InvalidArgument, match="expected vram_bytes=0x100000"):
        Vram(1 << 20, mmap.mmap(fd, 1 << 19, mmap.MAP_SHARED))
    os.close(fd)


def test_mappings_translate_to_their_backing() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    host = bytearray(8192)
    mappings.map(0x10_0000_0000, memory.vram[0x4000:0x6000])
    mappings.map(0x10_0000_2000, memoryview(host))  # adjacent mapping with a different backing
    memory.write(0x10_0000_1FFC, b"ABCDEFGH")  # straddles the two
    assert bytes(memory.vram[0x5FFC:0x6000]) == b"ABCD" and bytes(host[:4]) == b"EFGH"
    assert bytes(memory.read(0x10_0000_1FFC, 8)) == b"ABCDEFGH"
    span = memory.host_span(0x10_0000_2010)
    assert span.nbytes == 8192 - 0x10 and span.address == np.frombuffer(host, np.uint8).ctypes.data + 0x10


@pytest.mark.parametrize(
    ("va", "nbytes", "fault_va"),
    [
        (0, 4, 0),
        (0x10_0000_3FFC, 8, 0x10_0000_4000),
        (0x10_0000_0000 - 2, 4, 0x10_0000_0000 - 2),
        (1 << 60, 1, 1 << 60),
    ],
)
def test_unmapped_accesses_fault_without_writing_anything(va: int, nbytes: int, fault_va: int) -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    mappings.map(0x10_0000_0000, memory.vram[:0x4000])
    with pytest.raises(GpuMemoryFault, match=f"GPU memory fault at {fault_va:#x}") as info:
        memory.write(va, b"\xff" * nbytes)
    assert info.value.va == fault_va
    assert not np.any(np.frombuffer(memory.vram, np.uint8)), "a faulting write writes nothing"
    with pytest.raises(GpuMemoryFault):
        memory.read(va, nbytes)


BAD_MAPPINGS = [
    (0x1001, 4096, "expected a non-empty range of whole 4096 B pages"),
    (0x1000, 100, "expected a non-empty range of whole 4096 B pages"),
    (0x1000, 0, "expected a non-empty range"),
    (0x3000, 4096, "overlaps the mapping 0x2000\\+0x2000; unmap it first"),
    (0x1000, 8192, "overlaps the mapping 0x2000\\+0x2000"),
    ((1 << 48) - 4096, 8192, "ends past the GPU VA limit"),
    (SYS_APERTURE, 4096, "overlaps the system aperture"),
    (-4096, 4096, "expected an int >= 0"),
]


@pytest.mark.parametrize(("va", "nbytes", "message"), BAD_MAPPINGS)
def test_bad_mappings_are_refused_and_change_nothing(va: int, nbytes: int, message: str) -> None:
    memory, mappings = flat(1 << 20, system_bus=FakePcie(), vram_at_zero=False)
    mappings.map(0x2000, memory.vram[:0x2000])
    before = mappings.mappings
    with pytest.raises(InvalidArgument, match=message):
        mappings.map(va, memoryview(bytearray(nbytes)))
    assert mappings.mappings == before


def test_read_only_backings_and_unknown_unmaps_are_refused() -> None:
    _memory, mappings = flat(1 << 20, vram_at_zero=False)
    with pytest.raises(InvalidArgument, match="read-only"):
        mappings.map(0x1000, memoryview(bytes(4096)))
    with pytest.raises(InvalidArgument, match=r"va=0x1000, expected the start of a mapping \(mapped: nothing\)"):
        mappings.unmap(0x1000)


def test_writes_to_a_read_only_mapping_fault_and_change_nothing() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    mappings.map(0x1000, memory.vram[:0x1000])
    mappings.map(0x2000, memory.vram[0x1000:0x2000], writable=False)
    memory.vram[0x1000:0x1004] = b"keep"
    writes: list[Callable[[], object]] = [
        lambda: memory.write(0x2000, b"x"),
        lambda: memory.write(0x1FFE, b"abcd"),  # straddles into the read-only page
        lambda: memory.fill(0x2000, 8, 0, dword=True),
        lambda: memory.copy(0x2000, 0x1000, 4),
    ]
    for write in writes:
        with pytest.raises(GpuMemoryFault, match="read-only") as caught:
            write()
        assert caught.value.va == 0x2000
    assert bytes(memory.read(0x2000, 4)) == b"keep"  # readable as ever
    assert not any(memory.vram[0xFFE:0x1000])  # nothing of the straddling write landed either


def test_unmap_makes_the_range_fault_again() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=True)
    memory.write(0x100, b"x")
    mappings.unmap(0)
    with pytest.raises(GpuMemoryFault):
        memory.read(0x100, 1)


@settings(max_examples=60)
@given(src=st.integers(0, 0x3000), dst=st.integers(0, 0x3000), nbytes=st.integers(0, 0x1000))
def test_copies_behave_like_memmove_even_when_overlapping(src: int, dst: int, nbytes: int) -> None:
    memory, _mappings = flat(1 << 20, vram_at_zero=True)
    _check_copy_is_memmove(memory, src, dst, nbytes, seed=src * 7 + dst)


def _check_copy_is_memmove(memory: AddressSpace, src: int, dst: int, nbytes: int, *, seed: int) -> None:
    """``memory.copy`` over 16 KB of random bytes at GPU address 0 leaves what Python's slice assignment leaves."""
    pattern = np.random.default_rng(seed).integers(0, 256, 0x4000, dtype=np.uint8).tobytes()
    memory.write(0, pattern)
    memory.copy(dst, src, nbytes)
    expected = bytearray(pattern)
    expected[dst : dst + nbytes] = pattern[src : src + nbytes]
    assert bytes(memory.read(0, 0x4000)) == bytes(expected)


@settings(max_examples=60)
@given(src=st.integers(0, 0x3000), dst=st.integers(0, 0x3000), nbytes=st.integers(0, 0x1000))
def test_copies_across_split_mappings_behave_like_memmove(src: int, dst: int, nbytes: int) -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    mappings.map(0, memory.vram[0x10000:0x12000])  # GPU-contiguous, VRAM-discontiguous: copies cross the seam
    mappings.map(0x2000, memory.vram[0x4000:0x6000])
    _check_copy_is_memmove(memory, src, dst, nbytes, seed=src * 5 + dst)


def test_copies_across_mappings_and_the_system_aperture() -> None:
    bus = FakePcie()
    memory, _mappings = flat(1 << 20, system_bus=bus, vram_at_zero=True)
    memory.write(0x1000, bytes(range(200)))
    memory.copy(SYS_APERTURE + 0x200010, 0x1000, 200)  # VRAM -> SRAM (copyout)
    assert bytes(bus.memory[0x10 : 0x10 + 200]) == bytes(range(200))
    memory.copy(0x8000, SYS_APERTURE + 0x200010, 200)  # SRAM -> VRAM (copyin)
    assert bytes(memory.read(0x8000, 200)) == bytes(range(200))
    memory.fill(SYS_APERTURE + 0x200400, 16, 0x01020304, dword=True)
    assert bytes(bus.memory[0x400:0x410]) == bytes.fromhex("04030201") * 4
    assert memory.read_u32(SYS_APERTURE + 0x200400) == 0x01020304


@contextmanager
def _peak_allocation() -> Iterator[Callable[[], int]]:
    """The most host memory (bytes, numpy arrays included) allocated at once inside the block: a count, not a time."""
    tracemalloc.start()
    peak = [0]
    try:
        yield lambda: peak[0]
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def test_a_fill_past_the_bus_memory_faults_before_allocating_host_memory_for_it() -> None:
    bus = FakePcie()
    memory, _mappings = flat(1 << 20, system_bus=bus, vram_at_zero=True)
    with _peak_allocation() as peak, pytest.raises(GpuMemoryFault, match=r"at 0x100000200000\+0x10000000: system"):
        memory.fill(SYS_APERTURE + 0x200000, 1 << 28, 0x5A5A5A5A, dword=True)
    assert peak() < 1 << 20, f"{peak():#x} bytes allocated for a fill the bus cannot take"
    assert not any(bus.memory), "nothing was written"
    memory.fill(SYS_APERTURE + 0x200000, 0x1000, 0xAB, dword=False)  # a fill that fits still works
    assert bytes(bus.memory[:0x1001]) == b"\xab" * 0x1000 + b"\0"


def test_a_copy_gathered_for_the_bus_checks_the_bus_before_gathering() -> None:
    bus = FakePcie()
    memory, mappings = flat(1 << 20, system_bus=bus, vram_at_zero=False)
    mappings.map(0, memory.vram[:0x40000])  # two mappings, so the copy's source is gathered into one buffer
    mappings.map(0x40000, memory.vram[0x80000:0xC0000])
    with _peak_allocation() as peak, pytest.raises(GpuMemoryFault, match="system bus"):
        memory.copy(SYS_APERTURE + 0x260000, 0, 0x80000)  # runs 0x60000 bytes past the end of SRAM
    assert peak() < 0x80000 and not any(bus.memory)
    memory.write(0x3FFF0, bytes(range(32)))
    memory.copy(SYS_APERTURE + 0x200000, 0x3FFF0, 32)
    assert bytes(bus.memory[:32]) == bytes(range(32))


def test_system_bus_errors_become_memory_faults() -> None:
    memory, _mappings = flat(1 << 20, system_bus=FakePcie(), vram_at_zero=True)
    with pytest.raises(GpuMemoryFault, match=r"at 0x100000000000\+0x4: system bus 0x0: PCIe 0x0\+0x4 hits nothing"):
        memory.read_u32(SYS_APERTURE)
    with pytest.raises(GpuMemoryFault, match="system bus"):
        memory.write_u32(SYS_APERTURE + 0x900000, 1)
    with pytest.raises(GpuMemoryFault, match="kernels cannot access the system aperture"):
        memory.host_span(SYS_APERTURE + 0x200000)


def test_without_a_bus_the_aperture_is_ordinary_unmapped_space() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    with pytest.raises(GpuMemoryFault, match="no mapping"):
        memory.read(SYS_APERTURE + 0x200000, 4)
    mappings.map(SYS_APERTURE, memoryview(bytearray(4096)))  # the KFD path may use these addresses
    assert memory.read_u32(SYS_APERTURE) == 0


def test_the_fake_bus_is_a_system_bus() -> None:
    assert isinstance(FakePcie(), SystemBus)


def test_writes_are_reported_to_the_listener() -> None:
    memory, _mappings = flat(1 << 20, vram_at_zero=True)
    seen: list[tuple[int, int]] = []
    memory.on_write = lambda va, n: seen.append((va, n))
    memory.write(0x10, b"abcd")
    memory.copy(0x100, 0x10, 4)
    memory.fill(0x200, 8, 1, dword=False)
    memory.read(0x10, 4)
    assert seen == [(0x10, 4), (0x100, 4), (0x200, 8)]


@pytest.mark.parametrize(
    ("vram_bytes", "message"), [(1000, "expected an int >= 1048576"), (3 << 19, "whole number of MB")]
)
def test_bad_vram_sizes_are_refused(vram_bytes: int, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Vram(vram_bytes)


def test_dword_fills_must_be_aligned() -> None:
    memory, _mappings = flat(1 << 20)
    with pytest.raises(InvalidArgument, match="dword fill of 0x2\\+0x8"):
        memory.fill(2, 8, 0, dword=True)


def test_the_generation_changes_whenever_the_mappings_do() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=True)
    seen = [memory.generation]
    mappings.map(0x10_0000_0000, memoryview(bytearray(4096)))
    seen.append(memory.generation)
    memory.write(0x10, b"abcd")  # accesses leave it alone
    seen.append(memory.generation)
    mappings.unmap(0x10_0000_0000)
    seen.append(memory.generation)
    memory.reset()
    seen.append(memory.generation)
    assert seen[1] > seen[0] and seen[2] == seen[1] and seen[3] > seen[2] and seen[4] > seen[3]


def _fill_counts(memory: AddressSpace, va: int, nbytes: int) -> tuple[int, int]:
    count_calls = load_benchmark("callcount").count_calls
    return cast(tuple[int, int], count_calls(lambda: memory.fill(va, nbytes, 0x5A, dword=False)))


def test_a_fill_writes_in_place_with_a_cost_that_does_not_grow_with_its_size() -> None:
    memory, _ = flat(64 << 20)
    memory.fill(0, 64 << 20, 0, dword=False)  # commits the pages
    with _peak_allocation() as peak:
        memory.fill(0x1000, 48 << 20, 0xA5A5A5A5, dword=True)
    assert peak() < 64 << 10, f"{peak():#x} bytes allocated for a fill of 48 MB"
    words, end = np.frombuffer(memory.vram, "<u4"), (0x1000 + (48 << 20)) // 4
    assert words[0x400] == words[end - 1] == 0xA5A5A5A5 and words[0x3FF] == words[end] == 0
    assert _fill_counts(memory, 0, 4096) == _fill_counts(memory, 0, 32 << 20), "one run: the same calls"


def test_a_fill_of_scattered_runs_costs_a_few_calls_per_run() -> None:
    memory, mappings = flat(1 << 20, vram_at_zero=False)
    runs = 64
    for page in range(runs):  # GPU-contiguous, VRAM pages in reverse order: one run per page
        mappings.map(page * 4096, memory.vram[(runs - 1 - page) * 4096 : (runs - page) * 4096])
    memory.fill(4, runs * 4096 - 8, 0x01020304, dword=True)
    words = np.frombuffer(memory.vram[: runs * 4096], "<u4").reshape(runs, 1024)[::-1].ravel()  # in GPU order
    assert words[0] == words[-1] == 0 and np.all(words[1:-1] == 0x01020304)
    few, many = _fill_counts(memory, 0, 8 * 4096), _fill_counts(memory, 0, runs * 4096)
    per_run = [(m - f) / (runs - 8) for m, f in zip(many, few, strict=True)]
    assert per_run[0] <= 3 and per_run[1] <= 5, f"(Python, C) calls per run: {per_run}"  # the walk and one fill
