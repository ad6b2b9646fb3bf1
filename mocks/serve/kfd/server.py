"""The server: MOCKKFD behind a Unix socket, one thread per client connection, one lock around MOCKKFD.

Each thread of a client process that uses a served file has a connection of its own, so one thread blocked in
``WAIT_EVENTS`` holds up no other; connections are grouped into processes by their peer's pid (``SO_PEERCRED``),
and a process's threads share its descriptors. A forked child connects afresh: it does not share its parent's KFD
process. The process that opens ``/dev/kfd`` holds MOCKKFD's process until its last connection closes (process
exit: :meth:`MockKFD.exit_process`); another process opening ``/dev/kfd`` meanwhile gets ``EBUSY`` while the
holder keeps a served file open, and otherwise takes the KFD process over (the holder's queues and memory are gone).
Requests are served by MOCKKFD's own file-I/O seam (:class:`~tinyhil.mocks.kfd.MockFileIO`), so errnos and state
are those of in-process MOCKKFD; the server only translates descriptors (the client's to MOCKKFD's, in requests and
in ACQUIRE_VM's ``drm_fd``) and memory (:class:`~.client_memory.ClientMemory`, :class:`~.shared.SharedMemory`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Final, cast

from tinyhil.fileio import IoctlArg
from tinyhil.mocks.serve.kfd.client_memory import ClientMemory, receive
from tinyhil.mocks.serve.kfd.doorbells import DoorbellWatcher
from tinyhil.mocks.serve.kfd.protocol import MAX_PAYLOAD_BYTES, REPLY, REQUEST, ArgFlag, Op
from tinyhil.mocks.serve.kfd.shared import SharedMemory
from tinyhil.spec.kfd_ioctls import KfdIoctl
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH
from tinyhil.spec.linux_ioctl import ioc_nr

if TYPE_CHECKING:
    from tinyhil.mocks.kfd import MockKFD

__all__ = ["DEADLOCK_GRACE_S", "KfdServer"]

LOG: Final = logging.getLogger("tinyhil.mocks.serve.kfd")
# An infinite WAIT_EVENTS that nothing pending can satisfy waits this long (wall clock) for the client's other
# threads to ring a doorbell or issue an ioctl before it fails with EDEADLK, as in-process MOCKKFD fails at once.
DEADLOCK_GRACE_S: Final = 5.0
_ACQUIRE_VM_NR: Final = ioc_nr(KfdIoctl.AMDKFD_IOC_ACQUIRE_VM)
_WAIT_EVENTS_NR: Final = ioc_nr(KfdIoctl.AMDKFD_IOC_WAIT_EVENTS)
_DRM_FD: Final = ctypes.c_uint32
_NO_FD: Final = 0xFFFF_FFFF  # a descriptor the client never had: MOCKKFD answers EINVAL, as amdkfd does
_BACKLOG: Final = 16
_UCRED: Final = struct.Struct("3i")  # struct ucred: pid, uid, gid (SO_PEERCRED)


class _Process:
    """One client process: its connections (one per thread that used a served file) and its descriptors (client fd
    -> MOCKKFD fd), which all its threads share."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.connections: set[_Connection] = set()
        self.fds: dict[int, int] = {}


class _Connection:
    """One thread of a client process: its socket, and its memory as the ioctls it issues see it."""

    def __init__(self, server: KfdServer, sock: socket.socket, process: _Process) -> None:
        self.server = server
        self.sock = sock
        self.process = process
        self.memory = ClientMemory(sock)

    def serve(self) -> None:
        try:
            while True:
                data, fds = receive(self.sock, REQUEST.size + MAX_PAYLOAD_BYTES)
                self._request(data, fds)
        except (ConnectionError, OSError) as exc:
            LOG.debug("client connection ended: %s", exc)
        finally:
            self.server.disconnected(self)
            self.sock.close()

    def _reply(self, err: int, value: int = 0, payload: bytes = b"", fd: int | None = None) -> None:
        header = REPLY.pack(Op.DONE, err, value, 0, len(payload), 0)
        ancillary = [] if fd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))]
        self.sock.sendmsg([header, payload], ancillary)

    def _request(self, data: bytes, fds: list[int]) -> None:
        op, client_fd, a, b, _, length, flags = REQUEST.unpack_from(data)
        payload = data[REQUEST.size : REQUEST.size + length]
        kfd, lock = self.server.kfd, self.server.lock
        try:
            if op == Op.OPEN:
                path = payload.split(b"\0", 1)[0].decode(errors="surrogateescape")
                with lock:
                    self.process.fds[client_fd] = self.server.open(self.process, path, a)
                self._reply(0)
            elif op == Op.CLOSE:
                with lock:
                    kfd.fileio.close(self._fd(client_fd))
                    del self.process.fds[client_fd]
                self._reply(0)
            elif op == Op.IOCTL:
                result, out = self._ioctl(self._fd(client_fd), a, b, ArgFlag(flags), payload, fds)
                self._reply(0, result, out)
            elif op == Op.MMAP:
                with lock:
                    buffer = kfd.fileio.mmap(self._fd(client_fd), a, b)
                    try:
                        shared, offset = self.server.memory.locate(buffer.address, a)
                        memfd = os.dup(shared)  # ours until sent: a free on another thread may close the original
                    finally:
                        kfd.fileio.munmap(buffer)
                try:
                    self._reply(0, offset, fd=memfd)
                finally:
                    os.close(memfd)
            else:
                self._reply(-errno.EINVAL)
        except OSError as exc:
            self._reply(-(exc.errno or errno.EIO))
        except Exception:  # a bug must not take the client down with no answer: it gets EIO, the log the reason
            LOG.exception("serving request %d failed", op)
            self._reply(-errno.EIO)
        finally:
            for fd in fds:
                os.close(fd)

    def _fd(self, client_fd: int) -> int:
        fd = self.process.fds.get(client_fd)
        if fd is None:
            raise OSError(errno.EBADF, f"fd={client_fd} is not a served device file of this process")
        return fd

    def _ioctl(
        self, fd: int, request: int, address: int, flags: ArgFlag, payload: bytes, fds: list[int]
    ) -> tuple[int, bytes]:
        buffer: bytes | bytearray = b""
        if ArgFlag.READABLE in flags:
            buffer = bytearray(payload) if ArgFlag.WRITABLE in flags else bytes(payload)
        nr = ioc_nr(request)
        drm_fd = b""
        if nr == _ACQUIRE_VM_NR and len(buffer) >= ctypes.sizeof(_DRM_FD):
            size = ctypes.sizeof(_DRM_FD)
            drm_fd = bytes(buffer[:size])
            mapped = self.process.fds.get(int.from_bytes(drm_fd, "little"), _NO_FD)
            buffer = type(buffer)(mapped.to_bytes(size, "little") + bytes(buffer[size:]))
        self.memory.userptr = (address, fds[0]) if ArgFlag.USERPTR_FD in flags and fds else None
        deadline = time.monotonic() + DEADLOCK_GRACE_S
        try:
            with self.server.lock:
                try:
                    while True:
                        self.server.kfd.user = self.memory  # pointers in this ioctl are this thread's process's
                        self.server.watcher.scan()
                        try:
                            # bytes is read-only user memory to the seam (tinyhil.fileio.arguments.user_memory)
                            result = self.server.kfd.fileio.ioctl(fd, request, cast(IoctlArg, buffer))
                            break
                        except OSError as exc:
                            remaining = deadline - time.monotonic()
                            if nr != _WAIT_EVENTS_NR or exc.errno != errno.EDEADLK or remaining <= 0:
                                raise
                            # the client's other threads may still ring a doorbell or set an event
                            self.server.watcher.activity.wait(remaining)
                finally:
                    self.server.watcher.activity.notify_all()  # this ioctl may be what another thread's wait awaits
        finally:
            self.memory.userptr = None
        if drm_fd:
            buffer = type(buffer)(drm_fd + bytes(buffer[len(drm_fd) :]))
        return result, bytes(buffer) if isinstance(buffer, bytearray) else b""


