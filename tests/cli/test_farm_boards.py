"""``tinyhil farm probe`` and ``farm set``: a repaired board comes back, a power_cycle command runs before a BAD
board's re-probe with its output kept, an operator's decision is recorded with who and why, and a busy board is
never probed over another run's work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tinyhil.cli import EXIT_USAGE, main
from tinyhil.cli.farm_boards import operator
from tinyhil.device_farm.health import read_changes
from tinyhil.device_farm.inventory.hwmap import load_hwmap
from tinyhil.device_farm.leases import BoardLock, Holder, acquire

# The bridge probe reads the LTSSM byte first: a stall there fails the probe (the board is broken).
BROKEN = '{ faults = [ { operation = "control_in", request = 0xE4, occurrence = 1, fault = "stall" } ] }'
MAP = """
[[board]]
id = "bridge"
kind = "emulated"
emulated = {{ target = "MOCKUSB+AMD", options = {options} }}
power_cycle = ["{python}", "-c", "import sys; print('port 3 off, on'); print('relay warm', file=sys.stderr)"]
"""


def _map(tmp_path: Path, options: str) -> Path:
    path = tmp_path / "hwmap.toml"
    path.write_text(MAP.format(options=options, python=sys.executable))
    return path


def _args(tmp_path: Path, command: str, *more: str) -> list[str]:
    return ["farm", command, *more, "--hwmap", str(tmp_path / "hwmap.toml"), "--state", str(tmp_path / "state")]


def _status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert main([*_args(tmp_path, "status"), "--json", "--lock-dir", str(tmp_path / "locks")]) == 0
    return {b["board"]: b["health"] for b in json.loads(capsys.readouterr().out)["boards"]}


def test_farm_probe_brings_a_repaired_board_back_after_its_power_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _map(tmp_path, BROKEN)
    locks = ["--lock-dir", str(tmp_path / "locks")]
    assert main([*_args(tmp_path, "probe", "bridge"), *locks]) == 1
    out = capsys.readouterr().out
    assert "board bridge: probe failed: bridge probe: USBErrorPipe" in out and "UNKNOWN -> BAD" in out
    assert not (tmp_path / "state" / "power-cycle").exists()  # it was not BAD before this probe: no power cycle
    assert _status(tmp_path, capsys) == {"bridge": "BAD"}
    _map(tmp_path, "{}")  # repaired
    assert main([*_args(tmp_path, "probe"), *locks]) == 0
    out = capsys.readouterr().out
    assert "board bridge: probe passed: link L0" in out and "BAD -> GOOD" in out
    log = tmp_path / "state" / "power-cycle" / "bridge.log"
    assert f"after power_cycle exit status 0 (output in {log})" in out
    kept = log.read_text()
    assert "exit status 0" in kept and "port 3 off, on\n" in kept and "relay warm\n" in kept
    assert _status(tmp_path, capsys) == {"bridge": "GOOD"}
    changes = [(c.before, c.after) for c in read_changes(tmp_path / "state")]
    assert changes == [("UNKNOWN", "BAD"), ("BAD", "GOOD")]  # every change journaled, with its reason


def test_farm_probe_never_probes_a_busy_board(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hwmap = _map(tmp_path, "{}")
    board = load_hwmap(hwmap).board("bridge")
    with acquire(tmp_path / "locks", BoardLock.of(board), Holder.here("other-run", "test_long", "bridge")):
        assert main([*_args(tmp_path, "probe"), "--lock-dir", str(tmp_path / "locks"), "--wait", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "board bridge: busy, held by pid " in out and "(run other-run) running test_long" in out
    assert "board bridge: not probed, busy (board 'bridge': no lease within 0.2 s" in out
    assert _status(tmp_path, capsys) == {"bridge": "UNKNOWN"} and read_changes(tmp_path / "state") == []


def test_farm_set_records_who_and_why_and_holds_the_board_out_whatever_probes_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _map(tmp_path, "{}")
    locks = ["--lock-dir", str(tmp_path / "locks")]
    assert main([*_args(tmp_path, "set", "bridge", "maintenance"), "--reason", "reflowing J3"]) == 0
    assert f"board bridge: UNKNOWN -> MAINTENANCE (maintenance: reflowing J3 ({operator()}))" in capsys.readouterr().out
    assert main([*_args(tmp_path, "probe"), *locks]) == 0  # it probes fine, and stays in maintenance
    assert _status(tmp_path, capsys) == {"bridge": "MAINTENANCE"}
    assert main([*_args(tmp_path, "set", "bridge", "good"), "--reason", "J3 fixed"]) == 0
    assert _status(tmp_path, capsys) == {"bridge": "GOOD"}
    [held, back] = read_changes(tmp_path / "state")
    assert (held.after, held.by, back.after, back.by) == ("MAINTENANCE", operator(), "GOOD", operator())
    assert held.reason == f"maintenance: reflowing J3 ({operator()})"


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        (["set", "bridge", "good", "--reason", " "], "reason '', expected a few words saying why (--reason TEXT)"),
        (["set", "nope", "good", "--reason", "x"], "board 'nope' is not in"),
        (["probe", "--wait", "-1"], "--wait -1, expected seconds >= 0"),
    ],
)
def test_bad_probe_and_set_arguments_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], more: list[str], expected: str
) -> None:
    _map(tmp_path, "{}")
    args = [*_args(tmp_path, more[0]), *more[1:]]
    assert main(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err


def test_farm_set_refuses_a_board_the_map_holds_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _map(tmp_path, "{}")
    (tmp_path / "hwmap.toml").write_text((tmp_path / "hwmap.toml").read_text() + 'state = "retired"\n')
    assert main([*_args(tmp_path, "set", "bridge", "good"), "--reason", "x"]) == EXIT_USAGE
    assert "board 'bridge' is retired in the hardware map (line 2); change its state there" in capsys.readouterr().err
