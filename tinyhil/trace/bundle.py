"""Reproduction bundles: what a failing test left behind to be run again (``--hil-repro-dir``, ``tinyhil repro``).

A bundle is a directory holding ``bundle.json`` and, on a recordable target, the test's USB trace
(``trace.hiltrace.jsonl``). ``bundle.json`` holds the format and version, the test's node id, the target string and
the options it was opened with (as JSON: quirks, seed, fault plan, mode...; the seed, fault plan and quirks also on
their own), how it failed (the phase and the one-line reason), the versions of tinyhil, Python and the key
libraries, the board's hardware-map entry when it ran on the farm (``null`` otherwise), and where pytest ran
(``rootdir``, ``invocation_dir``, ``test_path`` the test module's absolute path), so that ``tinyhil repro`` can run
it again.

Raises (:func:`load_bundle`): :class:`BundleError` naming the file and the field.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import tinyhil
from tinyhil._files import write_atomically
from tinyhil.trace.convert import trace_file_name
from tinyhil.trace.errors import TraceError

__all__ = ["BUNDLE_FILE", "BUNDLE_FORMAT", "BUNDLE_TRACE", "BUNDLE_VERSION", "BundleError", "ReproBundle",
           "bundle_dir_name", "library_versions", "load_bundle", "write_bundle"]  # fmt: skip

BUNDLE_FORMAT: Final = "tinyhil-repro"
BUNDLE_VERSION: Final = 1
BUNDLE_FILE: Final = "bundle.json"
BUNDLE_TRACE: Final = "trace.hiltrace.jsonl"
_LIBRARIES: Final = ("numpy", "pytest", "libusb1", "hypothesis")
_FAILED: Final = ("failed", "error")


class BundleError(TraceError, ValueError):
    """A repro bundle is missing or malformed; the message names the file and the field.

    Attributes:
        path: the bundle file (or directory) at fault; field: the field, or ``""`` for the file as a whole.
    """

    def __init__(self, path: str | Path, field_name: str, problem: str) -> None:
        where = f" field {field_name!r}" if field_name else ""
        super().__init__(f"{path}:{where} {problem}")
        self.path = str(path)
        self.field = field_name


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
    test_path: str | None = None  # the test module, absolute (a farm shard's rootdir may not hold it)
    format: str = BUNDLE_FORMAT
    version: int = BUNDLE_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_TYPES: Final[dict[str, type | tuple[type, ...]]] = {
    "nodeid": str, "target": str, "options": dict, "outcome": str, "when": str, "reason": str, "rootdir": str,
    "invocation_dir": str, "versions": dict, "seed": (int, type(None)), "board": (dict, type(None)),
    "trace": (str, type(None)), "test_path": (str, type(None)), "format": str, "version": int,
}  # fmt: skip


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


def load_bundle(path: str | Path) -> tuple[ReproBundle, Path]:
    """The bundle at ``path`` (its directory or its ``bundle.json``) and its directory.

    Raises:
        BundleError: no such bundle, not JSON, a wrong format or version, a missing or mistyped field, an outcome
            that is no failure, or a trace it names that is not there.
    """
    given = Path(path)
    file = given / BUNDLE_FILE if given.is_dir() else given
    if not file.is_file():
        raise BundleError(given, "", f"no such bundle, expected a directory holding {BUNDLE_FILE} (--hil-repro-dir)")
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(file, "", f"not a JSON bundle ({exc})") from None
    if not isinstance(data, dict):
        raise BundleError(file, "", f"{type(data).__name__} at the top, expected an object")
    if data.get("format") != BUNDLE_FORMAT:
        raise BundleError(file, "format", f"format={data.get('format')!r}, expected {BUNDLE_FORMAT!r}")
    if data.get("version") != BUNDLE_VERSION:
        raise BundleError(file, "version", f"version={data.get('version')!r}, expected {BUNDLE_VERSION}")
    known = {f.name for f in fields(ReproBundle)}
    for name in sorted(set(data) - known):
        raise BundleError(file, name, f"unknown field, expected only {sorted(known)}")
    for name, kind in _TYPES.items():
        if name not in data:
            if name in ("versions", "seed", "board", "trace", "test_path"):
                continue
            raise BundleError(file, name, "missing")
        if not isinstance(data[name], kind) or (kind is int and isinstance(data[name], bool)):
            raise BundleError(file, name, f"{name}={data[name]!r}, expected {_kind_name(kind)}")
    if data["outcome"] not in _FAILED:
        raise BundleError(file, "outcome", f"outcome={data['outcome']!r}, expected one of {list(_FAILED)}")
    bundle = ReproBundle(**data)
    if bundle.trace is not None:
        trace = file.parent / bundle.trace
        if Path(bundle.trace).name != bundle.trace or not trace.is_file():
            raise BundleError(file, "trace", f"trace={bundle.trace!r}: no such file in {file.parent}")
    return bundle, file.parent


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {"dict": "an object", "int": "an int", "NoneType": "null"}
    return " or ".join(names.get(k.__name__, f"a {k.__name__}") for k in kinds)
