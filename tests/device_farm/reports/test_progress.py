"""The progress line in a terminal: every update fits the terminal's width (long test ids cut in the middle, so no
line wraps and leaves junk behind), and a log gets every result whole."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tinyhil.device_farm.engine import Result
from tinyhil.device_farm.reports.matrix import row_name
from tinyhil.device_farm.reports.progress import CUT, Progress, middle_cut, print_results
from tinyhil.device_farm.reports.summary import PairReport

COLUMNS = 100
CLEAR = "\r\x1b[2K"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _nodeid(n: int) -> str:
    return f"tests/suite/test_module_{n}.py::test_copy_sizes[MOCKKFD+AMD:LLVM:gfx1100-{'x' * (n % 90)}-{n}]"


def _results(count: int) -> list[Result]:
    outcomes = ("passed", "failed", "error", "skipped")
    return [Result(f"k{n}", _nodeid(n), "MOCKKFD+AMD", f"board-{n % 3}", "host", 1, outcomes[n % 4], 0.1, "why")
            for n in range(count)]  # fmt: skip


def test_no_update_is_wider_than_the_terminal() -> None:
    out = _Terminal()
    results = _results(206)
    progress = Progress(len(results), out, columns=lambda: COLUMNS)
    for result in results:
        progress.started(result.board, result.nodeid)
        progress.show(result)
        progress.show(Result(result.key, result.nodeid, result.target, result.board, "host", 1, "error", 0.0,
                             "lost", "board lost: ENODEV", final=False))  # fmt: skip
    progress.close()
    updates = [piece for chunk in out.getvalue().split(CLEAR) for piece in chunk.split("\n") if piece]
    assert len(updates) > len(results) * 2
    assert max(len(update) for update in updates) < COLUMNS
    assert any(CUT in update for update in updates)  # the long ids were cut, not left to wrap
    finals = [u for u in updates if u.startswith(f"[{len(results)}/")]
    assert finals and re.match(rf"\[{len(results)}/{len(results)}\] ", finals[-1])


def test_a_cut_id_keeps_its_start_and_its_end() -> None:
    nodeid = _nodeid(89)
    cut = middle_cut(nodeid, 40)
    assert len(cut) == 40 and CUT in cut
    head, tail = cut.split(CUT)
    assert nodeid.startswith(head) and nodeid.endswith(tail) and len(head) >= len(tail)
    assert middle_cut(nodeid, len(nodeid)) == nodeid


def test_a_log_gets_every_result_whole() -> None:
    out = io.StringIO()
    results = _results(3)
    progress = Progress(len(results), out, columns=lambda: 20)
    for result in results:
        progress.show(result)
    assert out.getvalue().splitlines() == [f"[{n + 1}/3] {r.outcome} {r.nodeid} on {r.board}"
                                           for n, r in enumerate(results)]  # fmt: skip


def test_a_quarantined_failure_is_not_counted_failed() -> None:
    out = _Terminal()
    results = [r for r in _results(4) if r.outcome == "failed"]
    progress = Progress(len(results), out, columns=lambda: COLUMNS, quarantined=lambda result: True)
    progress.show(results[0])
    assert out.getvalue().split(CLEAR)[-1].startswith("1/1 done, 0 failed")


def test_the_closing_matrix_folds_to_the_terminal_and_a_log_keeps_ids_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    long_ids = _results(90)[-3:]  # ids of about 150 characters
    finals = [{"nodeid": r.nodeid, "target": r.target, "outcome": "passed", "board": r.board, "host": "h"}
              for r in long_ids]  # fmt: skip
    described = [{"name": "MOCKKFD+AMD", "available": True}]
    shown = {}
    for out in (_Terminal(), io.StringIO()):
        print_results([PairReport(f) for f in finals], described, out, run_dir=tmp_path, quarantine=None)
        shown[out.isatty()] = out.getvalue().splitlines()
    matrix = [line for line in shown[True] if not line.startswith(("totals:", "reports:"))]
    assert max(map(len, matrix)) <= COLUMNS and len(matrix) > 2 + len(finals)  # header, rule, folded rows
    assert any(line.startswith(row_name(finals[2]["nodeid"], "MOCKKFD+AMD")) for line in shown[False])
