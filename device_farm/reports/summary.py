"""A farm run's reports, written from its journal: ``summary.json`` (:mod:`tinyhil.fixtures.summary`, the one schema
and writer) and a merged ``junit.xml``.

Each pair is reported once, with its final attempt. A pair whose earlier attempts were lost to the infrastructure
and whose final attempt passed is *flaky*, reported with every outcome. A failing pair that an active quarantine
entry matches is *quarantined*: reported with the entry's reason, and it does not fail the run. Every report counts
a pair once, as its kind (:attr:`PairReport.kind`, :mod:`tinyhil.fixtures.outcomes`). JUnit test cases carry the
properties ``outcome`` (the kind), ``target``, ``board``, ``host`` and ``attempt`` (and ``flaky`` or ``earlier``,
the lost attempts, ``quarantined``, and ``bundle``, the directory of a failing pair's reproduction bundle when its
shard ran under ``--hil-repro-dir``). A failure's
``<failure>`` or ``<error>`` body is its traceback as pytest wrote it (``--tb`` honoured), its ``<system-out>`` the
captured standard output and, under ``--- Captured log ---``, its log records, its ``<system-err>`` the captured
standard error. Test names are pytest's node ids relative to the suite's root, so they are the same in every checkout.

``junit.xml`` is XML 1.0 whatever a test printed: every text and attribute goes through :func:`junit_escape`, which
writes a character XML 1.0 cannot carry (C0 controls but tab and newline, a carriage return, which a parser would
turn into a newline, lone surrogates, U+FFFE and U+FFFF) as ``\\xNN`` or ``\\uNNNN`` and a backslash as ``\\\\``;
:func:`junit_unescape` gives back the whole original message.
"""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tinyhil._files import write_atomically
from tinyhil.device_farm.journal import JournalState
from tinyhil.device_farm.planning import Pair
from tinyhil.device_farm.quarantine import Quarantine
from tinyhil.device_farm.reports.metadata import RunMetadata, iso_time
from tinyhil.fixtures.outcomes import FAILING, JUNIT_TAGS, count_kinds, counts_line, junit_counts, result_kind
from tinyhil.fixtures.summary import SCHEMA, split_nodeid, summary_document

__all__ = [
    "PairReport",
    "failed",
    "farm_summary",
    "junit_escape",
    "junit_unescape",
    "pair_counts",
    "pair_reports",
    "quarantined_by",
    "run_completeness",
    "totals_line",
    "write_junit",
]

_RESULT_FIELDS: Final = tuple(field.name for field in SCHEMA["results[]"])
_EARLIER_FIELDS: Final = tuple(field.name for field in SCHEMA["earlier[]"])
_DETAILS: Final = ("longrepr", "stdout", "stderr", "log")  # a failure's texts, kept for failing pairs only
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
    def artifacts(self) -> dict[str, str]:
        """What tinyhil made for this pair's failure, by kind (``bundle``: its reproduction bundle's directory;
        ``trace``: the USB trace the bundle keeps)."""
        if self.bundle is None:
            return {}
        trace = self.final.get("trace")
        return {"bundle": self.bundle, **({"trace": str(trace)} if trace else {})}

    @property
    def details(self) -> dict[str, str]:
        """A failing pair's texts (``longrepr``, ``stdout``, ``stderr``, ``log``) that are not empty."""
        if self.final["outcome"] not in FAILING:
            return {}
        return {name: str(self.final[name]) for name in _DETAILS if self.final.get(name)}

    @property
    def fails_run(self) -> bool:
        return self.final["outcome"] in FAILING and self.quarantined is None

    @property
    def kind(self) -> str:
        """What every report counts this pair as (:func:`~tinyhil.fixtures.outcomes.result_kind`)."""
        return result_kind(str(self.final["outcome"]), flaky=self.flaky, quarantined=self.quarantined is not None)

    def as_json(self) -> dict[str, Any]:
        """This pair's ``results[]`` entry in ``summary.json`` (:data:`~tinyhil.fixtures.summary.SCHEMA`)."""
        final = self.final
        earlier = [{name: a.get(name) for name in _EARLIER_FIELDS} for a in self.earlier]
        known = {name: final[name] for name in _RESULT_FIELDS if name in final and name not in _DETAILS}
        artifacts = {"artifacts": self.artifacts} if self.artifacts else {}
        return {**known, "test": split_nodeid(final["nodeid"]), "duration_s": float(final.get("duration_s", 0.0)),
                "reason": str(final.get("reason") or ""), "flaky": self.flaky, "quarantined": self.quarantined,
                "earlier": earlier, "bundle": self.bundle, **self.details, **artifacts}  # fmt: skip


def pair_counts(reports: Sequence[PairReport]) -> dict[str, int]:
    """How many pairs there are of each kind (:func:`~tinyhil.fixtures.outcomes.count_kinds`)."""
    return count_kinds(report.kind for report in reports)


def totals_line(reports: Sequence[PairReport]) -> str:
    """``7 passed, 2 failed, 1 quarantined`` (:func:`~tinyhil.fixtures.outcomes.counts_line`), or ``nothing ran``."""
    return counts_line(pair_counts(reports))


def quarantined_by(quarantine: Quarantine | None, final: Mapping[str, Any], today: dt.date) -> str | None:
    """The reason of the active entry of ``quarantine`` that covers a ``final`` result (a journal record: a failure
    or an error, by its test, target and board), or ``None``."""
    if quarantine is None or final["outcome"] not in FAILING:
        return None
    entry = quarantine.match(final["nodeid"], final["target"], final["board"], today)
    return None if entry is None else entry.reason


