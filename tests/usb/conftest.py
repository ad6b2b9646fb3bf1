"""Fixtures of the USB tests: the scripted usb1 stand-in (``support.scripted_usb``) and transports built on it."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from support import scripted_usb
from support.scripted_usb import ScriptedContext, ScriptedHandle

from tinyhil.usb import Usb3Transport


@pytest.fixture
def usb_fake() -> ModuleType:
    """The scripted usb1 stand-in module (``ScriptedHandle``, ``ScriptedContext``, ``Call``, ``replies``...)."""
    return scripted_usb


@pytest.fixture
def handle() -> ScriptedHandle:
    """A scripted handle that accepts every OUT and answers every IN with zeros."""
    return ScriptedHandle()


@pytest.fixture
def transport(handle: ScriptedHandle) -> Iterator[Usb3Transport]:
    """A transport over ``handle`` whose event pump completes everything pending at each pump."""
    with Usb3Transport(handle, ScriptedContext(handle)) as opened:
        yield opened
