"""The test x target matrix printed after a run: a row per test, a column per target, each cell the result's kind
(:data:`CELL`). Given the terminal's ``width``, a test id too long for the target columns to stay on screen is
folded onto continuation lines (indented by two spaces), preferably after a ``[``, ``-``, ``,``, ``/`` or ``::``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tinyhil.printable import printable

__all__ = ["CELL", "render_matrix", "row_name"]

CELL: Final = {
    "passed": "pass",
    "failed": "FAIL",
    "error": "ERROR",
    "skipped": "skip",
    "xfailed": "xfail",
    "xpassed": "XPASS",
    "flaky": "flaky",
    "quarantined": "quar",
}
_NOT_RUN: Final = "-"
_GAP: Final = "  "
_INDENT: Final = "  "  # a folded test id's continuation lines
_MIN_TEST_WIDTH: Final = 24  # the test column never folds narrower than this, whatever the terminal
_MIN_CELL_WIDTH: Final = 5
_BREAKS: Final = ("::", "[", "-", ",", "/")  # a fold goes after one of these, where one is in the line's second half


def row_name(nodeid: str, target: str) -> str:
    """A matrix row's name: the test's node id without the target parameter
    (``tests/x.py::test_fill[NULL-4]`` on ``NULL`` -> ``tests/x.py::test_fill[4]``), so tests of one name in two
    files are two rows."""
    return nodeid.replace(f"[{target}-", "[").replace(f"-{target}]", "]").replace(f"[{target}]", "")


def _fold(name: str, width: int) -> list[str]:
    """``name`` as lines of at most ``width`` characters, the continuation lines indented by :data:`_INDENT`."""
    lines, rest, room = [], name, width
    while len(rest) > room:
        found = [(rest.rfind(mark, room // 2, room), mark) for mark in _BREAKS]
        cut = max((at + len(mark) for at, mark in found if at >= 0), default=room)
        lines.append(rest[:cut])
        rest, room = rest[cut:], width - len(_INDENT)
    lines.append(rest)
    return [lines[0], *(_INDENT + line for line in lines[1:])]


def render_matrix(results: Sequence[Mapping[str, Any]], targets: Sequence[str], *, width: int | None = None) -> str:
    """Rows are tests (parameters other than the target kept) sorted by test id, columns are targets, cells the
    results' kinds (``kind``, else ``outcome``). With ``width`` (the terminal's columns), test ids are folded so that
    every line fits when the target columns leave the test column at least :data:`_MIN_TEST_WIDTH` characters."""
    columns = list(targets) or sorted({str(r["target"]) for r in results if r.get("target")})
    rows: dict[str, dict[str, str]] = {}
    for result in results:
        target = result.get("target") or ""
        # a test id is text from a file (pairs.json, the journal): its control characters are shown, not sent
        cells = rows.setdefault(printable(row_name(str(result["nodeid"]), target), newlines=False), {})
        kind = str(result.get("kind") or result["outcome"])
        cells[target or "(no target)"] = CELL.get(kind, kind)
    if any("(no target)" in cells for cells in rows.values()):
        columns.append("(no target)")
    widths = [max(len(c), _MIN_CELL_WIDTH) for c in columns]
    test_width = max([len("test"), *map(len, rows)])
    if width is not None:
        room = width - sum(len(_GAP) + w for w in widths)
        test_width = min(test_width, max(room, _MIN_TEST_WIDTH))
    lines = [_GAP.join(["test".ljust(test_width), *(c.ljust(w) for c, w in zip(columns, widths, strict=True))])]
    lines.append(_GAP.join(["-" * test_width, *("-" * w for w in widths)]))
    for row, cells in sorted(rows.items()):  # by test id: one order whatever order the results finished in
        *folded, last = _fold(row, test_width)
        lines += folded
        lines.append(
            _GAP.join(
                [
                    last.ljust(test_width),
                    *(cells.get(c, _NOT_RUN).ljust(w) for c, w in zip(columns, widths, strict=True)),
                ]
            )
        )
    return "\n".join(line.rstrip() for line in lines)
