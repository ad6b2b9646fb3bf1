"""Hostile and malformed traces (issue 26, section 3): every size is bounded before anything is allocated, the readers
stream, and every malformed input is one TraceFormatError naming the file, the record and the field, in every
consumer (``tinyhil trace show/convert/drift``, ``open_replay``)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tinyhil.cli import EXIT_USAGE, main
from tinyhil.mocks.replay import open_replay
from tinyhil.trace import TraceFormatError, load_trace, open_trace
from tinyhil.trace.limits import TRANSFER_MAX_BYTES

RSS_CHILD = Path(__file__).with_name("rss_child.py")
MIB = 1 << 20
HOSTILE_RSS_BOUND = 200 * MIB  # a hostile length may cost no more than this in all (the 4 GiB it asks for is refused)

RECORDS: list[dict[str, Any]] = [
    {"seq": 0, "t_ns": 0, "dur_ns": 1000, "op": "control", "bmRequestType": 0xC0, "bRequest": 0xE4, "wValue": 0xB450,
     "wIndex": 0, "ep": 0, "length": 1, "data": "78", "timeout": 1000, "ret": 1},
    {"seq": 1, "t_ns": 1000, "dur_ns": 1000, "op": "bulk", "ep": 0x81, "length": 16, "data": "00" * 16,
     "timeout": 1000, "ret": 16},
    {"seq": 2, "t_ns": 2000, "op": "submit", "tag": 0, "ep": 0x81, "length": 16, "data": "", "timeout": 1000},
    {"seq": 3, "t_ns": 3000, "op": "complete", "tag": 0, "status": "COMPLETED", "actual": 16, "data": "00" * 16},
]  # fmt: skip


@pytest.fixture(scope="module")
def header(recorded: Path) -> dict[str, Any]:
    """A real recording's header (MOCKUSB+AMD, its device and options)."""
    with open(recorded, "rb") as file:
        value: dict[str, Any] = json.loads(file.readline())
    return value


