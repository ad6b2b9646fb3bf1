"""Probes under the board's lease: a busy board is not probed; a BAD board's power_cycle runs first, as an argument
list, with its output kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tinyhil.device_farm.health.leased import LeasedProbe, power_cycle
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, parse_hwmap
from tinyhil.device_farm.leases import BoardLock, Holder, LeaseTimeout, acquire, holders


def _board(power_cycle: str = "") -> Board:
    text = f'[[board]]\nid = "b"\nkind = "emulated"\nemulated = {{ target = "NULL" }}\n{power_cycle}\n'
    return parse_hwmap(text).board("b")


def test_a_probe_holds_the_lease_while_it_runs_and_a_busy_board_is_not_probed(tmp_path: Path) -> None:
    board = _board()
    seen: list[object] = []

    def probe(probed: Board) -> ProbeResult:
        seen.append(holders(tmp_path, BoardLock.of(probed))[0])
        return ProbeResult(True, "fine")

    assert LeasedProbe(tmp_path, "run-1", probe)(board).ok
    [holder] = seen
    assert isinstance(holder, Holder) and (holder.run_id, holder.test, holder.board) == ("run-1", "(health probe)", "b")
    with acquire(tmp_path, BoardLock.of(board), Holder.here("other")), pytest.raises(LeaseTimeout):
        LeasedProbe(tmp_path, "run-1", probe)(board)
    assert len(seen) == 1


def test_a_bad_boards_power_cycle_runs_first_as_an_argument_list(tmp_path: Path) -> None:
    marker = tmp_path / "a file; rm -rf ~"  # a shell would split this; an argument list never does
    argv = [sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text('on')", str(marker)]
    board = _board(f"power_cycle = {json.dumps(argv)}")
    book = HealthBook((board,), clock=lambda: 1.0, state_dir=tmp_path)
    probe = LeasedProbe(tmp_path / "locks", "r", lambda b: ProbeResult(marker.exists(), "probed"), book=book,
                        state_dir=tmp_path)  # fmt: skip
    assert not probe(board).ok  # not BAD yet: no power cycle
    book.record_probe("b", ProbeResult(False, "broken"))
    result = probe(board)
    assert result.ok and result.detail.startswith("probed; after power_cycle exit status 0 (output in ")
    assert marker.read_text() == "on"


@pytest.mark.parametrize(
    ("argv", "ended"),
    [
        (["/nonexistent/relay-tool", "off"], "could not start: No such file or directory"),
        ([sys.executable, "-c", "import time; print('cycling', flush=True); time.sleep(30)"], "killed after 0.5 s"),
        ([sys.executable, "-c", "raise SystemExit(3)"], "exit status 3"),
    ],
)
def test_a_power_cycle_that_fails_is_said_and_kept_never_raised(tmp_path: Path, argv: list[str], ended: str) -> None:
    board = _board(f"power_cycle = {json.dumps(argv)}")
    said = power_cycle(board, tmp_path, timeout_s=0.5)
    assert said.startswith(f"power_cycle {ended}")
    assert ended in (tmp_path / "power-cycle" / "b.log").read_text()
