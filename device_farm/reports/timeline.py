"""``report.html``'s timeline: which board ran what, and when (inline HTML and CSS, nothing fetched).

A lane per board (``board @ host``), a bar per timed attempt, placed on a time axis of seconds from the run's first
attempt, with ticks at a round step (:func:`tick_step_s`). A bar's title (shown on hover) names the test, the attempt,
its outcome, its duration and, for an attempt the infrastructure ended, the cause. An attempt that was retried
carries the class ``retried``; one the infrastructure ended (the board lost, the shard killed) ``lost``. A legend
names every colour and mark. Elements carry ``data-`` attributes for readers and tests: ``data-test``,
``data-attempt``, ``data-outcome``, ``data-duration``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tinyhil.device_farm.reports._markup import escape as _e
from tinyhil.device_farm.reports._markup import where as _where

__all__ = ["STYLE", "render_timeline", "tick_step_s"]

STYLE: Final = """
.timeline-wrap { margin-left: 11em; }
.timeline { position: relative; border-left: 1px solid #999; }
.lane { position: relative; height: 18px; margin: 3px 0; background: #fafafa; }
.lane-name { position: absolute; left: -11em; width: 10.5em; text-align: right; font-size: 12px; }
.bar { position: absolute; top: 2px; height: 14px; min-width: 2px; opacity: .85; box-sizing: border-box; }
.bar.retried { border: 2px dashed #555; }
.bar.lost { background: repeating-linear-gradient(45deg, #f8d0d0 0 4px, #555 4px 6px); }
.axis { position: relative; height: 1.6em; border-top: 1px solid #999; font-size: 11px; color: #555; }
.tick { position: absolute; top: 0; height: 5px; border-left: 1px solid #999; }
.tick span { position: absolute; top: 5px; transform: translateX(-50%); white-space: nowrap; }
.legend { margin: .6em 0 0 11em; font-size: 12px; } .legend span.key { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: middle; }
"""
_TICKS_WANTED: Final = 8  # about this many ticks on the axis, at a 1, 2 or 5 x 10^n step
_STEPS: Final = (1.0, 2.0, 5.0)
_MIN_BAR_PERCENT: Final = 0.2
# The legend: (CSS classes of the swatch, what it means).
_LEGEND: Final = (
    ("passed", "passed"), ("failed", "failed"), ("error", "error"), ("skipped", "skipped"),
    ("xfailed", "xfailed or xpassed"), ("bar retried", "retried (a later attempt followed)"),
    ("bar lost", "ended by the infrastructure (board lost, shard killed)"),
)  # fmt: skip


def tick_step_s(span_s: float) -> float:
    """The axis' tick step for ``span_s`` seconds: the smallest 1, 2 or 5 x 10^n that gives at most about
    :data:`_TICKS_WANTED` ticks."""
    raw = max(span_s, 1e-3) / _TICKS_WANTED
    power = 10.0 ** math.floor(math.log10(raw))
    return next((m * power for m in _STEPS if m * power >= raw), 10 * power)


def _seconds(value: float) -> str:
    return f"{value:g} s" if value >= 1 or value == 0 else f"{value * 1000:g} ms"


def _axis(span_s: float) -> str:
    step = tick_step_s(span_s)
    ticks = [n * step for n in range(int(span_s / step) + 1)]
    marks = "".join(f'<div class="tick" data-seconds="{t:g}" style="left:{t / span_s * 100:.3f}%">'
                    f"<span>{_e(_seconds(round(t, 9)))}</span></div>" for t in ticks)  # fmt: skip
    return f'<div class="axis" id="timeline-axis" data-step="{step:g}">{marks}</div>'


def _bar(attempt: Mapping[str, Any], start: float, span_s: float, retried: bool) -> str:
    began, ended = float(attempt["started"]), float(attempt["finished"])
    left = (began - start) / span_s * 100
    width = max((ended - began) / span_s * 100, _MIN_BAR_PERCENT)
    lost = attempt.get("infrastructure") is not None
    classes = " ".join(["bar", str(attempt["outcome"]), *(["retried"] if retried else []), *(["lost"] if lost else [])])
    label = f"{attempt['nodeid']} attempt {attempt.get('attempt')}: {attempt['outcome']}, {ended - began:.3f} s"
    if lost:
        label += f" ({attempt['infrastructure']})"
    return (f'<div class="{_e(classes)}" data-test="{_e(attempt["nodeid"])}" '
            f'data-attempt="{_e(attempt.get("attempt"))}" data-outcome="{_e(attempt["outcome"])}" '
            f'data-duration="{ended - began:.3f}" style="left:{left:.3f}%;width:{width:.3f}%" '
            f'title="{_e(label)}"></div>')  # fmt: skip


def render_timeline(attempts: Sequence[tuple[Mapping[str, Any], bool]]) -> str:
    """The timeline of ``attempts``, each with whether it was retried; attempts without a start or an end time (a
    pair reported without running) are left out."""
    timed = [(a, retried) for a, retried in attempts if a.get("started") and a.get("finished")]
    if not timed:
        return '<div class="timeline" id="timeline" data-bars="0"><p>No timed attempts.</p></div>'
    start = min(float(a["started"]) for a, _ in timed)
    span_s = max(float(a["finished"]) for a, _ in timed) - start or 1.0
    lanes: dict[str, list[tuple[Mapping[str, Any], bool]]] = {}
    for attempt, retried in timed:
        lanes.setdefault(_where(attempt), []).append((attempt, retried))
    rows = []
    for name in sorted(lanes):
        bars = "".join(_bar(a, start, span_s, retried) for a, retried in lanes[name])
        first = lanes[name][0][0]
        rows.append(f'<div class="lane" data-board="{_e(first["board"])}" data-host="{_e(first.get("host", "-"))}">'
                    f'<span class="lane-name">{_e(name)}</span>{bars}</div>')  # fmt: skip
    legend = "".join(f'<span class="key"><i class="{_e(classes)}" style="position:static"></i>{_e(meaning)}</span>'
                     for classes, meaning in _LEGEND)  # fmt: skip
    return (f'<div class="timeline-wrap"><div class="timeline" id="timeline" data-bars="{len(timed)}" '
            f'data-seconds="{span_s:.3f}">{"".join(rows)}</div>{_axis(span_s)}</div>'
            f'<p class="legend" id="timeline-legend">{legend}</p>')  # fmt: skip
