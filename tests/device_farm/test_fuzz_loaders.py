"""Fuzzing every loader of the farm's files: random bytes, random JSON- and TOML-shaped documents, and documents
shaped like each file with random values. Only the loader's typed error may come out (``HwmapError``,
``QuarantineError``, ``FileFormatError``); the journal and the kept durations take no error at all (a bad line is
recorded as corrupt, bad durations are a fresh start). ``HYPOTHESIS_PROFILE=nightly`` runs more examples.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.device_farm.collection import read_pairs
from tinyhil.device_farm.health.states import HealthBook
from tinyhil.device_farm.inventory.hwmap import HwmapError, load_hwmap, parse_hwmap
from tinyhil.device_farm.journal import read_journal
from tinyhil.device_farm.leases import read_holder
from tinyhil.device_farm.planning import read_durations
from tinyhil.device_farm.quarantine import QuarantineError, load_quarantine, parse_quarantine
from tinyhil.loading import FileFormatError

pytestmark = pytest.mark.fuzz

HWMAP = parse_hwmap('[[board]]\nid = "null"\nkind = "emulated"\nemulated = { target = "NULL" }\n', host="h")

# Names the loaders know, so random documents reach past the "unknown field" checks.
NAMES = ["id", "kind", "targets", "capabilities", "host", "tags", "state", "usb", "kfd", "nv", "emulated", "target",
         "slots", "options", "vid_pid", "serial", "port", "gpu_id", "unique_id", "pci", "pci_bus_id", "uuid", "seed",
         "mode", "faults", "firmware", "operation", "fault", "occurrence", "request", "partial_bytes", "test",
         "board", "reason", "expires", "boards", "probed_at", "probes_failed", "infrastructure_failures", "pid",
         "run_id", "since", "key", "nodeid", "attempt", "outcome", "final", "duration_s", "infrastructure", "pairs",
         "arg", "requires", "skip", "version", "quarantine", "x"]  # fmt: skip
WORDS = ["emulated", "usb-bridge", "amd-kfd", "nv", "NULL", "MOCKUSB+AMD", "MOCKKFD+AMD", "USB+AMD", "KFD+AMD",
         "GOOD", "BAD", "maintenance", "retired", "add1:0001", "1-2.3", "0000:03:00.0", "GPU-1", "generated",
         "stall", "control_in", "bulk_out", "timeout", "copyin", "result", "run", "passed", "(", "\x1b[2J",
         ""]  # fmt: skip

names = st.one_of(st.sampled_from(NAMES), st.text(max_size=8))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-10, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
# Nested values, up to a little past the depth cap, and now and then far past it.
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=5)),
    max_leaves=40,
)
deep = st.tuples(st.integers(30, 40), st.sampled_from(["[", "{"])).map(lambda t: t[0] * t[1])


def _json(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def _toml_key(key: str) -> str:
    return key if key and key.replace("_", "").replace("-", "").isalnum() and key.isascii() else json.dumps(key)


def _toml(value: Any) -> str:
    """``value`` as a TOML inline value (``None``, which TOML lacks, as a date, which JSON lacks)."""
    if value is None:
        return "2027-01-31"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int | str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{ " + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"


def _toml_tables(table: str, entries: list[dict[str, Any]]) -> str:
    return "".join(
        f"[[{table}]]\n" + "".join(f"{_toml_key(k)} = {_toml(v)}\n" for k, v in entry.items()) for entry in entries
    )


def _shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Entries with some of ``fields`` (each plausible or random) and now and then a random extra key."""
    return st.fixed_dictionaries({}, optional={**{k: st.one_of(v, values) for k, v in fields.items()}, "x": values})


locator_tables = st.dictionaries(st.sampled_from(NAMES[12:32]), st.one_of(st.sampled_from(WORDS), values), max_size=4)
boards = _shaped({"id": st.sampled_from(["a", "b", "../x"]), "kind": st.sampled_from(WORDS[:4]),
                  "targets": st.lists(st.sampled_from(WORDS[4:9]), max_size=2), "usb": locator_tables,
                  "kfd": locator_tables, "nv": locator_tables, "emulated": locator_tables,
                  "state": st.sampled_from(WORDS[9:13])})  # fmt: skip
quarantine_entries = _shaped({"test": st.sampled_from(["t", "(", "a+"]), "reason": st.text(max_size=5),
                              "expires": st.dates(), "target": st.sampled_from(["N.*", "["])})  # fmt: skip
