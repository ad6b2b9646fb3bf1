"""usbmon pcapng: byte-exact round trips, a link-type-189 capture, and bad files named by byte offset."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tinyhil.trace import Complete, Submit, TraceFormatError, load_trace
from tinyhil.trace.jsonl import dump_jsonl, parse_jsonl
from tinyhil.trace.pcapng import LINKTYPE_USB_LINUX, dump_pcapng
from tinyhil.trace.pcapng_reader import parse_pcapng

SHB_BYTES = 28 + 4  # block header, magic, version, section length, trailer; the comment option comes on top


def _blocks(blob: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of every block."""
    out, offset = [], 0
    while offset < len(blob):
        kind, total = struct.unpack_from("<II", blob, offset)
        out.append((offset, kind, total))
        offset += total
    return out


@pytest.fixture(scope="module")
def pcapng(recorded: Path) -> bytes:
    return dump_pcapng(load_trace(recorded))


def test_pcapng_to_jsonl_to_pcapng_is_byte_identical(pcapng: bytes) -> None:
    lines = list(dump_jsonl(parse_pcapng(pcapng)))
    assert dump_pcapng(parse_jsonl(lines)) == pcapng


def test_every_transfer_is_an_s_and_a_c_event_on_one_urb(recorded: Path, pcapng: bytes) -> None:
    imported = parse_pcapng(pcapng)
    submits = [r for r in imported.records if isinstance(r, Submit)]
    completes = [r for r in imported.records if isinstance(r, Complete)]
    assert len(submits) == len(completes) and [s.tag for s in submits] == [c.tag for c in completes]
    blocks = _blocks(pcapng)
    assert [kind for _, kind, _ in blocks[:2]] == [0x0A0D0D0A, 1] and {k for _, k, _ in blocks[2:]} == {6}
    assert imported.header.device == load_trace(recorded).header.device, "the header rides along as the comment"
    assert not imported.header.host_ops, "claim and release are not on the wire"


def _capture_189() -> bytes:
    """A hand-made capture as a hardware usbmon gives it: link type 189 (48-byte headers), microsecond stamps."""

    def block(kind: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    def packet(t_us: int, header: bytes, data: bytes) -> bytes:
        captured = header + data
        return block(6, struct.pack("<IIIII", 0, 0, t_us, len(captured), len(captured)) + captured)

    setup = struct.pack("<BBHHH", 0xC0, 0xE4, 0xB450, 0, 1)
    s = struct.pack("<QBBBBHBBqiiII8s", 0xFFFF8881, ord("S"), 2, 0x80, 5, 3, 0, ord("<"), 10, 20, -115, 1, 0, setup)
    c = struct.pack("<QBBBBHBBqiiII8s", 0xFFFF8881, ord("C"), 2, 0x80, 5, 3, ord("-"), 0, 10, 30, 0, 1, 1, bytes(8))
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(1, struct.pack("<HHI", LINKTYPE_USB_LINUX, 0, 65535))
    return shb + idb + packet(20, s, b"") + packet(30, c, b"\x78")


def test_a_link_type_189_capture_imports_and_converts_back_identically() -> None:
    blob = _capture_189()
    trace = parse_pcapng(blob)
    submit, complete = trace.records
    assert isinstance(submit, Submit) and (submit.bmRequestType, submit.bRequest, submit.wValue) == (0xC0, 0xE4, 0xB450)
    assert isinstance(complete, Complete) and complete.data == b"\x78" and complete.t_ns == 30_000
    assert dump_pcapng(parse_jsonl(dump_jsonl(trace))) == blob


def _set_u32(blob: bytes, offset: int, value: int) -> bytes:
    return blob[:offset] + struct.pack("<I", value) + blob[offset + 4 :]


def test_bad_pcapng_files_name_the_byte_offset(pcapng: bytes) -> None:
    blocks = _blocks(pcapng)
    idb, epb = blocks[1][0], blocks[4][0]
    record, with_data = next(
        (n, o) for n, (o, _, _) in enumerate(blocks[2:]) if struct.unpack_from("<I", pcapng, o + 20)[0] > 64
    )
    cases = {
        "bad block length": (_set_u32(pcapng, epb + 4, 0x43), f"offset {epb:#x}: bad block length 67"),
        "mismatched length": (_set_u32(pcapng, epb + 4, blocks[4][2] + 4), f"offset {epb:#x}: bad block length:"),
        "wrong link type": (pcapng[: idb + 8] + b"\x01\x00" + pcapng[idb + 10 :], f"offset {idb:#x}: link type 1,"),
        "packet cut short": (_set_u32(pcapng, epb + 20, 40), f"offset {epb:#x} (record 2): packet cut short: 40 bytes"),
        "data cut short": (
            _set_u32(pcapng, with_data + 20, 64),
            f"offset {with_data:#x} (record {record}): packet cut short: usbmon len_cap",
        ),
        "truncated file": (pcapng[: epb + 10], f"offset {epb:#x}: truncated file"),
        "not pcapng": (b"\x00" * 64, "offset 0x0: block type 0x0, expected a Section Header Block"),
    }
    for name, (blob, message) in cases.items():
        with pytest.raises(TraceFormatError) as caught:
            parse_pcapng(blob)
        assert message in str(caught.value), f"{name}: {caught.value}"


def test_loading_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcapng"
    path.write_bytes(_capture_189()[:40])
    message = rf"^{path}: offset 0x1c: truncated file: the block of 20 bytes ends at 0x30"
    with pytest.raises(TraceFormatError, match=message):
        load_trace(path)
