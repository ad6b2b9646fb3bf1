"""A farm run's reports, written from its journal: ``summary.json`` and a merged ``junit.xml``.

Each pair is reported once, with its final attempt. A pair whose earlier attempts were lost to the infrastructure
and whose final attempt passed is *flaky*, reported with every outcome. A failing pair that an active quarantine
entry matches is *quarantined*: reported with the entry's reason, and it does not fail the run. JUnit test cases
carry the properties ``target``, ``board``, ``host`` and ``attempt`` (and ``flaky``, ``quarantined``, and ``bundle``,
the directory of a failing pair's reproduction bundle when its shard ran under ``--hil-repro-dir``).

``junit.xml`` is XML 1.0 whatever a test printed: every text and attribute goes through :func:`junit_escape`, which
writes a character XML 1.0 cannot carry (C0 controls but tab and newline, a carriage return, which a parser would
turn into a newline, lone surrogates, U+FFFE and U+FFFF) as ``\\xNN`` or ``\\uNNNN`` and a backslash as ``\\\\``;
:func:`junit_unescape` gives back the whole original message.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.journal import JournalState
from tinyhil.device_farm.quarantine import Quarantine

__all__ = [
    "FAILING",
    "PairReport",
    "failed",
    "junit_escape",
    "junit_unescape",
    "outcome_counts",
    "pair_reports",
    "totals_line",
    "write_junit",
    "write_summary",
]

FAILING: Final = frozenset({"failed", "error"})
SUMMARY_FORMAT: Final = 1
# What XML 1.0 (section 2.2, Char) cannot carry, plus the backslash that starts an escape and the carriage return
# that end-of-line handling (section 2.11) turns into a newline.
_NOT_XML: Final = re.compile("[\\\\\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPED: Final = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return "\\" if code == "\\" else chr(int(code[1:], 16))


def junit_escape(text: object) -> str:
    """``str(text)`` as XML 1.0 can carry it, reversibly: see the module docstring."""
    return _NOT_XML.sub(_escape, str(text))


def junit_unescape(text: str) -> str:
    """The original of a :func:`junit_escape` text (what a junit.xml reader gets back from an attribute or text)."""
    return _ESCAPED.sub(_unescape, text)


@dataclass(frozen=True, slots=True)
class PairReport:
    """One pair's final result, with its earlier (infrastructure-lost) attempts and what the run makes of it."""

    final: Mapping[str, Any]
    earlier: tuple[Mapping[str, Any], ...] = ()
    quarantined: str | None = None

    @property
    def flaky(self) -> bool:
        return bool(self.earlier) and self.final["outcome"] not in FAILING

    @property
    def bundle(self) -> str | None:
        """The directory of this pair's reproduction bundle (``tinyhil repro``), when it failed and left one."""
        found = self.final.get("bundle")
        return str(found) if found and self.final["outcome"] in FAILING else None

    @property
    def fails_run(self) -> bool:
        return self.final["outcome"] in FAILING and self.quarantined is None

    def as_json(self) -> dict[str, Any]:
        earlier = [{k: a.get(k) for k in ("attempt", "board", "outcome", "infrastructure")} for a in self.earlier]
        return {**self.final, "flaky": self.flaky, "quarantined": self.quarantined, "earlier": earlier,
                "bundle": self.bundle}  # fmt: skip


def outcome_counts(reports: Sequence[PairReport]) -> dict[str, int]:
    """How many pairs ended in each outcome (final attempts only)."""
    return dict(Counter(str(report.final["outcome"]) for report in reports))


def totals_line(reports: Sequence[PairReport]) -> str:
    """``2 failed, 7 passed, 1 skipped`` (outcomes sorted by name), or ``nothing ran``."""
    return ", ".join(f"{n} {k}" for k, n in sorted(outcome_counts(reports).items())) or "nothing ran"


def pair_reports(journal: JournalState, quarantine: Quarantine | None, today: dt.date) -> list[PairReport]:
    """Every pair with a final result, in journal order."""
    reports = []
    for key, final in journal.final.items():
        earlier = tuple(a for a in journal.attempts[key] if not a["final"])
        entry = None
        if quarantine is not None and final["outcome"] in FAILING:
            entry = quarantine.match(final["nodeid"], final["target"], final["board"], today)
        reports.append(PairReport(final, earlier, None if entry is None else entry.reason))
    return reports


def failed(reports: Sequence[PairReport]) -> bool:
    """Whether the run fails: a pair failed and no quarantine entry covers it."""
    return any(report.fails_run for report in reports)


def write_summary(path: Path, reports: Sequence[PairReport], extra: Mapping[str, Any]) -> None:
    """``summary.json``: counts (outcomes, flaky, quarantined), every pair, and ``extra`` (run id, boards, ...)."""
    counts = outcome_counts(reports)
    flaky = sum(1 for r in reports if r.flaky)
    quarantined = sum(1 for r in reports if r.quarantined is not None)
    counts.update({name: n for name, n in (("flaky", flaky), ("quarantined", quarantined)) if n})
    document = {"format": SUMMARY_FORMAT, **extra, "counts": counts,
                "results": [r.as_json() for r in reports]}  # fmt: skip
    write_atomically(path, json.dumps(document, indent=1))


def _case(report: PairReport) -> ET.Element:
    final = report.final
    path, _, name = str(final["nodeid"]).partition("::")
    classname = path.removesuffix(".py").replace("/", ".")
    case = ET.Element("testcase", classname=junit_escape(classname), name=junit_escape(name),
                      time=f"{final.get('duration_s', 0.0):.3f}")  # fmt: skip
    properties = ET.SubElement(case, "properties")
    shown: dict[str, Any] = {k: final.get(k) for k in ("target", "board", "host", "attempt")}
    if report.bundle is not None:
        shown["bundle"] = report.bundle
    if report.flaky:
        shown["flaky"] = "; ".join(
            f"attempt {a['attempt']} on {a['board']}: {a['infrastructure']}" for a in report.earlier
        )
    if report.quarantined is not None:
        shown["quarantined"] = report.quarantined
    for name_, value in shown.items():
        ET.SubElement(properties, "property", name=name_, value=junit_escape(value))
    outcome, reason = final["outcome"], junit_escape(final.get("reason") or "")
    if outcome in FAILING and report.quarantined is None:
        ET.SubElement(case, "failure" if outcome == "failed" else "error", message=reason).text = reason
    elif outcome in FAILING or outcome == "skipped":
        message = f"quarantined: {junit_escape(report.quarantined)} ({reason})" if report.quarantined else reason
        ET.SubElement(case, "skipped", message=message)
    return case


def write_junit(path: Path, reports: Sequence[PairReport], name: str, *, incomplete: str | None = None) -> None:
    """One ``<testsuite>`` with a ``<testcase>`` per pair (a quarantined failure is written as skipped); a run that
    stopped before every pair ran says so in the suite's property ``incomplete`` (the reason)."""
    cases = [_case(report) for report in reports]
    count = {tag: sum(1 for c in cases if c.find(tag) is not None) for tag in ("failure", "error", "skipped")}
    suite = ET.Element("testsuite", name=junit_escape(name), tests=str(len(cases)), failures=str(count["failure"]),
                       errors=str(count["error"]), skipped=str(count["skipped"]))  # fmt: skip
    if incomplete is not None:
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="incomplete", value=junit_escape(incomplete))
    suite.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    write_atomically(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
