"""``tinyhil farm history`` and the history options of the two run commands (docs/history.md).

tinyhil farm history [changes|flaky|boards|durations] [--history PATH] [--suite PATH] [--runs N] [--json]
                     [--export FILE [--format csv|jsonl]]
    what a lab asks in the morning: new failures (fail tonight, did not fail last night), known ones (still fail),
    fixed ones; per test its flake rate over the last N runs; per board its infrastructure-failure rate and health
    timeline; per test its duration trend. With no question, all four. ``--suite`` picks the suite (default: the
    newest run's); ``--export`` writes every recorded attempt as CSV or JSON lines instead.

``tinyhil run`` and ``tinyhil farm run`` take ``--history PATH|none`` (where the run is recorded), ``--last-failed``
(run only the pairs that failed in the previous run of the suite) and ``--on-finish CMD`` (run once with the
summary's path as its last argument).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any, Final

from tinyhil.cli.usage import EXIT_OK, EXIT_USAGE, add_subcommand, description
from tinyhil.device_farm.finish_hook import on_finish_command
from tinyhil.device_farm.history import HistorySettings, history_path, open_history
from tinyhil.device_farm.history.export import export_format, export_history
from tinyhil.device_farm.history.facts import suite_key
from tinyhil.device_farm.history.queries import board_rates, changes, duration_trends, flake_rates, latest_suite
from tinyhil.device_farm.history.settings import DEFAULT_RUNS, HISTORY_ENV, NO_HISTORY
from tinyhil.device_farm.run import resolve_suite
from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry

__all__ = ["QUESTIONS", "add_history_command", "add_history_options", "history_options"]

QUESTIONS: Final = ("changes", "flaky", "boards", "durations")
_HISTORY_HELP: Final = (f"the run history database, or {NO_HISTORY!r} (default: ${HISTORY_ENV}, else history.db in "
                        "the farm state or ~/.local/state/tinyhil)")  # fmt: skip


def add_history_options(parser: Any) -> None:
    """Add ``--history``, ``--last-failed`` and ``--on-finish`` to a run command's parser."""
    parser.add_argument("--history", metavar="PATH", help=_HISTORY_HELP)
    parser.add_argument(
        "--last-failed",
        action="store_true",
        help="run only the pairs that failed in the previous run of the suite (no history: all)",
    )
    parser.add_argument(
        "--on-finish",
        metavar="CMD",
        help="run CMD once at the end with the summary's path as its last argument (no shell)",
    )


