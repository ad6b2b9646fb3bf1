"""A run's header: the first record of its journal, saying what the run is, so that ``--resume DIR`` runs the same run.

The header (``"kind": "run"``, ``"header": 1``) records the command that started the run (``run`` or ``farm run``),
the tinyhil version, the suite (its entries, ``pyargs``, and a content digest of each of its Python files), the
hardware map (its path and the SHA-256 of its content; ``null`` for the emulated boards a run makes itself), the
pytest arguments, the targets asked for and the targets collected, and every option that shapes the set of pairs
(``allow_unavailable``, the quarantine file and its digest, ``quarantine_verify``, ``subset`` and ``seed``) or their
results (``reruns``), then the shard count, the state directory, the Dask engine's settings, and the pairs
themselves (their keys, sorted, and their SHA-256).

Resuming reads it back (:func:`read_header`) and refuses, with one line that says what changed, a run whose
tinyhil, suite files, hardware map or quarantine file differ from the header's (:func:`check_sources`), a command
line option that contradicts it (:func:`check_given`), and a collection that gives other pairs
(:func:`check_pairs`). A journal with no header this version wrote (garbage, or a journal of an older tinyhil) is
one :class:`~tinyhil.loading.FileFormatError`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import tinyhil
from tinyhil.cache import file_sha256
from tinyhil.device_farm.journal import JOURNAL_NAME, JournalState, read_journal
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError

if TYPE_CHECKING:
    from tinyhil.device_farm.inventory.hwmap import HardwareMap
    from tinyhil.device_farm.run import FarmRun

__all__ = [
    "HEADER_VERSION",
    "RunChanged",
    "RunHeader",
    "check_given",
    "check_pairs",
    "check_sources",
    "file_digest",
    "header_record",
    "keys_digest",
    "keys_record",
    "read_header",
    "resume_header",
    "suite_digests",
]

HEADER_VERSION: Final = 1
_DIGEST_CHARS: Final = 16  # of a suite file's SHA-256: enough to tell an edit, short enough for a large suite
_KEYS_MAX_BYTES: Final = LIMITS["journal"].max_bytes // 2  # a header with more pair keys keeps only their digest
_SHOWN: Final = 3  # pairs or files a refusal names
_NOT_COLLECTED: Final = frozenset({"__pycache__", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}"})


class RunChanged(InvalidArgument):
    """What ``--resume`` would run is not the run the journal started: one line saying what changed."""


def file_digest(path: str | Path) -> str:
    """The SHA-256 of the file at ``path``, in hex.

    Raises:
        FileFormatError: the file cannot be read.
    """
    try:
        return file_sha256(path)
    except OSError as exc:
        raise FileFormatError(path, 0, "file", f"cannot read it: {exc.strerror or exc}") from None


def _suite_files(entry: str) -> list[Path]:
    path = Path(entry)
    if not path.exists():  # a package: its directory (or its module)
        spec = importlib.util.find_spec(entry)
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
        if spec is not None and not locations and spec.origin:
            return [Path(spec.origin)]
        path = Path(locations[0]) if locations else path
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.py") if not any(_skipped(part) for part in p.relative_to(path).parts[:-1]))


def _skipped(directory: str) -> bool:
    """Whether pytest's default ``norecursedirs`` skips ``directory`` (hidden ones, virtual environments, builds)."""
    return directory.startswith(".") or directory.endswith(".egg") or directory in _NOT_COLLECTED


def suite_digests(suite: Sequence[str]) -> dict[str, str]:
    """Every Python file of ``suite`` (a file, the ``*.py`` under a directory or a package, but in the directories
    pytest does not collect by default: hidden ones, ``venv``, ``build``, ``dist``, ...) by path, with the start of
    its SHA-256."""
    return {str(path): file_digest(path)[:_DIGEST_CHARS] for entry in suite for path in _suite_files(entry)}


def keys_digest(keys: Iterable[str]) -> str:
    """The SHA-256 of a pair set: its keys sorted, one a line."""
    return hashlib.sha256("".join(f"{key}\n" for key in sorted(keys)).encode()).hexdigest()


def keys_record(keys: Iterable[str]) -> dict[str, Any]:
    """A pair set as the header keeps it: its digest, and its keys when they fit half a journal line."""
    ordered = sorted(keys)
    kept = ordered if len(json.dumps(ordered)) <= _KEYS_MAX_BYTES else None
    return {"keys_sha256": keys_digest(ordered), "keys": kept}


