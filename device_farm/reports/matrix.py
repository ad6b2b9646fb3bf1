"""The test x target matrix printed after a run."""

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
}
_NOT_RUN: Final = "-"


def row_name(nodeid: str, target: str) -> str:
    """A matrix row's name: the test's node id without the target parameter
    (``tests/x.py::test_fill[NULL-4]`` on ``NULL`` -> ``tests/x.py::test_fill[4]``), so tests of one name in two
    files are two rows."""
    return nodeid.replace(f"[{target}-", "[").replace(f"-{target}]", "]").replace(f"[{target}]", "")


def render_matrix(results: Sequence[Mapping[str, Any]], targets: Sequence[str]) -> str:
    """Rows are tests (parameters other than the target kept) sorted by test id, columns are targets, cells the
    outcomes."""
    columns = list(targets) or sorted({str(r["target"]) for r in results if r.get("target")})
    rows: dict[str, dict[str, str]] = {}
    for result in results:
        target = result.get("target") or ""
        # a test id is text from a file (pairs.json, the journal): its control characters are shown, not sent
        cells = rows.setdefault(printable(row_name(str(result["nodeid"]), target), newlines=False), {})
        cells[target or "(no target)"] = CELL.get(str(result["outcome"]), str(result["outcome"]))
    if any("(no target)" in cells for cells in rows.values()):
        columns.append("(no target)")
    width = max([len("test"), *map(len, rows)])
    widths = [max(len(c), 5) for c in columns]
    lines = ["  ".join(["test".ljust(width), *(c.ljust(w) for c, w in zip(columns, widths, strict=True))])]
    lines.append("  ".join(["-" * width, *("-" * w for w in widths)]))
    for row, cells in sorted(rows.items()):  # by test id: one order whatever order the results finished in
        lines.append(
            "  ".join(
                [row.ljust(width), *(cells.get(c, _NOT_RUN).ljust(w) for c, w in zip(columns, widths, strict=True))]
            )
        )
    return "\n".join(line.rstrip() for line in lines)