def history_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~tinyhil.device_farm.run.FarmRun` fields the history options give (``history``, ``on_finish``).

    Raises:
        InvalidArgument: ``--last-failed`` with no history, or an ``--on-finish`` that is no command line.
    """
    settings = HistorySettings(history_path(args.history), last_failed=args.last_failed)
    return {"history": settings, "on_finish": on_finish_command(args.on_finish) if args.on_finish else ()}


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _answers(db: sqlite3.Connection, suite: str, runs: int, questions: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    flakes = flake_rates(db, suite, runs)
    if "changes" in questions:
        change = changes(db, suite)
        flaky = sorted({f.key for f in flakes if f.flaky} & {*change.new, *change.known}) if change else []
        found["changes"] = None if change is None else {
            "tonight": change.tonight, "last_night": change.last_night, "new": list(change.new),
            "known": list(change.known), "fixed": list(change.fixed), "flaky": flaky}  # fmt: skip
    if "flaky" in questions:
        found["flaky"] = [{"pair": f.key, "rate": f.rate, "runs": f.runs, "failures": f.failures, "flips": f.flips,
                           "flaky": f.flaky} for f in sorted(flakes, key=lambda f: not f.flaky)]  # fmt: skip
    if "boards" in questions:
        found["boards"] = [{"board": b.board, "attempts": b.attempts, "infrastructure_failures":
                            b.infrastructure_failures, "rate": b.rate,
                            "timeline": [{"at": at, "state": state, "reason": reason}
                                         for at, state, reason in b.timeline]}
                           for b in board_rates(db, runs)]  # fmt: skip
    if "durations" in questions:
        found["durations"] = [{"pair": t.key, "durations_s": list(t.durations_s), "median_s": t.median_s,
                               "last_s": t.last_s} for t in duration_trends(db, suite, runs)]  # fmt: skip
    return found


def _print(answers: dict[str, Any], runs: int) -> None:
    change = answers.get("changes")
    if "changes" in answers:
        if change is None:
            print("no run of this suite recorded")
        else:
            print(f"tonight: run {change['tonight']}; last night: run {change['last_night'] or '(none)'}")
            for name, title in (("new", "new failures (fail tonight, not last night)"),
                                ("known", "known failures (still fail)"), ("fixed", "fixed tonight")):  # fmt: skip
                print(f"{title}: {len(change[name])}")
                for key in change[name]:
                    flaky = " (flaky by history)" if key in change["flaky"] else ""
                    print(f"  {printable(key, newlines=False)}{flaky}")
    if "flaky" in answers:
        print(f"flake rate over the last {runs} runs: {len(answers['flaky'])} pairs failed and passed")
        for f in answers["flaky"]:
            flag = ", flaky" if f["flaky"] else ""
            print(f"  {f['rate']:4.0%}  ({f['failures']} of {f['runs']} runs, {f['flips']} flips{flag})  "
                  f"{printable(f['pair'], newlines=False)}")  # fmt: skip
    if "boards" in answers:
        print(f"boards, infrastructure failures over the last {runs} runs:")
        for b in answers["boards"]:
            print(f"  {printable(b['board'], newlines=False)}: {b['rate']:.0%} ({b['infrastructure_failures']} of "
                  f"{b['attempts']} attempts)")  # fmt: skip
            for change_ in b["timeline"]:
                print(f"    {_when(change_['at'])}  {change_['state']}  {printable(change_['reason'], newlines=False)}")
    if "durations" in answers:
        print(f"durations of passing runs over the last {runs} runs (seconds, oldest first):")
        for t in answers["durations"]:
            shown = " ".join(f"{d:.3f}" for d in t["durations_s"])
            print(f"  {printable(t['pair'], newlines=False)}: median {t['median_s']:.3f}, last {t['last_s']:.3f} "
                  f"[{shown}]")  # fmt: skip


def _history(args: argparse.Namespace, registry: TargetRegistry) -> int:
    path = history_path(args.history)
    if path is None:
        raise InvalidArgument(f"--history {NO_HISTORY}: farm history reads a database, expected its path")
    runs = HistorySettings(path, runs=args.runs).runs  # checked where every window is
    if not path.exists():
        print(json.dumps({"history": str(path), "runs": 0}) if args.json else f"no run history at {path}")
        return EXIT_OK
    db = open_history(path)
    try:
        if args.export:
            target = Path(args.export)
            count = export_history(db, target, export_format(target, args.format))
            print(f"tinyhil farm history: {count} attempts written to {target}")
            return EXIT_OK
        suite = suite_key(resolve_suite(args.suite)) if args.suite else latest_suite(db)
        if suite is None:
            print(json.dumps({"history": str(path), "runs": 0}) if args.json else f"no run recorded in {path}")
            return EXIT_OK
        answers = _answers(db, suite, runs, (args.question,) if args.question else QUESTIONS)
    finally:
        db.close()
    if args.json:
        print(json.dumps({"history": str(path), "suite": suite, "runs": runs, **answers}, indent=1))
    else:
        print(f"history {path}, suite {printable(suite, newlines=False)!r}")
        _print(answers, runs)
    return EXIT_OK


def add_history_command(sub: Any) -> None:
    """Add ``history`` to the ``tinyhil farm`` subcommands."""
    found = add_subcommand(sub, "history", "what history says: new, known and fixed failures, flaky tests, boards, "
                           "durations; or export it", EXIT_OK, EXIT_USAGE, details=description(__doc__))  # fmt: skip
    found.add_argument("question", nargs="?", choices=QUESTIONS, help="one question (default: all)")
    found.add_argument("--history", metavar="PATH", help=_HISTORY_HELP)
    found.add_argument("--suite", action="append", metavar="PATH",
                       help="the suite, as the run named it (default: the newest run's)")  # fmt: skip
    found.add_argument(
        "--runs",
        type=int,
        default=DEFAULT_RUNS,
        metavar="N",
        help=f"how many recent runs the rates and trends look at (default {DEFAULT_RUNS})",
    )
    found.add_argument("--json", action="store_true", help="print JSON for machines")
    found.add_argument("--export", metavar="FILE", help="write every recorded attempt to FILE (.csv or .jsonl)")
    found.add_argument("--format", choices=("csv", "jsonl"), help="--export's format (default: by extension)")
    found.set_defaults(handler=_history)
