"""Served boards in a farm run: shards run under ``tinyhil serve`` and drive the real-interface targets (``KFD+AMD``
over the ``/dev/kfd`` file seam, ``USB+AMD`` over libusb) against the emulators; a board whose tools are missing
takes no work, with the reason naming the Debian package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinyhil.builtin_targets import usb_firmware_reason
from tinyhil.device_farm.inventory.hwmap import parse_hwmap
from tinyhil.device_farm.inventory.served_boards import ServedLocator, serve_arguments
from tinyhil.device_farm.shard.served import (
    served_collection,
    served_command,
    served_shard,
    served_targets,
    served_unavailable_reason,
)
from tinyhil.fixtures.selection import HilRequirement, TargetStatus, ineligible_reason
from tinyhil.mocks.serve.kfd.build import COMPILER_PACKAGE
from tinyhil.registry import Target, default_registry
from tinyhil.trace.convert import load_trace

TESTS = Path(__file__).resolve().parents[2]
FORK_EACH_TEST = TESTS / "mocks" / "serve" / "kfd"  # one process per test under serve kfd (docs/serve.md)
RUN_TIMEOUT_S = 300
MAP = """
[[board]]
id = "served-kfd"
kind = "served"
served = { serve = "kfd", target = "MOCKKFD+AMD", options = { gpus = 1 } }

[[board]]
id = "served-usb"
kind = "served"
served = { serve = "usb", target = "MOCKUSB+AMD", options = { mode = "timed", record = "served-usb.hiltrace.jsonl" } }

[[board]]
id = "null"
kind = "emulated"
emulated = { target = "NULL" }
"""
HWMAP = parse_hwmap(MAP, "lab.toml")


def test_only_a_served_boards_command_runs_under_tinyhil_serve() -> None:
    served, _, emulated = HWMAP.boards
    assert isinstance(served.locator, ServedLocator)
    command = ["pytest", "-q", "--hil-target", "KFD+AMD"]
    assert served_command(served, command) == [sys.executable, "-m", "tinyhil.cli", "serve",
                                               *serve_arguments(served.locator), "--", *command]  # fmt: skip
    assert served_command(emulated, command) == command
    usb = HWMAP.board("served-usb")
    assert "record=" + json.dumps("served-usb.hiltrace.jsonl") in served_command(usb, command)
    assert not any(a.startswith("record=") for a in served_command(usb, command, record=False))  # a probe's
    assert served_shard(served, command, 4321)[1] == 0  # its parent is tinyhil serve: it dies with that
    assert served_shard(emulated, command, 4321) == (command, 4321)
    assert served_targets(HWMAP.boards) == {"KFD+AMD", "USB+AMD"}


def _pair(target: Target, need: HilRequirement, skip: str | None) -> dict[str, object]:
    node = f"t.py::test[{target.name}]"
    return {"arg": node, "nodeid": node, "target": target.name, "requires": sorted(need.requires),
            "targets": [list(g) for g in need.pattern_groups], "skip": skip}  # fmt: skip


def test_collection_skips_only_what_a_served_target_cannot_run_on_its_board(monkeypatch: pytest.MonkeyPatch) -> None:
    target = default_registry().resolve("KFD+AMD")
    monkeypatch.setattr(Target, "unavailable_reason", lambda self: "no /dev/kfd in the farm's own process")
    here = TargetStatus(target, target.unavailable_reason())
    runs = HilRequirement(frozenset({"fill"}))
    lacks = HilRequirement(frozenset({"exec"}))
    pairs = [_pair(target, need, ineligible_reason(here, need)) for need in (runs, lacks)]
    pairs.append(_pair(target, runs, "a skip of the test's own"))
    decided = served_collection(pairs, frozenset({"KFD+AMD"}))
    assert [p["skip"] for p in decided] == [None, ineligible_reason(TargetStatus(target, None), lacks),
                                            "a skip of the test's own"]  # fmt: skip
    assert served_collection(pairs, frozenset()) == pairs  # no served board: the collection's verdict stands


def _farm_run(tmp_path: Path, board: str, target: str, *pytest_args: str, env: dict[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    hwmap = tmp_path / "hwmap.toml"
    kept = [b for b in MAP.split("[[board]]") if f'"{board}"' in b]
    hwmap.write_text("[[board]]" + kept[0])
    report = tmp_path / "report"
    path = os.pathsep.join(filter(None, [str(FORK_EACH_TEST), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "TINYHIL_FARM_STATE": str(tmp_path / "state"), "PYTHONPATH": path, **(env or {})}
    argv = [sys.executable, "-m", "tinyhil.cli", "farm", "run", "--hwmap", str(hwmap), "--target", target, "--report",
            str(report), "--history", "none", "--", *pytest_args]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, env=environment,
                          cwd=tmp_path)  # fmt: skip
    return done, report


def _outcomes(report: Path) -> dict[str, tuple[str, str]]:
    summary = json.loads((report / "summary.json").read_text())
    return {t["nodeid"]: (t["outcome"], t["board"]) for t in summary["results"]}


def test_a_served_kfd_board_runs_portable_suite_tests_on_kfd_amd(tmp_path: Path) -> None:
    locator = load_board_locator("served-kfd")
    reason = served_unavailable_reason(locator)
    if reason is not None:
        pytest.skip(reason)
    # Each test in a process of its own: one process opens /dev/kfd once under serve kfd (docs/serve.md).
    done, report = _farm_run(tmp_path, "served-kfd", "KFD+AMD", "-k", "test_fill", "-p", "fork_each_test")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    outcomes = _outcomes(report)
    assert len(outcomes) >= 2
    assert all(node.endswith("[KFD+AMD]") for node in outcomes)
    assert set(outcomes.values()) == {("passed", "served-kfd")}


def test_a_served_usb_board_runs_portable_suite_tests_on_usb_amd(tmp_path: Path) -> None:
    reason = served_unavailable_reason(load_board_locator("served-usb")) or usb_firmware_reason()
    if reason is not None:
        pytest.skip(reason)
    done, report = _farm_run(tmp_path, "served-usb", "USB+AMD", "-k", "test_fill")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    outcomes = _outcomes(report)
    assert len(outcomes) >= 2
    assert all(node.endswith("[USB+AMD]") for node in outcomes)
    assert set(outcomes.values()) == {("passed", "served-usb")}
    # The board's record option: the shard's session, written in the run directory (its working directory).
    trace = load_trace(report / "served-usb.hiltrace.jsonl")
    assert trace.records
    assert not list(tmp_path.glob("*.hiltrace.jsonl"))  # the probe, run from here, recorded nothing


def test_a_served_board_without_its_tools_takes_no_work_naming_the_package(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-cc")
    done, _ = _farm_run(tmp_path, "served-kfd", "KFD+AMD", "-k", "test_fill", env={"CC": missing})
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("board served-kfd:"))
    assert f"install the Debian package {COMPILER_PACKAGE}" in line
    assert "it takes no work" in line


def load_board_locator(board_id: str) -> ServedLocator:
    locator = HWMAP.board(board_id).locator
    assert isinstance(locator, ServedLocator)
    return locator
