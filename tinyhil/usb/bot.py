"""USB Mass Storage Bulk-Only Transport (BOT) framing for ``Usb3Transport.send_batch``: the command block wrapper
(CBW) a host sends before a SCSI command and the command status wrapper (CSW) the device answers with.

The layouts are the USB Mass Storage Class BOT specification's: a 31-byte CBW (``USBC``, tag, data length, flags,
LUN, command length, 16 command bytes) and a 13-byte CSW (``USBS``, tag, residue, status). The stock ASM2464
firmware speaks it; the custom firmware, and so the emulated board, answers the bulk endpoints only after an 0xF2 or
0xF0 arm (docs/asm2464.md), so a CBW sent to it times out, as on such a board.
"""

from __future__ import annotations

import struct
from typing import Final

from tinyhil.errors import DeviceError, InvalidArgument

__all__ = ["CBW_SIGNATURE", "CSW_BYTES", "CSW_SIGNATURE", "check_csw", "pack_cbw"]

CBW_SIGNATURE: Final = 0x43425355  # "USBC"
CSW_SIGNATURE: Final = 0x53425355  # "USBS"
CSW_BYTES: Final = 13
CDB_FIELD_BYTES: Final = 16  # CBWCB: the command block field, zero-padded
_CBW: Final = struct.Struct("<IIIBBB16s")
_CSW: Final = struct.Struct("<IIIB")


def pack_cbw(tag: int, cdb: bytes, data_length: int, *, strict: bool) -> bytes:
    """The CBW of command ``cdb`` with ``data_length`` bytes of host-to-device data (flags 0, LUN 0).

    A command longer than the 16-byte field goes out truncated with its own length in bCBWCBLength, as the USB3
    class this transport mirrors sends it (a device rejects such a CBW); strict mode refuses it, and an empty one.

    Raises:
        InvalidArgument: ``cdb`` is not bytes-like or longer than 255 bytes; strict: empty or longer than 16 bytes.
    """
    try:
        command = memoryview(cdb).tobytes()  # not bytes(cdb): bytes(5) would be five zero bytes
    except TypeError:
        raise InvalidArgument(f"send_batch: cdb={cdb!r}, expected a bytes-like command block") from None
    if len(command) > 0xFF:
        raise InvalidArgument(f"send_batch(cdb of {len(command):#x} bytes): expected at most 0xff (bCBWCBLength)")
    if strict and not 1 <= len(command) <= CDB_FIELD_BYTES:
        raise InvalidArgument(
            f"send_batch(cdb of {len(command):#x} bytes): strict mode refuses it, expected 1..{CDB_FIELD_BYTES:#x} "
            "bytes (the CBW's command field); a board is sent it and rejects it (docs/usb3-compat.md)"
        )
    return _CBW.pack(CBW_SIGNATURE, tag, data_length, 0, 0, len(command), command)


def check_csw(csw: bytes | bytearray | memoryview, tag: int) -> None:
    """Check the device's CSW for the command of ``tag``: the signature, the tag and status 0 (passed).

    Raises:
        DeviceError: the CSW is not 13 bytes, or its signature, tag or status is not the expected one.
    """
    if len(csw) != CSW_BYTES:
        raise DeviceError(f"CSW of {len(csw):#x} bytes, expected {CSW_BYTES:#x}", op="send_batch")
    signature, answered, _residue, status = _CSW.unpack(csw)
    if (signature, answered, status) != (CSW_SIGNATURE, tag, 0):
        raise DeviceError(
            f"CSW signature {signature:#010x}, tag {answered}, status {status}; expected signature "
            f"{CSW_SIGNATURE:#010x}, tag {tag}, status 0 (command passed)",
            op="send_batch",
        )
