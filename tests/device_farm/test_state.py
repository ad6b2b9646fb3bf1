"""Where the farm keeps its state and its leases: the lock directory is one per host, whatever the state directory,
and a per-user fallback must be private."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyhil.device_farm import state
from tinyhil.device_farm.state import LOCK_DIR_ENV, farm_state_dir, lock_dir
from tinyhil.errors import InvalidArgument


@pytest.fixture
def no_host_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No usable /run/lock/tinyhil, no $TINYHIL_LOCK_DIR: the per-user fallbacks decide."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(state, "HOST_LOCK_DIR", tmp_path / "a-file" / "tinyhil")
    monkeypatch.delenv(LOCK_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    (tmp_path / "runtime").mkdir()
    return tmp_path


def test_the_lock_directory_is_the_option_else_the_environment_whatever_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "env-locks"))
    assert lock_dir(tmp_path / "given") == tmp_path / "given" and (tmp_path / "given").is_dir()
    assert lock_dir() == tmp_path / "env-locks"
    farm_state_dir(str(tmp_path / "state-a"))
    assert not (tmp_path / "state-a" / "leases").exists()  # leases are not the state directory's
    monkeypatch.delenv(LOCK_DIR_ENV)
    monkeypatch.setattr(state, "HOST_LOCK_DIR", tmp_path / "run-lock" / "tinyhil")
    (tmp_path / "run-lock").mkdir()
    assert lock_dir() == tmp_path / "run-lock" / "tinyhil"
    assert (tmp_path / "run-lock" / "tinyhil").stat().st_mode & 0o7777 == 0o1777  # every user's runs meet there


def test_the_per_user_fallback_is_made_private(no_host_dir: Path) -> None:
    made = lock_dir()
    assert made == no_host_dir / "runtime" / "tinyhil-locks" and made.stat().st_mode & 0o777 == 0o700


def test_a_per_user_fallback_others_may_enter_is_refused(no_host_dir: Path) -> None:
    path = no_host_dir / "runtime" / "tinyhil-locks"
    path.mkdir()
    os.chmod(path, 0o755)
    with pytest.raises(InvalidArgument) as raised:
        lock_dir()
    assert str(raised.value) == (f"$XDG_RUNTIME_DIR/tinyhil-locks {path}: owned by uid {os.getuid()} with mode 0o755, "
                                 f"expected a directory of uid {os.getuid()} with mode 0o700 (others could forge its "
                                 "leases)")  # fmt: skip


def test_a_lock_directory_that_is_a_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "a-file"))
    with pytest.raises(
        InvalidArgument, match=r"\$TINYHIL_LOCK_DIR .*a-file: a file, expected a directory for the farm"
    ):
        lock_dir()