class KfdServer:
    """Serve ``kfd`` on a Unix socket at ``path``; ``memory`` is the :class:`SharedMemory` its host memory comes from.

    :meth:`start` listens and starts the doorbell watcher; :meth:`stop` ends both and closes MOCKKFD's process.
    """

    def __init__(self, kfd: MockKFD, memory: SharedMemory, path: str) -> None:
        self.kfd = kfd
        self.memory = memory
        self.path = path
        self.lock = threading.Lock()
        self.watcher = DoorbellWatcher(kfd, self.lock)
        self.owner: _Process | None = None  # the client process that holds MOCKKFD's process
        self._local_memory = kfd.user
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._processes: dict[int, _Process] = {}
        self._accepting: threading.Thread | None = None

    def start(self) -> None:
        self._listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self._listener.listen(_BACKLOG)
        self._accepting = threading.Thread(target=self._accept, name="tinyhil-kfd-accept", daemon=True)
        self._accepting.start()
        self.watcher.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed: stop
            pid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))[0]
            with self.lock:
                process = self._processes.setdefault(pid, _Process(pid))
                connection = _Connection(self, sock, process)
                process.connections.add(connection)
            threading.Thread(target=connection.serve, name="tinyhil-kfd-client", daemon=True).start()

    def open(self, process: _Process, path: str, flags: int) -> int:
        """Open ``path`` in MOCKKFD for ``process``. Call with the lock held.

        Raises:
            OSError: MOCKKFD's errno, or ``EBUSY`` when another process holds ``/dev/kfd``.
        """
        kfd_path = os.path.normpath(path) == KFD_DEVICE_PATH
        if kfd_path and self.owner is not None and self.owner is not process:
            if self.owner.fds:
                raise OSError(errno.EBUSY, f"{KFD_DEVICE_PATH} is held by another served process")
            self._end_process()  # its holder keeps no served file open: hand the KFD process over
        fd = self.kfd.fileio.open(path, flags)
        if kfd_path:
            self.owner = process
        return fd

    def disconnected(self, connection: _Connection) -> None:
        """A client thread's connection closed; once its process has none left (it exited), close its files, and
        if it held /dev/kfd, its KFD process exits."""
        with self.lock:
            process = connection.process
            process.connections.discard(connection)
            if process.connections:
                return
            self._processes.pop(process.pid, None)
            for fd in process.fds.values():
                with contextlib.suppress(OSError):
                    self.kfd.fileio.close(fd)
            process.fds.clear()
            if self.owner is process:
                self._end_process()

    def _end_process(self) -> None:
        """The owner's KFD process exits (:meth:`MockKFD.exit_process`: its queues destroyed, its memory freed, its
        files closed). MOCKKFD runs every served request as the server's own process, so its one KFD process is the
        owner's. Call with the lock held."""
        self.owner = None
        self.kfd.exit_process()
        self.kfd.user = self._local_memory

    def stop(self) -> None:
        self.watcher.stop()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        if self._accepting is not None:
            self._accepting.join()
        with self.lock:
            connections = [c for process in self._processes.values() for c in process.connections]
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)
        with self.lock:
            self.kfd.close()
            self.kfd.user = self._local_memory
        self.memory.close()
