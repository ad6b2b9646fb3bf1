"""tshark (Wireshark's decoder) reads tinyhil's pcapng and finds the requests, endpoints, lengths and bytes recorded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tinyhil.trace import Complete, Submit, Transfer, load_trace, save_trace
from tinyhil.trace.pcapng_reader import parse_pcapng

FIELDS = ("usb.urb_type", "usb.transfer_type", "usb.endpoint_address", "usb.setup.bRequest", "usb.setup.wValue",
          "usb.setup.wIndex", "usb.setup.wLength", "usb.data_len", "usb.capdata", "usb.data_fragment",
          "usb.control.Response")  # fmt: skip

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None, reason="tshark is not installed (Debian package: tshark)"
)


VENDOR = 0x40  # bmRequestType type bits 6:5 = 2


def _decode(path: Path) -> list[dict[str, str]]:
    command = ["tshark", "-r", str(path), "-T", "fields", *(arg for f in FIELDS for arg in ("-e", f))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return [dict(zip(FIELDS, line.split("\t"), strict=True)) for line in done.stdout.splitlines()]


def _int(text: str) -> int:
    return int(text, 0)


def test_tshark_decodes_the_same_requests_endpoints_lengths_and_bytes(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "session.pcapng"
    save_trace(load_trace(recorded), path)
    packets = _decode(path)
    events = parse_pcapng(path.read_bytes()).records  # the packets in file order, as tinyhil wrote them
    assert len(packets) == len(events) > 100
    transfers = [r for r in load_trace(recorded).records if isinstance(r, (Transfer, Submit))]
    submits = [e for e in events if isinstance(e, Submit)]
    assert len(submits) >= len(transfers)  # clear_halt and set_configuration are control requests on the wire too
    seen_bulk_bytes = vendor_requests = 0
    for packet, event in zip(packets, events, strict=True):
        assert packet["usb.urb_type"] == ("'S'" if isinstance(event, Submit) else "'C'")
        if isinstance(event, Submit):
            if event.bmRequestType is not None:
                assert _int(packet["usb.transfer_type"]) == 2
                assert _int(packet["usb.setup.bRequest"]) == event.bRequest
                if event.bmRequestType & VENDOR == VENDOR:  # tshark names a standard request's fields its own way
                    assert _int(packet["usb.setup.wValue"]) == event.wValue
                    assert _int(packet["usb.setup.wIndex"]) == event.wIndex
                    assert _int(packet["usb.setup.wLength"]) == event.length
                    vendor_requests += 1
                assert bytes.fromhex(packet["usb.data_fragment"]) == event.data
            else:
                assert _int(packet["usb.transfer_type"]) == 3
                assert _int(packet["usb.endpoint_address"]) == event.ep
                assert bytes.fromhex(packet["usb.capdata"]) == event.data
                seen_bulk_bytes += len(event.data)
            assert _int(packet["usb.data_len"]) == len(event.data)
        else:
            assert isinstance(event, Complete)
            assert _int(packet["usb.data_len"]) == len(event.data)
            if event.data:  # a control IN's reply, or a bulk IN's bytes
                shown = packet["usb.control.Response"] or packet["usb.capdata"]
                assert bytes.fromhex(shown) == event.data
    recorded_out = sum(len(r.data) for r in transfers if r.ep == 0x02)
    assert seen_bulk_bytes == recorded_out > 0x40000
    assert vendor_requests == sum(1 for r in transfers if r.bmRequestType in (0x40, 0xC0)) > 100
