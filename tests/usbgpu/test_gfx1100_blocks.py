"""The gfx1100 driver is its IP blocks: the boot runs each block's init in list order, the clocks, each block's
clock gating in the same order, and close runs each fini in reverse, on the cold and on the partial path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.usbgpu import gfx1100
from tinyhil.usbgpu.gfx1100 import GmcBlock, IhBlock, MecBlock, PspBlock, SdmaBlock, SmuBlock, SocBlock
from tinyhil.usbgpu.gfx1100_gpu import open_usb_gpu

BLOCKS = (SocBlock, GmcBlock, IhBlock, PspBlock, SmuBlock, MecBlock, SdmaBlock)
ORDER = ["soc", "gmc", "ih", "psp", "smu", "mec", "sdma"]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``"<block>.<method>"`` for every init / gate_clocks / fini, and ``"smu.clocks"``, in call order."""
    log: list[str] = []

    def recording(cls: type, method: str) -> Callable[..., None]:
        original = getattr(cls, method)

        def call(self: object, *args: object, **kwargs: object) -> None:
            log.append(f"{cls.name}.{method}")  # type: ignore[attr-defined]
            original(self, *args, **kwargs)

        return call

    for cls in BLOCKS:
        for method in ("init", "gate_clocks", "fini"):
            monkeypatch.setattr(cls, method, recording(cls, method))
    monkeypatch.setattr(SmuBlock, "clocks", recording(SmuBlock, "clocks"))
    return log


def _expected_boot() -> list[str]:
    return [f"{name}.init" for name in ORDER] + ["smu.clocks"] + [f"{name}.gate_clocks" for name in ORDER]


def _expected_close() -> list[str]:
    # the SMU's fini sets the clocks to level 0
    return [entry for name in reversed(ORDER) for entry in [f"{name}.fini"] + (["smu.clocks"] * (name == "smu"))]


def test_each_block_lives_in_the_module_named_as_the_model_s_block() -> None:
    package = Path(gfx1100.__file__).parent
    for cls in BLOCKS:
        assert cls.__module__ == f"tinyhil.usbgpu.gfx1100.{cls.name}"
        assert (package / f"{cls.name}.py").is_file()


def test_the_cold_and_the_partial_boot_run_the_block_list_in_order_and_close_in_reverse(calls: list[str]) -> None:
    with MockUSB3(vram_bytes=64 << 20) as usb:
        gpu = open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
        assert [block.name for block in gpu.boot.blocks] == ORDER and not gpu.boot.partial
        assert calls == _expected_boot()
        del calls[:]
        gpu.close()
        assert calls == _expected_close()
        del calls[:]
        again = open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
        assert again.boot.partial and calls == _expected_boot()
        again.close()
