"""The farm's state directory: what outlives a run on a host (the boards' health record, their leases, the
durations the planner orders work by).

It is ``--state``, else ``$TINYHIL_FARM_STATE``, else ``~/.local/state/tinyhil/farm``; the leases live in its
``leases`` directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from tinyhil.errors import InvalidArgument

__all__ = ["LEASES_DIR_NAME", "STATE_ENV", "farm_state_dir", "leases_dir"]

STATE_ENV: Final = "TINYHIL_FARM_STATE"
LEASES_DIR_NAME: Final = "leases"


def leases_dir(state_dir: Path) -> Path:
    """Where the leases of the farm whose state is in ``state_dir`` live."""
    return state_dir / LEASES_DIR_NAME


def farm_state_dir(given: str | None) -> Path:
    """Where the farm keeps health and leases: ``given``, else ``$TINYHIL_FARM_STATE``, else the user's state dir;
    created with its ``leases`` directory if missing, and checked here, once, for every farm command.

    Raises:
        InvalidArgument: the path (or its ``leases``) is a file, lies below a file, or cannot be created or written:
            one line naming the path and what was expected.
    """
    if given:
        path, source = Path(given), "--state"
    elif os.environ.get(STATE_ENV):
        path, source = Path(os.environ[STATE_ENV]), f"${STATE_ENV}"
    else:
        path, source = Path.home() / ".local" / "state" / "tinyhil" / "farm", "the farm state directory"
    for directory in (path, leases_dir(path)):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise InvalidArgument(f"{source} {directory}: a file, expected a directory for the farm's state") from None
        except OSError as exc:
            why = "below a file" if isinstance(exc, NotADirectoryError) else exc.strerror or str(exc)
            raise InvalidArgument(f"{source} {directory}: cannot create it ({why}), expected a directory for "
                                  "the farm's state") from None  # fmt: skip
        if not os.access(directory, os.W_OK | os.X_OK):
            raise InvalidArgument(f"{source} {directory}: not writable, expected a directory the farm can write")
    return path
