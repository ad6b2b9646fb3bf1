"""Fixtures of the copyin/copyout tests (the boards themselves are ``support.boards``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.boards import Board, make_board


@pytest.fixture
def board_factory() -> Callable[..., Board]:
    """``board_factory(mode, quirks=..., seed=..., faults=..., ring_bytes=...)``: a fresh board. Use it as a context
    manager (``with board_factory() as board:``) to close it; hypothesis examples do, so boards do not pile up."""
    return make_board
