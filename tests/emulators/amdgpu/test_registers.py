"""The BAR5 register block: latched queue registers, RB_CNTL create/destroy, read-only status, unknown offsets."""

from __future__ import annotations

import logging

import pytest

from tinyhil.emulators.amdgpu import AmdGpu, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.spec.amdgpu import Bar, Bar5, ErrorCode, QueueReg, QueueStatus, RbCntl


@pytest.fixture
def usb_gpu() -> AmdGpu:
    return AmdGpu(EventKernel(), vram_bytes=16 << 20, vram_at_zero=True)


def _write(gpu: AmdGpu, offset: int, value: int) -> None:
    gpu.mmio_write(Bar.REGS, offset, value.to_bytes(4, "little"))


def _read(gpu: AmdGpu, offset: int) -> int:
    return int.from_bytes(gpu.mmio_read(Bar.REGS, offset, 4), "little")


def _program(gpu: AmdGpu, block: int, *, ring: int = 0x10000, size_log2: int = 12, doorbell: int = 1) -> None:
    values = {
        QueueReg.RB_BASE_LO: ring,
        QueueReg.RB_SIZE_LOG2: size_log2,
        QueueReg.RPTR_ADDR_LO: 0x1000,
        QueueReg.WPTR_ADDR_LO: 0x1008,
        QueueReg.DOORBELL: doorbell,
    }
    for reg, value in values.items():
        _write(gpu, block + reg, value)
    _write(gpu, block + QueueReg.RB_CNTL, RbCntl.ENABLE)


def test_enable_latches_the_registers_into_a_queue(usb_gpu: AmdGpu) -> None:
    _program(usb_gpu, Bar5.COMPUTE0, ring=0x20000, size_log2=13, doorbell=9)
    (queue,) = usb_gpu.queues
    assert (queue.kind, queue.config.ring_va, queue.config.ring_bytes, queue.doorbell_index) == (
        QueueKind.COMPUTE,
        0x20000,
        1 << 13,
        9,
    )
    assert (queue.config.rptr_va, queue.config.wptr_va) == (0x1000, 0x1008)
    assert _read(usb_gpu, Bar5.COMPUTE0 + QueueReg.RB_SIZE_LOG2) == 13, "latched registers read back"
    assert _read(usb_gpu, Bar5.COMPUTE0 + QueueReg.STATUS) == QueueStatus.IDLE
    _write(usb_gpu, Bar5.COMPUTE0 + QueueReg.RB_CNTL, RbCntl.ENABLE)
    assert usb_gpu.queues == (queue,), "enabling an enabled queue changes nothing"


@pytest.mark.parametrize(
    ("ring", "size_log2", "message"),
    [(0x10000, 7, "ring_bytes=128"), (0x10000, 31, "ring_bytes=2147483648"), (0x10010, 12, "ring_va=0x10010")],
)
def test_unusable_settings_leave_the_queue_disabled_with_a_config_error(
    usb_gpu: AmdGpu, caplog: pytest.LogCaptureFixture, ring: int, size_log2: int, message: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="tinyhil.emulators.amdgpu"):
        _program(usb_gpu, Bar5.SDMA1, ring=ring, size_log2=size_log2)
    assert usb_gpu.queues == ()
    assert _read(usb_gpu, Bar5.SDMA1 + QueueReg.RB_CNTL) == 0
    assert _read(usb_gpu, Bar5.SDMA1 + QueueReg.STATUS) == QueueStatus.PACKET_ERROR
    assert _read(usb_gpu, Bar5.SDMA1 + QueueReg.ERROR_CODE) == ErrorCode.BAD_QUEUE_CONFIG
    assert message in caplog.text


def test_a_doorbell_in_use_is_a_config_error(usb_gpu: AmdGpu) -> None:
    _program(usb_gpu, Bar5.SDMA0, doorbell=4)
    _program(usb_gpu, Bar5.SDMA1, ring=0x20000, doorbell=4)
    assert len(usb_gpu.queues) == 1 and _read(usb_gpu, Bar5.SDMA1 + QueueReg.ERROR_CODE) == ErrorCode.BAD_QUEUE_CONFIG


def test_read_only_registers_ignore_writes_and_unknown_offsets_read_zero(usb_gpu: AmdGpu) -> None:
    _write(usb_gpu, Bar5.ID, 0)
    _write(usb_gpu, Bar5.SDMA0 + QueueReg.STATUS, 0xFF)
    _write(usb_gpu, 0x1F0000, 0x1234)
    assert _read(usb_gpu, Bar5.ID) == 0x48494C31
    assert _read(usb_gpu, Bar5.SDMA0 + QueueReg.STATUS) == 0
    assert _read(usb_gpu, 0x1F0000) == 0 and _read(usb_gpu, Bar5.SDMA0 + 0x80) == 0


def test_multi_register_accesses_go_in_address_order(usb_gpu: AmdGpu) -> None:
    block = Bar5.SDMA0
    usb_gpu.mmio_write(Bar.REGS, block, (0x10000).to_bytes(4, "little") + (0).to_bytes(4, "little") + b"\x0c\0\0\0")
    assert usb_gpu.mmio_read(Bar.REGS, block, 12) == (0x10000).to_bytes(4, "little") + bytes(4) + b"\x0c\0\0\0"
