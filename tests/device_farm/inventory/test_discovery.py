"""Discovery on fake host trees (a bridge on an emulated USB bus, two KFD GPUs, an NV GPU) and drift against a map."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.hosts import FakeHost

from tinyhil.device_farm.inventory.discovery import (
    Discovery,
    FoundBoard,
    discover,
    discover_kfd,
    discover_nv,
    discover_usb,
)
from tinyhil.device_farm.inventory.hwmap import BoardKind, KfdLocator, NvLocator, UsbLocator, parse_hwmap
from tinyhil.device_farm.inventory.map_drift import compare, map_entry
from tinyhil.emulators.asm2464 import Asm2464
from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.usb.context import EmulatedUsbContext

HOST = "lab-1"


def test_discovery_on_a_fake_host_finds_a_bridge_two_kfd_gpus_and_an_nv_gpu(
    tmp_path: Path, fake_host: FakeHost
) -> None:
    root = fake_host.build(tmp_path)
    found = discover(root, usb_context=EmulatedUsbContext(Asm2464(serial="BRIDGE7")))
    assert found.notes == ()
    kinds = [board.kind for board in found.boards]
    assert kinds == [BoardKind.USB_BRIDGE, BoardKind.AMD_KFD, BoardKind.AMD_KFD, BoardKind.NV]
    bridge, first, second, nv = found.boards
    assert bridge.locator == UsbLocator("add1:0001", serial="BRIDGE7", port="2-1")
    assert first.locator == KfdLocator(gpu_id=4660, unique_id=11, pci="0000:03:00.0")
    assert second.locator == KfdLocator(gpu_id=8738, unique_id=22, pci="0000:83:00.0")
    assert "gfx1100" in first.description
    assert (
        nv.locator == NvLocator(pci_bus_id=FakeHost.nv_pci, uuid=FakeHost.nv_uuid) and nv.description == "NVIDIA H200"
    )


def test_usb_discovery_lists_only_bridges_with_their_port_paths() -> None:
    kernel = EventKernel()
    other = Asm2464(serial="B", vendor_id=0x1234, kernel=kernel)
    boards, notes = discover_usb(EmulatedUsbContext(Asm2464(serial="A", kernel=kernel), other))
    assert notes == ()
    assert [b.locator for b in boards] == [UsbLocator("add1:0001", "A", "2-1")]


def test_an_empty_host_says_which_sources_had_nothing(tmp_path: Path) -> None:
    found = discover(tmp_path, usb=False)
    assert found.boards == ()
    assert [note.split(":")[0] for note in found.notes] == ["kfd"]
    assert "amdkfd not loaded" in found.notes[0]


def test_sysfs_alone_still_finds_an_nv_gpu_by_its_pci_vendor(tmp_path: Path, fake_host: FakeHost) -> None:
    root = fake_host.build(tmp_path)
    (root / "proc/driver/nvidia/gpus" / FakeHost.nv_pci / "information").unlink()
    boards, _ = discover_nv(root)
    assert [b.locator for b in boards] == [NvLocator(pci_bus_id=FakeHost.nv_pci)]
    assert boards[0].source == "sysfs"


class _NvmlError(Exception):
    pass


def _fake_nvml(error: str | None = None) -> Any:
    """A pynvml-shaped module with one H200, or one whose nvmlInit raises the named NVMLError subclass."""
    errors = {name: type(name, (_NvmlError,), {}) for name in ("NVMLError_LibraryNotFound", "NVMLError_Unknown")}

    def init() -> None:
        if error is not None:
            raise errors[error]("NVML says no")

    return SimpleNamespace(
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda index: ("handle", index),
        nvmlDeviceGetUUID=lambda handle: FakeHost.nv_uuid,
        nvmlDeviceGetName=lambda handle: b"NVIDIA H200",
        nvmlDeviceGetPciInfo=lambda handle: SimpleNamespace(busId=b"00000000:41:00.0"),
    )


def test_nvml_reports_its_gpus_with_uuid_and_bus_id(tmp_path: Path) -> None:
    boards, notes = discover_nv(tmp_path, nvml=_fake_nvml())
    assert notes == ()
    assert [(b.locator, b.source, b.description) for b in boards] == [
        (NvLocator(pci_bus_id=FakeHost.nv_pci, uuid=FakeHost.nv_uuid), "nvml", "NVIDIA H200")
    ]


@pytest.mark.parametrize(
    ("error", "said"),
    [
        ("NVMLError_LibraryNotFound", "no usable NVIDIA GPU here: the NVIDIA driver library is not installed"),
        ("NVMLError_Unknown", "failed: NVML says no"),
    ],
)
def test_nvml_without_a_driver_is_said_and_procfs_is_read_instead(
    tmp_path: Path, fake_host: FakeHost, error: str, said: str
) -> None:
    boards, notes = discover_nv(fake_host.build(tmp_path), nvml=_fake_nvml(error))
    assert [b.source for b in boards] == ["procfs"]
    assert notes == (f"nv: NVML {said} ({error}); read procfs/sysfs",)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="needs nvidia-ml-py (pip install nvidia-ml-py)")
def test_the_real_nvml_on_a_machine_without_an_nvidia_driver_says_so(tmp_path: Path) -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    boards, notes = discover_nv(tmp_path, nvml=pynvml)
    assert boards == ()
    assert len(notes) == 1 and notes[0].startswith("nv: NVML no usable NVIDIA GPU here: ")


def test_kfd_discovery_reads_a_mock_kfd_topology_too(tmp_path: Path, fake_host: FakeHost) -> None:
    boards, notes = discover_kfd(fake_host.build(tmp_path))
    assert notes == () and len(boards) == 2


MAP = f"""
[[board]]
id = "bridge"
kind = "usb-bridge"
usb = {{ vid_pid = "add1:0001", serial = "BRIDGE7" }}
targets = ["USB+AMD"]
host = "{HOST}"

