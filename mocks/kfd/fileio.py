"""MOCKKFD's side of the file-I/O seam: file descriptors, ioctls and mmaps on its virtual device tree.

File descriptors are real descriptors of ``/dev/null`` reserved for the mock's files, so they never collide with
the process's other descriptors. Paths under ``/dev`` and ``/sys/devices/virtual/kfd`` belong to the mock (a missing
one is ``ENOENT``, never the real file); reads, listings and existence checks of any other path fall through to the
real file system, and ``open`` refuses them.

mmap offsets::

    /dev/kfd         KFD_MMAP_TYPE_DOORBELL | gpu_id << 46   the GPU's 8 KiB doorbell frame (stores ring doorbells)
                     KFD_MMAP_TYPE_EVENTS                    the signal page (at most 32 KiB)
                     KFD_MMAP_TYPE_MMIO | gpu_id << 46       the GPU's MMIO remap page (HDP flush; no effect here)
    renderD<128+n>   an allocation's mmap_offset (+ page)    CPU access to that VRAM / GTT buffer object
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import weakref
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from tinyhil.fileio import IoctlArg, MappedBuffer
from tinyhil.fileio.arguments import as_int, check_fd, check_mapped_buffer, check_mmap, check_path, ioctl_request
from tinyhil.mocks.kfd._errno import fail
from tinyhil.mocks.kfd.state import Allocation, GpuDevice
from tinyhil.mocks.kfd.topology import SysfsTree
from tinyhil.spec.amdgpu import PAGE_BYTES
from tinyhil.spec.kfd_events import KFD_SIGNAL_PAGE_BYTES
from tinyhil.spec.kfd_memory import (
    KFD_MMAP_TYPE_DOORBELL,
    KFD_MMAP_TYPE_EVENTS,
    KFD_MMAP_TYPE_MASK,
    KFD_MMAP_TYPE_MMIO,
    kfd_mmap_get_gpu_id,
)
from tinyhil.spec.kfd_queues import KFD_DOORBELL_PROCESS_SLICE_BYTES
from tinyhil.spec.kfd_topology import KFD_DEVICE_PATH

if TYPE_CHECKING:
    from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["FileKind", "MockFileIO", "OpenFile"]


class FileKind(Enum):
    """What an open mock file is."""

    KFD = "kfd"
    RENDER = "render node"
    SYSFS = "sysfs file"
    DIRECTORY = "directory"


@dataclass(eq=False, slots=True)
class OpenFile:
    """One open file description of the mock, and the process (``pid``) that opened it."""

    fd: int
    path: str
    kind: FileKind
    pid: int
    gpu: GpuDevice | None = None


def _normalize(path: Any) -> str:
    normal = posixpath.normpath(check_path(path))
    return "/" + normal.lstrip("/") if normal.startswith("/") else normal


def _close_reserved(files: dict[int, OpenFile], pid: int | None = None) -> None:
    """Close the files ``pid`` opened (default: every file)."""
    for fd in [fd for fd, file in files.items() if pid is None or file.pid == pid]:
        os.close(fd)
        del files[fd]


class MockFileIO:
    """The :class:`~tinyhil.fileio.FileIO` seam over a :class:`~tinyhil.mocks.kfd.MockKFD`.

    Arguments are checked by the seam's shared rules (:mod:`tinyhil.fileio.arguments`), which
    :class:`~tinyhil.fileio.RealFileIO` applies too, so a bad argument gets the same answer from both:

    - ``TypeError`` where Python's own call would raise it before any system call: ``fd``, ``request``,
      ``length``, ``offset`` or ``flags`` that is not an int (``mmap(fd, 1.5, 0)``, ``ioctl(fd, "x", buf)``,
      ``ioctl(fd, None, buf)``), a path that is not a str, bytes or os.PathLike, and ``munmap`` of anything but a
      :class:`~tinyhil.fileio.MappedBuffer`; ``ValueError`` for a path with a NUL byte (``exists`` says False).
    - ``OSError`` with Linux's errno for every int and path: ``EBADF`` for a descriptor that is not open here,
      ``EINVAL`` / ``ENOMEM`` for an mmap length or offset ``mmap(2)`` refuses, ``ENOTTY`` for an ioctl on a file
      other than /dev/kfd, and the dispatcher's errnos (:mod:`tinyhil.mocks.kfd.dispatch`) for the ioctl itself.
      The request is taken as the kernel's 32-bit ``unsigned int cmd``; the argument is user memory as
      :func:`~tinyhil.fileio.arguments.user_memory` defines it.

    A rejected call changes nothing (:meth:`MockKFD.state_digest` is unchanged) and logs one line.
    """

    def __init__(self, kfd: MockKFD) -> None:
        self.kfd = kfd
        self.files: dict[int, OpenFile] = {}
        self._finalizer = weakref.finalize(self, _close_reserved, self.files)

    def close_all(self) -> None:
        """Close every file the mock has open (every process exits)."""
        _close_reserved(self.files)

    def close_process_files(self, pid: int) -> None:
        """Close the files process ``pid`` opened (its exit)."""
        _close_reserved(self.files, pid)

    def file_of(self, fd: int) -> OpenFile | None:
        return self.files.get(fd)

    def _file(self, fd: int, what: str) -> OpenFile:
        """The open file ``fd`` (an int from ``as_int``) names."""
        file = self.files.get(check_fd(fd, what))
        if file is None:
            fail(errno.EBADF, f"{what}: fd={fd} is not a file open in MOCKKFD")
        return file

    # --- files ---------------------------------------------------------------------------------------------------
    def open(self, path: str, flags: int) -> int:
        normal = _normalize(path)
        flags = as_int("flags", flags)
        tree = self.kfd.sysfs
        if not SysfsTree.owns(normal):
            fail(errno.ENOENT, f"open({path!r}): MOCKKFD opens only its own /dev and KFD sysfs files")
        if normal in tree.files:
            content = tree.files[normal]
            if content is None:
                gpu = next((g for g in self.kfd.gpus if g.identity.render_path == normal), None)
                kind = FileKind.KFD if normal == KFD_DEVICE_PATH else FileKind.RENDER
            else:
                gpu, kind = None, FileKind.SYSFS
        elif normal in tree.dirs:
            gpu, kind = None, FileKind.DIRECTORY
        else:
            fail(errno.ENOENT, f"open({path!r}): no such file in MOCKKFD's device tree")
        if kind in (FileKind.SYSFS, FileKind.DIRECTORY) and flags & (os.O_WRONLY | os.O_RDWR):
            fail(errno.EISDIR if kind is FileKind.DIRECTORY else errno.EACCES, f"open({path!r}) for writing: read-only")
        if kind is FileKind.KFD:
            self.kfd.ensure_process()
        fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.files[fd] = OpenFile(fd, normal, kind, os.getpid(), gpu)
        return fd

    def close(self, fd: int) -> None:
        fd = as_int("fd", fd)
        self._file(fd, "close")
        del self.files[fd]
        os.close(fd)

    def read(self, path: str) -> bytes:
        normal = _normalize(path)
        if not SysfsTree.owns(normal):
            with open(path, "rb") as file:
                return file.read()
        tree = self.kfd.sysfs
        if normal in tree.dirs:
            fail(errno.EISDIR, f"read({path!r}): is a directory")
        if normal not in tree.files:
            fail(errno.ENOENT, f"read({path!r}): no such file in MOCKKFD's device tree")
        content = tree.files[normal]
        if content is None:
            fail(errno.EINVAL, f"read({path!r}): the device has no read operation")
        return content

    def listdir(self, path: str) -> list[str]:
        normal = _normalize(path)
        if not SysfsTree.owns(normal):
            return sorted(os.listdir(path))
        tree = self.kfd.sysfs
        if normal in tree.files:
            fail(errno.ENOTDIR, f"listdir({path!r}): not a directory")
        if normal not in tree.dirs:
            fail(errno.ENOENT, f"listdir({path!r}): no such directory in MOCKKFD's device tree")
        return sorted(tree.dirs[normal])

    def exists(self, path: str) -> bool:
        try:
            normal = _normalize(path)
        except ValueError:  # a NUL byte: os.path.exists says False
            return False
        if not SysfsTree.owns(normal):
            return os.path.exists(path)
        return normal in self.kfd.sysfs.files or normal in self.kfd.sysfs.dirs

    # --- ioctl and mmap ------------------------------------------------------------------------------------------
    def ioctl(self, fd: int, request: int, buf: IoctlArg) -> int:
        fd, request = as_int("fd", fd), ioctl_request(request)
        file = self._file(fd, "ioctl")
        if file.kind is not FileKind.KFD:
            fail(errno.ENOTTY, f"ioctl({request:#x}) on {file.path}: MOCKKFD emulates ioctls on /dev/kfd only")
        if file.pid != os.getpid():  # kfd_ioctl: "Using KFD FD in wrong process"
            fail(errno.EBADF, f"ioctl({request:#x}) on fd={fd}: /dev/kfd opened by pid {file.pid}, used by pid "
                              f"{os.getpid()}; a forked child opens /dev/kfd itself")  # fmt: skip
        return self.kfd.dispatcher.ioctl(request, buf)

    def mmap(self, fd: int, length: int, offset: int) -> MappedBuffer:
        fd = as_int("fd", fd)
        length, offset = check_mmap("mmap", length, offset, PAGE_BYTES)
        file = self._file(fd, "mmap")
        what = f"mmap({file.path}, length={length:#x}, offset={offset:#x})"
        if file.kind is FileKind.KFD:
            return self._mmap_kfd(what, length, offset)
        if file.kind is FileKind.RENDER and file.gpu is not None:
            return self._mmap_render(what, file.gpu, length, offset)
        fail(errno.ENODEV, f"{what}: {file.kind.value}s cannot be mapped")

    def munmap(self, buf: MappedBuffer) -> None:
        check_mapped_buffer(buf).release()

    def _mmap_kfd(self, what: str, length: int, offset: int) -> MappedBuffer:
        mmap_type = offset & KFD_MMAP_TYPE_MASK
        gpu = self.kfd.gpu_by_id(kfd_mmap_get_gpu_id(offset))
        if mmap_type == KFD_MMAP_TYPE_EVENTS:
            page = self.kfd.process.signal_page
            if length > KFD_SIGNAL_PAGE_BYTES or page is None:
                fail(errno.EINVAL, f"{what}: no signal page yet, or more than {KFD_SIGNAL_PAGE_BYTES:#x} bytes")
            self.kfd.process.signal_mapped_size = length
            return MappedBuffer.over(page, 0, length)
        if gpu is None:
            fail(errno.ENODEV, f"{what}: the offset names gpu_id={kfd_mmap_get_gpu_id(offset):#x}, no GPU of MOCKKFD")
        if mmap_type == KFD_MMAP_TYPE_DOORBELL:
            if length != KFD_DOORBELL_PROCESS_SLICE_BYTES:
                fail(errno.EINVAL, f"{what}: the doorbell frame is {KFD_DOORBELL_PROCESS_SLICE_BYTES:#x} bytes")
            return MappedBuffer.over(
                gpu.doorbell_page, on_write=functools.partial(self.kfd.queues.doorbell_written, gpu)
            )
        if mmap_type == KFD_MMAP_TYPE_MMIO:
            if length != PAGE_BYTES:
                fail(errno.EINVAL, f"{what}: the MMIO remap page is {PAGE_BYTES:#x} bytes")
            return MappedBuffer.over(gpu.mmio_page)
        fail(errno.EINVAL, f"{what}: KFD_MMAP_TYPE_RESERVED_MEM (APU trap handler memory) is not emulated")

    def _mmap_render(self, what: str, gpu: GpuDevice, length: int, offset: int) -> MappedBuffer:
        allocations = self.kfd.process.pdds[gpu.gpu_id].allocations.values() if self.kfd.has_process else ()
        for allocation in allocations:
            start = allocation.drm_offset
            if start is not None and start <= offset and offset + length <= start + allocation.size:
                relative = offset - start
                on_write = functools.partial(_bo_written, self.kfd, allocation, relative)
                return MappedBuffer.over(allocation.backing, relative, length, on_write=on_write)
        fail(errno.EINVAL, f"{what}: no buffer object of {gpu.identity.render_path} covers that range")


def _bo_written(kfd: MockKFD, allocation: Allocation, base: int, offset: int, nbytes: int) -> None:
    """A CPU store into a mapped buffer object: tell every GPU the buffer is mapped on."""
    for gpu_id in allocation.mapped_on:
        gpu = kfd.gpu_by_id(gpu_id)
        if gpu is not None:
            gpu.port.memory_written(allocation.va + base + offset, nbytes)
