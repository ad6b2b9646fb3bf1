"""What a run shows on its output while it runs (:class:`Progress`) and when it ends (:func:`print_results`: the
matrix, the totals, the unavailable targets, expired quarantine entries, where the reports are, and last, as pytest's
``-ra`` does, a short summary of each failure: the test, its target and board, its first line, and where
``report.html`` shows its traceback and output)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from tinyhil.device_farm.engine import Result
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.reports import JUNIT_NAME, REPORT_NAME, SUMMARY_NAME
from tinyhil.device_farm.reports.html import failure_anchors
from tinyhil.device_farm.reports.matrix import render_matrix
from tinyhil.device_farm.reports.summary import PairReport, totals_line
from tinyhil.pipes import OUTPUT_CLOSED, silence
from tinyhil.printable import printable

__all__ = ["Progress", "print_results"]

_RULE_WIDTH: Final = 72  # the failure summary's heading rule


def print_results(reports: Sequence[PairReport], described: Sequence[Mapping[str, Any]], out: TextIO, *,
                  run_dir: Path, quarantine: Quarantine | None) -> None:  # fmt: skip
    """The run's closing lines on ``out``: the matrix of ``reports`` over the ``described`` targets, the totals, each
    unavailable target with its skips, the expired entries of ``quarantine``, and the reports in ``run_dir``."""
    results = [dict(r.final) for r in reports]
    print(file=out)
    print(render_matrix(results, [str(d["name"]) for d in described]), file=out)
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


class Progress:
    """Tests done / total, failures, and what each board is running: one updating line in a terminal; a plain line
    per result otherwise (a log has no use for the in-between states).

    When the output's reader goes away (``tinyhil run | head -1``), :attr:`closed` turns true, the rest of the
    output goes to ``os.devnull``, and ``on_closed`` is called once with :data:`OUTPUT_CLOSED` (the run stops).
    """

    def __init__(self, total: int, out: TextIO, on_closed: Callable[[str], None] | None = None) -> None:
        self.total, self.out, self.done, self.failures = total, out, 0, 0
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.running: dict[str, str] = {}  # node id -> board
        self.closed = False
        self.on_closed = on_closed

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

    def started(self, board: str, nodeid: str) -> None:
        self.running[nodeid] = board
        if self.live:
            self._redraw()

    def _redraw(self) -> None:
        shown = sorted((board, nodeid.rpartition("::")[2]) for nodeid, board in self.running.items())
        boards = ", ".join(f"{board}: {test}" for board, test in shown)
        status = f"{self.done}/{self.total} done, {self.failures} failed | {boards}"
        self._write("\r\x1b[2K" + printable(status[:200], newlines=False))

    def show(self, result: Result) -> None:
        if not result.final:
            line = f"retry {result.nodeid} ({result.board}: {result.infrastructure})"
        else:
            self.done += 1
            self.failures += result.outcome in ("failed", "error")
            line = f"[{self.done}/{self.total}] {result.outcome} {result.nodeid} on {result.board}"
        line = printable(line, newlines=False)  # test ids and reasons come from files and shards
        self.running.pop(result.nodeid, None)
        if self.live:
            if result.outcome in ("failed", "error") or not result.final:  # failures stay visible above the line
                self._write("\r\x1b[2K" + line + "\n")
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
