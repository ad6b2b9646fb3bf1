"""What a run shows on its output while it runs (:class:`Progress`) and when it ends (:func:`print_results`: the
matrix, the totals, the unavailable targets, expired quarantine entries, where the reports are, and last, as pytest's
``-ra`` does, a short summary of each failure: the test, its target and board, its first line, and where
``report.html`` shows its traceback and output)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from tinyhil.device_farm.engine import Result
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.reports import JUNIT_NAME, REPORT_NAME, SUMMARY_NAME
from tinyhil.device_farm.reports.html import failure_anchors
from tinyhil.device_farm.reports.matrix import render_matrix
from tinyhil.device_farm.reports.summary import PairReport, totals_line
from tinyhil.fixtures.outcomes import FAILING, result_kind
from tinyhil.pipes import OUTPUT_CLOSED, silence
from tinyhil.printable import printable

__all__ = ["CUT", "Progress", "middle_cut", "print_results"]

_RULE_WIDTH: Final = 72  # the failure summary's heading rule
CUT: Final = "..."  # what stands for the middle of a test id cut to fit the terminal
_CLEAR: Final = "\r\x1b[2K"  # back to the line's start, and clear it


def print_results(reports: Sequence[PairReport], described: Sequence[Mapping[str, Any]], out: TextIO, *,
                  run_dir: Path, quarantine: Quarantine | None) -> None:  # fmt: skip
    """The run's closing lines on ``out``: the matrix of ``reports`` over the ``described`` targets (folded to the
    terminal's width when ``out`` is one), the totals, each
    unavailable target with its skips, the expired entries of ``quarantine``, and the reports in ``run_dir``."""
    results = [{**r.final, "kind": r.kind} for r in reports]
    print(file=out)
    columns = _terminal_columns() if _is_terminal(out) else None  # a log keeps every id on one line
    print(render_matrix(results, [str(d["name"]) for d in described], width=columns), file=out)
    print(file=out)
    print(f"totals: {totals_line(reports)}", file=out)
    for target in described:
        if not target["available"]:
            skipped = sum(1 for r in results if r["target"] == target["name"] and r["outcome"] == "skipped")
            tests = "test" if skipped == 1 else "tests"
            print(f"unavailable: {target['name']}: {skipped} {tests} skipped ({target['reason']})", file=out)
    if quarantine is not None:
        for entry in quarantine.expired(dt.date.today()):
            print(f"quarantine entry at {quarantine.path}:{entry.line} expired: {entry}", file=out)
    print(f"reports: {run_dir / JUNIT_NAME} {run_dir / SUMMARY_NAME} {run_dir / REPORT_NAME}", file=out)
    anchors = failure_anchors(reports)
    if anchors:
        print(" short failure summary ".center(_RULE_WIDTH, "="), file=out)
    for index, anchor in anchors.items():
        final = reports[index].final
        line = (f"{str(final['outcome']).upper()} {final['nodeid']} on {final['target']} (board {final.get('board')}):"
                f" {final.get('reason') or '-'}")  # fmt: skip
        print(printable(line, newlines=False), file=out)  # test ids and messages come from shards
        print(f"  details: {run_dir / REPORT_NAME}#{anchor}", file=out)


def middle_cut(text: str, room: int) -> str:
    """``text`` whole when it has at most ``room`` characters, else its start and end around :data:`CUT` (a long
    test id keeps its file and its parameters)."""
    if len(text) <= room:
        return text
    if room <= len(CUT):
        return text[:room]
    kept = room - len(CUT)
    return text[: (kept + 1) // 2] + CUT + text[len(text) - kept // 2 :]


def _terminal_columns() -> int:
    return shutil.get_terminal_size().columns


def _is_terminal(out: TextIO) -> bool:
    return bool(getattr(out, "isatty", lambda: False)())


class Progress:
    """Tests done / total, failures, and what each board is running: one updating line in a terminal; a plain line
    per result otherwise (a log has no use for the in-between states).

    Every pair of the run counts toward the total, those decided without running (skipped at collection, no board
    to route to) included: the run shows them as they are journaled. In a terminal, every line it writes fits in
    ``columns()`` - 1 characters (the terminal's width, asked at each update), long test ids cut in the middle
    (:func:`middle_cut`), so no line wraps and the updating line leaves nothing behind. A result is shown as the kind
    the reports count it as (:func:`~tinyhil.fixtures.outcomes.result_kind`): ``quarantined`` says whether a failing
    result is covered by a quarantine entry (it is not counted as failed), and a final result after lost attempts
    is ``flaky``.

    When the output's reader goes away (``tinyhil run | head -1``), :attr:`closed` turns true, the rest of the
    output goes to ``os.devnull``, and ``on_closed`` is called once with :data:`OUTPUT_CLOSED` (the run stops).
    """

    def __init__(self, total: int, out: TextIO, on_closed: Callable[[str], None] | None = None, *,
                 columns: Callable[[], int] = _terminal_columns,
                 quarantined: Callable[[Result], bool] | None = None) -> None:  # fmt: skip
        self.total, self.out, self.done, self.failures = total, out, 0, 0
        self.live = _is_terminal(out)
        self.running: dict[str, str] = {}  # node id -> board
        self.closed = False
        self.on_closed = on_closed
        self.columns, self.quarantined = columns, quarantined

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.closed = True
            silence(self.out)
            if self.on_closed is not None:
                self.on_closed(OUTPUT_CLOSED)

    def _room(self) -> int:
        return max(self.columns() - 1, len(CUT) + 1)  # the last column left free: some terminals wrap on it

    def started(self, board: str, nodeid: str) -> None:
        self.running[nodeid] = board
        if self.live:
            self._redraw()

    def _status(self, room: int) -> str:
        head = f"{self.done}/{self.total} done, {self.failures} failed | "
        shown = sorted((printable(board, newlines=False), printable(nodeid.rpartition("::")[2], newlines=False))
                       for nodeid, board in self.running.items())  # fmt: skip
        text = head + ", ".join(f"{board}: {test}" for board, test in shown)
        if len(text) > room and shown:  # each test's name cut to its share of the room the board names leave
            share = (room - len(head) - sum(len(board) + len(": , ") for board, _ in shown)) // len(shown)
            text = head + ", ".join(f"{board}: {middle_cut(test, max(share, 0))}" for board, test in shown)
        return text if len(text) <= room else text[: room - len(CUT)] + CUT

    def _redraw(self) -> None:
        self._write(_CLEAR + self._status(self._room()))

    def _kind(self, result: Result) -> str:
        """What the reports will count a final ``result`` as (a later attempt of a pair follows lost ones only)."""
        quarantined = result.outcome in FAILING and self.quarantined is not None and self.quarantined(result)
        return result_kind(result.outcome, flaky=result.attempt > 1, quarantined=quarantined)

    def _line(self, result: Result, kind: str) -> str:
        """The line of ``result`` (test ids and reasons come from files and shards: shown printable); in a terminal,
        its test id cut to fit."""
        if not result.final:
            cause = result.infrastructure or f"{result.outcome}, run again for --reruns: {result.reason}"
            parts = ("retry ", result.nodeid, f" ({result.board}: {cause})")
        else:
            parts = (f"[{self.done}/{self.total}] {kind} ", result.nodeid, f" on {result.board}")
        head, nodeid, tail = (printable(part, newlines=False) for part in parts)
        if self.live:
            room = self._room()
            nodeid = middle_cut(nodeid, max(room - len(head) - len(tail), len(CUT) + 1))
            return middle_cut(head + nodeid + tail, room)
        return head + nodeid + tail

    def show(self, result: Result) -> None:
        """Count and show one attempt (a final result counts toward the total)."""
        kind = self._kind(result) if result.final else result.outcome
        failing = result.final and kind in FAILING
        if result.final:
            self.done += 1
            self.failures += failing
        line = self._line(result, kind)
        self.running.pop(result.nodeid, None)
        if self.live:
            if failing or not result.final:  # failures stay visible above the line
                self._write(_CLEAR + line + "\n")
            self._redraw()
        else:
            self._write(line + "\n")

    def note(self, line: str) -> None:
        """A line of its own (a board the run waits for), kept above the updating line in a terminal."""
        line = printable(line, newlines=False)  # holders come from files anyone on the host may write
        if self.live:
            self._write("\r\x1b[2K" + line + "\n")
            self._redraw()
        else:
            self._write(line + "\n")

    def close(self) -> None:
        if self.live:
            self._write("\n")
