"""Board health: the state machine, its record on disk, and the probes per kind (run on emulated boards)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tinyhil.device_farm.health.probes import PROBE_SRAM_BYTES, probe_board
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, FileFormatError
from tinyhil.mocks.usb.context import EmulatedUsbContext

MAP = """
[[board]]
id = "usb-emu"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD" }

[[board]]
id = "kfd-emu"
kind = "emulated"
emulated = { target = "MOCKKFD+AMD" }

[[board]]
id = "null"
kind = "emulated"
emulated = { target = "NULL" }

[[board]]
id = "bridge"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", serial = "LAB7" }
targets = ["USB+AMD"]

[[board]]
id = "kfd"
kind = "amd-kfd"
kfd = { gpu_id = 4660 }
targets = ["KFD+AMD"]

[[board]]
id = "nv"
kind = "nv"
nv = { uuid = "GPU-1234" }

[[board]]
id = "resting"
kind = "emulated"
emulated = { target = "NULL" }
state = "maintenance"
"""
HWMAP = parse_hwmap(MAP)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_board_starts_unknown_needs_a_probe_and_is_scheduled_only_when_good() -> None:
    clock = Clock()
    book = HealthBook(HWMAP.boards, clock=clock, probe_interval_s=60)
    assert book.state("null") is HealthState.UNKNOWN and book.needs_probe("null") and not book.schedulable("null")
    assert book.record_probe("null", ProbeResult(True, "fine")).state is HealthState.GOOD
    assert book.schedulable("null") and not book.needs_probe("null")
    clock.now += 60  # the periodic probe is due: no work until it runs
    assert book.needs_probe("null") and not book.schedulable("null")
    record = book.record_probe("null", ProbeResult(False, "SRAM round trip: byte 3 reads 0x00"))
    assert record.state is HealthState.BAD and record.reason == "probe failed: SRAM round trip: byte 3 reads 0x00"
    assert record.probes_failed == 1 and not book.schedulable("null")
    book.record_probe("null", ProbeResult(True, "fine again"))
    record = book.record_infrastructure_failure("null", "USBErrorNoDevice")
    assert (record.state, record.infrastructure_failures) == (HealthState.UNKNOWN, 1)
    assert record.reason == "infrastructure failure: USBErrorNoDevice" and book.needs_probe("null")


def test_maintenance_from_the_map_wins_over_probes_and_is_never_probed() -> None:
    book = HealthBook(HWMAP.boards, clock=Clock())
    book.record_probe("resting", ProbeResult(True, "fine"))
    assert book.state("resting") is HealthState.MAINTENANCE
    assert not book.needs_probe("resting") and not book.schedulable("resting")
    assert book.record("resting").reason == "maintenance in the hardware map"


def test_the_record_survives_a_restart_and_a_corrupt_one_is_named(tmp_path: Path) -> None:
    clock = Clock()
    HealthBook(HWMAP.boards, clock=clock, state_dir=tmp_path).record_probe("null", ProbeResult(False, "broken"))
    again = HealthBook(HWMAP.boards, clock=clock, state_dir=tmp_path)
    assert again.state("null") is HealthState.BAD and again.record("null").probed_at == 1000.0
    assert json.loads((tmp_path / "health.json").read_text())["boards"]["null"]["state"] == "BAD"
    (tmp_path / "health.json").write_text("{not json")
    with pytest.raises(InvalidArgument, match=r"health\.json: file: not JSON: .* \(not a health record; delete it"):
        HealthBook(HWMAP.boards, clock=clock, state_dir=tmp_path)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(InvalidArgument, match="probe_interval_s=0, expected a number of seconds > 0"):
        HealthBook(HWMAP.boards, clock=Clock(), probe_interval_s=0)
    with pytest.raises(InvalidArgument, match="board 'nope' is not in this farm's map; boards: usb-emu"):
        HealthBook(HWMAP.boards, clock=Clock()).state("nope")


@pytest.mark.parametrize(
    ("board_id", "detail"),
    [
        ("usb-emu", f"link L0, SRAM round trip of {PROBE_SRAM_BYTES} bytes"),
        ("kfd-emu", "MOCKKFD+AMD opened, KFD 1."),
        ("null", "NULL opened, a buffer allocated and freed"),
    ],
)
def test_an_emulated_board_passes_the_probe_of_the_kind_it_emulates(board_id: str, detail: str) -> None:
    result = probe_board(HWMAP.board(board_id))
    assert result.ok, result.detail
    assert result.detail.startswith(detail)


def test_an_emulated_board_whose_fault_plan_breaks_its_probe_goes_bad_and_is_not_scheduled() -> None:
    plan = FaultPlan.single(Operation.control_in(0xE4), 1, Fault.stall())  # the LTSSM read stalls
    result = probe_board(HWMAP.board("usb-emu"), options={"faults": plan})
    assert not result.ok and result.detail == "bridge probe: USBErrorPipe: LIBUSB_ERROR_PIPE [-9]"
    book = HealthBook(HWMAP.boards, clock=Clock())
    assert book.record_probe("usb-emu", result).state is HealthState.BAD
    assert not book.schedulable("usb-emu")


def test_sram_that_never_lands_fails_the_bridge_probe() -> None:
    plan = FaultPlan.single(Operation.bulk_out(), 1, Fault.drop())  # the 0xF2 write is lost on the bridge
    result = probe_board(HWMAP.board("usb-emu"), options={"faults": plan})
    assert not result.ok and result.detail.startswith("SRAM round trip: byte ")


def test_a_real_bridge_board_is_probed_over_libusb_here_an_emulated_bus() -> None:
    found = probe_board(HWMAP.board("bridge"), usb_context=EmulatedUsbContext(Asm2464(serial="LAB7")))
    assert found.ok, found.detail
    absent = probe_board(HWMAP.board("bridge"), usb_context=EmulatedUsbContext(Asm2464(serial="OTHER")))
    assert not absent.ok and absent.detail.startswith("bridge: open: BridgeUnavailable: ") and "LAB7" in absent.detail


def test_a_kfd_board_on_a_machine_without_kfd_fails_its_probe_with_the_reason() -> None:
    result = probe_board(HWMAP.board("kfd"))
    assert not result.ok and "KFD+AMD" in result.detail


class _NvmlError(Exception):
    pass


def _nvml(ecc: int = 0, pending: Any = 0, init_error: str | None = None) -> Any:
    errors = {n: type(n, (_NvmlError,), {}) for n in ("NVMLError_NotSupported", "NVMLError_LibraryNotFound")}

    def init() -> None:
        if init_error:
            raise errors[init_error]("no driver")

    def retired(handle: Any) -> int:
        if pending == "unsupported":
            raise errors["NVMLError_NotSupported"]("not supported")
        return int(pending)

    calls: list[str] = []
    return SimpleNamespace(
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByUUID=lambda uuid: calls.append(uuid) or "handle",
        nvmlDeviceGetName=lambda handle: b"NVIDIA H200",
        nvmlDeviceGetTotalEccErrors=lambda handle, kind, counter: ecc,
        nvmlDeviceGetRetiredPagesPendingStatus=retired,
    )


def test_the_nv_probe_queries_nvml_and_checks_ecc_and_page_retirement() -> None:
    nvml = _nvml()
    result = probe_board(HWMAP.board("nv"), nvml=nvml)
    assert result == ProbeResult(True, "NVIDIA H200, no uncorrected ECC errors, no pages pending retirement")
    assert nvml.calls == ["GPU-1234", "shutdown"]
    assert probe_board(HWMAP.board("nv"), nvml=_nvml(ecc=3)) == ProbeResult(
        False, "NVIDIA H200: 3 uncorrected ECC errors"
    )
    noted = probe_board(HWMAP.board("nv"), nvml=_nvml(pending="unsupported"))
    assert noted.ok and noted.detail.endswith("pages pending retirement: not supported")
    absent = probe_board(HWMAP.board("nv"), nvml=_nvml(init_error="NVMLError_LibraryNotFound"))
    assert absent == ProbeResult(False, "NVML: NVMLError_LibraryNotFound: no driver")


def test_a_board_with_the_documented_firmware_option_probes_good() -> None:
    """``options = { firmware = "generated" }`` is MOCKUSB+AMD's bring-up option: the bridge probe leaves it out."""
    options = 'options = { firmware = "generated" }'
    text = f'[[board]]\nid = "fw"\nkind = "emulated"\nemulated = {{ target = "MOCKUSB+AMD", {options} }}\n'
    board = parse_hwmap(text).boards[0]
    assert board.locator.options == {"firmware": "generated"}  # type: ignore[union-attr]
    result = probe_board(board)
    assert result == ProbeResult(True, f"link L0, SRAM round trip of {PROBE_SRAM_BYTES} bytes")
    book = HealthBook((board,), clock=Clock())
    assert book.ready(board, probe_board) and book.state("fw") is HealthState.GOOD


