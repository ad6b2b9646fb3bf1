"""The drift check: a trace's requests fed to the emulator its header describes, every differing reply listed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

import tinyhil
from tinyhil.cli import main
from tinyhil.emulators.asm2464 import Quirks
from tinyhil.emulators.faults import Fault, FaultKind, FaultPlan, FaultRule, Operation, Transfer
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.replay import jsonable
from tinyhil.mocks.trace_drift import board_options, drift, emulator_replies, from_jsonable
from tinyhil.spec.asm2464 import Request
from tinyhil.spec.copyin import CHUNK_BYTES
from tinyhil.trace import TraceFormatError, load_trace
from tinyhil.trace.drift import Reply, compare, drift_lines, trace_divergence
from tinyhil.trace.exchanges import exchanges, first_difference
from tinyhil.trace.records import TransferStatus
from tinyhil.usbgpu.copy import DrainError

USBErrorPipe = usb1.USBErrorPipe

QUIRKY = Quirks(full_window_corruption=True)


@pytest.fixture(scope="module")
def quirky_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copyin recorded on a bridge with the full-window corruption quirk on: "hardware" that corrupts the last
    sector of a full 256 KB window, so the driver's drain fence never lands and the copyin gives up."""
    path = tmp_path_factory.mktemp("quirky") / "quirky.hiltrace.jsonl"
    data = np.arange(CHUNK_BYTES, dtype=np.uint8)
    with tinyhil.open_target("MOCKUSB+AMD", record=str(path), quirks=QUIRKY) as device:
        buf = device.alloc(data.nbytes)
        with pytest.raises(DrainError):
            device.copyin(buf, data)
    return path


def _edit_header(source: Path, destination: Path, **options: object) -> Path:
    """``source`` with header options replaced (as a user editing a hardware trace would)."""
    lines = source.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["options"].update(options)
    destination.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    return destination


