"""The history's part of ``report.html``: the trend chart at the top (pass and fail counts of the suite's last
runs, an inline SVG: no network), the link to the previous run's report, and the mark beside each failure
(``new``, ``known`` or ``flaky`` by history; :func:`~tinyhil.device_farm.history.queries.run_history`)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Final

from tinyhil.device_farm.history.queries import RunHistory
from tinyhil.printable import printable

__all__ = ["HISTORY_STYLE", "failure_mark", "history_header"]

HISTORY_STYLE: Final = """
.mark { font-size: 11px; padding: 0 4px; border-radius: 3px; margin-left: .5em; }
.mark-new { background: #c62828; color: #fff; } .mark-known { background: #999; color: #fff; }
.mark-flaky { background: #b58900; color: #fff; }
#trend rect.pass { fill: #4caf50; } #trend rect.fail { fill: #e53935; }
"""
_BAR_PX: Final = 14
_GAP_PX: Final = 4
_HEIGHT_PX: Final = 60


def _e(value: object) -> str:
    return html.escape(printable(str(value)), quote=True)


def _chart(history: RunHistory) -> str:
    top = max((p.passed + p.failed for p in history.trend), default=0) or 1
    bars = []
    for n, point in enumerate(history.trend):
        x = n * (_BAR_PX + _GAP_PX)
        fail_px = point.failed / top * _HEIGHT_PX
        pass_px = point.passed / top * _HEIGHT_PX
        title = f"run {point.run_id}: {point.passed} passed, {point.failed} failed"
        bars.append(f'<g data-run="{_e(point.run_id)}" data-passed="{point.passed}" data-failed="{point.failed}">'
                    f"<title>{_e(title)}</title>"
                    f'<rect class="fail" x="{x}" y="{_HEIGHT_PX - fail_px:.1f}" width="{_BAR_PX}" '
                    f'height="{fail_px:.1f}"/>'
                    f'<rect class="pass" x="{x}" y="{_HEIGHT_PX - fail_px - pass_px:.1f}" width="{_BAR_PX}" '
                    f'height="{pass_px:.1f}"/></g>')  # fmt: skip
    width = max(len(history.trend) * (_BAR_PX + _GAP_PX), _BAR_PX)
    return (f'<svg id="trend" data-runs="{len(history.trend)}" '
            f'width="{width}" height="{_HEIGHT_PX}" role="img" aria-label="pass and fail counts of the last '
            f'{len(history.trend)} runs">{"".join(bars)}</svg>')  # fmt: skip


def history_header(history: RunHistory | None, page: Path) -> str:
    """The trend chart and the previous run's link, for the top of the run's ``page`` (its report.html); a line
    saying there is no history when the run was not recorded."""
    if history is None:
        return '<p id="history" data-recorded="false">No run history (recording is off, or it failed).</p>'
    previous = history.previous
    if previous is None:
        link = "first recorded run of this suite"
    else:
        before = Path(previous.report)
        if before == page:
            link = f"previous run {_e(previous.run_id)} (its report, in this directory, is replaced by this one)"
        else:
            link = f'previous run: <a id="previous-run" href="{_e(before.as_uri())}">{_e(previous.run_id)}</a>'
    legend = "oldest first, green passed, red failed; hover a bar for its counts"
    return (f'<div id="history" data-recorded="true"><p>Last {len(history.trend)} runs of this suite ({legend}); '
            f"{link}</p>{_chart(history)}</div>")  # fmt: skip


def failure_mark(history: RunHistory | None, key: str) -> str:
    """The mark beside the failure of pair ``key``: new, known or flaky by history (nothing without history)."""
    mark = None if history is None else history.marks.get(key)
    if mark is None:
        return ""
    return f' <span class="mark mark-{mark}" data-history="{mark}">{mark}</span>'