def pair_reports(journal: JournalState, quarantine: Quarantine | None, today: dt.date) -> list[PairReport]:
    """Every pair with a final result, in journal order."""
    reports = []
    for key, final in journal.final.items():
        earlier = tuple(a for a in journal.attempts[key] if not a["final"])
        reports.append(PairReport(final, earlier, quarantined_by(quarantine, final, today)))
    return reports


def failed(reports: Sequence[PairReport]) -> bool:
    """Whether the run fails: a pair failed and no quarantine entry covers it."""
    return any(report.fails_run for report in reports)


def farm_summary(reports: Sequence[PairReport], extra: Mapping[str, Any],
                 metadata: RunMetadata | None = None) -> dict[str, Any]:  # fmt: skip
    """The run's ``summary.json`` document: every pair, ``extra`` (``exitstatus``, ``targets``, ``complete`` and the
    farm's own fields: run id, boards, what is missing) and the run's ``metadata`` (its fields, and each board's
    ``firmware`` and ``driver``), written by :func:`~tinyhil.fixtures.summary.write_summary`."""
    fields = dict(extra)
    exitstatus, targets, complete = fields.pop("exitstatus"), fields.pop("targets"), fields.pop("complete", True)
    if metadata is not None:
        fields.update(metadata.summary_fields())
        fields["boards"] = [{**b, **metadata.board_versions(str(b["board"]))} for b in fields.get("boards", [])]
    return summary_document([r.as_json() for r in reports], exitstatus=exitstatus, targets=targets,
                            complete=complete, extra=fields)  # fmt: skip


def _case(report: PairReport) -> ET.Element:
    final, kind = report.final, report.kind
    path, _, name = str(final["nodeid"]).partition("::")
    classname = path.removesuffix(".py").replace("/", ".")
    case = ET.Element("testcase", classname=junit_escape(classname), name=junit_escape(name),
                      time=f"{final.get('duration_s', 0.0):.3f}")  # fmt: skip
    properties = ET.SubElement(case, "properties")
    shown: dict[str, Any] = {"outcome": kind, **{k: final.get(k) for k in ("target", "board", "host", "attempt")}}
    if report.bundle is not None:
        shown["bundle"] = report.bundle
    if report.earlier:
        shown["flaky" if report.flaky else "earlier"] = "; ".join(
            f"attempt {a['attempt']} on {a['board']}: {a['infrastructure']}" for a in report.earlier
        )
    if report.quarantined is not None:
        shown["quarantined"] = report.quarantined
    shown.update(report.artifacts)
    for name_, value in shown.items():
        ET.SubElement(properties, "property", name=name_, value=junit_escape(value))
    reason, details, tag = junit_escape(final.get("reason") or ""), report.details, JUNIT_TAGS[kind]
    if tag is not None:
        message = f"quarantined ({junit_escape(report.quarantined)}): {reason}" if kind == "quarantined" else reason
        element = ET.SubElement(case, tag, message=message)
        if kind == "quarantined":  # a failure that does not fail the run, traceback kept (pytest's xfail, likewise)
            element.set("type", "tinyhil.quarantined")
        if final["outcome"] in FAILING:
            element.text = junit_escape(details.get("longrepr") or final.get("reason") or "")
    log = f"--- Captured log ---\n{details['log']}" if "log" in details else ""
    for tag_, text in (("system-out", "\n".join(filter(None, (details.get("stdout"), log)))),
                       ("system-err", details.get("stderr"))):  # fmt: skip
        if text:
            ET.SubElement(case, tag_).text = junit_escape(text)
    return case


def write_junit(path: Path, reports: Sequence[PairReport], name: str, *, incomplete: str | None = None,
                metadata: RunMetadata | None = None) -> None:  # fmt: skip
    """One ``<testsuite>`` with a ``<testcase>`` per pair, each written as its kind's JUnit element
    (:data:`~tinyhil.fixtures.outcomes.JUNIT_TAGS`: a quarantined failure is a skip of type ``tinyhil.quarantined``
    with its traceback), and the suite's counts those of :func:`~tinyhil.fixtures.outcomes.junit_counts`. The suite's
    properties carry every kind's count (``count.<kind>``), the run's ``metadata`` (its ``timestamp``, ``hostname``
    and ``time`` attributes too) and, for a run that stopped before every pair ran, ``incomplete`` (the reason)."""
    counts = pair_counts(reports)
    suite = ET.Element("testsuite", {"name": junit_escape(name)} | {k: str(n) for k, n in junit_counts(counts).items()})
    if metadata is not None:
        suite.set("timestamp", iso_time(metadata.started))
        suite.set("hostname", junit_escape(metadata.host))
        suite.set("time", f"{metadata.duration_s:.3f}")
    properties = ET.SubElement(suite, "properties")
    shown = [*(metadata.items() if metadata is not None else ()), *((f"count.{k}", str(n)) for k, n in counts.items())]
    if incomplete is not None:
        shown.append(("incomplete", incomplete))
    for name_, value in shown:
        ET.SubElement(properties, "property", name=name_, value=junit_escape(value))
    suite.extend(_case(report) for report in reports)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    write_atomically(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")


def run_completeness(todo: Sequence[Pair], final: Mapping[str, Any], stopped: str | None) -> dict[str, Any]:
    """``{"complete": True}`` when every pair of the run has its final result, else ``complete: false`` with the
    reason (``incomplete``) and the pairs left without a result (``missing``, their keys)."""
    missing = [pair.key for pair in todo if pair.key not in final]
    if not missing:
        return {"complete": True}
    why = f"stopped: {stopped}" if stopped else "the engine ended early"
    reason = f"{why}; {len(missing)} of {len(todo)} pairs have no result"
    return {"complete": False, "incomplete": reason, "missing": missing}
