"""``tinyhil farm discover`` (what a fake host has, entries to add, drift) and ``tinyhil farm status``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hosts import FakeHost

from tinyhil.device_farm.cli import EXIT_USAGE, main
from tinyhil.device_farm.hwmap import load_hwmap
from tinyhil.device_farm.leases import Holder, acquire

MAP = """
[[board]]
id = "kfd-a"
kind = "amd-kfd"
kfd = { pci = "0000:03:00.0", gpu_id = 1111 }
targets = ["KFD+AMD"]
host = "lab-1"

[[board]]
id = "kfd-gone"
kind = "amd-kfd"
kfd = { pci = "0000:c3:00.0" }
targets = ["KFD+AMD"]
host = "lab-1"

[[board]]
id = "bridge"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", serial = "X" }
targets = ["USB+AMD"]
host = "lab-1"
"""


def _discover(root: Path, *extra: str) -> list[str]:
    return ["farm", "discover", "--root", str(root), "--no-usb", "--host", "lab-1", *extra]


def test_without_a_map_it_prints_what_it_found_and_the_entries_to_add(
    tmp_path: Path, fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_discover(fake_host.build(tmp_path))) == 0
    out = capsys.readouterr().out
    assert out.startswith("found on lab-1: 3 boards\n")
    assert out.count("[[board]]") == 3 and 'kind = "nv"' in out and 'targets = ["KFD+AMD"]' in out


def test_drift_is_printed_and_exits_1_and_usb_boards_are_not_called_missing_when_usb_was_skipped(
    tmp_path: Path, fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_host.build(tmp_path)
    (tmp_path / "map.toml").write_text(MAP)
    assert main(_discover(root, "--hwmap", str(tmp_path / "map.toml"))) == 1
    out = capsys.readouterr().out
    assert "missing (in " in out and "kfd-gone (amd-kfd, pci 0000:c3:00.0)" in out
    assert "changed: kfd-a: gpu_id 1111 in the map, 4660 found" in out
    assert "usb-bridge" not in out  # USB was not searched, so its board is not called missing
    assert out.count("[[board]]") == 2  # the second KFD GPU and the NV GPU are new


def test_json_output_carries_found_boards_notes_and_drift(
    tmp_path: Path, fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_host.build(tmp_path)
    (tmp_path / "map.toml").write_text(MAP)
    assert main(_discover(root, "--hwmap", str(tmp_path / "map.toml"), "--json")) == 1
    document = json.loads(capsys.readouterr().out)
    assert [b["kind"] for b in document["found"]] == ["amd-kfd", "amd-kfd", "nv"]
    assert document["drift"]["missing"] == ["kfd-gone"]
    assert document["drift"]["changed"] == [{"board": "kfd-a", "differences": [["gpu_id", 1111, 4660]]}]
    assert len(document["drift"]["new"]) == 2


def test_a_bad_map_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "map.toml").write_text('[[board]]\nid = "b"\nkind = "usb"\n')
    assert main(_discover(tmp_path, "--hwmap", str(tmp_path / "map.toml"))) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tinyhil farm: {tmp_path / 'map.toml'}:3: board 'b' kind: 'usb'")


STATUS_MAP = """
[[board]]
id = "emu"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", slots = 2 }

[[board]]
id = "broken"
kind = "emulated"
emulated = { target = "NULL" }
state = "retired"
"""


def test_status_probes_boards_and_shows_health_leases_and_holders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "map.toml").write_text(STATUS_MAP)
    hwmap = load_hwmap(tmp_path / "map.toml")
    args = ["farm", "status", "--hwmap", str(tmp_path / "map.toml"), "--state", str(tmp_path / "state")]
    assert main(args) == 0
    assert "emu     emulated    UNKNOWN      free (2 slots)" in capsys.readouterr().out
    with acquire(tmp_path / "state" / "leases", hwmap.board("emu"), Holder.here("run-9", "test_copy")):
        assert main([*args, "--probe"]) == 0
        out = capsys.readouterr().out
    assert "emu     emulated    GOOD         slot 0: pid " in out and "(run run-9) running test_copy" in out
    assert "broken  emulated    RETIRED      free (1 slot)" in out and "retired in the hardware map" in out
    assert main([*args, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(b["board"], b["health"], b["leases"]) for b in document["boards"]] == [
        ("emu", "GOOD", [None, None]),
        ("broken", "RETIRED", [None]),
    ]


def test_status_without_a_map_lists_the_emulated_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["farm", "status", "--state", str(tmp_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["hwmap"] == "(emulated targets)"
    assert {"mockusb-amd", "mockkfd-amd", "null"} <= {b["board"] for b in document["boards"]}
