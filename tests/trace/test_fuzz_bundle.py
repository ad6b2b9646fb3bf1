"""Fuzzing repro bundles (issue 26): whatever ``bundle.json`` holds, :func:`load_bundle` returns a bundle whose node
id is a node id inside its rootdir, or raises :class:`BundleError`; never anything else.

Two sources: any JSON document at all, and a valid bundle with some fields replaced by any JSON value or by a
hostile string (options, paths escaping the root, control characters). ``max_examples`` comes from the profile
(``HYPOTHESIS_PROFILE=nightly`` runs 50 times more).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil.trace.bundle import BUNDLE_FILE, BundleError, ReproBundle, check_nodeid, load_bundle

pytestmark = pytest.mark.fuzz

_JSON: Final = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
_HOSTILE: Final = st.sampled_from([
    "--basetemp=/tmp", "-pevil", "-p", "--", "../x.py::t", "/etc/x.py::t", "t.py::t\x1b[2J", "t.py::t\n--x",
    "t.py::t[", "t.py::", "::t", "t.py::t[a]", "NULL", "REPLAY+AMD", "/", "", "\u202e", "x" * 5000, "t.py::t[\x00]",
])  # fmt: skip
_FIELDS: Final = [f.name for f in ReproBundle.__dataclass_fields__.values()]
_SETTINGS: Final = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def _good(root: Path) -> dict[str, Any]:
    return {"format": "tinyhil-repro", "version": 1, "nodeid": "t.py::t[NULL]", "target": "NULL", "options": {},
            "outcome": "failed", "when": "call", "reason": "boom", "rootdir": str(root),
            "invocation_dir": str(root)}  # fmt: skip


def _load(directory: Path, text: str) -> None:
    (directory / BUNDLE_FILE).write_text(text)
    try:
        bundle, _ = load_bundle(directory)
    except BundleError as exc:
        assert "\n" not in str(exc) and "\x1b" not in str(exc)
        return
    assert check_nodeid(bundle.nodeid) == bundle.nodeid and Path(bundle.rootdir).is_dir()


@_SETTINGS
@given(document=_JSON)
def test_any_json_document_is_a_bundle_or_a_bundle_error(tmp_path: Path, document: object) -> None:
    _load(tmp_path, json.dumps(document))


@_SETTINGS
@given(changes=st.dictionaries(st.sampled_from([*_FIELDS, "extra"]), _JSON | _HOSTILE, min_size=1, max_size=4))
def test_a_bundle_with_any_fields_changed_is_a_bundle_or_a_bundle_error(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    _load(tmp_path, json.dumps({**_good(tmp_path), **changes}))


@_SETTINGS
@given(data=st.binary(max_size=200))
def test_any_bytes_are_a_bundle_or_a_bundle_error(tmp_path: Path, data: bytes) -> None:
    (tmp_path / BUNDLE_FILE).write_bytes(data)
    with pytest.raises(BundleError):
        load_bundle(tmp_path)
