"""Fixtures of the ASM2464 client tests: a scripted USB handle answered by a minimal fake bridge (both loaded by
path: test folders are not packages)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tinyhil.asm2464 import Asm2464Controller
from tinyhil.usb import Usb3Transport


def _load(name: str, path: Path) -> ModuleType:
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


SCRIPTED = _load("_tinyhil_tests_scripted_usb", Path(__file__).parents[1] / "usb" / "scripted_usb.py")
FAKE_BRIDGE = _load("_tinyhil_tests_fake_bridge", Path(__file__).with_name("fake_bridge.py"))


@pytest.fixture
def usb_fake() -> ModuleType:
    return SCRIPTED


@pytest.fixture
def bridge_fake() -> ModuleType:
    return FAKE_BRIDGE


@pytest.fixture
def bridge() -> object:
    """The fake device state (XDATA, SRAM, PCIe config model, memory regions, fault scripts)."""
    return FAKE_BRIDGE.FakeBridge()


@pytest.fixture
def handle(bridge: object) -> object:
    """A scripted handle answered by ``bridge``; ``handle.calls`` records the wire traffic."""
    return SCRIPTED.ScriptedHandle(bridge)


@pytest.fixture
def controller(handle: object) -> Iterator[Asm2464Controller]:
    """A controller over a real Usb3Transport over the scripted handle (retry pauses of 0 s)."""
    with Usb3Transport(handle, SCRIPTED.ScriptedContext(handle)) as transport:
        yield Asm2464Controller(transport, retry_delay_s=0)
