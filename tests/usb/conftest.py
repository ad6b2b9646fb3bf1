"""Fixtures of the USB tests: the scripted usb1 stand-in (``scripted_usb.py``, loaded by path: test folders are not
packages) and transports built on it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tinyhil.usb import Usb3Transport


def load_support(name: str, path: Path) -> ModuleType:
    """Import a test-support module by path, once per process."""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


SCRIPTED = load_support("_tinyhil_tests_scripted_usb", Path(__file__).with_name("scripted_usb.py"))


@pytest.fixture
def usb_fake() -> ModuleType:
    """The scripted usb1 stand-in module (``ScriptedHandle``, ``ScriptedContext``, ``Call``, ``replies``...)."""
    return SCRIPTED


@pytest.fixture
def handle() -> object:
    """A scripted handle that accepts every OUT and answers every IN with zeros."""
    return SCRIPTED.ScriptedHandle()


@pytest.fixture
def transport(handle: object) -> Iterator[Usb3Transport]:
    """A transport over ``handle`` whose event pump completes everything pending at each pump."""
    with Usb3Transport(handle, SCRIPTED.ScriptedContext(handle)) as opened:
        yield opened
