"""Health probes, one per board kind; an emulated board runs the probe of the real kind it emulates.

- ``usb-bridge`` (and emulated ``MOCKUSB+*``): power PCIe on, the LTSSM byte reads L0 (``0x78``), and a 512-byte
  SRAM round trip, written through the 0xF2 engine and read back through the XDATA window.
- ``amd-kfd`` (and emulated ``MOCKKFD+*``): open the KFD device runtime (which checks the KFD interface version
  and reads the topology), the opened GPU is the board's, and an SDMA fill of 64 KB reads back.
- ``nv``: NVML answers a query by UUID or PCI bus id, with no uncorrected volatile ECC errors and no page
  retirement pending.
- other emulated targets: open the target, allocate and free a buffer.
- ``served``: the probe of the board it presents (``usb-bridge`` or ``amd-kfd``), run under ``tinyhil serve``
  (:mod:`~tinyhil.device_farm.health.served_probe`).

A probe never raises: any failure, a typed error or not, is a failed :class:`ProbeResult` naming what broke.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.device_farm.health.states import ProbeResult
from tinyhil.device_farm.inventory.board_options import target_options
from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, EmulatedLocator, KfdLocator, NvLocator, UsbLocator
from tinyhil.device_farm.inventory.served_boards import ServedLocator
from tinyhil.registry import TargetRegistry, default_registry
from tinyhil.spec.asm2464 import LTSSM_L0, Xdata

__all__ = ["PROBE_FILL_BYTES", "PROBE_SRAM_BYTES", "probe_board", "probe_bridge"]

PROBE_SRAM_BYTES: Final = 512  # one 0xF2 sector; the XDATA window at 0x8000 shows SRAM from its start
PROBE_FILL_BYTES: Final = 64 << 10
_FILL_VALUE: Final = 0xA5
_KFD_FIRMWARE: Final = ("fw_version", "sdma_fw_version")  # a KFD topology node's microcode versions
_LANDING_POLLS: Final = 50  # 0xF2 writes have no completion: the read-back polls, 1 ms apart, this many times


def _failure(what: str, exc: BaseException) -> ProbeResult:
    return ProbeResult(False, f"{what}: {type(exc).__name__}: {exc}")


def probe_bridge(transport: Any) -> ProbeResult:
    """The bridge probe over any bridge transport (``Usb3Transport`` on a board, ``MockUSB3`` emulated)."""
    try:
        controller = Asm2464Controller(transport)
        controller.set_pcie_power(True)
        controller.wait_pcie_link(timeout_s=1.0)
        link = controller.pcie_link_state()
        if link != LTSSM_L0:
            return ProbeResult(False, f"PCIe link down: LTSSM {link:#04x}, expected {LTSSM_L0:#04x} (L0)")
        pattern = os.urandom(PROBE_SRAM_BYTES)
        controller.scsi_write(pattern)
        for _ in range(_LANDING_POLLS):
            back = controller.xdata_read(Xdata.SRAM_WINDOW, PROBE_SRAM_BYTES)
            if back == pattern:
                return ProbeResult(True, f"link L0, SRAM round trip of {PROBE_SRAM_BYTES} bytes")
            transport.pause(0.001)
        first = next(i for i, (a, b) in enumerate(zip(back, pattern, strict=True)) if a != b)
        return ProbeResult(
            False, f"SRAM round trip: byte {first} reads {back[first]:#04x}, wrote {pattern[first]:#04x}"
        )
    except Exception as exc:  # a probe reports, it never raises
        return _failure("bridge probe", exc)


def _probe_device(
    registry: TargetRegistry, target: str, options: Mapping[str, Any], gpu: KfdLocator | None
) -> ProbeResult:
    try:
        with registry.resolve(target).open(**options) as device:
            node = getattr(device, "node", None)
            if gpu is not None and gpu.gpu_id is not None and node is not None and node.gpu_id != gpu.gpu_id:
                return ProbeResult(False, f"{target} opened GPU gpu_id {node.gpu_id}, the map says {gpu.gpu_id}")
            if "fill" not in device.capabilities or "copyout" not in device.capabilities:
                buffer = device.alloc(4096)
                device.free(buffer)
                return ProbeResult(True, f"{target} opened, a buffer allocated and freed")
            buffer = device.alloc(PROBE_FILL_BYTES)
            device.fill(buffer, _FILL_VALUE)
            back = device.copyout(buffer)
            device.free(buffer)
            if back.count(_FILL_VALUE) != PROBE_FILL_BYTES:
                wrong = next(i for i, b in enumerate(back) if b != _FILL_VALUE)
                return ProbeResult(False, f"{target}: SDMA fill read back {back[wrong]:#04x} at byte {wrong}")
            version = getattr(getattr(device, "kfd", None), "version", None)
            said = f"KFD {version[0]}.{version[1]}, " if version else ""
            return ProbeResult(True, f"{target} opened, {said}SDMA fill of {PROBE_FILL_BYTES} bytes read back",
                               _kfd_versions(version, node))  # fmt: skip
    except Exception as exc:  # a probe reports, it never raises
        return _failure(f"{target} probe", exc)


def _kfd_versions(version: tuple[int, int] | None, node: Any) -> dict[str, str]:
    """What a KFD GPU says of its versions: the amdkfd interface it speaks (``driver``) and the microcode versions
    its topology node reports (``fw_version``, ``sdma_fw_version``: ``firmware``), each where it says it."""
    properties = getattr(node, "properties", None) or {}
    firmware = ", ".join(f"{name} {properties[name]}" for name in _KFD_FIRMWARE if name in properties)
    found = {"driver": f"amdkfd ioctl {version[0]}.{version[1]}" if version else "", "firmware": firmware}
    return {name: text for name, text in found.items() if text}


_NVML_UNCORRECTED: Final = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_NVML_VOLATILE_ECC: Final = 0  # NVML_VOLATILE_ECC


def _probe_nv(locator: NvLocator, nvml: Any) -> ProbeResult:
    try:
        nvml = importlib.import_module("pynvml") if nvml is None else nvml
        nvml.nvmlInit()
    except Exception as exc:
        return _failure("NVML", exc)
    try:
        if locator.uuid is not None:
            handle = nvml.nvmlDeviceGetHandleByUUID(locator.uuid)
        else:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(locator.pci_bus_id)
        name = nvml.nvmlDeviceGetName(handle)
        said = [name.decode() if isinstance(name, bytes) else str(name)]
        checks: list[tuple[str, Callable[[], Any]]] = [
            (
                "uncorrected ECC errors",
                lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, _NVML_UNCORRECTED, _NVML_VOLATILE_ECC),
            ),
            ("pages pending retirement", lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)),
        ]
        for what, query in checks:
            try:
                count = int(query())
            except Exception as exc:
                if type(exc).__name__ == "NVMLError_NotSupported":
                    said.append(f"{what}: not supported")
                    continue
                raise
            if count:
                return ProbeResult(False, f"{said[0]}: {count} {what}")
            said.append(f"no {what}")
        return ProbeResult(True, ", ".join(said), _nv_versions(nvml, handle))
    except Exception as exc:  # a probe reports, it never raises
        return _failure("NVML query", exc)
    finally:
        nvml.nvmlShutdown()


def _nv_versions(nvml: Any, handle: Any) -> dict[str, str]:
    """The NVIDIA driver's version and the board's VBIOS version, each where NVML answers."""
    found: dict[str, str] = {}
    queries: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("driver", lambda: nvml.nvmlSystemGetDriverVersion()),
        ("firmware", lambda: nvml.nvmlDeviceGetVbiosVersion(handle)),
    )
    for name, query in queries:
        try:
            text = query()
        except Exception:  # an NVML that cannot say: the version is left out, the probe's verdict stands
            continue
        found[name] = text.decode() if isinstance(text, bytes) else str(text)
    return found


def _open_bridge(board: Board, usb_context: Any) -> Any:
    from tinyhil.usb.backend import open_usb3

    assert isinstance(board.locator, UsbLocator)
    return open_usb3(board.locator.serial, context=usb_context)


def probe_board(
    board: Board,
    *,
    options: Mapping[str, Any] | None = None,
    registry: TargetRegistry | None = None,
    usb_context: Any = None,
    nvml: Any = None,
) -> ProbeResult:
    """Probe ``board``; ``options`` are the target options an emulated board opens with (a fault plan, a seed),
    by default those of its map entry."""
    registry = default_registry() if registry is None else registry
    locator = board.locator
    try:
        if options is None and isinstance(locator, EmulatedLocator):
            options = target_options(locator.target, locator.options, registry)
        options = dict(options or {})
        if isinstance(locator, EmulatedLocator):
            base = registry.resolve(locator.target).definition.name
            if base.startswith("MOCKUSB"):
                from tinyhil.mocks.targets import open_mock_usb3

                # The bridge probe opens the bridge alone: the options of the fresh board (MockUsbOptions.board()),
                # not those of the GPU bring-up above it (firmware), the copyin protocol (revision) or a recording.
                board_options = registry.resolve(locator.target).build_options(options).board()
                with open_mock_usb3(locator.target, **board_options) as usb:
                    return probe_bridge(usb)
            return _probe_device(registry, locator.target, options, None)
        if isinstance(locator, ServedLocator):
            from tinyhil.device_farm.health.served_probe import probe_served

            return probe_served(board)
        if board.kind is BoardKind.USB_BRIDGE:
            with _open_bridge(board, usb_context) as transport:
                return probe_bridge(transport)
        if isinstance(locator, KfdLocator):
            return _probe_device(registry, board.targets[0], options, locator)
        assert isinstance(locator, NvLocator)
        return _probe_nv(locator, nvml)
    except Exception as exc:  # opening failed: the board is absent, busy or broken
        return _failure(f"{board.id}: open", exc)