def _jsonl(path: Path, header: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    lines = [json.dumps(header), *(json.dumps(r) for r in records), json.dumps({"op": "end", "count": len(records)})]
    path.write_text("\n".join(lines) + "\n")
    return path


def _edit(header: dict[str, Any], where: str, **changes: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A copy of the header and records with ``changes`` applied to ``where`` (``header``, ``device``, ``options``,
    ``pcapng`` or a record index)."""
    head = json.loads(json.dumps(header))
    records = json.loads(json.dumps(RECORDS))
    if where == "header":
        head.update(changes)
    elif where in ("device", "descriptors", "options"):
        head[where].update(changes)
    elif where == "pcapng":
        head["pcapng"] = changes
    else:
        records[int(where)].update(changes)
    return head, records


def _block(kind: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def _usbmon(event: str, length: int, data: bytes = b"", flag_data: int = ord("<")) -> bytes:
    header = struct.pack("<QBBBBHBBqiiII8siiII", 0x1234, ord(event), 3, 0x81, 2, 2, ord("-"), flag_data, 0, 0,
                         -115 if event == "S" else 0, length, len(data), bytes(8), 0, 0, 0, 0)  # fmt: skip
    return _block(
        6, struct.pack("<IIIII", 0, 0, 1000, len(header) + len(data), len(header) + len(data)) + header + data
    )


SHB = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
IDB = _block(1, struct.pack("<HHI", 220, 0, 0))


def hostile_pcapng(path: Path) -> Path:
    """The 144-byte capture of issue 26: one bulk IN submit asking for len_urb = 0xffffffff bytes."""
    path.write_bytes(SHB + IDB + _usbmon("S", 0xFFFF_FFFF))
    assert path.stat().st_size == 144
    return path


def _run_child(*argv: str) -> tuple[dict[str, Any], str, str]:
    done = subprocess.run([sys.executable, str(RSS_CHILD), *argv], capture_output=True, text=True, timeout=600,
                          check=False)  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result, "\n".join(done.stdout.splitlines()[:-1]), done.stderr


def test_a_pcapng_asking_for_4_gib_is_refused_before_allocating(tmp_path: Path) -> None:
    path = hostile_pcapng(tmp_path / "hostile.pcapng")
    result, _, err = _run_child("trace", "drift", str(path))
    assert result["status"] == EXIT_USAGE
    assert err.count("\n") == 1 and f"{path}: offset 0x30 (record 0), field 'length': length=4294967295" in err
    assert f"<= {TRANSFER_MAX_BYTES:#x}" in err
    assert result["rss_bytes"] < HOSTILE_RSS_BOUND


def test_a_jsonl_submit_of_8_gib_is_refused_before_allocating(tmp_path: Path, header: dict[str, Any]) -> None:
    path = _jsonl(tmp_path / "big.hiltrace.jsonl", *_edit(header, "2", length=8 << 30))
    result, _, err = _run_child("trace", "drift", str(path))
    assert result["status"] == EXIT_USAGE and "line 4, field 'length': length=8589934592" in err
    assert result["rss_bytes"] < HOSTILE_RSS_BOUND


def test_a_header_asking_for_2_62_bytes_of_vram_is_refused(tmp_path: Path, header: dict[str, Any]) -> None:
    path = _jsonl(tmp_path / "vram.hiltrace.jsonl", *_edit(header, "options", vram_bytes=1 << 62))
    result, _, err = _run_child("trace", "drift", str(path))
    assert result["status"] == EXIT_USAGE and "options.vram_bytes=0x4000000000000000, expected a power of two" in err
    assert result["rss_bytes"] < HOSTILE_RSS_BOUND


def _small_blocks(path: Path, size: int) -> int:
    """Write ``size`` bytes of submit/complete pairs of 4-byte transfers to ``path``; returns the record count."""
    pair = _usbmon("S", 4) + _usbmon("C", 4, b"abcd", flag_data=0)
    path.write_bytes(SHB + IDB + pair * (size // len(pair)))
    return 2 * (size // len(pair))


def test_the_pcapng_reader_streams_a_24_mib_file_of_small_blocks(tmp_path: Path) -> None:
    """Memory is bounded by the largest block, not the file: ``trace show`` of 24 MiB of 100-byte blocks peaks within
    a small multiple of the same command on a file of one pair (the reader once held 20-26x the file)."""
    small, large = tmp_path / "small.pcapng", tmp_path / "large.pcapng"
    _small_blocks(small, 256)
    count = _small_blocks(large, 24 * MIB)
    baseline, _, _ = _run_child("trace", "show", str(small))
    result, out, _ = _run_child("trace", "show", str(large))
    assert result["status"] == 0 and f"{count} records" in out
    assert result["rss_bytes"] < 1.5 * baseline["rss_bytes"], (result, baseline)


def test_trace_convert_streams_a_capture_of_small_blocks(tmp_path: Path) -> None:
    """``convert`` writes as it reads: converting 4 MiB of small blocks to JSONL peaks within a small multiple of
    converting one pair, and the output holds every record."""
    small, large = tmp_path / "small.pcapng", tmp_path / "large.pcapng"
    _small_blocks(small, 256)
    count = _small_blocks(large, 4 * MIB)
    baseline, _, _ = _run_child("trace", "convert", str(small), str(tmp_path / "small.hiltrace.jsonl"))
    result, out, _ = _run_child("trace", "convert", str(large), str(tmp_path / "large.hiltrace.jsonl"))
    assert result["status"] == 0 and f"({count} records)" in out
    assert result["rss_bytes"] < 1.5 * baseline["rss_bytes"], (result, baseline)
    assert sum(1 for _ in open_trace(tmp_path / "large.hiltrace.jsonl").records()) == count


# --- one typed error for every malformed input, in every consumer ---------------------------------------------
Build = Callable[[Path, dict[str, Any]], Path]


def _bad_line(line: bytes) -> Build:
    def build(path: Path, header: dict[str, Any]) -> Path:
        _jsonl(path, header, RECORDS)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join([*lines[:2], line, *lines[3:]]))
        return path

    return build


def _edited(where: str, **changes: Any) -> Build:
    return lambda path, header: _jsonl(path, *_edit(header, where, **changes))


def _pcapng(packets: bytes) -> Build:
    """A capture of ``packets`` whose section comment carries a recording's header (so a replay may start)."""

    def build(path: Path, header: dict[str, Any]) -> Path:
        comment = json.dumps(header).encode()
        options = struct.pack("<HH", 1, len(comment)) + comment + bytes(-len(comment) % 4) + struct.pack("<HH", 0, 0)
        target = path.with_name(path.name.replace(".hiltrace.jsonl", ".pcapng"))
        target.write_bytes(_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + options) + IDB + packets)
        return target

    return build


READ_TIME = ("show", "convert", "drift", "replay")  # every consumer refuses it while reading
PAIRED = ("drift", "replay")  # refused where submits and completions are paired
MALFORMED: dict[str, tuple[Build, str, tuple[str, ...]]] = {
    "non-utf8": (_bad_line(b'{"seq": 1, "op": "\xff\xfe"}\n'), "line 3: not a JSON object: not UTF-8 text", READ_TIME),
    "5000-digit-int": (_bad_line(b'{"seq": 1' + b"0" * 5000 + b"}\n"), "an integer of 5001 digits", READ_TIME),
    "deep-nesting": (_bad_line(b"[" * 100_000 + b"]" * 100_000 + b"\n"), "nested deeper than 32 levels", READ_TIME),
    "vendor-id-type": (_edited("device", vendor_id="abc"), "field 'device.vendor_id': 'abc'", READ_TIME),
    "configuration-type": (
        _edited("descriptors", configuration="one"),
        "field 'descriptors.configuration'",
        READ_TIME,
    ),
    "speed-type": (_edited("device", speed="fast"), "field 'device.speed': 'fast'", READ_TIME),
    "pcapng-blocks-type": (_edited("pcapng", blocks="x"), "field 'pcapng.blocks': 'x', expected a list", READ_TIME),
    "pcapng-linktype": (_edited("pcapng", linktype=5), "field 'pcapng.linktype'", READ_TIME),
    "product-200-chars": (_edited("device", product="p" * 200), "field 'device.product'", READ_TIME),
    "huge-length": (_edited("1", length=1 << 40), "line 3, field 'length': length=1099511627776", READ_TIME),
    "huge-ret": (_edited("1", ret=1 << 40), "line 3, field 'ret': ret=1099511627776", READ_TIME),
    "ret-past-64-bits": (
        _edited("1", ret=1 << 70),
        "line 3: not a JSON object: not JSON: an integer of 22 digits",
        READ_TIME,
    ),
    "huge-actual": (_edited("3", actual=1 << 40), "line 5, field 'actual': actual=1099511627776", READ_TIME),
    "huge-t-ns": (_edited("0", t_ns=1 << 63), "line 2, field 't_ns'", READ_TIME),
    "huge-usbmon": (_edited("1", usbmon={"len_urb": 1 << 40}), "field 'usbmon.urb_id': missing", READ_TIME),
    "usbmon-out-of-range": (
        _edited(
            "1",
            usbmon={
                **{
                    n: 0
                    for n in (
                        "urb_id",
                        "event",
                        "xfer_type",
                        "epnum",
                        "devnum",
                        "busnum",
                        "flag_setup",
                        "flag_data",
                        "ts_sec",
                        "ts_usec",
                        "status",
                        "len_cap",
                        "interval",
                        "start_frame",
                        "xfer_flags",
                        "ndesc",
                    )
                },
                "setup": "00" * 8,
                "len_urb": 1 << 40,
            },
        ),
        "field 'usbmon.len_urb': 1099511627776, expected an integer >= 0 and <= 4294967295",
        READ_TIME,
    ),
    "in-data-longer-than-asked": (_edited("1", data="00" * 4096), "4096 bytes of data, expected at most 16", READ_TIME),
    "completion-longer-than-submit": (
        _edited("3", actual=4096, data="00" * 4096),
        "record seq 3: field 'actual'=4096, expected at most 16",
        PAIRED,
    ),
    "vram-2-62": (_edited("options", vram_bytes=1 << 62), "options.vram_bytes=0x4000000000000000", ("drift",)),
    "pcapng-4-gib": (_pcapng(_usbmon("S", 0xFFFF_FFFF)), "field 'length': length=4294967295", READ_TIME),
    "pcapng-bad-urb-event": (_pcapng(_usbmon("X", 4)), "usbmon event 0x58", READ_TIME),
}


@pytest.mark.parametrize("consumer", ["show", "convert", "drift", "replay"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_trace_is_one_typed_error_in_every_consumer(
    case: str, consumer: str, header: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build, fragment, refusing = MALFORMED[case]
    path = build(tmp_path / "bad.hiltrace.jsonl", header)
    if consumer == "replay":
        if consumer not in refusing:
            return
        with pytest.raises(TraceFormatError) as caught:
            open_replay(path).close()
        assert str(caught.value).startswith(f"{path}: ") and fragment in str(caught.value)
        return
    out = tmp_path / ("out.pcapng" if path.suffix == ".jsonl" else "out.hiltrace.jsonl")
    status = main(["trace", consumer, str(path), *([str(out)] if consumer == "convert" else [])])
    captured = capsys.readouterr()
    if consumer not in refusing:
        assert status in (0, 1) and not captured.err, captured.err
        return
    assert status == EXIT_USAGE, captured.out
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert f"{path}: " in captured.err and fragment in captured.err, captured.err
    assert not out.exists() and not list(tmp_path.glob("*.part")), "a failed conversion leaves nothing behind"


def test_a_deeply_nested_section_comment_is_a_capture_comment_not_a_crash(tmp_path: Path) -> None:
    comment = b"[" * 30_000 + b"]" * 30_000  # an option holds at most 65535 bytes
    options = struct.pack("<HH", 1, len(comment)) + comment + bytes(-len(comment) % 4) + struct.pack("<HH", 0, 0)
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + options)
    path = tmp_path / "comment.pcapng"
    path.write_bytes(shb + IDB + _usbmon("S", 4) + _usbmon("C", 4, b"abcd", flag_data=0))
    trace = load_trace(path)
    assert trace.header.target == "" and len(trace.records) == 2


def test_trace_show_escapes_control_characters_from_the_trace(
    tmp_path: Path, header: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _jsonl(tmp_path / "ansi.hiltrace.jsonl", *_edit(header, "header", target="\x1b]0;owned\x07\u202eX"))
    assert main(["trace", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07\\u202eX" in out


def test_a_trace_source_reads_lazily_and_again_on_each_pass(tmp_path: Path, header: dict[str, Any]) -> None:
    path = _jsonl(tmp_path / "ok.hiltrace.jsonl", header, RECORDS)
    source = open_trace(path)
    first = source.records()
    assert next(first).seq == 0  # one record read, the rest not yet
    assert [r.seq for r in source.records()] == [0, 1, 2, 3]
    assert [r.seq for r in first] == [1, 2, 3]
