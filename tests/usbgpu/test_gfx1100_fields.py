"""Every register field the gfx1100 model decodes is one the driver writes by name, through the same spec ``Field``.

The model's side is read from its source: each ``FIELD.get(...)`` and each ``value & FIELD.mask`` in
``emulators/amdgpu/gfx1100/*.py`` where ``FIELD`` is a spec :class:`~tinyhil.spec.amdgpu.Field` (a ``.put`` or a
``| FIELD.mask`` / ``& ~FIELD.mask`` is the model writing the field, not reading it). The driver's side is what it
encodes through :meth:`RegFields.encode` while it runs: a cold boot, both SDMA queues and the compute queue, a VM
fault it clears, its close, a partial re-open and its close.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinyhil.amdgpu.errors import QueueStopped
from tinyhil.amdgpu.firmware import GeneratedFirmware
from tinyhil.amdgpu.sdma import sdma_copy_linear
from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.mocks.usb3 import MockUSB3
from tinyhil.spec.amdgpu import SYS_APERTURE, Field, QueueKind, RegFields
from tinyhil.spec.gfx1100_ih import FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES
from tinyhil.spec.gfx1100_regs import GRBM_SOFT_RESET_SOFT_RESET_SDMA0
from tinyhil.usbgpu.gfx1100_gpu import open_usb_gpu

MODEL = Path(importlib.import_module("tinyhil.emulators.amdgpu.gfx1100").__file__ or "").parent
# Fields the model decodes that the driver leaves at their power-on value on purpose, and why.
NOT_WRITTEN = {
    id(GRBM_SOFT_RESET_SOFT_RESET_SDMA0): "the driver stops an SDMA queue through RB_CNTL (section 8), never by a "
    "soft reset of the engine",
    id(FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES): "the driver keeps one fault latched until it clears it (the power-on 0, "
    "as Linux leaves it); it sets only clear_protection_fault_status_addr",
}


def _field(module: Any, node: ast.expr) -> Field | None:
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        return value if isinstance(value, Field) else None
    return None


def model_decodes() -> dict[int, tuple[Field, str]]:
    """id(field) -> (field, where) for every spec Field the model's modules read a register value through."""
    found: dict[int, tuple[Field, str]] = {}
    for path in sorted(MODEL.glob("*.py")):
        module = importlib.import_module(f"tinyhil.emulators.amdgpu.gfx1100.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text())):
            read: list[ast.expr] = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                read.append(node.func.value)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
                read += [side.value for side in (node.left, node.right)
                         if isinstance(side, ast.Attribute) and side.attr == "mask"]  # fmt: skip
            for expr in read:
                field = _field(module, expr)
                if field is not None:
                    found.setdefault(id(field), (field, f"{path.name}:{node.lineno}"))
    return found


@pytest.fixture
def driver_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[int, Field]]:
    """id(field) -> field for every Field the driver encodes while the test runs."""
    written: dict[int, Field] = {}
    encode = RegFields.encode

    def recording(self: RegFields, **values: int) -> int:
        for name in values:
            field = self.field(name)
            written[id(field)] = field
        return encode(self, **values)

    monkeypatch.setattr(RegFields, "encode", recording)
    yield written


def run_the_driver() -> None:
    """A cold boot, every queue, a VM fault, close; then a partial re-open and close."""
    with MockUSB3(vram_bytes=64 << 20) as usb:
        gpu = open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
        sdma = [gpu.create_queue(QueueKind.SDMA, ring_va=0x100000 + 0x10000 * index, ring_bytes=1 << 12,
                                 rptr_va=0x1000 + 0x20 * index, wptr_va=0x1008 + 0x20 * index,
                                 index=index) for index in (0, 1)]  # fmt: skip
        gpu.create_queue(QueueKind.COMPUTE, ring_va=0x140000, ring_bytes=1 << 12, rptr_va=0x1100, wptr_va=0x1108)
        sdma[0].submit(sdma_copy_linear(0x500000, SYS_APERTURE + 0x40_0000, 64))  # no PTE there: a VM fault
        with pytest.raises(QueueStopped, match="protection fault"):
            sdma[0].wait_idle()
        gpu.close()
        again = open_usb_gpu(Asm2464Controller(usb), firmware=GeneratedFirmware())
        assert again.boot.partial
        again.close()


def test_the_model_decodes_fields_of_every_block_it_models() -> None:
    where = {where.split(":")[0] for _, where in model_decodes().values()}
    assert {"gmc.py", "ih.py", "mec_queue.py", "sdma_queue.py", "regfile.py", "front.py", "vm_faults.py"} <= where


def test_every_field_the_model_decodes_is_one_the_driver_writes(driver_writes: dict[int, Field]) -> None:
    run_the_driver()
    decoded = model_decodes()
    missing = {f"{field.name} ({where})" for key, (field, where) in decoded.items()
               if key not in driver_writes and key not in NOT_WRITTEN}  # fmt: skip
    assert not missing, f"the model decodes fields the driver never writes by name: {sorted(missing)}"
    # the exceptions stay honest: each is decoded by the model and not written by the driver
    assert set(NOT_WRITTEN) <= set(decoded)
    assert not set(NOT_WRITTEN) & set(driver_writes)
