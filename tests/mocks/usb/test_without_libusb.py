"""The emulated stack never touches the system libusb: it works in a process where loading libusb fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import ctypes, ctypes.util
    real_cdll, real_find = ctypes.CDLL, ctypes.util.find_library

    def no_libusb_cdll(name, *args, **kwargs):
        if name and "usb" in str(name):
            raise OSError(f"{name}: no libusb on this machine")
        return real_cdll(name, *args, **kwargs)

    ctypes.CDLL = no_libusb_cdll
    ctypes.util.find_library = lambda name: None if "usb" in name else real_find(name)

    import usb1
    try:
        usb1.USBContext().open()
    except OSError:
        pass
    else:
        raise SystemExit("the sabotage did not work: libusb loaded")

    from tinyhil.mocks.usb import open_emulated_board
    with open_emulated_board(mode="timed") as board:
        board.handle.controlWrite(0x40, 0xF2, 1, 0, b"")
        assert board.handle.bulkWrite(0x02, b"\\x01" * 512) == 512
        try:
            board.handle.bulkWrite(0x02, b"\\x01" * 512, timeout=5)
        except usb1.USBErrorTimeout as error:
            assert error.transferred == 0
        assert board.handle.controlRead(0xC0, 0xE4, 0x8000, 0, 2) == bytearray(b"\\x01\\x01")
    print("ok without libusb")
    """
)


def test_the_emulated_stack_runs_where_libusb_cannot_load() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok without libusb"
