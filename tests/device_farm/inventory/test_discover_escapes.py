"""What discovery reads from a host (procfs, sysfs, USB descriptors) may hold control characters: ``farm discover``
prints it escaped, and the ``[[board]]`` entry it suggests is valid TOML whose values read back as what was found and
whose id is a valid board id."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Final

import pytest
from support.hosts import FakeHost
from support.scripts import TINYHIL

from tinyhil.device_farm.inventory.discovery import discover
from tinyhil.device_farm.inventory.hwmap import NvLocator, board_id_from, parse_hwmap
from tinyhil.device_farm.inventory.map_drift import map_entry

_HOSTILE_UUID: Final = 'GPU-\x1b]0;PWNED\x07\x1b[2J"\\\n\x9b\u202e'
_RAW: Final = (*(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))), "\u202e")


@pytest.fixture
def hostile_host(tmp_path: Path) -> Path:
    root = FakeHost().build(tmp_path / "host")
    info = root / "proc/driver/nvidia/gpus" / FakeHost.nv_pci / "information"
    # the UUID's newline would end its line in the file: the ESC-laden model and UUID each stay on their own line
    uuid = _HOSTILE_UUID.replace("\n", "")
    info.write_text(f"Model: \t NVIDIA \x1b[31mH200\x1b]0;t\x07\x9b\nGPU UUID: \t {uuid}\nBus Location: \t "
                    f"{FakeHost.nv_pci}\n")  # fmt: skip
    return root


def test_the_suggested_entry_is_valid_toml_that_reads_back_what_was_found(hostile_host: Path) -> None:
    (found,) = [b for b in discover(hostile_host, usb=False).boards if isinstance(b.locator, NvLocator)]
    assert found.locator.uuid is not None and "\x1b" in found.locator.uuid
    text = map_entry(found)
    assert not any(c in text.replace("\n", "") for c in _RAW), repr(text)
    (board,) = tomllib.loads(text)["board"]
    assert board["nv"]["uuid"] == found.locator.uuid
    parse_hwmap(text)  # the id is a valid board id, the entry a valid map


@pytest.mark.parametrize("text", ["bridge-\x1b[2j", "..\u202e", "", "x" * 200, "GPU-\ud800", "bridge-ok.1_2"])
def test_board_id_from_always_gives_a_valid_board_id(text: str) -> None:
    made = board_id_from(text)
    parse_hwmap(f'[[board]]\nid = "{made}"\nkind = "nv"\nnv = {{ pci_bus_id = "0000:01:00.0" }}\n')
    if text == "bridge-ok.1_2":
        assert made == text


def test_farm_discover_prints_what_it_found_escaped(hostile_host: Path) -> None:
    done = subprocess.run([str(TINYHIL), "farm", "discover", "--root", str(hostile_host), "--no-usb"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout.replace("\n", "") for c in _RAW), repr(done.stdout)
    assert "\\x1b[31mH200" in done.stdout and "GPU-\\x1b]0;PWNED" in done.stdout
