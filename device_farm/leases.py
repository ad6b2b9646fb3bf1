"""Board leases: one test process (or health probe) per board slot at a time, backed by ``flock`` so a dead holder
never leaks a board.

A lease is an exclusive ``fcntl.flock`` on ``<lock dir>/<key>.<slot>.lock`` in the host-wide lock directory
(:func:`~tinyhil.device_farm.state.lock_dir`). The key is the board's physical identity (:func:`lock_key`: its USB
serial or bus-port path, its PCI location, its NV UUID), never its map id or the run's state directory, so two
runs with different maps or state directories that reach the same board meet on the same lock. A real board has one
slot; an emulated one as many as its map entry allows. The kernel drops the lock when the holder's file descriptor
closes, including when the holder is killed, so the next taker gets the board at once. Who holds it (host, pid, run
id, board id, test, since when) is written to ``<key>.<slot>.holder`` beside it; a holder file whose lock is free is
stale and is reported as free.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

from tinyhil._files import write_atomically
from tinyhil.device_farm.inventory.hwmap import Board, EmulatedLocator, KfdLocator, NvLocator, UsbLocator
from tinyhil.device_farm.inventory.served_boards import ServedLocator
from tinyhil.errors import DeviceTimeout, InvalidArgument
from tinyhil.loading import LIMITS, Fields, FileFormatError, parse_json, read_capped

__all__ = [
    "BoardLock",
    "HeldSlot",
    "Holder",
    "Leasable",
    "Lease",
    "LeaseTimeout",
    "acquire",
    "describe_holders",
    "held_slots",
    "holders",
    "lock_key",
    "read_holder",
]

DEFAULT_POLL_S: Final = 0.05
_HOLDER_FIELDS: Final = ("host", "pid", "run_id", "test", "since", "board")
_KEY_OTHER: Final = re.compile(r"[^A-Za-z0-9._:-]+")  # what a lock file's key may not hold
_KEY_MAX_CHARS: Final = 160  # a key, its slot and its suffix stay well inside a file name's 255 bytes
_KEY_HASH_CHARS: Final = 12
_LOCK_SUFFIX: Final = ".lock"
_LOCK_MODE: Final = 0o644  # other users may read it, which is enough to take and test a flock


def _key(kind: str, text: str) -> str:
    """``kind-text`` as a file name: a character a key may not hold becomes ``-``, and a text that had to change (or
    was too long) gets a hash of the original, so two identities never share a key."""
    kept = _KEY_OTHER.sub("-", text).strip("-")
    if kept == text and len(kept) <= _KEY_MAX_CHARS:
        return f"{kind}-{kept}"
    digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:_KEY_HASH_CHARS]
    return f"{kind}-{kept[:_KEY_MAX_CHARS]}-{digest}"


def lock_key(board: Board, run_id: str = "") -> str:
    """The key of ``board``'s lock files: its physical identity, the same in every map and state directory.

    USB bridges by serial (else bus-port path), KFD GPUs by PCI location (else KFD unique id, else topology gpu_id),
    NV GPUs by UUID (else PCI location; a PCI location is one key whatever the board's kind), emulated and served
    boards of a map by their host and map id, and a board a run made for itself (``tinyhil run``'s per-target
    boards, ``EmulatedLocator.per_run``) by the run's id, so separate runs get separate emulated instances; a
    hardware target found by its target string alone is keyed by that string.
    """
    locator = board.locator
    if isinstance(locator, UsbLocator):
        if locator.serial is not None:
            return _key("usb", f"{locator.vid_pid}-serial-{locator.serial}")
        return _key("usb-port", str(locator.port))
    if isinstance(locator, KfdLocator):
        if locator.pci is not None:
            return _key("pci", locator.pci)
        if locator.unique_id is not None:
            return _key("amdgpu", f"{locator.unique_id:016x}")
        return _key("kfd-gpu", str(locator.gpu_id))
    if isinstance(locator, NvLocator):
        return _key("nv", locator.uuid) if locator.uuid is not None else _key("pci", str(locator.pci_bus_id))
    if isinstance(locator, ServedLocator):  # an emulator a map serves: its host and map id, as an emulated board
        return _key("served", f"{board.host}-{board.id}")
    assert isinstance(locator, EmulatedLocator)
    if locator.per_run:
        return _key("run", f"{run_id}-{board.id}")
    if board.kind.value == "emulated":
        return _key("emulated", f"{board.host}-{board.id}")
    return _key("target", locator.target)


@dataclass(frozen=True, slots=True)
class BoardLock:
    """A board as the lease API sees it: its lock key, its id and its slots (:meth:`of` makes one)."""

    lock_key: str
    id: str
    slots: int

    @classmethod
    def of(cls, board: Board, run_id: str = "") -> BoardLock:
        """``board``'s lock; ``run_id`` keys a board its run made for itself (:func:`lock_key`)."""
        return cls(lock_key(board, run_id), board.id, board.slots)


class Leasable(Protocol):
    """What a lease needs of a board: its lock key (:func:`lock_key`), its id (for the holder record) and how many
    slots it has."""

    @property
    def lock_key(self) -> str: ...

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
    board: str = ""  # the board's id in the holder's map

    @classmethod
    def here(cls, run_id: str, test: str = "", board: str = "") -> Holder:
        """This process, now."""
        return cls(socket.gethostname(), os.getpid(), run_id, test, time.time(), board)

    def __str__(self) -> str:
        test = f" running {self.test}" if self.test else ""
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host} (run {self.run_id}){test} since {since}"


