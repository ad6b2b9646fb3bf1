"""NV boards in the farm: discovery (through NVML) gives boards that serve the NV target with its capabilities,
and their health probe asks NVML."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import ProbeResult
from tinyhil.device_farm.inventory.discovery import discover_nv
from tinyhil.device_farm.inventory.hwmap import BoardKind, NvLocator, parse_hwmap, target_inventory
from tinyhil.device_farm.inventory.map_drift import map_entry
from tinyhil.registry import default_registry

UUID = "GPU-5f2c7a10-0000-4000-8000-000000000001"


def _nvml() -> Any:
    """A pynvml-shaped module (passed in, not patched) with one healthy H200."""
    return SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda index: ("handle", index),
        nvmlDeviceGetHandleByUUID=lambda uuid: ("handle", uuid),
        nvmlDeviceGetUUID=lambda handle: UUID,
        nvmlDeviceGetName=lambda handle: b"NVIDIA H200",
        nvmlDeviceGetPciInfo=lambda handle: SimpleNamespace(busId=b"00000000:41:00.0"),
        nvmlDeviceGetTotalEccErrors=lambda handle, kind, counter: 0,
        nvmlDeviceGetRetiredPagesPendingStatus=lambda handle: 0,
    )


def test_a_discovered_nv_gpu_becomes_a_board_serving_nv_with_its_capabilities(tmp_path: Path) -> None:
    [found], notes = discover_nv(tmp_path, nvml=_nvml())
    assert notes == () and found.locator == NvLocator(pci_bus_id="0000:41:00.0", uuid=UUID)
    [board] = parse_hwmap(map_entry(found)).boards
    assert board.kind is BoardKind.NV and board.targets == ("NV",)
    assert board.capabilities == default_registry().resolve("NV").capabilities
    assert probe_board(board, nvml=_nvml()) == ProbeResult(
        True, "NVIDIA H200, no uncorrected ECC errors, no pages pending retirement"
    )


def test_targets_and_capabilities_a_map_gives_an_nv_board_win_over_the_default() -> None:
    text = '[[board]]\nid = "nv-0"\nkind = "nv"\nnv = { uuid = "GPU-1" }\ncapabilities = ["copyin"]\n'
    [board] = parse_hwmap(text).boards
    assert board.targets == ("NV",) and board.capabilities == {"copyin"}


def test_a_farm_run_without_a_map_puts_the_nv_target_on_an_nv_board() -> None:
    [board] = target_inventory([default_registry().resolve("NV")]).boards
    assert board.kind is BoardKind.NV and board.targets == ("NV",)


def test_the_probe_reads_the_driver_and_vbios_versions_where_nvml_answers() -> None:
    [board] = parse_hwmap(f'[[board]]\nid = "nv-0"\nkind = "nv"\nnv = {{ uuid = "{UUID}" }}\n').boards
    nvml = _nvml()
    nvml.nvmlSystemGetDriverVersion = lambda: b"570.86.15"
    nvml.nvmlDeviceGetVbiosVersion = lambda handle: "96.00.AF.00.01"
    result = probe_board(board, nvml=nvml)
    assert result.ok and result.versions == {"driver": "570.86.15", "firmware": "96.00.AF.00.01"}
    assert probe_board(board, nvml=_nvml()).versions == {}  # an NVML that cannot say leaves them out