@dataclass(frozen=True, slots=True)
class RunHeader:
    """A journal's header, each field typed (:meth:`from_record`); ``record`` is the header as written."""

    path: Path  # the journal
    command: str
    tinyhil: str
    suite: tuple[str, ...]
    pyargs: bool
    suite_files: Mapping[str, str]
    hwmap: str | None
    hwmap_sha256: str | None
    pytest_args: tuple[str, ...]
    targets: tuple[str, ...]
    collected: tuple[str, ...]
    allow_unavailable: bool
    quarantine: str | None
    quarantine_sha256: str | None
    quarantine_verify: bool
    subset: tuple[int, int] | None
    seed: int
    reruns: int
    last_failed: bool  # the pairs are those --last-failed chose (the header keeps their keys when it can)
    workers: int
    state: str
    dask: Mapping[str, Any] | None
    keys_sha256: str
    keys: tuple[str, ...] | None
    record: Mapping[str, Any]

    @classmethod
    def from_record(cls, record: Mapping[str, Any], path: Path) -> RunHeader:
        """The header ``record`` of the journal at ``path``, checked.

        Raises:
            FileFormatError: a field missing or of the wrong type (a journal this version did not write).
        """
        fields = Fields(dict(record), path, line=1)
        if record.get("header") != HEADER_VERSION:
            raise fields.error("header", f"{record.get('header')!r:.20}, expected {HEADER_VERSION}: the run was not "
                               "started by this tinyhil, which records what a run is in its header")  # fmt: skip
        cap = LIMITS["journal"].max_bytes  # a header's strings: its line's cap bounds them
        suite_files = fields.of_type("suite_files", dict) or {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in suite_files.items()):
            raise fields.error("suite_files", "expected an object of file paths to digests")
        subset = fields.of_type("subset", list, required=False)
        if subset is not None and (len(subset) != 2 or not all(type(n) is int and n >= 1 for n in subset)):
            raise fields.error("subset", f"{subset!r:.40}, expected [i, N]")
        dask = fields.of_type("dask", dict, required=False)
        keys = record.get("keys")
        return cls(
            path=path,
            command=str(fields.string("command")),
            tinyhil=str(fields.string("tinyhil")),
            suite=_strings(fields, "suite"),
            pyargs=fields.boolean("pyargs"),
            suite_files=suite_files,
            hwmap=fields.string("hwmap", required=False, max_len=cap),
            hwmap_sha256=fields.string("hwmap_sha256", required=False),
            pytest_args=_strings(fields, "pytest_args"),
            targets=_strings(fields, "targets"),
            collected=_strings(fields, "collected"),
            allow_unavailable=fields.boolean("allow_unavailable"),
            quarantine=fields.string("quarantine", required=False, max_len=cap),
            quarantine_sha256=fields.string("quarantine_sha256", required=False),
            quarantine_verify=fields.boolean("quarantine_verify"),
            subset=(subset[0], subset[1]) if subset is not None else None,
            seed=int(fields.integer("seed", minimum=-(2**63)) or 0),
            reruns=int(fields.integer("reruns", minimum=0) or 0),
            last_failed=fields.boolean("last_failed", required=False),
            workers=int(fields.integer("workers", minimum=1) or 1),
            state=str(fields.string("state", max_len=cap)),
            dask=dask,
            keys_sha256=str(fields.string("keys_sha256")),
            keys=None if keys is None else _strings(fields, "keys"),
            record=record,
        )


def _strings(fields: Fields, name: str) -> tuple[str, ...]:
    """A list of strings, maybe empty."""
    value = fields.of_type(name, list) or []
    if not all(isinstance(item, str) for item in value):
        raise fields.error(name, f"{value!r:.60}, expected a list of strings")
    return tuple(value)


def read_header(run_dir: Path) -> tuple[RunHeader, JournalState]:
    """The header of the run in ``run_dir``, and its journal read back.

    Raises:
        FileFormatError: no journal, or one with no header this version wrote (garbage, a journal cut before its
            first line ended, an older tinyhil's): one line naming the journal and what is wrong.
    """
    path = run_dir / JOURNAL_NAME
    if not path.is_file():
        raise FileFormatError(path, 0, "file", "no such journal, expected the directory of a run (--report DIR)")
    journal = read_journal(path)
    if journal.run is None:
        first = f"; line {journal.corrupt[0][0]}: {journal.corrupt[0][1]}" if journal.corrupt else ""
        raise FileFormatError(path, 0, "run", f"no run header{first}; expected the journal of a tinyhil run")
    return RunHeader.from_record(journal.run, path), journal


