"""Fixtures of the copyin/copyout tests. Test folders are not packages: ``boards.py`` is loaded by path here, before
pytest imports the test modules, and they import it as ``_usbgpu_boards``."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


def _load(name: str, path: Path) -> ModuleType:
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


BOARDS = _load("_usbgpu_boards", Path(__file__).with_name("boards.py"))


@pytest.fixture
def board_factory() -> Callable[..., object]:
    """``board_factory(mode, quirks=..., seed=..., faults=..., ring_bytes=...)``: a fresh board. Use it as a context
    manager (``with board_factory() as board:``) to close it; hypothesis examples do, so boards do not pile up."""
    return BOARDS.make_board  # type: ignore[no-any-return]
