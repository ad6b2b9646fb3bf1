"""Where the farm keeps what outlives a run: the state directory (the boards' health record and its journal, the
durations the planner orders work by) and the host-wide lock directory (the boards' leases).

The state directory is ``--state``, else ``$TINYHIL_FARM_STATE``, else ``~/.local/state/tinyhil/farm``.

The lock directory is one per host, whatever the state directory, so every process on the host that can reach a
board finds its lease (docs/farm.md, "Leases"): ``$TINYHIL_LOCK_DIR`` when set, else ``/run/lock/tinyhil`` when
it can be used (made sticky and world-writable, as ``/run/lock`` is, so every user's runs meet there), else
``$XDG_RUNTIME_DIR/tinyhil-locks``, else ``/tmp/tinyhil-locks-<uid>``; a per-user fallback must belong to this user
and be closed to others (mode 0700), or it is refused.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["HOST_LOCK_DIR", "LOCK_DIR_ENV", "STATE_ENV", "farm_state_dir", "lock_dir"]

STATE_ENV: Final = "TINYHIL_FARM_STATE"
LOCK_DIR_ENV: Final = "TINYHIL_LOCK_DIR"
HOST_LOCK_DIR: Final = Path("/run/lock/tinyhil")
_SHARED_MODE: Final = 0o1777  # like /run/lock: anyone may add a lock, only its owner removes it
_PRIVATE_MODE: Final = 0o700
_GROUP_OTHER_BITS: Final = 0o077


def _make_directory(path: Path, source: str, why: str) -> None:
    """Create ``path`` (and its parents) if missing, and check it is a directory this process can write.

    Raises:
        InvalidArgument: one line naming ``source``, the path and what was expected.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InvalidArgument(f"{source} {path}: a file, expected a directory for {why}") from None
    except OSError as exc:
        reason = "below a file" if isinstance(exc, NotADirectoryError) else exc.strerror or str(exc)
        raise InvalidArgument(f"{source} {path}: cannot create it ({reason}), expected a directory for {why}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{source} {path}: not writable, expected a directory for {why}")


def farm_state_dir(given: str | None) -> Path:
    """Where the farm keeps health and durations: ``given``, else ``$TINYHIL_FARM_STATE``, else the user's state dir;
    created if missing, and checked here, once, for every farm command.

    Raises:
        InvalidArgument: the path is a file, lies below a file, or cannot be created or written: one line naming the
            path and what was expected.
    """
    if given:
        path, source = Path(given), "--state"
    elif os.environ.get(STATE_ENV):
        path, source = Path(os.environ[STATE_ENV]), f"${STATE_ENV}"
    else:
        path, source = Path.home() / ".local" / "state" / "tinyhil" / "farm", "the farm state directory"
    _make_directory(path, source, "the farm's state")
    return path


def _shared_usable(path: Path) -> bool:
    """Whether the host-wide directory can be used: it exists (or can be made) and this process may write it."""
    try:
        if not path.exists():
            path.mkdir(mode=_SHARED_MODE)
            os.chmod(path, _SHARED_MODE)  # mkdir's mode passes through the umask
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _private(path: Path, source: str) -> Path:
    """A per-user lock directory: made 0700 if missing; refused when another user owns it or others may enter it.

    Raises:
        InvalidArgument: naming the path, its owner and mode, and what was expected.
    """
    if not path.exists():
        try:
            with contextlib.suppress(FileExistsError):  # made meanwhile: checked below like any other
                path.mkdir(mode=_PRIVATE_MODE)
        except OSError as exc:
            raise InvalidArgument(f"{source} {path}: cannot create it ({exc.strerror or exc}), expected a directory "
                                  "for the farm's board leases") from None  # fmt: skip
    _make_directory(path, source, "the farm's board leases")
    info = path.lstat()
    if info.st_uid != os.getuid() or info.st_mode & _GROUP_OTHER_BITS or not stat.S_ISDIR(info.st_mode):
        mode = stat.S_IMODE(info.st_mode)
        expected = f"expected a directory of uid {os.getuid()} with mode 0o700 (others could forge its leases)"
        raise InvalidArgument(f"{source} {path}: owned by uid {info.st_uid} with mode {mode:#o}, {expected}")
    return path


def lock_dir(given: str | Path | None = None) -> Path:
    """The host-wide directory of the boards' leases: ``given`` (an option), else ``$TINYHIL_LOCK_DIR``, else
    :data:`HOST_LOCK_DIR` when usable, else a per-user directory (module docstring).

    Raises:
        InvalidArgument: a given directory that cannot be made or written, or a per-user one that is not private.
    """
    if given:
        path = Path(given)
        _make_directory(path, "--lock-dir", "the farm's board leases")
        return path
    if os.environ.get(LOCK_DIR_ENV):
        path = Path(os.environ[LOCK_DIR_ENV])
        _make_directory(path, f"${LOCK_DIR_ENV}", "the farm's board leases")
        return path
    if _shared_usable(HOST_LOCK_DIR):
        return HOST_LOCK_DIR
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return _private(Path(runtime) / "tinyhil-locks", "$XDG_RUNTIME_DIR/tinyhil-locks")
    return _private(Path(f"/tmp/tinyhil-locks-{os.getuid()}"), "the per-user lock directory")
