"""Reproduction bundles: what a failing test left behind to be run again (``--hil-repro-dir``, ``tinyhil repro``).

A bundle is a directory holding ``bundle.json`` and, on a recordable target, the test's USB trace
(``trace.hiltrace.jsonl``). ``bundle.json`` holds the format and version, the test's node id, the target string and
the options it was opened with (as JSON: quirks, seed, fault plan, mode...; the seed, fault plan and quirks also on
their own), how it failed (the phase and the one-line reason), the versions of tinyhil, Python and the key
libraries, the board's hardware-map entry when it ran on the farm (``null`` otherwise), and where pytest ran
(``rootdir``, ``invocation_dir``, ``test_path`` the test module's absolute path, inside the rootdir), so that
``tinyhil repro`` can run it again.

Raises (:func:`load_bundle`): :class:`BundleError` naming the file and the field.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Final

import tinyhil
from tinyhil._files import write_atomically
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped
from tinyhil.printable import printable
from tinyhil.registry import default_registry
from tinyhil.target import parse_target
from tinyhil.trace.convert import trace_file_name
from tinyhil.trace.errors import TraceError

__all__ = ["BUNDLE_FILE", "BUNDLE_FORMAT", "BUNDLE_TRACE", "BUNDLE_VERSION", "BundleError", "ReproBundle",
           "bundle_dir_name", "check_nodeid", "library_versions", "load_bundle", "write_bundle"]  # fmt: skip

BUNDLE_FORMAT: Final = "tinyhil-repro"
BUNDLE_VERSION: Final = 1
BUNDLE_FILE: Final = "bundle.json"
BUNDLE_TRACE: Final = "trace.hiltrace.jsonl"
_LIBRARIES: Final = ("numpy", "pytest", "libusb1", "hypothesis")
_FAILED: Final = ("failed", "error")
_PHASES: Final = ("setup", "call", "teardown")
_NODEID_FORM: Final = (
    "a test file's path relative to the rootdir, '::' and the test's name (tests/test_x.py::test_y[id])"
)
# A failure's reason is one line of pytest's report; the file's own cap bounds it.
_REASON_MAX_CHARS: Final = LIMITS["bundle"].max_bytes


class BundleError(FileFormatError, TraceError):
    """A repro bundle is missing or malformed: ``path: field: what was wrong and what was expected``, one line.

    Attributes (those of :class:`~tinyhil.loading.FileFormatError`): ``path`` the bundle file (or the directory
    given), ``field`` the field (``file`` for the file as a whole), ``why`` the problem alone.
    """


@dataclass(frozen=True, slots=True)
class ReproBundle:
    """The contents of ``bundle.json`` (see the module docstring); ``trace`` is the trace's file name in the bundle
    directory, or ``None`` when the target records none."""

    nodeid: str
    target: str
    options: dict[str, Any]
    outcome: str
    when: str
    reason: str
    rootdir: str
    invocation_dir: str
    versions: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    faults: Any = None
    quirks: Any = None
    board: dict[str, Any] | None = None
    trace: str | None = None
    test_path: str | None = None  # the test module, absolute, inside rootdir (a farm shard's: its own folder)
    format: str = BUNDLE_FORMAT
    version: int = BUNDLE_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def library_versions() -> dict[str, str | None]:
    """tinyhil's, Python's and the key libraries' versions (``None`` for one not installed)."""
    found: dict[str, str | None] = {"tinyhil": tinyhil.__version__, "python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def bundle_dir_name(nodeid: str, target: str) -> str:
    """The directory name of a test's bundle: its trace file name (:func:`trace_file_name`) without the suffix."""
    return trace_file_name(nodeid, target, suffix="")


def write_bundle(directory: str | Path, bundle: ReproBundle) -> Path:
    """Write ``bundle.json`` into ``directory`` (created); returns the directory."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / BUNDLE_FILE, json.dumps(bundle.to_json(), indent=1) + "\n")
    return out


def check_nodeid(nodeid: str) -> str:
    """``nodeid`` checked to be a pytest node id of a test inside its rootdir: a relative path of a ``.py`` file
    (no ``..``, ``.`` or empty part, nothing that starts with ``-``), then ``::`` parts that are Python names, the last
    with an optional ``[parametrize id]``; no control characters anywhere. Returns it unchanged.

    Raises:
        InvalidArgument: naming the node id (escaped) and what was expected.
    """
    head, bracket, params = nodeid.partition("[")
    path, _, names = head.partition("::")
    parts = PurePosixPath(path).parts if path else ()
    if printable(nodeid, newlines=False) != nodeid:
        why = "holds control characters"
    elif not path or path.startswith("-"):
        why = "does not start with a test file's path"
    elif path.startswith("/") or "\\" in path:
        why = "an absolute path (or one with backslashes): the test must lie inside the rootdir"
    elif any(part in ("..", ".") for part in parts) or "//" in path or path.endswith("/"):
        why = "a path with '..', '.' or empty parts: the test must lie inside the rootdir"
    elif not path.endswith(".py"):
        why = "not the path of a .py file"
    elif not names or not all(name.isidentifier() for name in names.split("::")):
        why = "no '::' and test name after the path, or a part that is no Python name"
    elif bracket and (len(params) < 2 or not params.endswith("]")):
        why = "a parametrize id that is empty or does not end with ']'"
    else:
        return nodeid
    raise InvalidArgument(f"node id {nodeid[:200]!r}: {why}, expected {_NODEID_FORM}")


def load_bundle(path: str | Path) -> tuple[ReproBundle, Path]:
    """The bundle at ``path`` (its directory or its ``bundle.json``) and its directory, every field checked once
    (through :mod:`tinyhil.loading`: size, depth, integer and type caps).

    Raises:
        BundleError: no such bundle, not JSON, over a cap, a wrong format or version, a missing, unknown or mistyped
            field, a node id that is no node id inside its rootdir (:func:`check_nodeid`), a test module
            (``test_path``) outside the rootdir, a target that is no target string, options the target refuses
            (:func:`_check_options`), a rootdir that is no directory, an outcome that is no failure, or a trace it
            names that is not in the bundle's directory.
    """
    given = Path(path)
    file = given / BUNDLE_FILE if given.is_dir() else given
    try:
        if not file.is_file():
            raise FileFormatError(given, 0, "file", f"no such bundle, expected a directory holding {BUNDLE_FILE} "
                                                    "(--hil-repro-dir)")  # fmt: skip
        bundle = _read(Fields(parse_json(read_capped(file, "bundle"), file), file), file.parent)
    except FileFormatError as exc:
        raise BundleError(exc.path, exc.line, exc.field, exc.why) from None
    return bundle, file.parent


def _read(table: Fields, directory: Path) -> ReproBundle:
    """The bundle's fields, each checked (raises FileFormatError)."""
    found = table.string("format")
    if found != BUNDLE_FORMAT:
        raise table.error("format", f"{found!r}, expected {BUNDLE_FORMAT!r}")
    version = table.integer("version")
    if version != BUNDLE_VERSION:
        raise table.error("version", f"{version}, expected {BUNDLE_VERSION}")
    table.only([f.name for f in fields(ReproBundle)])
    nodeid, target = str(table.string("nodeid")), str(table.string("target"))
    for name, check in (("nodeid", check_nodeid), ("target", parse_target)):
        try:
            check(nodeid if name == "nodeid" else target)
        except InvalidArgument as exc:
            raise table.error(name, str(exc)) from None
    outcome, when = table.string("outcome"), table.string("when")
    if outcome not in _FAILED:
        raise table.error("outcome", f"{outcome!r}, expected one of {', '.join(_FAILED)}")
    if when not in _PHASES:
        raise table.error("when", f"{when!r}, expected one of {', '.join(_PHASES)}")
    rootdir = str(_absolute(table, "rootdir"))
    if not Path(rootdir).is_dir():
        raise table.error("rootdir", f"{rootdir!r}: no such directory, expected the directory the test ran in")
    test_path = _absolute(table, "test_path", required=False)
    if test_path is not None and not test_path.endswith(".py"):
        raise table.error("test_path", f"{test_path!r}, expected the absolute path of a .py file")
    if test_path is not None and not Path(test_path).resolve().is_relative_to(Path(rootdir).resolve()):
        raise table.error("test_path", f"{test_path!r}: outside the rootdir {rootdir!r}, expected the test module "
                                       "inside it")  # fmt: skip
    trace = table.string("trace", required=False)
    if trace is not None and (Path(trace).name != trace or not (directory / trace).is_file()):
        raise table.error("trace", f"{trace!r}: no such file in {directory}")
    return ReproBundle(
        nodeid=nodeid,
        target=target,
        options=_check_options(table, target),
        outcome=str(outcome),
        when=str(when),
        reason=table.string("reason", empty=True, max_len=_REASON_MAX_CHARS) or "",
        rootdir=rootdir,
        invocation_dir=str(_absolute(table, "invocation_dir")),
        versions=table.of_type("versions", dict, required=False) or {},
        seed=table.integer("seed", required=False),
        faults=table.table.get("faults"),
        quirks=table.table.get("quirks"),
        board=table.of_type("board", dict, required=False),
        trace=trace,
        test_path=test_path,
    )


def _check_options(table: Fields, target: str) -> dict[str, Any]:
    """The ``options`` field, checked by ``target``'s own option check: every name one the target takes, and, when
    every value is a plain one (a number, string, bool or null), the values too (its options dataclass). Options
    recorded as JSON objects (MOCKUSB+AMD's quirks, fault plan, timing) are read back where they are used."""
    options = table.of_type("options", dict) or {}
    try:
        resolved = default_registry().resolve(target)
        resolved.check_options(options)
        if not any(isinstance(value, (dict, list)) for value in options.values()):
            resolved.build_options(options)
    except (InvalidArgument, LookupError, TypeError) as exc:
        raise table.error("options", f"{str(exc)[:300]}") from None
    return options


def _absolute(table: Fields, name: str, *, required: bool = True) -> str | None:
    """The field ``name``: an absolute path without control characters (``None`` when absent and not required)."""
    value = table.string(name, required=required)
    if value is not None and (not Path(value).is_absolute() or printable(value, newlines=False) != value):
        raise table.error(name, f"{value!r}, expected an absolute path")
    return value
