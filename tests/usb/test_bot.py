"""Bulk-Only Transport framing (tinyhil.usb.bot) and ``Usb3Transport.send_batch`` over the scripted handle: the CBW
and data on the wire, the CSW check, zip pairing of commands and data, and what strict mode refuses."""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

import pytest

from tinyhil.errors import DeviceError, InvalidArgument
from tinyhil.usb import Usb3Transport
from tinyhil.usb.bot import CBW_SIGNATURE, CSW_BYTES, CSW_SIGNATURE, check_csw, pack_cbw


def _csw(tag: int, status: int = 0, signature: int = CSW_SIGNATURE) -> bytes:
    return struct.pack("<IIIB", signature, tag, 0, status)


def _answering(usb_fake: ModuleType, statuses: dict[int, int] | None = None) -> Any:
    """A responder that accepts OUTs and answers each CSW read with the tag of the last CBW sent."""
    last_tag = [0]

    def respond(call: Any) -> Any:
        if call.kind == "bulk_out" and len(call.data) == 31 and call.data[:4] == b"USBC":
            last_tag[0] = struct.unpack_from("<I", call.data, 4)[0]
        if call.kind == "bulk_in":
            return _csw(last_tag[0], (statuses or {}).get(last_tag[0], 0))
        return usb_fake.ok(call)

    return respond


def _transport(usb_fake: ModuleType, responder: Any, **kwargs: Any) -> tuple[Usb3Transport, Any]:
    handle = usb_fake.ScriptedHandle(responder)
    return Usb3Transport(handle, usb_fake.ScriptedContext(handle), **kwargs), handle


def test_a_cbw_is_31_bytes_with_the_command_zero_padded() -> None:
    cbw = pack_cbw(7, b"\x12\x00\x00\x00\x24\x00", 0x200, strict=True)
    assert len(cbw) == 31
    assert struct.unpack("<IIIBBB", cbw[:15]) == (CBW_SIGNATURE, 7, 0x200, 0, 0, 6)
    assert cbw[15:] == b"\x12\x00\x00\x00\x24\x00" + bytes(10)


def test_send_batch_sends_cbw_then_data_and_reads_each_csw(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, _answering(usb_fake))
    transport.send_batch([b"\x2a" + bytes(9), b"\x00" * 6], [b"payload!", None])
    kinds = [(call.kind, call.endpoint) for call in handle.calls]
    assert kinds == [("bulk_out", 0x02), ("bulk_out", 0x02), ("bulk_in", 0x81), ("bulk_out", 0x02), ("bulk_in", 0x81)]
    first, data, status, second, _ = handle.calls
    assert first.data == pack_cbw(1, b"\x2a" + bytes(9), 8, strict=True) and data.data == b"payload!"
    assert second.data == pack_cbw(2, b"\x00" * 6, 0, strict=True)
    assert (status.length, status.timeout) == (CSW_BYTES, 2000)


def test_a_failed_command_status_raises_naming_the_tag(usb_fake: ModuleType) -> None:
    transport, _ = _transport(usb_fake, _answering(usb_fake, statuses={2: 1}))
    with pytest.raises(DeviceError, match=r"tag 2, status 1; expected signature 0x53425355, tag 2, status 0"):
        transport.send_batch([b"\x00" * 6, b"\x00" * 6])


@pytest.mark.parametrize(
    ("csw", "message"),
    [
        (_csw(3, signature=0), "CSW signature 0x00000000"),
        (_csw(4), "tag 4, status 0; expected"),
        (b"\x00", "CSW of 0x1"),
    ],
)
def test_check_csw_refuses_a_wrong_signature_tag_or_size(csw: bytes, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        check_csw(csw, 3)


def test_odata_shorter_than_cdbs_ends_the_batch_as_zip_does_and_strict_mode_refuses_it(usb_fake: ModuleType) -> None:
    transport, handle = _transport(usb_fake, _answering(usb_fake))
    transport.send_batch([b"\x00" * 6, b"\x00" * 6], [None])
    assert len(handle.calls) == 2, "one CBW and its CSW: the second command has no data entry to pair with"
    strict, handle = _transport(usb_fake, _answering(usb_fake), strict=True)
    with pytest.raises(InvalidArgument, match=r"send_batch\(2 cdbs, 1 odata\): strict mode refuses it"):
        strict.send_batch([b"\x00" * 6, b"\x00" * 6], [None])
    assert handle.calls == []


@pytest.mark.parametrize("cdb", [b"", bytes(17)])
def test_a_command_outside_the_16_byte_field_goes_out_and_strict_mode_refuses_it(
    usb_fake: ModuleType, cdb: bytes
) -> None:
    transport, handle = _transport(usb_fake, _answering(usb_fake))
    transport.send_batch([cdb])
    assert handle.calls[0].data[14] == len(cdb) and handle.calls[0].data[15:] == cdb[:16].ljust(16, b"\x00")
    strict, handle = _transport(usb_fake, _answering(usb_fake), strict=True)
    with pytest.raises(InvalidArgument, match=rf"send_batch\(cdb of {len(cdb):#x} bytes\): strict mode refuses it"):
        strict.send_batch([cdb])
    assert handle.calls == []


def test_a_command_block_that_is_not_bytes_is_refused_in_both_modes(usb_fake: ModuleType) -> None:
    for strict in (False, True):
        transport, handle = _transport(usb_fake, _answering(usb_fake), strict=strict)
        for cdb in (1.5, 5):
            with pytest.raises(InvalidArgument, match=rf"send_batch: cdb={cdb}, expected a bytes-like command block"):
                transport.send_batch([cdb])
        with pytest.raises(InvalidArgument, match=r"expected at most 0xff \(bCBWCBLength\)"):
            transport.send_batch([bytes(256)])
        assert handle.calls == []
