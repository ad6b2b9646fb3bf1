"""A process's KFD session: one :class:`~tinyhil.kfd.KFD` per process and system, shared by every device it opens.

amdkfd keeps a process's state (its ``kfd_process`` and a process device per GPU, with the VM that ``ACQUIRE_VM``
took from a render node file) for the life of the process, not of an open file: closing ``/dev/kfd`` ends none of
it, and a second ``ACQUIRE_VM`` of a GPU from another render node file is ``EBUSY``. So, as libhsakmt does, a
process opens ``/dev/kfd`` and each GPU's render node once and acquires each VM once: :func:`process_session`
returns the calling process's session on a file-I/O seam, opening it on first use. Devices hold it
(:meth:`KfdSession.hold`) and give it back (:meth:`KfdSession.release`); a device's close frees what the device
allocated, never the session, which lasts until the process exits. A forked child gets a session of its own: it
never uses its parent's (checked with ``os.getpid()``). docs/mockkfd.md "Process lifetime".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Final

from tinyhil.errors import DeviceError, StateError
from tinyhil.fileio import FileIO, RealFileIO
from tinyhil.kfd.client import KFD

__all__ = ["KfdSession", "end_session", "process_session"]

# The sessions of this process, keyed by the system a seam reaches (every RealFileIO reaches this machine's amdkfd).
_SESSIONS: Final[dict[object, KfdSession]] = {}
_OPENING: Final = threading.Lock()  # two threads' first devices open one session, not two


def _system(fileio: FileIO | None) -> object:
    """The key of the amdkfd that ``fileio`` reaches: one for this machine's (None or any :class:`RealFileIO`),
    else the seam itself."""
    return RealFileIO if fileio is None or isinstance(fileio, RealFileIO) else fileio


class KfdSession:
    """The calling process's KFD connection on one system: its :class:`KFD` and the devices holding it.

    ``on_end`` (for a machine that exists only as long as its devices, such as a MOCKKFD built for one target open)
    makes the session end with its last device and then runs; without it the session lasts as long as the process.
    """

    def __init__(self, kfd: KFD, on_end: Callable[[], None] | None = None) -> None:
        self.kfd = kfd
        self.pid = os.getpid()
        self.on_end = on_end
        self.users: dict[int, list[str]] = {}  # GPU index -> the names of the devices open on it
        self.faults: dict[int, DeviceError] = {}  # a memory fault or hardware exception reported to one device's
        # wait, for another GPU's device
        self.ended = False

    def hold(self, gpu_index: int, device: str) -> None:
        """The device named ``device`` uses GPU ``gpu_index`` of this session (several devices may share a GPU).

        Raises:
            StateError: the session ended.
        """
        if self.ended:
            raise StateError(f"the KFD session of pid {self.pid} ended; open the device again")
        self.users.setdefault(gpu_index, []).append(device)

    def release(self, gpu_index: int, device: str) -> None:
        """The device named ``device`` no longer uses GPU ``gpu_index``; with ``on_end`` and no device left, the
        session ends."""
        holders = self.users.get(gpu_index, [])
        if device in holders:
            holders.remove(device)
        if not holders:
            self.users.pop(gpu_index, None)
        if not self.users and self.on_end is not None:
            self.end()

    def end(self) -> None:
        """What the process's exit does to its KFD connection: close the KFD (its events, memory, render nodes and
        ``/dev/kfd``), forget the session, and run ``on_end`` (idempotent)."""
        if self.ended:
            return
        self.ended = True
        if _SESSIONS.get(_system(self.kfd.fileio)) is self:
            del _SESSIONS[_system(self.kfd.fileio)]
        try:
            self.kfd.close()
        finally:
            if self.on_end is not None:
                self.on_end()

    def __repr__(self) -> str:
        return f"KfdSession(pid {self.pid}, {self.kfd!r}, devices on GPUs {sorted(self.users)})"


def process_session(fileio: FileIO | None = None, *, on_end: Callable[[], None] | None = None) -> KfdSession:
    """The calling process's session on ``fileio`` (default: this machine), opened (``/dev/kfd``, topology,
    apertures, exception events) on first use; ``on_end`` is given to a session this call opens.

    Raises:
        FileNotFoundError: no ``/dev/kfd``.
        DeviceError: what :class:`KFD` raises for an interface or apertures it cannot use.
    """
    key = _system(fileio)
    with _OPENING:
        session = _SESSIONS.get(key)
        if session is not None and session.pid == os.getpid() and not session.ended and not session.kfd.closed:
            return session
        # none yet, or the parent's (this is a forked child): its files and mappings are the parent's, left untouched
        session = KfdSession(KFD(fileio), on_end)
        _SESSIONS[key] = session
        return session


def end_session(fileio: FileIO | None = None) -> None:
    """End the calling process's session on ``fileio`` (default: this machine), if it has one: what its exit does."""
    session = _SESSIONS.get(_system(fileio))
    if session is not None and session.pid == os.getpid():
        session.end()
