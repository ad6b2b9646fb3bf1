"""``report.html``: one self-contained page of a farm run (no network needed to view it).

Sections: a banner when the run is incomplete (``complete: false`` in the summary: it stopped before every pair
ran; ``id="incomplete"``); the run's metadata (``id="metadata"``, a row per
:meth:`~tinyhil.device_farm.reports.metadata.RunMetadata.items` pair); the totals (``id="totals"``, by kind, a
``data-<kind>`` count each); the test x target matrix (each cell the kind and the board that ran it); failures with
their messages (and a link to the reproduction bundle, ``data-bundle``, when the pair left one), each with its
traceback, captured output and log records collapsed under it (``<details data-detail="longrepr">``, ...) and an
anchor (``id="failure-N"``) that its matrix cell links to; flaky and quarantined tests; board health with the
firmware and driver versions its probe read; and the timeline (:mod:`~tinyhil.device_farm.reports.timeline`). Every
element a reader or a test counts carries a ``data-`` attribute (``data-outcome``, ``data-kind``, ``data-board``,
``data-test``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.history.html import HISTORY_STYLE, failure_mark, history_header
from tinyhil.device_farm.history.queries import RunHistory
from tinyhil.device_farm.reports import timeline
from tinyhil.device_farm.reports._markup import escape as _e
from tinyhil.device_farm.reports._markup import where as _where
from tinyhil.device_farm.reports.matrix import row_name
from tinyhil.device_farm.reports.metadata import RunMetadata
from tinyhil.device_farm.reports.summary import PairReport, pair_counts
from tinyhil.fixtures.outcomes import FAILING, counts_line

__all__ = ["failure_anchors", "render_report", "write_report"]

_STYLE: Final = (
    """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
