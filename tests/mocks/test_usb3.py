"""MockUSB3: the real transport class over the emulated board, opened through the real discovery path."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import PlainEndpoint
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.usb import Usb3Transport


def test_defaults_open_a_fresh_sync_board_that_is_a_usb3_transport() -> None:
    with MockUSB3() as usb:
        assert isinstance(usb, Usb3Transport)
        assert usb.mode.value == "sync"
        Asm2464Controller(usb).xdata_write(0x5000, b"\x12\x34")
        assert bytes(usb.bridge.memory.xdata[0x5000:0x5002]) == b"\x12\x34"
        assert usb.kernel is usb.bridge.kernel
    with pytest.raises(StateError):
        usb.control_read(0xE4, 1, value=0x5000)


def test_keyword_arguments_reach_the_board() -> None:
    quirks = Quirks(full_window_corruption=True)
    with MockUSB3(mode="timed", quirks=quirks, seed=5) as usb:
        assert usb.mode.value == "timed"
        assert usb.bridge.quirks is quirks


def test_a_board_built_by_the_caller_is_used_as_is() -> None:
    kernel = EventKernel(seed=4)
    bridge = Asm2464(serial="X", function=PlainEndpoint(vram_bytes=1 << 20), kernel=kernel)
    with MockUSB3.over(bridge, mode="timed", max_in_flight=2) as usb:
        assert usb.bridge is bridge and usb.kernel is kernel and usb.mode.value == "timed"
        assert usb._pool._max_in_flight == 2  # the transport option reached the transport
        controller = Asm2464Controller(usb, retry_delay_s=0)
        controller.xdata_write(0x5000, b"hi")
        assert bytes(bridge.memory.xdata[0x5000:0x5002]) == b"hi"
    with pytest.raises(InvalidArgument, match=r"bridge=<.*PlainEndpoint.*, expected an Asm2464"):
        MockUSB3.over(PlainEndpoint())  # type: ignore[arg-type]


@pytest.mark.parametrize("parts", [["function"], ["kernel"], ["bridge"], ["function", "kernel"]])
def test_parts_given_to_the_fresh_form_name_the_given_parts_form(parts: list[str]) -> None:
    values = {"function": PlainEndpoint(), "kernel": EventKernel(), "bridge": Asm2464()}
    shown = re.escape(", ".join(f"{name}=..." for name in parts))
    with pytest.raises(InvalidArgument, match=rf"MockUSB3\({shown}\): a fresh board takes no parts.*MockUSB3\.over"):
        MockUSB3(quirks=Quirks(), **{name: values[name] for name in parts})


def test_a_bad_mode_is_an_error_in_both_forms() -> None:
    with pytest.raises(InvalidArgument, match="mode"):
        MockUSB3(mode="fast")
    with pytest.raises(InvalidArgument, match="mode"):
        MockUSB3.over(Asm2464(), mode="fast")


@pytest.mark.parametrize("mode", ["sync", "timed"])
def test_a_bulk_in_into_a_callers_buffer_lands_in_place(mode: str) -> None:
    """An asynchronous bulk IN on the caller's buffer (scsi_read_into): the emulated transfer fills that buffer where
    it is, as libusb does, in both clock modes; a padded size goes through scsi_read and lands the same bytes."""
    with MockUSB3(mode=mode) as usb:
        sram = usb.bridge.memory.sram
        sram[:4096] = np.arange(4096, dtype=np.uint32).astype(np.uint8)
        controller = Asm2464Controller(usb)

        def read_released(into: Any) -> None:
            controller.scsi_read_arm(len(into))
            usb.kernel.schedule(1000, release)  # the GPU's completion-queue write, a microsecond later
            controller.scsi_read_into(into, arm=False)

        def release() -> None:  # what the bridge does on that write (the PCIe side is not brought up here)
            usb.bridge.engine.released = True
            usb.bridge.front.bulk.poke()

        out = np.full(4096 + 2, 0xEE, dtype=np.uint8)
        read_released(out[1:-1])
        assert out[1:-1].tobytes() == sram[:4096].tobytes() and out[0] == out[-1] == 0xEE
        padded = bytearray(1000)
        read_released(padded)
        assert padded == sram[:1000].tobytes()
        assert usb.in_flight == ()


def test_a_transfer_whose_emulated_run_raises_is_not_left_in_flight() -> None:
    """A model event that raises during a synchronous submit ends the submit with that error; the transfer never
    became in flight, so closing the transport returns (it used to pump forever waiting for it)."""

    def broken() -> None:
        raise RuntimeError("model bug")

    usb = MockUSB3()
    usb.kernel.schedule(0, broken)
    with pytest.raises(RuntimeError, match="model bug"):
        usb.control_write_async(0xE5, 0x5000, 0x12)
    assert not usb._handle._inflight, "the failed submit left its transfer in flight: close() would pump forever"
    usb.close()
    assert usb.state.value == "closed"
