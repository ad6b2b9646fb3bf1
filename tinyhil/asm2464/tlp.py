"""Encoding of single TLPs for the bridge's 0xF0 engine and decoding of its 8-byte completion (docs/asm2464.md).

An 0xF0 OUT request carries ``wValue = fmt_type | byte_enable << 8``, ``wIndex`` the mode, and 12 bytes
``<III``: ``addr_lo``, ``addr_hi``, ``value``. The address is dword aligned; the byte enables select the bytes
within that dword (``offset`` = trailing zero bits, ``size`` = set bits). Data travels in its PCIe byte lanes: the
byte at ``offset`` sits in bits ``8*offset`` and up of ``value`` (and of a read completion's data dword).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import (
    BYTE_ENABLE_SHIFT,
    CPL_BYTES,
    CPL_FORMAT,
    CPL_STATUS_SHIFT,
    TLP_FMT_4DW,
    TLP_FMT_DATA,
    TLP_REQUEST_FORMAT,
    TLP_TYPE_MASK,
    TLP_TYPE_MSG,
    TLP_TYPE_MSG_MASK,
    CplStatus,
    FmtType,
    RetStatus,
)

__all__ = ["TlpCompletion", "byte_enables", "describe_fmt_type", "encode_tlp", "has_data", "is_posted", "lane_offset"]

DWORD_BYTES: Final = 4
U32_MASK: Final = 0xFFFF_FFFF
ADDR32_LIMIT: Final = 1 << 32
ADDR64_LIMIT: Final = 1 << 64
_CPL_STATUS_BITS: Final = 0x7


def byte_enables(offset: int, size: int) -> int:
    """First-dword byte enables for ``size`` bytes starting at byte ``offset`` of a dword (``0b1111`` for a dword).

    Raises:
        InvalidArgument: ``size`` not in 1..4 or the bytes cross the dword.
    """
    check_int("size", size, min_value=1, max_value=DWORD_BYTES)
    check_int("offset", offset, min_value=0, max_value=DWORD_BYTES - 1)
    if offset + size > DWORD_BYTES:
        raise InvalidArgument(f"offset={offset} size={size} crosses a dword boundary, expected offset + size <= 4")
    return ((1 << size) - 1) << offset


def lane_offset(byte_enable: int) -> tuple[int, int]:
    """``(offset, size)`` selected by contiguous byte enables: trailing zero bits and set bits."""
    check_int("byte_enable", byte_enable, min_value=1, max_value=0xF)
    offset = (byte_enable & -byte_enable).bit_length() - 1
    return offset, byte_enable.bit_count()


def is_posted(fmt_type: int) -> bool:
    """Whether a TLP of this fmt/type gets no completion: memory writes and messages (PCIe posted requests)."""
    if fmt_type & TLP_TYPE_MSG_MASK == TLP_TYPE_MSG:
        return True
    return fmt_type & TLP_TYPE_MASK == 0 and bool(fmt_type & TLP_FMT_DATA)


def has_data(fmt_type: int) -> bool:
    """Whether a TLP of this fmt/type carries a data payload (writes, MsgD)."""
    return bool(fmt_type & TLP_FMT_DATA)


def describe_fmt_type(fmt_type: int) -> str:
    """The spec name of ``fmt_type`` (``MWR64``) or its hex value."""
    try:
        return FmtType(fmt_type).name
    except ValueError:
        return f"fmt_type {fmt_type:#04x}"


def encode_tlp(fmt_type: int, address: int, size: int, value: int | None) -> tuple[int, bytes]:
    """``(wValue, data stage)`` of an 0xF0 OUT single TLP (mode 0) for ``size`` bytes at byte ``address``.

    Raises:
        InvalidArgument: bad fmt_type, an address the fmt_type cannot carry, bytes crossing a dword, a missing
            value for a write or a value for a read, or a value wider than ``size`` bytes.
    """
    check_int("fmt_type", fmt_type, min_value=0, max_value=0xFF)
    check_int("address", address, min_value=0, max_value=ADDR64_LIMIT - 1)
    offset = address % DWORD_BYTES
    enables = byte_enables(offset, size)
    limit = ADDR64_LIMIT if fmt_type & TLP_FMT_4DW else ADDR32_LIMIT
    if address >= limit:
        raise InvalidArgument(
            f"address={address:#x} with {describe_fmt_type(fmt_type)} (3-DW header), expected an address below "
            f"{limit:#x}; use the 64-bit form (fmt_type | {TLP_FMT_4DW:#x})"
        )
    if has_data(fmt_type):
        if value is None:
            raise InvalidArgument(f"{describe_fmt_type(fmt_type)} at {address:#x} needs value=, got None")
        check_int("value", value, min_value=0, max_value=(1 << (8 * size)) - 1)
        data = value << (8 * offset)
    else:
        if value is not None:
            raise InvalidArgument(f"value={value!r} for {describe_fmt_type(fmt_type)}, which carries no data")
        data = 0
    aligned = address - offset
    payload = struct.pack(TLP_REQUEST_FORMAT, aligned & U32_MASK, aligned >> 32, data)
    return fmt_type | enables << BYTE_ENABLE_SHIFT, payload


@dataclass(frozen=True, slots=True)
class TlpCompletion:
    """The 8-byte 0xF0 IN completion of the last single TLP.

    ``data`` is the completion's data dword (byte lanes as on the wire), ``cpl_status`` bits 7:5 of the header
    high byte, ``byte_count`` the header low byte, ``ret_status`` the firmware's own status byte.
    """

    data: int
    cpl_status: int
    byte_count: int
    ret_status: int

    @classmethod
    def decode(cls, raw: bytes | bytearray | memoryview) -> TlpCompletion:
        """Decode the 8 bytes of an 0xF0 IN reply.

        Raises:
            InvalidArgument: ``raw`` is not exactly 8 bytes.
        """
        if len(raw) != CPL_BYTES:
            raise InvalidArgument(f"completion of {len(raw)} bytes, expected {CPL_BYTES}")
        data, header_hi, byte_count, ret_status = struct.unpack(CPL_FORMAT, raw)
        return cls(data, header_hi >> CPL_STATUS_SHIFT & _CPL_STATUS_BITS, byte_count, ret_status)

    def encode(self) -> bytes:
        """The 8 wire bytes (the inverse of :meth:`decode`; used by scripted devices in tests)."""
        return struct.pack(CPL_FORMAT, self.data, self.cpl_status << CPL_STATUS_SHIFT, self.byte_count, self.ret_status)

    @property
    def ok(self) -> bool:
        """Firmware exchange succeeded and the completer answered with successful completion."""
        return self.ret_status == RetStatus.OK and self.cpl_status == CplStatus.SC

    @property
    def retryable(self) -> bool:
        """The firmware reported ERROR or TIMEOUT: the driver re-issues the TLP."""
        return self.ret_status in (RetStatus.ERROR, RetStatus.TIMEOUT)

    def status_name(self) -> str:
        """``UR`` / ``CRS`` / ``CA`` / ``SC``, or ``reserved 0b011`` for an undefined value."""
        try:
            return CplStatus(self.cpl_status).name
        except ValueError:
            return f"reserved {self.cpl_status:#05b}"

    def ret_status_name(self) -> str:
        """``OK`` / ``ERROR`` / ``TIMEOUT``, or ``unknown 0x02``."""
        try:
            return RetStatus(self.ret_status).name
        except ValueError:
            return f"unknown {self.ret_status:#04x}"