td.cell { font-size: 12px; white-space: nowrap; }
.passed { background: #d7f5d7; } .failed, .error { background: #f8d0d0; } .skipped { background: #eee; }
.xfailed, .xpassed { background: #f5ecc8; } .flaky { background: #d7f5d7; outline: 2px dotted #2a7f2a; }
.quarantined { background: #f8d0d0; outline: 2px dashed #b58900; }
#metadata th { font-weight: normal; color: #555; } #metadata td { font-family: monospace; font-size: 12px; }
pre { white-space: pre-wrap; margin: 0; }
details { margin: 2px 0 2px 1em; } summary { cursor: pointer; color: #444; }
td.cell a { color: inherit; }
.incomplete { background: #fde2b8; border: 2px solid #b35c00; padding: 6px 10px; }
"""
    + timeline.STYLE
)


def _cell(report: PairReport, anchor: str | None) -> str:
    outcome, kind = str(report.final["outcome"]), report.kind
    board, host = report.final.get("board") or "-", report.final.get("host") or "-"
    title = _e(report.final.get("reason") or outcome)
    return (f'<td class="cell {_e(kind)}" data-outcome="{_e(outcome)}" data-kind="{_e(kind)}" data-board="{_e(board)}" '
            f'data-host="{_e(host)}" title="{title}">{_linked(f"{_e(kind)} · {_e(_where(report.final))}", anchor)}'
            "</td>")  # fmt: skip


def _linked(text: str, anchor: str | None) -> str:
    return text if anchor is None else f'<a href="#{_e(anchor)}">{text}</a>'


_DETAIL_TITLES: Final = {"longrepr": "traceback", "stdout": "captured stdout", "stderr": "captured stderr",
                         "log": "captured log"}  # fmt: skip


def _failure(report: PairReport, anchor: str, history: RunHistory | None = None) -> str:
    """A failure's line, its message, and its traceback, output and log each collapsed under it."""
    details = "".join(f'<details data-detail="{name}"><summary>{_DETAIL_TITLES[name]}</summary>'
                      f"<pre>{_e(text)}</pre></details>" for name, text in report.details.items())  # fmt: skip
    duration = float(report.final.get("duration_s") or 0.0)
    return (f'<li id="{_e(anchor)}" data-test="{_e(report.final["nodeid"])}"><b>{_e(report.final["nodeid"])}</b> '
            f"{failure_mark(history, str(report.final.get('key', '')))}on {_e(_where(report.final))} ({duration:.3f} s)"
            f"{_bundle_link(report)}"
            f"<pre>{_e(report.final.get('reason'))}</pre>{details}</li>")  # fmt: skip


def failure_anchors(reports: Sequence[PairReport]) -> dict[int, str]:
    """The anchor (``failure-N``) of each failure the page lists (those that fail the run), by its report's index."""
    listed = [i for i, r in enumerate(reports) if r.final["outcome"] in FAILING and r.quarantined is None]
    return {i: f"failure-{n}" for n, i in enumerate(listed, 1)}


def _bundle_link(report: PairReport) -> str:
    """`` (repro bundle)`` linking the pair's bundle directory, or nothing when it left none."""
    if report.bundle is None:
        return ""
    # as_uri percent-encodes every byte a URI cannot hold; no filesystem call (a journal's path may hold a NUL)
    href = Path(report.bundle).as_uri() if Path(report.bundle).is_absolute() else report.bundle
    return (
        f' (<a class="bundle" data-bundle="{_e(report.bundle)}" href="{_e(href)}">repro bundle</a>: '
        f"<code>tinyhil repro {_e(report.bundle)}</code>)"
    )


def _flaky_line(report: PairReport) -> str:
    lost = "; ".join(f"attempt {_e(a.get('attempt'))} on {_e(_where(a))}: {_e(a.get('infrastructure'))}"
                     for a in report.earlier)  # fmt: skip
    final = report.final
    return f"{_e(final['nodeid'])}: {lost}; then {_e(final['outcome'])} on {_e(_where(final))}"


def _matrix(reports: Sequence[PairReport], anchors: Mapping[int, str]) -> str:
    targets = sorted({str(r.final["target"]) for r in reports})
    rows: dict[str, dict[str, tuple[PairReport, str | None]]] = {}
    for index, report in enumerate(reports):
        target = str(report.final["target"])
        rows.setdefault(row_name(str(report.final["nodeid"]), target), {})[target] = (report, anchors.get(index))
    head = "".join(f"<th>{_e(t)}</th>" for t in targets)
    body = []
    for test in sorted(rows):
        cells = []
        for target in targets:
            found = rows[test].get(target)
            cells.append('<td class="cell" data-outcome="none">—</td>' if found is None else _cell(*found))
        body.append(f'<tr data-test="{_e(test)}"><th>{_e(test)}</th>{"".join(cells)}</tr>')
    return f'<table id="matrix"><thead><tr><th>test</th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _listing(element_id: str, items: Sequence[str], empty: str, *, elements: bool = False) -> str:
    """A list of ``items`` (HTML; ``elements``: each already its own ``<li>``), or ``empty`` when there is none."""
    if not items:
        return f'<p id="{element_id}" data-count="0">{_e(empty)}</p>'
    listed = "".join(items) if elements else "".join(f"<li>{i}</li>" for i in items)
    return f'<ul id="{element_id}" data-count="{len(items)}">{listed}</ul>'


def _metadata(metadata: RunMetadata | None) -> str:
    if metadata is None:
        return ""
    rows = "".join(f'<tr data-name="{_e(name)}"><th>{_e(name)}</th><td>{_e(value)}</td></tr>'
                   for name, value in metadata.items(boards=False))  # fmt: skip
    return f'<table id="metadata">{rows}</table>'


def _board_row(board: Mapping[str, Any], metadata: RunMetadata | None) -> str:
    read = metadata.board_versions(str(board["board"])) if metadata is not None else {}
    cells = [board["board"], board.get("host", "-"), board["health"], board.get("reason") or "",
             read.get("firmware") or "-", read.get("driver") or "-"]  # fmt: skip
    return (
        f'<tr data-board="{_e(board["board"])}" data-health="{_e(board["health"])}" '
        f'data-host="{_e(board.get("host", "-"))}">{"".join(f"<td>{_e(c)}</td>" for c in cells)}</tr>'
    )


def _totals(reports: Sequence[PairReport]) -> str:
    counts = pair_counts(reports)
    data = " ".join(f'data-{kind}="{n}"' for kind, n in counts.items())
    return (
        f'<p id="totals" data-pairs="{len(reports)}" {data}>{len(reports)} test x target pairs: '
        f"{_e(counts_line(counts))}</p>"
    )


def render_report(reports: Sequence[PairReport], extra: Mapping[str, Any], metadata: RunMetadata | None = None, *,
                  history: RunHistory | None = None, page: Path = Path()) -> str:  # fmt: skip
    """The page's HTML for ``reports``, the run's ``extra`` (``run_id``, ``boards`` with their health and versions)
    and its ``metadata``, with what ``history`` says of the run (:mod:`~tinyhil.device_farm.history.html`) when the
    page is ``page``."""
    anchors = failure_anchors(reports)
    failures = [_failure(reports[i], anchor, history) for i, anchor in anchors.items()]
    flaky = [_flaky_line(r) for r in reports if r.flaky]
    quarantined = [f"{_e(r.final['nodeid'])}: {_e(r.final['outcome'])} ({_e(r.quarantined)})"
                   for r in reports if r.quarantined is not None]  # fmt: skip
    boards = "".join(_board_row(b, metadata) for b in extra.get("boards", []))
    attempts = [(a, True) for r in reports for a in r.earlier] + [(r.final, False) for r in reports]
    run_id = _e(extra.get("run_id", ""))
    banner = ""
    if extra.get("complete") is False:  # the run stopped before every pair ran: say so before anything else
        banner = (f'<p id="incomplete" class="incomplete" data-missing="{len(extra.get("missing", []))}">'
                  f"<b>Incomplete run:</b> {_e(extra.get('incomplete', ''))}</p>")  # fmt: skip
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tinyhil farm run {run_id}</title>
<style>{_STYLE}{HISTORY_STYLE}</style></head>
<body>
<h1>tinyhil farm run {run_id}</h1>{banner}{_metadata(metadata)}{history_header(history, page)}
{_totals(reports)}
<h2>Matrix</h2>{_matrix(reports, anchors)}
<h2>Failures</h2>{_listing("failures", failures, "No failures.", elements=True)}
<h2>Flaky</h2>{_listing("flaky", flaky, "No flaky tests.")}
<h2>Quarantined</h2>{_listing("quarantined", quarantined, "Nothing quarantined.")}
<h2>Boards</h2><table id="boards"><thead><tr><th>board</th><th>host</th><th>health</th><th>why</th>
<th>firmware</th><th>driver</th></tr></thead><tbody>{boards}</tbody></table>
<h2>Timeline</h2>{timeline.render_timeline(attempts)}
</body></html>
"""


def write_report(path: Path, reports: Sequence[PairReport], extra: Mapping[str, Any],
                 metadata: RunMetadata | None = None, *, history: RunHistory | None = None) -> None:  # fmt: skip
    """Write ``report.html`` (through a temporary file, so a reader never sees half a page)."""
    write_atomically(path, render_report(reports, extra, metadata, history=history, page=path))
