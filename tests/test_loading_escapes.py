"""What a file puts into an error message or a written file is printable and whole: control characters in the field
names and key paths of every loader are escaped where :class:`~tinyhil.loading.FileFormatError` is built, and text
that UTF-8 cannot carry (lone surrogates, as a test's message naming an undecodable file name holds) is escaped, never
a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

import pytest

from tinyhil._files import write_atomically
from tinyhil.device_farm.inventory.hwmap import load_hwmap
from tinyhil.device_farm.reports import PairReport
from tinyhil.device_farm.reports.html import write_report
from tinyhil.loading import Fields, FileFormatError, parse_json
from tinyhil.printable import printable
from tinyhil.trace.bundle import BUNDLE_FILE, BundleError, load_bundle
from tinyhil.trace.errors import TraceFormatError

_OSC: Final = "\x1b]0;PWNED\x07\x1b[2J"
# Every raw control character a terminal acts on, C0, DEL and C1 (0x9b is CSI).
_RAW: Final = tuple(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)))
_UNDECODABLE: Final = os.fsdecode(b"/tmp/caf\xe9\x9b.bin")  # what a failing test names: lone surrogates


def _clean(message: str) -> None:
    assert not any(c in message for c in _RAW), repr(message)
    message.encode("utf-8")  # no lone surrogate: it prints and writes as UTF-8


def test_an_unknown_key_with_escapes_is_named_escaped() -> None:
    with pytest.raises(FileFormatError) as caught:
        Fields({_OSC: 1}, "f.json").only(["a"])
    _clean(str(caught.value))
    assert printable(_OSC, newlines=False) in str(caught.value)


def test_a_huge_integer_under_an_escape_key_is_named_escaped() -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_json(json.dumps({"\x1b": 1 << 64}), "f.json")
    _clean(str(caught.value))
    assert "\\x1b" in str(caught.value)


def test_a_bundle_key_with_escapes_is_refused_in_one_printable_line(tmp_path: Path) -> None:
    (tmp_path / BUNDLE_FILE).write_text(json.dumps({"format": "tinyhil-repro", "version": 1, _OSC: 1}))
    with pytest.raises(BundleError) as caught:
        load_bundle(tmp_path)
    _clean(str(caught.value))


@pytest.mark.parametrize("table", [f'[[board]]\nid = "b"\n"{_OSC}" = 1\n',
                                   '[[board]]\nid = "b"\nkind = "emulated"\n'
                                   f'emulated = {{ target = "NULL", "{_OSC}" = 1 }}\n'])  # fmt: skip
def test_a_hwmap_key_with_escapes_is_refused_in_one_printable_line(tmp_path: Path, table: str) -> None:
    path = tmp_path / "hwmap.toml"
    path.write_text(table.replace("\x1b", "\\u001b").replace("\x07", "\\u0007"))
    with pytest.raises(FileFormatError) as caught:
        load_hwmap(path)
    _clean(str(caught.value))
    assert "\\x1b]0;PWNED" in str(caught.value)


def test_a_trace_error_is_one_printable_line() -> None:
    error = TraceFormatError("line 3", f"field {_OSC} r\udc9b", path="t\x9b.jsonl")
    _clean(str(error))


def test_printable_escapes_lone_surrogates_and_c1() -> None:
    shown = printable(f"r\ud800 {_UNDECODABLE} \x9b")
    _clean(shown)
    assert "\\ud800" in shown and "\\udce9\\udc9b" in shown and "\\x9b" in shown


def test_text_utf8_cannot_carry_is_written_escaped(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_atomically(target, "assert os.path.exists('/tmp/caf\udce9.bin') \ud800")
    assert target.read_text(encoding="utf-8") == "assert os.path.exists('/tmp/caf\\udce9.bin') \\ud800"


def test_a_report_of_a_message_with_surrogates_is_written(tmp_path: Path) -> None:
    final = {"nodeid": "t.py::test_x[NULL]", "target": "NULL", "board": "b", "host": "h", "attempt": 1,
             "outcome": "failed", "reason": f"assert os.path.exists({_UNDECODABLE!r}) \ud800",
             "duration_s": 0.1, "started": 1.0, "finished": 2.0}  # fmt: skip
    page = tmp_path / "report.html"
    write_report(page, [PairReport(final)], {"run_id": "r", "boards": []})
    assert "caf" in page.read_text(encoding="utf-8")