def test_no_drift_on_an_emulator_trace(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = load_trace(recorded)
    assert drift(trace) == []
    assert main(["trace", "drift", str(recorded)]) == 0
    total = len(exchanges(trace))
    assert capsys.readouterr().out.strip() == f"{recorded}: no drift (all {total} replies agree)"


def test_no_drift_when_the_quirk_is_on_on_both_sides(quirky_trace: Path) -> None:
    trace = load_trace(quirky_trace)
    assert board_options(trace.header).quirks == QUIRKY  # the header's quirks are built back
    assert drift(trace) == []


def test_an_edited_header_shows_the_quirk_the_emulator_has_off(
    quirky_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = _edit_header(quirky_trace, tmp_path / "edited.hiltrace.jsonl", quirks=None)
    found = drift(load_trace(edited))
    assert found, "the emulator without the quirk lands the fence the recording never saw"
    first = found[0]
    trace = load_trace(quirky_trace)
    record = next(r for r in trace.records if r.seq == first.seq)
    # The first divergence is the driver's first read of the drain fence: XDATA_READ of SRAM, 0 on the recording
    # (the corrupted sector lost the sentinel), 1 on the emulator without the quirk.
    assert record.bRequest == Request.XDATA_READ
    assert first.fields == ("data",) and first.first_byte == 0
    assert first.expected.data[0] == 0 and first.got.data[0] == 1
    assert main(["trace", "drift", str(edited)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == f"{edited}: {len(found)} of {len(exchanges(trace))} replies differ; the first is record seq {first.seq}"
    )
    assert out[1].startswith(f"record seq {first.seq}: control IN bmRequestType=0xc0 bRequest=0xe4 (XDATA_READ)")
    assert "data differs first at byte 0x0: expected 0x00, got 0x01" in out[1]


def test_options_given_override_the_header_and_drift_is_deterministic(quirky_trace: Path, tmp_path: Path) -> None:
    trace = load_trace(quirky_trace)
    off = dataclasses.replace(board_options(trace.header), quirks=None)
    edited = load_trace(_edit_header(quirky_trace, tmp_path / "e.hiltrace.jsonl", quirks=None))
    given, from_header = drift(trace, off), drift(edited)
    assert given and [(d.seq, d.fields, bytes(d.got.data)) for d in given] == [
        (d.seq, d.fields, bytes(d.got.data)) for d in from_header
    ]


def test_a_recorded_stall_the_emulator_does_not_give_is_drift(tmp_path: Path) -> None:
    plan = FaultPlan((FaultRule(Operation(Transfer.BULK_OUT), 1, Fault(FaultKind.STALL)),))
    path = tmp_path / "stall.hiltrace.jsonl"
    with pytest.raises(USBErrorPipe), tinyhil.open_target("MOCKUSB+AMD", record=str(path), faults=plan) as device:
        device.copyin(device.alloc(4096), np.ones(4096, dtype=np.uint8))
    trace = load_trace(path)
    assert board_options(trace.header).faults == plan
    assert drift(trace) == []  # the fault plan comes back from the header: the same stall
    found = drift(trace, dataclasses.replace(board_options(trace.header), faults=None))
    assert found[0].expected.err == "USBErrorPipe" and found[0].expected.status is TransferStatus.STALL
    assert found[0].got.err is None and found[0].fields == ("status", "actual")
    assert found[0].request.startswith("bulk OUT ep=0x02")


def test_emulator_replies_pair_with_the_exchanges(recorded: Path) -> None:
    trace = load_trace(recorded)
    replies = emulator_replies(trace)
    assert replies == [Reply.recorded(e) for e in exchanges(trace)]


def test_compare_lists_each_field_that_differs(recorded: Path) -> None:
    trace_exchanges = exchanges(load_trace(recorded))
    replies = [Reply.recorded(e) for e in trace_exchanges]
    index = next(i for i, e in enumerate(trace_exchanges) if len(e.data) >= 4)
    wrong = bytearray(replies[index].data)
    wrong[3] ^= 0xFF
    replies[index] = dataclasses.replace(replies[index], data=bytes(wrong), actual=replies[index].actual + 1)
    (found,) = compare(trace_exchanges, replies)
    assert (found.seq, found.fields, found.first_byte) == (trace_exchanges[index].seq, ("actual", "data"), 3)
    with pytest.raises(InvalidArgument, match="1 replies for 0 exchanges"):
        compare([], [Reply()])


def test_first_difference() -> None:
    assert first_difference(b"abc", b"abc") is None
    assert first_difference(b"abc", b"abd") == 2
    assert first_difference(b"ab", b"abc") == 2
    assert first_difference(b"", b"") is None


def test_drift_lines_without_a_total() -> None:
    assert drift_lines([], name="t") == ["t: no drift (every reply agrees)"]


def test_trace_divergence_names_the_first_request_that_differs(recorded: Path, tmp_path: Path) -> None:
    trace = load_trace(recorded)
    assert trace_divergence(trace, trace) is None
    shorter = dataclasses.replace(trace, records=trace.records[:-3])
    assert "the recording goes on after" in str(trace_divergence(trace, shorter))


def test_header_options_that_cannot_be_read_back_name_the_field(recorded: Path, tmp_path: Path) -> None:
    bad = _edit_header(recorded, tmp_path / "bad.hiltrace.jsonl", quirks={"type": "Quirks", "stream_wedge": "yes"})
    with pytest.raises(TraceFormatError, match=r"line 1: header options.quirks.stream_wedge='yes', expected a bool"):
        drift(load_trace(bad), path=str(bad))
    unknown = _edit_header(recorded, tmp_path / "unknown.hiltrace.jsonl", warp=9)
    with pytest.raises(TraceFormatError, match=r"options.warp: unknown field of MockUsbOptions"):
        drift(load_trace(unknown))
    wrong_type = _edit_header(recorded, tmp_path / "type.hiltrace.jsonl", faults={"type": "Quirks"})
    with pytest.raises(TraceFormatError, match=r"options.faults=.*expected \{'type': 'FaultPlan'"):
        drift(load_trace(wrong_type))


def test_the_cli_reports_a_bad_header_in_one_line(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _edit_header(recorded, tmp_path / "bad.hiltrace.jsonl", seed="x")
    assert main(["trace", "drift", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "options.seed='x', expected an int" in err


def test_from_jsonable_round_trips_what_jsonable_wrote() -> None:
    plan = FaultPlan((FaultRule(Operation(Transfer.BULK_OUT), 3, Fault(FaultKind.TIMEOUT, 512)),))
    assert from_jsonable(FaultPlan, jsonable(plan), "faults") == plan
    assert from_jsonable(Quirks, jsonable(QUIRKY), "quirks") == QUIRKY
    with pytest.raises(InvalidArgument, match=r"faults.rules\[0\].fault.kind='melt', expected one of"):
        data = jsonable(plan)
        data["rules"][0]["fault"]["kind"] = "melt"
        from_jsonable(FaultPlan, data, "faults")