[[board]]
id = "kfd-a"
kind = "amd-kfd"
kfd = {{ pci = "0000:03:00.0", gpu_id = 1111 }}
targets = ["KFD+AMD"]
host = "{HOST}"

[[board]]
id = "kfd-gone"
kind = "amd-kfd"
kfd = {{ pci = "0000:c3:00.0" }}
targets = ["KFD+AMD"]
host = "{HOST}"

[[board]]
id = "elsewhere"
kind = "amd-kfd"
kfd = {{ gpu_id = 9 }}
targets = ["KFD+AMD"]
host = "lab-2"

[[board]]
id = "emu"
kind = "emulated"
emulated = {{ target = "MOCKUSB+AMD" }}
"""


def test_drift_reports_missing_new_and_changed_boards_without_guessing(tmp_path: Path, fake_host: FakeHost) -> None:
    found = discover(fake_host.build(tmp_path), usb_context=EmulatedUsbContext(Asm2464(serial="BRIDGE7")))
    drift = compare(parse_hwmap(MAP), found, HOST)
    assert [b.id for b in drift.missing] == ["kfd-gone"]  # lab-2's board and the emulated one are not looked for
    assert [str(c) for c in drift.changed] == ["kfd-a: gpu_id 1111 in the map, 4660 found"]
    assert [b.locator for b in drift.new] == [found.boards[2].locator, found.boards[3].locator]
    assert drift


def test_a_map_that_matches_the_host_has_no_drift(tmp_path: Path, fake_host: FakeHost) -> None:
    found = discover(fake_host.build(tmp_path), usb_context=EmulatedUsbContext(Asm2464(serial="BRIDGE7")))
    entries = "\n".join(map_entry(board) for board in found.boards)
    drift = compare(parse_hwmap(entries, host=HOST), found, HOST)
    assert not drift and drift.missing == drift.new == drift.changed == ()


def test_map_entries_for_new_boards_load_back_as_the_same_locators(tmp_path: Path, fake_host: FakeHost) -> None:
    found = discover(fake_host.build(tmp_path), usb_context=EmulatedUsbContext(Asm2464(serial="BRIDGE7")))
    text = "\n".join(map_entry(board) for board in found.boards)
    hwmap = parse_hwmap(text)
    assert [b.locator for b in hwmap.boards] == [f.locator for f in found.boards]
    assert [b.id for b in hwmap.boards] == ["bridge-bridge7", "kfd-0000-03-00-0", "kfd-0000-83-00-0", "nv-5f2c7a10"]
    assert hwmap.boards[0].targets == ("USB+AMD",) and hwmap.boards[3].targets == ("NV",)  # NV: by default


def test_a_found_board_records_its_source() -> None:
    board = FoundBoard(BoardKind.NV, NvLocator(pci_bus_id=FakeHost.nv_pci), "x", "sysfs")
    assert Discovery((board,)).boards[0].source == "sysfs"
