"""Issue 4 over MockUSB3: the emulated AMD GPU behind the emulated bridge, driven by the USB-path reference driver.

Everything the host does goes through USB: ``pcie_bringup`` programs the PCIe tree with config TLPs, the driver
(``open_usb_gpu``: ``Gfx1100UsbGpu`` on Navi 31's real registers, the only GPU the USB path models) boots the GPU and
sets queues up through BAR5, writes rings and data through BAR0 and rings doorbells through BAR2 (0xF0 streams), and
lands SRAM bytes with ``scsi_write`` (0xF2 + bulk OUT). ``usb.gpu`` (the emulator) is only read for assertions.
gfx1100 reports a memory fault through the GC hub.

VRAM layout: pointers ``0x1000`` (SDMA rptr/wptr) and ``0x1040`` (compute), SDMA ring ``0x100000``, compute ring
``0x110000``, data from ``0x400000``, kernel program ``0x800000``, kernel arguments ``0x7F0000``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.host_kernels import VADD_C

from tinyhil.amdgpu import (
    AmdQueue,
    QueueStopped,
    pm4_launch,
    pm4_release_mem,
    sdma_const_fill,
    sdma_copy_linear,
    sdma_fence,
    sdma_poll_regmem,
    sdma_timestamp,
    sdma_write,
)
from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464 import Asm2464Controller
from tinyhil.compiler import HostCCompiler
from tinyhil.emulators.amdgpu import AmdGpu
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.amdgpu.model_choices import ErrorCode
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import DeviceTimeout, InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import SYS_APERTURE, QueueKind
from tinyhil.spec.amdgpu_sdma import SdmaOp
from tinyhil.spec.asm2464 import PCIE_SRAM_BASE, SLOT_BYTES
from tinyhil.spec.code_object import ArgKind, CodeObject, pack_code_object
from tinyhil.spec.gfx1100_ih import IhClientId, IhSourceId
from tinyhil.spec.pci import Config
from tinyhil.usbgpu.gfx1100_gpu import Gfx1100UsbGpu, open_usb_gpu

VRAM_BYTES = 64 << 20
SDMA_RING, COMPUTE_RING, RING_BYTES = 0x100000, 0x110000, 0x10000
DATA, ARGS, PROGRAM = 0x400000, 0x7F0000, 0x800000


@dataclass
class Board:
    usb: MockUSB3
    controller: Asm2464Controller
    driver: Gfx1100UsbGpu

    @property
    def gpu(self) -> AmdGpu:
        return self.usb.gpu

    def sdma(self) -> AmdQueue:
        return self.driver.create_queue(
            QueueKind.SDMA, ring_va=SDMA_RING, ring_bytes=RING_BYTES, rptr_va=0x1000, wptr_va=0x1008
        )

    def compute(self) -> AmdQueue:
        return self.driver.create_queue(
            QueueKind.COMPUTE, ring_va=COMPUTE_RING, ring_bytes=RING_BYTES, rptr_va=0x1040, wptr_va=0x1048,
        )  # fmt: skip


def _open(seed: int = 0, mode: str = "sync") -> Board:
    usb = MockUSB3(vram_bytes=VRAM_BYTES, seed=seed, mode=mode)
    controller = Asm2464Controller(usb)
    return Board(usb, controller, open_usb_gpu(controller, firmware=GeneratedFirmware()))


@pytest.fixture(params=["sync", "timed"])
def board(request: pytest.FixtureRequest) -> Iterator[Board]:
    """A board brought up, in both transfer modes: the copy-side code is the same."""
    board = _open(mode=request.param)
    yield board
    board.usb.close()


def test_the_default_function_is_the_gpu_on_the_board_kernel() -> None:
    kernel = EventKernel(seed=3)
    with MockUSB3(seed=3, vram_bytes=128 << 20, gfx_target_version=110000) as usb:
        assert isinstance(usb.bridge.function, Gfx1100Function) and usb.gpu is usb.bridge.function.gpu
        assert usb.gpu.kernel is usb.kernel and usb.kernel.seed == kernel.seed
        assert (usb.gpu.vram_bytes, usb.gpu.gfx_target_version) == (128 << 20, 110000)
        assert usb.bridge.function.config.read(Config.DEVICE_ID, 2) == 0x744C
    bridge = Asm2464(function=PlainEndpoint(vram_bytes=1 << 20))
    with MockUSB3.over(bridge) as usb, pytest.raises(StateError, match="PlainEndpoint"):
        _ = usb.gpu


@pytest.mark.parametrize("version", [120001, 90500, 90402, "gfx1100"])
def test_a_gpu_other_than_gfx1100_is_refused_naming_the_value_and_where_it_runs(version: object) -> None:
    with pytest.raises(InvalidArgument, match=rf"gfx_target_version={version!r}\): only gfx1100's register interface "
                       r"is modelled on the USB path, expected gfx_target_version=110000 .*MOCKKFD\+AMD"):  # fmt: skip
        MockUSB3(gfx_target_version=version)  # type: ignore[arg-type]


def test_the_interface_option_is_gone() -> None:
    with pytest.raises(TypeError, match="interface"):
        MockUSB3(interface="gfx1100")  # no register interface to choose: gfx1100's is the only one


@pytest.mark.parametrize("option", ["vram_bytes", "gfx_target_version", "seed", "faults"])
def test_board_options_with_a_given_bridge_are_refused_naming_where_they_go(option: str) -> None:
    with pytest.raises(InvalidArgument, match=rf"MockUSB3.over\(bridge, {option}=...\): the bridge is already built"):
        MockUSB3.over(Asm2464(), **{option: 1})


def test_bring_up_finds_the_gpu_and_its_bars(board: Board) -> None:
    topology = board.driver.topology
    assert (topology.vendor_id, topology.device_id) == (0x1002, 0x744C)
    sizes = {bar.index: (bar.size, bar.is_64bit, bar.prefetchable) for bar in topology.bars}
    assert sizes == {0: (VRAM_BYTES, True, True), 2: (8 << 10, True, True), 5: (1 << 20, False, False)}
    assert board.driver.vram_bytes == board.gpu.vram_bytes == VRAM_BYTES


def test_sdma_packets_submitted_by_doorbell_read_back_through_bar0(board: Board) -> None:
    """Issue 4, first check: FENCE / WRITE / COPY_LINEAR / CONST_FILL / TIMESTAMP through BAR5, BAR2 and BAR0."""
    driver, queue = board.driver, board.sdma()
    source = np.random.default_rng(1).integers(0, 256, 0x30001, dtype=np.uint8)
    driver.write_memory(DATA + 0x100000, source)
    before_ns = board.usb.kernel.now_ns
    queue.submit(
        sdma_write(DATA, [0x11111111, 0x22222222, 0x33333333]),
        sdma_copy_linear(DATA + 0x200000, DATA + 0x100000, source.size),
        sdma_const_fill(DATA + 0x1000, 0xA5A5A5A5, 0x100),
        sdma_timestamp(DATA + 0x10),
        sdma_fence(DATA + 0x20, 0x600D),
    )
    assert board.usb.bridge.function.front.dropped_doorbells == [], "every doorbell reached the queue"
    driver.wait(lambda: driver.read_u32(DATA + 0x20) == 0x600D, "the fence")
    assert driver.read_memory(DATA, 16) == bytes.fromhex("111111112222222233333333") + bytes(4)
    assert driver.read_memory(DATA + 0x200000, source.size + 1) == source.tobytes() + b"\0"
    assert driver.read_memory(DATA + 0x1000, 0x104) == b"\xa5" * 0x100 + bytes(4)
    stamp = driver.read_u64(DATA + 0x10)
    assert before_ns // 10 < stamp <= board.usb.kernel.now_ns // 10, "100 MHz virtual time, after the submission"
    assert queue.read_rptr() == queue.wptr


def test_poll_regmem_on_sram_is_released_by_a_later_scsi_write(board: Board) -> None:
    """Issue 4, second check: a POLL_REGMEM through the system aperture waits for bytes the host lands in SRAM."""
    driver, queue = board.driver, board.sdma()
    wire = 0x1000
    sentinel = 0x51000007
    image = np.random.default_rng(2).integers(0, 256, wire, dtype=np.uint8)
    image[-4:] = np.frombuffer(sentinel.to_bytes(4, "little"), np.uint8)
    window = SYS_APERTURE + PCIE_SRAM_BASE
    queue.submit(
        sdma_poll_regmem(window + wire - 4, sentinel, interval=4),
        sdma_copy_linear(DATA, window, wire - 4),
        sdma_fence(DATA + 0x2000, 1),
    )
    with pytest.raises(DeviceTimeout, match=r"the copy: not reached .*SDMA0 queue 0: rptr 0x0 of wptr"):
        driver.wait(lambda: driver.read_u32(DATA + 0x2000) == 1, "the copy", timeout_s=0.02)
    assert queue.read_rptr() == 0 and board.gpu.queues[0].waiting, "still waiting at the poll"
    board.controller.scsi_write(image, slot_start=1)  # the right bytes in the wrong slot release nothing
    board.usb.pause(0.001)  # let the poll re-check a few hundred times
    assert board.gpu.queues[0].waiting and driver.read_memory(DATA, 16) == bytes(16)
    board.controller.scsi_write(image, slot_start=0)
    driver.wait(lambda: driver.read_u32(DATA + 0x2000) == 1, "the copy")
    assert driver.read_memory(DATA, wire - 4) == image[:-4].tobytes()
    assert bytes(board.usb.bridge.read_sram(SLOT_BYTES, wire)) == image.tobytes()


def test_vector_add_dispatched_through_pm4_gives_the_numpy_result(board: Board) -> None:
    compiler = HostCCompiler()
    if compiler.unavailable_reason():
        pytest.skip(str(compiler.unavailable_reason()))
    driver, queue = board.driver, board.compute()
    n = 5000
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out, a_va, b_va = DATA, DATA + 0x10000, DATA + 0x20000
    driver.write_memory(a_va, a)
    driver.write_memory(b_va, b)
    code = CodeObject("vadd", (ArgKind.POINTER,) * 3 + (ArgKind.VALUE,), compiler.compile(VADD_C))
    driver.write_memory(PROGRAM, pack_code_object(code))
    driver.write_memory(ARGS, np.array([out, a_va, b_va, n], "<u8"))
    queue.submit(pm4_launch(PROGRAM, ARGS, (-(-n // 64), 1, 1), (64, 1, 1)), pm4_release_mem(DATA + 0xF000, 7))
    driver.wait(lambda: driver.read_u32(DATA + 0xF000) == 7, "the end-of-pipe fence")
    assert np.array_equal(np.frombuffer(driver.read_memory(out, 4 * n), np.float32), a + b)
    assert driver.read_u32(out + 4 * n) == 0, "the kernel stops at n"


def _timestamps(seed: int) -> tuple[list[int], bytes, int]:
    board = _open(seed)
    with board.usb:
        driver, queue = board.driver, board.sdma()
        sizes = (64, 4096, 1 << 16, 1 << 20)
        copies = [sdma_copy_linear(DATA + 0x100000, 0x200000, size) for size in sizes]
        stamps = [sdma_timestamp(DATA + 8 * i) for i in range(len(sizes) + 1)]
        # One doorbell for the copies (the gaps are the engine's pace), then a second submission.
        queue.submit(*(packet for pair in zip(stamps, copies, strict=False) for packet in pair), stamps[-1])
        queue.submit(sdma_timestamp(DATA + 0x28), sdma_fence(DATA + 0x40, 1))
        driver.wait(lambda: driver.read_u32(DATA + 0x40) == 1, "the fence")
        raw = driver.read_memory(DATA, 0x30)
        return [int(t) for t in np.frombuffer(raw, "<u8")], raw, board.usb.kernel.now_ns


def test_timestamps_are_monotonic_and_identical_across_two_runs_with_the_same_seed() -> None:
    stamps, raw, now_ns = _timestamps(seed=5)
    assert all(earlier < later for earlier, later in itertools.pairwise(stamps)), stamps
    gaps = [later - earlier for earlier, later in itertools.pairwise(stamps[:5])]
    assert gaps == sorted(gaps) and gaps[-1] > gaps[0], "a bigger copy takes longer"
    assert _timestamps(seed=5)[1:] == (raw, now_ns), "byte-identical, at the same virtual time"


def test_a_memory_fault_on_gfx1100_is_the_gc_hub_protection_fault_at_the_next_wait() -> None:
    """An unmapped GPU address is a protection fault: its interrupt vector reaches the driver at its next wait."""
    board = _open()
    with board.usb:
        queue = board.sdma()
        queue.submit(sdma_fence(0x9_0000_0000, 1), sdma_fence(DATA, 1))
        with pytest.raises(
            QueueStopped, match=r"SDMA0 queue 0: GC hub protection fault at GPU address 0x900000000"
        ) as error:
            board.driver.wait(lambda: board.driver.read_u32(DATA) == 1, "the second fence")
        assert error.value.error_code == IhSourceId.UTCL2_FAULT and error.value.fault_addr == 0x9_0000_0000
        assert (error.value.opcode, error.value.ring_offset) == (5, 0), "the FENCE at the ring's start"
        assert board.driver.read_u32(DATA) == 0, "nothing after the fault ran"
        assert board.gpu.queues[0].error_code == ErrorCode.MEMORY_FAULT


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dwords=st.lists(
        st.one_of(st.integers(0, 0xFFFF_FFFF), st.sampled_from([int(op) for op in SdmaOp])), min_size=1, max_size=48
    )
)
def test_random_dwords_in_an_sdma_ring_over_usb_end_in_idle_a_wait_or_a_reasoned_stop(dwords: list[int]) -> None:
    board = _open()
    with board.usb:
        driver, queue = board.driver, board.sdma()
        queue.submit(np.array(dwords, "<u4"))
        try:
            driver.wait(lambda: queue.read_rptr() >= queue.wptr, "the ring to drain", timeout_s=0.003)
        except QueueStopped as stopped:  # gfx1100: only a memory fault reaches the host (the GC hub's status)
            assert stopped.status == IhClientId.GFX and stopped.error_code in set(IhSourceId)  # the IV, as it came
            assert stopped.queue in str(stopped) and 0 <= stopped.ring_offset < RING_BYTES
        except DeviceTimeout:  # gfx1100 has no per-queue STATUS: a queue stopped by a bad packet shows as a timeout
            engine_queue = board.gpu.queues[0]
            stopped_by_a_packet = engine_queue.error_code != ErrorCode.NONE
            assert engine_queue.waiting or "waiting for the rest" in engine_queue.describe() or stopped_by_a_packet
        assert board.controller.pcie_link_up(), "the bridge still answers"