class LeaseTimeout(DeviceTimeout):
    """No slot of the board came free in time; ``holders`` says who has them."""

    def __init__(self, board_id: str, timeout_s: float, holders: list[Holder | None]) -> None:
        held = describe_holders(holders)
        super().__init__(f"board {board_id!r}: no lease within {timeout_s:g} s, held by {held}")
        self.board_id, self.timeout_s, self.holders = board_id, timeout_s, holders

    def __reduce__(self) -> tuple[type[LeaseTimeout], tuple[str, float, list[Holder | None]]]:
        return LeaseTimeout, (self.board_id, self.timeout_s, self.holders)  # crosses to the run from a Dask worker


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
        self.holder = replace(self.holder, test=test)
        _write_holder(self._holder_path, self.holder)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(PermissionError):  # another user's stale record (see _write_holder) stays
            self._holder_path.unlink(missing_ok=True)  # before the unlock: the next holder writes its own
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<Lease {self.board_id}#{self.slot} {'held' if self.held else 'released'} by {self.holder}>"


def describe_holders(holders: list[Holder | None]) -> str:
    """The holders of a board in one line (``holders unknown`` when every holder file is gone)."""
    return "; ".join(str(h) for h in holders if h is not None) or "holders unknown"


def _paths(lease_dir: Path, key: str, slot: int) -> tuple[Path, Path]:
    return lease_dir / f"{key}.{slot}{_LOCK_SUFFIX}", lease_dir / f"{key}.{slot}.holder"


def _write_holder(path: Path, holder: Holder) -> None:
    with contextlib.suppress(PermissionError):  # another user's stale record in the shared directory: the lock,
        write_atomically(path, json.dumps(asdict(holder)))  # not this file, is the truth


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
    board = fields.string("board", required=False, max_len=_TEXT_MAX_CHARS, empty=True) or ""
    assert host is not None and run_id is not None and pid is not None and test is not None and since is not None
    return Holder(host, pid, run_id, test, since, board)


def _read_holder(path: Path) -> Holder | None:
    """The holder in ``path``, or ``None`` when it is gone or cannot be used (the lock, not this file, is the truth:
    a holder that died mid-write leaves a file that says nothing)."""
    try:
        return read_holder(path)
    except FileFormatError:
        return None


def _open_lock(lock_path: Path) -> int:
    """A descriptor of ``lock_path`` to flock, made if missing (read-only where another user made it)."""
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _LOCK_MODE)
    except PermissionError:
        return os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)


def _try_slot(lease_dir: Path, board: Leasable, slot: int, holder: Holder) -> Lease | None:
    lock_path, holder_path = _paths(lease_dir, board.lock_key, slot)
    fd = _open_lock(lock_path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    _write_holder(holder_path, holder)
    return Lease(board.id, slot, fd, holder_path, holder)


def acquire(
    lease_dir: str | Path,
    board: Leasable,
    holder: Holder,
    *,
    timeout_s: float | None = 0.0,
    poll_s: float = DEFAULT_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[list[Holder | None]], None] | None = None,
) -> Lease:
    """Take a free slot of ``board``, waiting up to ``timeout_s`` (``None``: as long as it takes), polling every
    ``poll_s``. When every slot is held at the first try, ``on_wait`` is called once with the holders, before the
    wait begins. Waiting is not a fault: a caller never counts it against the board.

    Raises:
        LeaseTimeout: every slot stayed held for ``timeout_s``; the error names the holders.
        InvalidArgument: a negative timeout or a poll interval that is not positive.
    """
    if timeout_s is not None and not timeout_s >= 0:
        raise InvalidArgument(f"timeout_s={timeout_s!r}, expected seconds >= 0 or None (no bound)")
    if not poll_s > 0:
        raise InvalidArgument(f"poll_s={poll_s!r}, expected seconds > 0")
    lease_dir = Path(lease_dir)
    lease_dir.mkdir(parents=True, exist_ok=True)
    deadline = None if timeout_s is None else clock() + timeout_s
    waiting = False
    while True:
        for slot in range(board.slots):
            lease = _try_slot(lease_dir, board, slot, holder)
            if lease is not None:
                return lease
        if deadline is not None and clock() >= deadline:
            raise LeaseTimeout(board.id, timeout_s or 0.0, holders(lease_dir, board))
        if not waiting and on_wait is not None:
            on_wait(holders(lease_dir, board))
        waiting = True
        sleep(poll_s)


def _held(lock_path: Path) -> bool:
    """Whether some process holds the lock (taking it for an instant when it is free)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
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
        lock_path, holder_path = _paths(lease_dir, board.lock_key, slot)
        result.append(_read_holder(holder_path) if _held(lock_path) else None)
    return result


@dataclass(frozen=True, slots=True)
class HeldSlot:
    """A held lock of the lock directory: its key and slot, and who holds it (``None``: the record is gone)."""

    key: str
    slot: int
    holder: Holder | None


def held_slots(lease_dir: str | Path) -> list[HeldSlot]:
    """Every held lock in ``lease_dir``, whichever run, map or state directory took it, sorted by key and slot."""
    lease_dir = Path(lease_dir)
    if not lease_dir.is_dir():
        return []
    found = []
    for lock_path in lease_dir.glob(f"*{_LOCK_SUFFIX}"):
        key, _, slot = lock_path.name[: -len(_LOCK_SUFFIX)].rpartition(".")
        if not slot.isdigit() or not _held(lock_path):
            continue
        found.append(HeldSlot(key, int(slot), _read_holder(lock_path.with_suffix(".holder"))))
    return sorted(found, key=lambda held: (held.key, held.slot))
