"""MockUSB3: the real transport class over the emulated board, opened through the real discovery path."""

from __future__ import annotations

import pytest

from tinyhil.asm24 import Asm24Controller
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.usb import Usb3Transport


def test_defaults_open_a_fresh_sync_board_that_is_a_usb3_transport() -> None:
    with MockUSB3() as usb:
        assert isinstance(usb, Usb3Transport)
        assert usb.mode.value == "sync"
        Asm24Controller(usb).xdata_write(0x5000, b"\x12\x34")
        assert bytes(usb.bridge.memory.xdata[0x5000:0x5002]) == b"\x12\x34"
        assert usb.kernel is usb.bridge.kernel
    with pytest.raises(StateError):
        usb.control_read(0xE4, 1, value=0x5000)


def test_keyword_arguments_reach_the_board() -> None:
    quirks = Quirks(full_window_corruption=True)
    with MockUSB3(mode="timed", quirks=quirks, seed=5) as usb:
        assert usb.mode.value == "timed"
        assert usb.bridge.quirks is quirks


def test_a_board_built_by_the_caller_is_used_as_is_and_board_options_with_it_are_rejected() -> None:
    bridge = Asm2464(serial="X")
    with MockUSB3(bridge=bridge) as usb:
        assert usb.bridge is bridge
    with pytest.raises(InvalidArgument, match="quirks"):
        MockUSB3(bridge=Asm2464(), quirks=Quirks())
    with pytest.raises(InvalidArgument, match="mode"):
        MockUSB3(mode="fast")