def _record(**fields: Any) -> str:
    record = {"state": "BAD", "reason": "r", "probed_at": 1.0, "probes_failed": 1, "infrastructure_failures": 0}
    return json.dumps({"boards": {"null": {**record, **fields}}})


@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        (_record(state="NICE"), "boards.null.state", "'NICE', expected one of GOOD, UNKNOWN, BAD"),
        (_record(state=None), "boards.null.state", "missing"),
        (_record(reason=5), "boards.null.reason", "5, expected a string"),
        (_record(probed_at="noon"), "boards.null.probed_at", "'noon', expected a number >= 0"),
        (_record(probes_failed=True), "boards.null.probes_failed", "True, expected an integer >= 0"),
        (_record(probes_failed=-1), "boards.null.probes_failed", "-1, expected an integer >= 0"),
        (_record(colour="red"), "boards.null.colour", "unknown field"),
        (_record(probes_failed=2**64 + 1), "boards.null.probes_failed", "an integer past 64 bits"),
        (_record().replace('"probes_failed": 1', '"probes_failed": ' + "9" * 5000), "file", "not JSON: an integer of"),
        ('{"boards": ' + "[" * 5000 + "]" * 5000 + "}", "file", "nested deeper than 32 levels"),
        ('{"boards": ' + "[" * 40 + "]" * 40 + "}", "boards", "nested deeper than 32 levels"),
        ('{"boards": []}', "boards", "[], expected a table"),
        ('{"boards": {"null": 3}}', "boards.null", "3, expected a table"),
        ("[1]", "file", "a list, expected a table"),
    ],
)
def test_a_hostile_health_record_is_one_error_naming_file_and_field(
    tmp_path: Path, text: str, field: str, why: str
) -> None:
    (tmp_path / "health.json").write_text(text)
    with pytest.raises(FileFormatError) as raised:
        HealthBook(HWMAP.boards, clock=Clock(), state_dir=tmp_path)
    error = raised.value
    assert error.path == str(tmp_path / "health.json") and error.field.startswith(field), str(error)
    assert error.why.startswith(why) and error.why.endswith("delete it to start every board from UNKNOWN)")
    assert str(error).startswith(f"{tmp_path / 'health.json'}: {error.field}: ")


def test_a_health_record_over_its_cap_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "health.json").write_bytes(b" " * (LIMITS["health"].max_bytes + 1))
    with pytest.raises(FileFormatError, match=r"health\.json: file: larger than 16777216 bytes, the limit"):
        HealthBook(HWMAP.boards, clock=Clock(), state_dir=tmp_path)