health_records = _shaped({"state": st.sampled_from(["GOOD", "BAD", "NICE"]), "reason": st.text(max_size=5),
                          "probed_at": st.floats(), "probes_failed": st.integers(-1, 3)})  # fmt: skip
holder_records = _shaped({"host": st.text(max_size=5), "pid": st.integers(-1, 2**65), "run_id": st.text(max_size=3),
                          "test": st.text(max_size=3), "since": st.floats()})  # fmt: skip
result_records = _shaped({"kind": st.sampled_from(["result", "run"]), "key": st.text(max_size=3),
                          "nodeid": st.text(max_size=3), "target": st.text(max_size=3), "board": st.text(max_size=3),
                          "attempt": st.integers(-1, 3), "outcome": st.sampled_from(["passed", ""]),
                          "final": st.booleans(), "duration_s": st.sampled_from([0.5, "slow", -1, None])})  # fmt: skip
pair_records = _shaped({"arg": st.text(max_size=3), "target": st.sampled_from(["NULL", None]),
                        "requires": st.lists(st.sampled_from(["copyin", ""]), max_size=2),
                        "skip": st.sampled_from([None, "why", False])})  # fmt: skip


@contextmanager
def _file(data: bytes | str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "file"
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        yield path


def _only(error: type[Exception], load: Callable[[], object]) -> None:
    try:
        load()
    except error as exc:
        assert str(exc), "a typed error says what was wrong"


documents = st.one_of(
    st.binary(max_size=300),
    values.map(_json),
    values.map(lambda v: f"v = {_toml(v)}\n"),
    deep.map(lambda opening: f'{{"boards": {opening}'),
    deep.map(lambda opening: f"x = {opening}"),
)


def _health(path: Path) -> object:
    path.rename(path.with_name("health.json"))
    return HealthBook(HWMAP.boards, clock=lambda: 0.0, state_dir=path.parent)


@given(
    st.one_of(
        documents,
        st.lists(boards, max_size=3).map(lambda entries: _toml_tables("board", entries)),
        st.lists(quarantine_entries, max_size=3).map(lambda entries: _toml_tables("quarantine", entries)),
    )
)
def test_toml_loaders_raise_only_their_typed_errors(document: bytes | str) -> None:
    text = document if isinstance(document, str) else document.decode("utf-8", "replace")
    _only(HwmapError, lambda: parse_hwmap(text, "f.toml", host="h"))
    _only(QuarantineError, lambda: parse_quarantine(text, "f.toml"))
    with _file(document) as path:
        _only(HwmapError, lambda: load_hwmap(path, host="h"))
        _only(QuarantineError, lambda: load_quarantine(path))


@given(
    st.one_of(
        documents,
        st.dictionaries(st.sampled_from(["null", "other"]), health_records).map(lambda b: _json({"boards": b})),
        holder_records.map(_json),
        st.lists(pair_records, max_size=3).map(lambda pairs: _json({"pairs": pairs})),
        st.dictionaries(st.text(max_size=3), values).map(_json),
    )
)
def test_json_loaders_raise_only_the_typed_error(document: bytes | str) -> None:
    for load in (read_holder, read_pairs, _health):
        with _file(document) as path:
            _only(FileFormatError, lambda: load(path))  # noqa: B023 (called at once)
    with _file(document) as path:
        path.rename(path.with_name("durations.json"))
        assert all(type(v) is float and v >= 0 for v in read_durations(path.parent).values())


@given(st.lists(st.one_of(result_records.map(_json), documents.map(str), deep), max_size=6))
def test_the_journal_records_every_bad_line_as_corrupt_and_never_raises(lines: list[str]) -> None:
    with _file("\n".join(lines) + "\n") as path:
        state = read_journal(path)
    for record in [*state.final.values(), *(r for a in state.attempts.values() for r in a)]:
        assert isinstance(record["key"], str) and type(record["attempt"]) is int and type(record["final"]) is bool
        assert "duration_s" not in record or type(record["duration_s"]) in (int, float)
    assert all(isinstance(number, int) and problem for number, problem in state.corrupt)


def test_the_toml_renderer_writes_what_tomllib_reads() -> None:
    """The fuzz documents are TOML: a known value round-trips (a ``None`` is written as a date)."""
    import tomllib

    value = {"a": [1, 2.5, "x"], "b key": {"c": True}, "d": None}
    assert tomllib.loads(f"v = {_toml(value)}\n")["v"] == {"a": [1, 2.5, "x"], "b key": {"c": True},
                                                          "d": dt.date(2027, 1, 31)}  # fmt: skip