def header_record(run: FarmRun, hwmap: HardwareMap, run_id: str, started: float, collected: Sequence[str],
            keys: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """The journal header of ``run`` on ``hwmap``, started at ``started``, with its id, the targets it collected and
    the keys of its pairs."""
    hwmap_path = str(Path(hwmap.path).resolve()) if Path(hwmap.path).is_file() else None
    quarantine = str(Path(run.quarantine.path).resolve()) if run.quarantine is not None else None
    dask = None if run.dask is None else {"scheduler": run.dask.scheduler, "board_grace_s": run.dask.board_grace_s,
                                          "scheduler_grace_s": run.dask.scheduler_grace_s}  # fmt: skip
    return {"kind": "run", "run_id": run_id, "started": started, "pairs": len(keys), "header": HEADER_VERSION,
            "command": run.command, "tinyhil": tinyhil.__version__, "suite": list(run.suite), "pyargs": run.pyargs,
            "suite_files": suite_digests(run.suite), "hwmap": hwmap_path,
            "hwmap_sha256": file_digest(hwmap_path) if hwmap_path else None, "pytest_args": list(run.pytest_args),
            "targets": list(run.targets), "collected": list(collected), "allow_unavailable": run.allow_unavailable,
            "quarantine": quarantine, "quarantine_sha256": file_digest(quarantine) if quarantine else None,
            "quarantine_verify": run.quarantine_verify, "subset": list(run.subset) if run.subset else None,
            "seed": run.subset_seed, "reruns": run.reruns,
            "last_failed": bool(run.history is not None and run.history.last_failed), "workers": run.workers,
            "state": str(run.state_dir.resolve()), "dask": dask, **keys_record(keys)}  # fmt: skip


def resume_header(run_dir: Path) -> RunHeader:
    """The header of the run in ``run_dir``, checked against what would run now (:func:`check_sources`).

    Raises:
        FileFormatError: no journal there, or one without a header (:func:`read_header`).
        RunChanged: the tinyhil, a suite file, the map or the quarantine file changed since the run started.
    """
    header = read_header(run_dir)[0]
    check_sources(header)
    return header


def _refuse(header: RunHeader, what: str) -> RunChanged:
    return RunChanged(f"--resume {header.path.parent}: {what}; resume it as it was, or start a new run (--report)")


def check_sources(header: RunHeader) -> None:
    """Check that the tinyhil, the suite's files, the hardware map and the quarantine file are the header's.

    Raises:
        RunChanged: the first that changed, with what changed.
    """
    if header.tinyhil != tinyhil.__version__:
        raise _refuse(header, f"the run was started by tinyhil {header.tinyhil}, this is {tinyhil.__version__}")
    now = suite_digests(header.suite)
    changed = sorted(p for p in now.keys() & header.suite_files.keys() if now[p] != header.suite_files[p])
    added, removed = sorted(now.keys() - header.suite_files.keys()), sorted(header.suite_files.keys() - now.keys())
    for files, how in ((changed, "changed"), (added, "added"), (removed, "removed")):
        if files:
            shown = ", ".join(files[:_SHOWN]) + (f" and {len(files) - _SHOWN} more" if len(files) > _SHOWN else "")
            raise _refuse(header, f"suite file{'s' * (len(files) > 1)} {how} since the run started: {shown}")
    for name, path, digest in (("hardware map", header.hwmap, header.hwmap_sha256),
                               ("quarantine file", header.quarantine, header.quarantine_sha256)):  # fmt: skip
        if path is not None and file_digest(path) != digest:
            raise _refuse(header, f"the {name} {path} changed since the run started (SHA-256 {str(digest)[:12]}... "
                          f"then, {file_digest(path)[:12]}... now)")  # fmt: skip


def check_given(header: RunHeader, given: Mapping[str, tuple[object, object]]) -> None:
    """Check options given on the resume command line against the header: ``given`` maps an option's name to its
    value and the header's, in the same form.

    Raises:
        RunChanged: the first option that contradicts the header.
    """
    for option, (value, recorded) in given.items():
        if value != recorded:
            raise _refuse(header, f"{option} {_shown(value)} contradicts the run's {_shown(recorded)} (its header "
                          f"in {JOURNAL_NAME})")  # fmt: skip


def _shown(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value) or "(none)"
    return "(none)" if value is None else str(value)


def check_pairs(header: RunHeader, keys: Iterable[str]) -> None:
    """Check that the pairs collected now are the run's.

    Raises:
        RunChanged: the pair set differs: how many then and now, and some added and removed ones when the header
            keeps its keys.
    """
    now = sorted(keys)
    if keys_digest(now) == header.keys_sha256:
        return
    what = f"the suite's test x target pairs changed since the run started ({header.record.get('pairs')} then, "
    what += f"{len(now)} now"
    if header.keys is not None:
        for pairs, how in ((sorted(set(now) - set(header.keys)), "new"), (sorted(set(header.keys) - set(now)), "gone")):
            if pairs:
                what += f"; {how}: {', '.join(pairs[:_SHOWN])}" + (" ..." if len(pairs) > _SHOWN else "")
    raise _refuse(header, what + ")")
