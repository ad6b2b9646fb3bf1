"""Board leases: one test process per board at a time, backed by ``flock`` so a dead holder never leaks a board.

A lease is an exclusive ``fcntl.flock`` on ``<lease dir>/<board>.<slot>.lock`` (a real board has one slot; an
emulated one as many as its map entry allows). The kernel drops the lock when the holder's file descriptor closes,
including when the holder is killed, so the next taker gets the board at once. Who holds it (host, pid, run id,
test, since when) is written to ``<board>.<slot>.holder`` beside it; a holder file whose lock is free is stale and
is reported as free.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

from tinyhil._files import write_atomically
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped

__all__ = [
    "DEFAULT_LEASE_TIMEOUT_S",
    "Holder",
    "Leasable",
    "Lease",
    "LeaseTimeout",
    "acquire",
    "holders",
    "read_holder",
]

DEFAULT_POLL_S: Final = 0.05
DEFAULT_LEASE_TIMEOUT_S: Final = 60.0  # how long a shard waits for its board's lease
_HOLDER_FIELDS: Final = ("host", "pid", "run_id", "test", "since")


class Leasable(Protocol):
    """What a lease needs of a board: its id (it names the lock files) and how many slots it has."""

    @property
    def id(self) -> str: ...

    @property
    def slots(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease (the ``.holder`` file's fields, :func:`read_holder`)."""

    host: str
    pid: int
    run_id: str
    test: str
    since: float

    @classmethod
    def here(cls, run_id: str, test: str = "") -> Holder:
        """This process, now."""
        return cls(socket.gethostname(), os.getpid(), run_id, test, time.time())

    def __str__(self) -> str:
        test = f" running {self.test}" if self.test else ""
        return f"pid {self.pid} on {self.host} (run {self.run_id}){test}"


class LeaseTimeout(DeviceTimeout):
    """No slot of the board came free in time; ``holders`` says who has them."""

    def __init__(self, board_id: str, timeout_s: float, holders: list[Holder | None]) -> None:
        held = "; ".join(str(h) for h in holders if h is not None) or "holders unknown"
        super().__init__(f"board {board_id!r}: no lease within {timeout_s:g} s, held by {held}")
        self.board_id, self.holders = board_id, holders


class Lease:
    """A held lease; :meth:`release` (or leaving the ``with`` block) gives it back."""

    def __init__(self, board_id: str, slot: int, fd: int, holder_path: Path, holder: Holder) -> None:
        self.board_id, self.slot, self.holder = board_id, slot, holder
        self._fd: int | None = fd
        self._holder_path = holder_path

    @property
    def held(self) -> bool:
        return self._fd is not None

    def update(self, test: str) -> None:
        """Record the test the holder is running now."""
        if self._fd is None:
            raise InvalidArgument(f"lease on {self.board_id!r} was released; acquire it again")
        self.holder = Holder(self.holder.host, self.holder.pid, self.holder.run_id, test, self.holder.since)
        _write_holder(self._holder_path, self.holder)

    def release(self) -> None:
        if self._fd is None:
            return
        self._holder_path.unlink(missing_ok=True)  # before the unlock: the next holder writes its own
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<Lease {self.board_id}#{self.slot} {'held' if self.held else 'released'} by {self.holder}>"


def _paths(lease_dir: Path, board_id: str, slot: int) -> tuple[Path, Path]:
    return lease_dir / f"{board_id}.{slot}.lock", lease_dir / f"{board_id}.{slot}.holder"


def _write_holder(path: Path, holder: Holder) -> None:
    write_atomically(path, json.dumps(asdict(holder)))


_TEXT_MAX_CHARS: Final = LIMITS["lease"].max_bytes  # a node id is kept whole: the file's cap bounds it


def read_holder(path: str | Path) -> Holder:
    """The holder recorded in ``path``, every field typed.

    Raises:
        FileFormatError: the file is unreadable, over ``LIMITS["lease"]``, not JSON, or a field is missing or of the
            wrong type (naming the file and the field).
    """
    fields = Fields(parse_json(read_capped(path, "lease"), path), path)
    fields.only(_HOLDER_FIELDS)
    host, run_id = (fields.string(name, max_len=_TEXT_MAX_CHARS) for name in ("host", "run_id"))
    pid = fields.integer("pid", minimum=0)
    test = fields.string("test", max_len=_TEXT_MAX_CHARS, empty=True)
    since = fields.number("since")
    assert host is not None and run_id is not None and pid is not None and test is not None and since is not None
    return Holder(host, pid, run_id, test, since)


def _read_holder(path: Path) -> Holder | None:
    """The holder in ``path``, or ``None`` when it is gone or cannot be used (the lock, not this file, is the truth:
    a holder that died mid-write leaves a file that says nothing)."""
    try:
        return read_holder(path)
    except FileFormatError:
        return None


def _try_slot(lease_dir: Path, board_id: str, slot: int, holder: Holder) -> Lease | None:
    lock_path, holder_path = _paths(lease_dir, board_id, slot)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    _write_holder(holder_path, holder)
    return Lease(board_id, slot, fd, holder_path, holder)


def acquire(
    lease_dir: str | Path,
    board: Leasable,
    holder: Holder,
    *,
    timeout_s: float = 0.0,
    poll_s: float = DEFAULT_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Lease:
    """Take a free slot of ``board``, waiting up to ``timeout_s`` (polling every ``poll_s``).

    Raises:
        LeaseTimeout: every slot stayed held; the error names the holders.
        InvalidArgument: a negative timeout or a poll interval that is not positive.
    """
    if not timeout_s >= 0:
        raise InvalidArgument(f"timeout_s={timeout_s!r}, expected seconds >= 0")
    if not poll_s > 0:
        raise InvalidArgument(f"poll_s={poll_s!r}, expected seconds > 0")
    lease_dir = Path(lease_dir)
    lease_dir.mkdir(parents=True, exist_ok=True)
    deadline = clock() + timeout_s
    while True:
        for slot in range(board.slots):
            lease = _try_slot(lease_dir, board.id, slot, holder)
            if lease is not None:
                return lease
        if clock() >= deadline:
            raise LeaseTimeout(board.id, timeout_s, holders(lease_dir, board))
        sleep(poll_s)


def _held(lock_path: Path) -> bool:
    """Whether some process holds the lock (taking it for an instant when it is free)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def holders(lease_dir: str | Path, board: Leasable) -> list[Holder | None]:
    """Per slot of ``board``: its holder, or ``None`` when free (a stale holder file counts as free)."""
    lease_dir = Path(lease_dir)
    result: list[Holder | None] = []
    for slot in range(board.slots):
        lock_path, holder_path = _paths(lease_dir, board.id, slot)
        result.append(_read_holder(holder_path) if _held(lock_path) else None)
    return result
