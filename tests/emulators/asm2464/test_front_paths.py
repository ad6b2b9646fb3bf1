"""The synchronous inline fast path and the queued event path of the USB front agree.

Two identical boards (seed, timing, landing quirks, fault plan, a GPU behind the bridge) run the same sequence of
vendor requests, SRAM-armed bulk transfers and GPU work; one sends every transfer with ``UsbFront.transfer`` (the
inline path wherever it is allowed), the other with ``submit`` + ``wait`` (always queued). Every outcome, the
virtual clock, the bridge state, the fault counters and the GPU's memory must come out the same.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tinyhil.amdgpu import AmdQueue, sdma_copy_linear, sdma_fence, sdma_poll_regmem
from tinyhil.emulators.amdgpu import SYS_APERTURE, AmdGpu, BridgedFunction, QueueKind
from tinyhil.emulators.amdgpu.pcie import HostPort
from tinyhil.emulators.asm2464 import Asm2464, Quirks, Urb, UsbStatus
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PcieUnsupportedRequest, Type0Config
from tinyhil.emulators.pcie.endpoint import gpu_bars
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.mocks.amdgpu import DirectQueueTransport
from tinyhil.spec.asm2464 import FmtType
from tinyhil.spec.pci import CLASS_DISPLAY_VGA, VENDOR_ID_AMD

SRAM_PCIE = 0x200000
RELEASE_PCIE = 0x822000 + 12  # the completion-queue dword whose GPU write releases a device-to-host arm
VRAM_COPY = 0x400000
TIMEOUT_NS = 2_000_000
SRAM_XDATA = 0x8000  # XDATA window onto SRAM bytes 0-0xFFF
SYS_BUF_XDATA = 0xA000
LAYOUT = {"ring_va": 0x100000, "ring_bytes": 0x10000, "rptr_va": 0x1000, "wptr_va": 0x1008, "doorbell_index": 0}

Step = tuple[Any, ...]  # (kind, its arguments)
VRAM_BYTES = 8 << 20


class DmaGpu(BridgedFunction):
    """The GPU core as the bridge's PCIe function, reduced to what these tests use: a DMA master. Its flat memory
    puts VRAM at GPU address 0 and reaches the bridge at ``SYS_APERTURE + pcie_addr``, so a queue driven directly
    (no register interface, no page tables) copies into SRAM, polls it and writes the completion queue."""

    def __init__(self, kernel: EventKernel) -> None:
        self._check_board(kernel, VRAM_BYTES, min_vram=1 << 20, shown_min="1 MB")
        self._port = HostPort()
        self.gpu = AmdGpu(kernel, vram_bytes=VRAM_BYTES, system_bus=self._port, vram_at_zero=True)
        self._config = Type0Config(vendor_id=VENDOR_ID_AMD, device_id=0x744C, class_code=CLASS_DISPLAY_VGA,
                                   bars=gpu_bars(VRAM_BYTES))  # fmt: skip

    def mmio_read(self, bar: int, offset: int, nbytes: int) -> bytes:
        raise PcieUnsupportedRequest(f"BAR{bar} {offset:#x}: this test GPU has no BARs to read", addr=offset,
                                     nbytes=nbytes)  # fmt: skip

    def mmio_write(self, bar: int, offset: int, data: bytes) -> None:
        raise PcieUnsupportedRequest(f"BAR{bar} {offset:#x}: this test GPU has no BARs to write", addr=offset,
                                     nbytes=len(data))  # fmt: skip

    def host_memory_written(self, pcie_addr: int, nbytes: int) -> None:
        self.gpu.memory_written(SYS_APERTURE + pcie_addr, nbytes)


@dataclass
class Board:
    """One brought-up bridge with an SDMA queue on the GPU behind it, and the way it sends transfers."""

    bridge: Asm2464
    queue: AmdQueue
    function: DmaGpu
    inline: bool

    def send(self, urb: Urb) -> Urb:
        front = self.bridge.front
        if self.inline:
            return front.transfer(urb)
        front.wait(front.submit(urb))  # always queued: the same outcome rule as transfer()
        if urb.status is not UsbStatus.COMPLETED:
            error = urb.error()
            if error is not None:
                raise error
        return urb


def build(make_host: Any, seed: int, landing: tuple[int, int], plan: FaultPlan, *, inline: bool) -> Board:
    kernel = EventKernel(seed)
    function = DmaGpu(kernel)
    quirks = Quirks(landing_delay_ns=landing[0], landing_jitter_ns=landing[1])
    bridge = Asm2464(kernel=kernel, function=function, quirks=quirks, seed=seed)
    make_host(bridge).bring_up()  # without faults; the plan applies to the sequence only
    bridge.faults = plan
    queue = AmdQueue(DirectQueueTransport(function.gpu), QueueKind.SDMA, **LAYOUT)
    queue.initialize()
    function.gpu.create_queue(QueueKind.SDMA, **LAYOUT)
    return Board(bridge, queue, function, inline)


def control(request_type: int, request: int, value: int, index: int, length: int = 0, data: bytes = b"") -> Urb:
    payload = memoryview(data) if request_type & 0x80 == 0 else None
    return Urb(0, length or len(data), TIMEOUT_NS, setup=(request_type, request, value, index), payload=payload)


def urbs_for(step: Step) -> list[Urb]:
    """The transfers of one host step (fresh objects per board)."""
    kind = step[0]
    if kind == "xdata_write":
        _, addr, byte = step
        return [control(0x40, 0xE5, addr, byte)]
    if kind == "xdata_read":
        _, addr, length = step
        return [control(0xC0, 0xE4, addr, 0, length)]
    if kind == "bulk_out":
        _, slot, sectors, extra, fill = step
        length = sectors * 512 + extra
        arm = control(0x40, 0xF2, sectors, slot | 4 << 8)
        return [arm, Urb(0x02, length, TIMEOUT_NS, payload=memoryview(bytes([fill]) * length))]
    if kind == "bulk_in":
        _, slot, sectors, _release = step
        arm = control(0x40, 0xF2, sectors | 0x8000, slot | 4 << 8)
        return [arm, Urb(0x81, sectors * 512, TIMEOUT_NS)]
    if kind == "config_read":
        _, reg = step
        tlp = struct.pack("<III", reg, 0, 0)
        return [control(0x40, 0xF0, FmtType.CFGRD0 | 0xF << 8, 0, data=tlp), control(0xC0, 0xF0, 0, 0, 8)]
    raise AssertionError(step)


def gpu_work(board: Board, step: Step) -> None:
    kind = step[0]
    if kind == "gpu_copy":
        _, offset, nbytes, fence_offset, value = step
        board.queue.submit(
            sdma_copy_linear(VRAM_COPY, SYS_APERTURE + SRAM_PCIE + offset, nbytes),
            sdma_fence(SYS_APERTURE + SRAM_PCIE + fence_offset * 4, value),
        )
    elif kind == "gpu_release":
        board.queue.submit(sdma_fence(SYS_APERTURE + RELEASE_PCIE, step[1]))
    elif kind == "gpu_poll":  # waits for bytes a bulk OUT lands (or a host XDATA write into the SRAM window)
        _, offset, value = step
        board.queue.submit(sdma_poll_regmem(SYS_APERTURE + SRAM_PCIE + offset * 4, value, interval=4))
    elif kind == "idle":
        board.bridge.kernel.run_for(step[1])
    else:
        raise AssertionError(step)


def release_later(board: Board, copy_bytes: int) -> None:
    """The GPU releases the armed copyout while the bulk IN waits (after a copy of ``copy_bytes``, if any)."""
    packets = [sdma_copy_linear(VRAM_COPY, SYS_APERTURE + SRAM_PCIE, copy_bytes)] if copy_bytes else []
    board.queue.submit(*packets, sdma_fence(SYS_APERTURE + RELEASE_PCIE, 1))


def outcome(run: Callable[[], Urb]) -> tuple[object, ...]:
    try:
        urb = run()
    except Exception as error:  # the same exception, with the same message, on both paths
        return ("raised", type(error).__name__, str(error))
    return (urb.status, bytes(urb.data), urb.actual_length, urb.submitted_ns, urb.completed_ns)


def drive(board: Board, steps: list[Step]) -> tuple[object, ...]:
    """Run ``steps`` on ``board``; returns every observable result."""
    results: list[object] = []
    for step in steps:
        if str(step[0]).startswith(("gpu_", "idle")):
            results.append(outcome_of_work(board, step))
            continue
        for number, urb in enumerate(urbs_for(step)):
            if step[0] == "bulk_in" and number == 1 and step[3] is not None:
                release_later(board, step[3])
            results.append(outcome(partial(board.send, urb)))
    bridge = board.bridge
    gpu = board.function.gpu
    vram = hashlib.sha256(bytes(gpu.vram[VRAM_COPY : VRAM_COPY + 0x10000])).hexdigest()
    sram = hashlib.sha256(bridge.read_sram(0, 0x80000)).hexdigest()
    counts = sorted((repr(operation), count) for operation, count in bridge.front.counts.items())
    queues = [(queue.status, queue.describe()) for queue in gpu.queues]
    return tuple(results), bridge.kernel.now_ns, bridge.state_digest(), sram, counts, vram, queues


def outcome_of_work(board: Board, step: Step) -> tuple[object, ...]:
    try:
        gpu_work(board, step)
    except Exception as error:
        return ("raised", type(error).__name__, str(error))
    return ("ok", board.bridge.kernel.now_ns)


def plan_kind(plan: FaultPlan, counts: dict[Operation, int]) -> str:
    if not plan.rules:
        return "no rules"
    fired = any(counts.get(rule.operation, 0) >= rule.occurrence for rule in plan.rules)
    return "fired" if fired else "never fired"


def check_paths_agree(make_host: Any, seed: int, landing: tuple[int, int], plan: FaultPlan, steps: list[Step]) -> str:
    """Run ``steps`` on an inline and a queued board; returns the kind of fault plan (``plan_kind``)."""
    inline, queued = (build(make_host, seed, landing, plan, inline=path) for path in (True, False))
    assert drive(inline, steps) == drive(queued, steps)
    return plan_kind(plan, queued.bridge.front.counts)


slots = st.integers(0, 27)
sectors = st.integers(1, 8)
host_steps = st.one_of(
    st.tuples(
        st.just("xdata_write"), st.sampled_from([SRAM_XDATA, SRAM_XDATA + 0x40, SYS_BUF_XDATA]), st.integers(0, 255)
    ),
    st.tuples(st.just("xdata_read"), st.sampled_from([SRAM_XDATA, SYS_BUF_XDATA, 0xB800]), st.integers(1, 64)),
    st.tuples(st.just("bulk_out"), slots, sectors, st.sampled_from([0, 0, 0, 512]), st.integers(0, 255)),
    st.tuples(st.just("bulk_in"), slots, sectors, st.sampled_from([None, 0, 0x1000, 0x40000])),
    st.tuples(st.just("config_read"), st.sampled_from([0x00, 0x08])),
)
gpu_steps = st.one_of(
    st.tuples(
        st.just("gpu_copy"),
        st.integers(0, 0x4000),
        st.integers(1, 0x2000),
        st.integers(0, 0x3FF),
        st.integers(0, 2**32 - 1),
    ),
    st.tuples(st.just("gpu_release"), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("gpu_poll"), st.integers(0, 0x3FF), st.sampled_from([0, 0x01010101])),
    st.tuples(st.just("idle"), st.integers(0, 200_000)),
)
sequences = st.lists(st.one_of(host_steps, host_steps, gpu_steps), min_size=1, max_size=10)
landings = st.tuples(st.sampled_from([0, 1_000, 50_000]), st.sampled_from([0, 5_000]))


def test_the_inline_path_and_the_event_path_agree(make_host: Any) -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=200)
    @given(seed=st.integers(0, 3), landing=landings, plan=fault_plans(max_occurrence=4), steps=sequences)
    def paths_agree(seed: int, landing: tuple[int, int], plan: FaultPlan, steps: list[Step]) -> None:
        kind = check_paths_agree(make_host, seed, landing, plan, steps)
        event(f"fault plan: {kind}")
        seen[kind] += 1

    paths_agree()
    assert seen["fired"] and seen["never fired"], f"the property drew too few kinds of fault plan: {dict(seen)}"


def test_a_plan_that_fires_and_one_that_never_fires_agree(make_host: Any) -> None:
    steps: list[Step] = [("gpu_poll", 0, 0x01010101), ("bulk_out", 0, 2, 0, 1), ("xdata_read", SRAM_XDATA, 8)]
    steps += [("bulk_out", 4, 1, 0, 2), ("gpu_release", 1), ("bulk_in", 0, 2, 0x1000), ("config_read", 0)]
    fires = FaultPlan.single(Operation.bulk_out(), 2, Fault.short_write(100))
    never = FaultPlan.single(Operation.bulk_out(), 3, Fault.stall())
    assert check_paths_agree(make_host, 0, (50_000, 5_000), fires, steps) == "fired"
    assert check_paths_agree(make_host, 0, (50_000, 5_000), never, steps) == "never fired"


def test_an_unrelated_fault_rule_leaves_the_inline_path_on(make_host: Any) -> None:
    def events_for_one_read(plan: FaultPlan) -> int:
        board = build(make_host, 0, (0, 0), plan, inline=True)
        kernel = board.bridge.kernel
        before = kernel.events_run
        board.send(control(0xC0, 0xE4, SRAM_XDATA, 0, 4))
        return kernel.events_run - before

    unrelated = FaultPlan.single(Operation.bulk_in(), 1, Fault.stall())
    assert events_for_one_read(unrelated) == events_for_one_read(FaultPlan()) == 0, "no arrival or completion event"


def test_an_attempt_with_a_planned_fault_takes_the_queued_path_and_counts_once(make_host: Any) -> None:
    plan = FaultPlan.single(Operation.control_in(0xE4), 2, Fault.stall())
    outcomes = []
    for inline in (True, False):
        board = build(make_host, 0, (0, 0), plan, inline=inline)
        read = [outcome(partial(board.send, control(0xC0, 0xE4, SRAM_XDATA, 0, 4))) for _ in range(3)]
        outcomes.append((read, board.bridge.front.counts[Operation.control_in(0xE4)], board.bridge.kernel.now_ns))
    assert outcomes[0] == outcomes[1]
    read, count, _now = outcomes[0]
    assert [result[0] for result in read] == [UsbStatus.COMPLETED, "raised", UsbStatus.COMPLETED] and count == 3
    assert read[1][1] == "UsbStall" and "fault plan" in str(read[1][2])
