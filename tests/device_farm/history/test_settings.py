"""Where history goes: --history, $TINYHIL_HISTORY, the farm's state directory, $XDG_STATE_HOME, the home default,
and ``none``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyhil.device_farm.history.settings import HISTORY_ENV, HISTORY_NAME, NO_HISTORY, HistorySettings, history_path
from tinyhil.device_farm.state import STATE_ENV
from tinyhil.errors import InvalidArgument


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (HISTORY_ENV, STATE_ENV, "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.fixture(scope="module")
def history_seen_by_a_module_fixture() -> str | None:
    return os.environ.get(HISTORY_ENV)


def test_runs_made_by_module_fixtures_record_no_history(history_seen_by_a_module_fixture: str | None) -> None:
    assert history_seen_by_a_module_fixture == NO_HISTORY


def test_the_order_of_the_sources(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert history_path(None) == clean / "home" / ".local" / "state" / "tinyhil" / HISTORY_NAME
    monkeypatch.setenv("XDG_STATE_HOME", str(clean / "xdg"))
    assert history_path(None) == clean / "xdg" / "tinyhil" / HISTORY_NAME
    monkeypatch.setenv(STATE_ENV, str(clean / "farm"))
    assert history_path(None) == clean / "farm" / HISTORY_NAME
    monkeypatch.setenv(HISTORY_ENV, str(clean / "env.db"))
    assert history_path(None) == clean / "env.db"
    assert history_path(str(clean / "given.db")) == clean / "given.db"
    assert history_path(NO_HISTORY) is None
    monkeypatch.setenv(HISTORY_ENV, NO_HISTORY)
    assert history_path(None) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": None, "last_failed": True}, "--last-failed reads the previous run from history"),
        ({"path": Path("h.db"), "runs": 0}, r"history runs=0 \(--runs\), expected an integer >= 1"),
        ({"path": Path("h.db"), "runs": True}, r"history runs=True \(--runs\), expected an integer >= 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        HistorySettings(**kwargs)  # type: ignore[arg-type]
