"""``tinyhil farm discover`` (what a fake host has, entries to add, drift) and ``tinyhil farm status``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.hosts import FakeHost

from tinyhil.cli import EXIT_USAGE, main
from tinyhil.device_farm.inventory.hwmap import load_hwmap
from tinyhil.device_farm.leases import BoardLock, Holder, acquire

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
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_discover(FakeHost().build(tmp_path))) == 0
    out = capsys.readouterr().out
    assert out.startswith("found on lab-1: 3 boards\n")
    assert out.count("[[board]]") == 3 and 'kind = "nv"' in out and 'targets = ["KFD+AMD"]' in out


def test_drift_is_printed_and_exits_1_and_usb_boards_are_not_called_missing_when_usb_was_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = FakeHost().build(tmp_path)
    (tmp_path / "map.toml").write_text(MAP)
    assert main(_discover(root, "--hwmap", str(tmp_path / "map.toml"))) == 1
    out = capsys.readouterr().out
    assert "missing (in " in out and "kfd-gone (amd-kfd, pci 0000:c3:00.0)" in out
    assert "changed: kfd-a: gpu_id 1111 in the map, 4660 found" in out
    assert "usb-bridge" not in out  # USB was not searched, so its board is not called missing
    assert out.count("[[board]]") == 2  # the second KFD GPU and the NV GPU are new


def test_json_output_carries_found_boards_notes_and_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = FakeHost().build(tmp_path)
    (tmp_path / "map.toml").write_text(MAP)
    assert main(_discover(root, "--hwmap", str(tmp_path / "map.toml"), "--json")) == 1
    document = json.loads(capsys.readouterr().out)
    assert [b["kind"] for b in document["found"]] == ["amd-kfd", "amd-kfd", "nv"]
    assert document["drift"]["missing"] == ["kfd-gone"]
    assert document["drift"]["changed"] == [{"board": "kfd-a", "differences": [["gpu_id", 1111, 4660]]}]
    assert len(document["drift"]["new"]) == 2


EMULATED_MAP = """
[[board]]
id = "emu-null"
kind = "emulated"
emulated = { target = "NULL", slots = 2 }

[[board]]
id = "emu-usb"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD" }

[[board]]
id = "elsewhere"
kind = "emulated"
emulated = { target = "NULL" }
host = "lab-2"
"""


def test_a_map_of_emulated_boards_lists_this_hosts_as_present_and_probed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "map.toml").write_text(EMULATED_MAP)
    assert main(_discover(tmp_path, "--hwmap", str(tmp_path / "map.toml"))) == 0
    out = capsys.readouterr().out
    assert out.startswith("found on lab-1: 2 boards\n")
    assert "emu-null (target NULL, 2 slots): present, probe passed" in out
    assert "emu-usb (target MOCKUSB+AMD, 1 slot): present, probe passed" in out and "elsewhere" not in out
    assert main(_discover(tmp_path, "--hwmap", str(tmp_path / "map.toml"), "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(b["board"], b["probe"]["ok"]) for b in document["emulated"]] == [("emu-null", True), ("emu-usb", True)]


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
    locks = tmp_path / "locks"
    args = ["farm", "status", "--hwmap", str(tmp_path / "map.toml"), "--state", str(tmp_path / "state"),
            "--lock-dir", str(locks)]  # fmt: skip
    assert main(args) == 0
    assert "emu     emulated    UNKNOWN      free (2 slots)" in capsys.readouterr().out
    with acquire(locks, BoardLock.of(hwmap.board("emu")), Holder.here("run-9", "test_copy", "emu")):
        assert main([*args, "--probe"]) == 0  # the probe takes the other slot: it never overlaps the holder's test
        out = capsys.readouterr().out
    assert "emu     emulated    GOOD         slot 0: pid " in out and "(run run-9) running test_copy" in out
    held = f"  {BoardLock.of(hwmap.board('emu')).lock_key}.0: board emu, pid {os.getpid()}"
    assert "held on this host: 1\n" in out and held in out
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


STATE_COMMANDS = {
    "status": ["farm", "status"],
    "run": ["farm", "run", "--report", "REPORT"],
    "worker": ["farm", "worker", "--scheduler", "tcp://127.0.0.1:9"],
}


@pytest.mark.parametrize("command", sorted(STATE_COMMANDS))
@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("a-file", "a-file: a file, expected a directory for the farm's state"),
        ("a-file/below", "a-file/below: cannot create it (below a file), expected a directory for the farm's state"),
    ],
)
def test_a_state_path_that_is_not_a_directory_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, state: str, expected: str
) -> None:
    (tmp_path / "a-file").write_text("")
    args = [arg.replace("REPORT", str(tmp_path / "report")) for arg in STATE_COMMANDS[command]]
    assert main([*args, "--state", str(tmp_path / state)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"tinyhil farm: --state {tmp_path}/{expected}\n"


def test_the_state_directory_from_the_environment_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("TINYHIL_FARM_STATE", str(tmp_path / "a-file"))
    assert main(["farm", "status"]) == EXIT_USAGE
    expected = f"$TINYHIL_FARM_STATE {tmp_path / 'a-file'}: a file, expected a directory for the farm's state"
    assert capsys.readouterr().err == f"tinyhil farm: {expected}\n"


def test_status_escapes_control_characters_from_health_and_lease_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "map.toml").write_text(STATUS_MAP)
    hwmap = load_hwmap(tmp_path / "map.toml")
    state = tmp_path / "state"
    state.mkdir()
    record = {"state": "BAD", "reason": "probe failed: \x1b]0;owned\x07\x1b[2J\nfake line", "probes_failed": 1}
    (state / "health.json").write_text(json.dumps({"boards": {"emu": record}}))
    args = ["farm", "status", "--hwmap", str(tmp_path / "map.toml"), "--state", str(state), "--lock-dir",
            str(tmp_path / "locks")]  # fmt: skip
    holder = Holder("lab\x1b[31m", 7, "run\r", "test\x9b1m", 1.0, "emu\n")
    with acquire(tmp_path / "locks", BoardLock.of(hwmap.board("emu")), holder):
        assert main(args) == 0
    out = capsys.readouterr().out
    assert not any(char in out for char in "\x1b\x07\r\x9b")
    assert "probe failed: \\x1b]0;owned\\x07\\x1b[2J\\x0afake line" in out
    assert "slot 0: pid 7 on lab\\x1b[31m (run run\\x0d) running test\\x9b1m" in out
    assert "board emu\\x0a, pid 7 on lab\\x1b[31m" in out
    # the header, two lines per board, and the host's one held lease: nothing a file says adds a line
    assert len(out.splitlines()) == 7
