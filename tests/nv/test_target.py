"""The NV target: registered with its renderers and options, unavailable with the precise reason here."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

import tinyhil
from tinyhil.cli import main
from tinyhil.errors import InvalidArgument, TargetUnavailable
from tinyhil.nv import CUresult
from tinyhil.nv import target as nv_target
from tinyhil.nv.target import NV_TARGET_CAPABILITIES, nv_unavailable_reason
from tinyhil.registry import default_registry


class DynamicLibNotFoundError(RuntimeError):
    """What cuda.pathfinder raises for a missing driver library (matched by class name)."""


def _bindings(init: Callable[[int], Any], count: int = 1, cuda_version: int = 13000) -> Any:
    """A cuda.bindings.driver-shaped module: cuInit as given, ``count`` GPUs, a driver for ``cuda_version``."""
    return SimpleNamespace(cuInit=init, cuDeviceGetCount=lambda: (CUresult.CUDA_SUCCESS, count),
                           cuDriverGetVersion=lambda: (CUresult.CUDA_SUCCESS, cuda_version))  # fmt: skip


def _missing_driver(flags: int) -> Any:
    raise DynamicLibNotFoundError('"cuda" is an NVIDIA driver library and can only be found via system search.')


NVRTC_OK = SimpleNamespace(nvrtcVersion=lambda: (0, 13, 0))


@pytest.mark.parametrize(
    ("bindings", "reason"),
    [
        (_bindings(_missing_driver), "no NVIDIA driver: libcuda is not installed (DynamicLibNotFoundError: "),
        (_bindings(lambda f: (CUresult.CUDA_ERROR_NO_DEVICE,)), "no NVIDIA GPU: cuInit returned CUDA_ERROR_NO_DEVICE"),
        (_bindings(lambda f: (CUresult.CUDA_SUCCESS,), count=0), "no NVIDIA GPU: cuDeviceGetCount returned 0"),
        (_bindings(lambda f: (CUresult.CUDA_ERROR_INVALID_VALUE,)),
         "the CUDA driver failed to initialise: cuInit returned CUDA_ERROR_INVALID_VALUE (1)"),
    ],
)  # fmt: skip
def test_the_probe_names_what_is_missing(bindings: Any, reason: str) -> None:
    said = nv_unavailable_reason(bindings=bindings, nvrtc=NVRTC_OK)
    assert said is not None and said.startswith(reason)


def test_with_a_gpu_the_probe_asks_nvrtc_last() -> None:
    ready = _bindings(lambda f: (CUresult.CUDA_SUCCESS,))
    assert nv_unavailable_reason(bindings=ready, nvrtc=NVRTC_OK, version="13.5.0") is None
    said = nv_unavailable_reason(bindings=ready, nvrtc=SimpleNamespace(nvrtcVersion=lambda: (6,)), version="13.0.1")
    assert said == "nvrtcVersion returned 6"


def test_a_driver_older_than_the_bindings_cuda_major_is_named() -> None:
    old = _bindings(lambda f: (CUresult.CUDA_SUCCESS,), cuda_version=12040)
    assert nv_unavailable_reason(bindings=old, nvrtc=NVRTC_OK, version="13.5.0") == (
        "the NVIDIA driver supports CUDA 12.4 (cuDriverGetVersion 12040), older than cuda-bindings 13.5.0 is built "
        "for (CUDA 13): install cuda-bindings 12.x and its NVRTC wheel, or a CUDA 13 driver"
    )
    assert nv_unavailable_reason(bindings=old, nvrtc=NVRTC_OK, version="12.9.4") is None


def test_without_the_bindings_the_probe_says_to_install_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed() -> Any:
        raise ModuleNotFoundError("No module named 'cuda'")

    monkeypatch.setattr(nv_target, "load_bindings", not_installed)  # the import itself: nothing to pass in
    assert nv_unavailable_reason() == "cuda-bindings is not installed (pip install 'tinyhil[nv]')"


def test_an_unexpected_runtime_error_is_not_mistaken_for_a_missing_driver() -> None:
    def broken(flags: int) -> Any:
        raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else"):
        nv_unavailable_reason(bindings=_bindings(broken), nvrtc=NVRTC_OK)


def test_tinyhil_targets_lists_nv_with_the_reason_it_cannot_run_here(capsys: pytest.CaptureFixture[str]) -> None:
    reason = nv_unavailable_reason()
    assert main(["targets", "--json"]) == 0
    [row] = [r for r in json.loads(capsys.readouterr().out) if r["target"] == "NV"]
    assert row["available"] is (reason is None) and row["reason"] == reason
    assert main(["targets"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("NV ")]
    assert line.split()[1] == ("available" if reason is None else "unavailable")
    assert reason is None or line.endswith(reason)
    if reason is not None:
        with pytest.raises(TargetUnavailable, match="target NV is unavailable: ") as caught:
            tinyhil.open_target("NV")
        assert caught.value.reason == reason


def test_nv_is_a_hardware_target_with_nvrtc_as_its_renderer() -> None:
    registry = default_registry()
    resolved = registry.resolve("NV")
    assert not resolved.emulated and resolved.renderer == "NVRTC" and registry.resolve("NV:CUDA").renderer == "NVRTC"
    assert sorted(resolved.capabilities) == NV_TARGET_CAPABILITIES and "memory-faults" not in resolved.capabilities
    assert resolved.definition.options == ()


def test_nv_colon_n_names_gpu_n() -> None:
    registry = default_registry()
    second = registry.resolve("NV:1")
    assert second.spec.index == 1 and second.name == "NV:1" and second.renderer == "NVRTC"
    assert registry.resolve("NV:01:NVRTC").name == "NV:1:NVRTC"
    with pytest.raises(InvalidArgument, match="device index must be at most 65535"):
        registry.resolve("NV:70000")
