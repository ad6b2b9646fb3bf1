"""The served board from a target string and ``--option KEY=VALUE`` options, and the refusals of `serve usb`."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from tinyhil.cli import EXIT_USAGE, main
from tinyhil.emulators.faults import FaultKind, Operation
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.serve.options import parse_options
from tinyhil.mocks.serve.usb import ServeUnavailable, UsbTestbed, served_board, umockdev_unavailable_reason
from tinyhil.mocks.usb.context import TransferMode


def test_options_are_json_where_they_parse_and_text_elsewhere() -> None:
    parsed = parse_options(["seed=3", "usb3=false", "mode=timed", 'quirks={"landing_delay_ns": 5}'])
    assert parsed == {"seed": 3, "usb3": False, "mode": "timed", "quirks": {"landing_delay_ns": 5}}


def test_options_build_the_board_they_name() -> None:
    faults = '[{"operation": "bulk_out", "occurrence": 2, "fault": "stall"}]'
    board = served_board("MOCKUSB+AMD", ["mode=timed", "seed=7", f"faults={faults}", "usb3=false",
                                         'quirks={"landing_delay_ns": 5}'])  # fmt: skip
    assert board.mode is TransferMode.TIMED and board.target == "MOCKUSB+AMD"
    assert board.bridge.kernel.seed == 7 and not board.bridge.usb3
    assert board.bridge.quirks.landing_delay_ns == 5
    fault = board.bridge.faults.fault_for(Operation.bulk_out(), 2)
    assert fault is not None and fault.kind is FaultKind.STALL


BAD_OPTIONS = [
    ("MOCKUSB+AMD", ["seed"], r"--option 'seed', expected KEY=VALUE"),
    ("MOCKUSB+AMD", ["seed=1", "seed=2"], r"--option seed= given twice"),
    ("MOCKUSB+AMD", ["vram=1"], r"--option vram=\.\.\., expected one of mode, seed"),
    ("MOCKUSB+AMD", ["seed=x"], r"seed='x', expected an integer"),
    ("MOCKUSB+AMD", ["usb3=1"], r"usb3=1, expected true or false"),
    ("MOCKUSB+AMD", ["mode=fast"], r"option mode='fast', expected one of 'sync', 'timed'"),
    ("MOCKUSB+AMD", ["faults=3"], r"faults=3, expected a list of rule tables"),
    ("MOCKUSB+AMD", ['quirks={"nope": 1}'], r"quirks=\{'nope': 1\}: .*expected Quirks fields"),
    ("MOCKUSB+AMD", ["timing=slow"], r"timing preset 'slow', expected one of"),
    ("MOCKUSB+AMD", ["record=3"], r"record=3, expected a path ending in \.hiltrace\.jsonl or \.pcapng"),
    ("MOCKUSB+AMD", ["record=trace.txt"], r"trace\.txt"),
    ("MOCKKFD+AMD", [], r"--target 'MOCKKFD\+AMD', expected a MOCKUSB\+AMD target"),
]


@pytest.mark.parametrize(("target", "options", "message"), BAD_OPTIONS)
def test_bad_targets_and_options_are_refused_by_name(target: str, options: list[str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        served_board(target, options)


def test_serve_usb_refuses_in_one_line_naming_the_package_without_umockdev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no umockdev-wrapper on it
    assert main(["serve", "usb", "--", "true"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "install the Debian package umockdev" in err[0] and "Traceback" not in err[0]


def test_serve_usb_refuses_a_bad_option_before_starting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "usb", "--option", "seed=x", "--", "true"]) == EXIT_USAGE
    assert "seed='x', expected an integer" in capsys.readouterr().err


def _fake_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper = tmp_path / "umockdev-wrapper"
    wrapper.write_text('#!/bin/sh\nexec "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_without_pygobject_the_reason_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_wrapper(tmp_path, monkeypatch)
    monkeypatch.setitem(sys.modules, "gi", None)  # import gi raises ImportError
    reason = umockdev_unavailable_reason()
    assert reason is not None and "pip install 'tinyhil[serve]'" in reason and "libgirepository1.0-dev" in reason


def test_without_the_typelib_the_reason_names_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_wrapper(tmp_path, monkeypatch)
    gi = types.ModuleType("gi")

    def require_version(namespace: str, version: str) -> None:
        raise ValueError(f"Namespace {namespace} not available")

    gi.require_version = require_version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gi", gi)
    with pytest.raises(ServeUnavailable, match=r"install the Debian package gir1\.2-umockdev-1\.0") as caught:
        served = served_board("MOCKUSB+AMD", [])
        UsbTestbed(served)
    assert caught.value.package == "gir1.2-umockdev-1.0"
