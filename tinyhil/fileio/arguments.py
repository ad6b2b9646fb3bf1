"""The file-I/O seam's argument rules, one place for every implementation (real and emulated) so both answer alike.

Python's own calls set the pattern: an argument of the wrong type never reaches the kernel and raises the exception
Python raises for it (``os.close(1.5)``, ``fcntl.ioctl(fd, None)`` and ``mmap.mmap(-1, 1.5)`` raise ``TypeError``,
a path with a NUL byte ``ValueError``); an integer the kernel refuses is an ``OSError`` with Linux's errno. In the
order the checks run::

    fd, request, length, offset or flags not an int (no __index__)    TypeError, naming the argument
    path not a str, bytes or os.PathLike / with a NUL byte             TypeError / ValueError, as os.open's
    munmap of anything but a MappedBuffer                              TypeError
    request                                                            taken as the kernel's 32-bit unsigned cmd
    mmap offset outside [0, 2**64) or not page aligned                 EINVAL  (sys_mmap: off & ~PAGE_MASK)
    mmap length < 1                                                    EINVAL  (do_mmap: !len)
    mmap length that page rounding takes past 2**64                    ENOMEM  (do_mmap: PAGE_ALIGN(len) == 0)
    fd outside [0, FD_LIMIT), or not open                              EBADF
    ioctl argument                                                     user memory, see user_memory()

No message formats a caller's value with a format code that assumes its type: an int is shown in hex, anything
else by its type name.
"""

from __future__ import annotations

import errno
import logging
import operator
import os
from typing import Any, Final, NoReturn

from tinyhil.fileio.buffers import MappedBuffer
from tinyhil.spec.linux_ioctl import IOC_REQUEST_MASK

__all__ = [
    "FD_LIMIT",
    "MMAP_OFFSET_LIMIT",
    "as_int",
    "check_fd",
    "check_mapped_buffer",
    "check_mmap",
    "check_path",
    "ioctl_request",
    "seam_error",
    "user_memory",
]

LOG: Final = logging.getLogger("tinyhil.fileio")
FD_LIMIT: Final = 1 << 31  # file descriptors are non-negative C ints
MMAP_OFFSET_LIMIT: Final = 1 << 64  # the kernel's unsigned long pgoff << PAGE_SHIFT
_NO_MEMORY: Final = memoryview(b"")
_SHOWN_INT_LIMIT: Final = 1 << 128  # a larger int is named by its width, not its digits


def _hex(value: int) -> str:
    return f"{value:#x}" if abs(value) < _SHOWN_INT_LIMIT else f"<an int of {value.bit_length()} bits>"


def seam_error(code: int, message: str) -> NoReturn:
    """Raise ``OSError(code)`` with the errno's name and ``message``, after logging it."""
    name = errno.errorcode.get(code, str(code))
    LOG.info("%s: %s", name, message)
    raise OSError(code, f"{os.strerror(code)} ({name}): {message}")


def as_int(name: str, value: Any) -> int:
    """``value`` as an int, as Python's ``os`` / ``fcntl`` / ``mmap`` take one (anything with ``__index__``).

    Raises:
        TypeError: ``value`` is not an integer (a float, a str, None): the call cannot reach the kernel.
    """
    if type(value) is int:
        return value
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}={type(value).__name__} object, expected an int") from None


def check_fd(fd: int, what: str) -> int:
    """``fd`` (an int from :func:`as_int`) if it can name a descriptor.

    Raises:
        OSError: ``EBADF``, for a negative descriptor or one past ``FD_LIMIT``.
    """
    if not 0 <= fd < FD_LIMIT:
        seam_error(errno.EBADF, f"{what}: fd={_hex(fd)} is not a file descriptor (expected 0 <= fd < {FD_LIMIT:#x})")
    return fd


def ioctl_request(request: Any) -> int:
    """The request number as the kernel receives it: an int, truncated to the 32 bits of ``unsigned int cmd``.

    Raises:
        TypeError: the request is not an int (``fcntl.ioctl`` raises the same for ``None`` or ``"x"``).
    """
    return as_int("request", request) & IOC_REQUEST_MASK


def check_mmap(what: str, length: Any, offset: Any, page_bytes: int) -> tuple[int, int]:
    """``(length, offset)`` of an mmap, checked as ``mmap(2)`` checks them before it looks at the descriptor.

    ``page_bytes`` is the page size of the kernel the seam talks to (the host's for the real seam, the emulated
    kernel's for a mock).

    Raises:
        TypeError: ``length`` or ``offset`` is not an int.
        OSError: ``EINVAL`` for an offset outside ``[0, 2**64)`` or not page aligned, or a length below 1;
            ``ENOMEM`` for a length that page rounding takes past ``2**64``.
    """
    length = as_int("length", length)
    offset = as_int("offset", offset)
    shown = f"{what}(length={_hex(length)}, offset={_hex(offset)})"
    if not 0 <= offset < MMAP_OFFSET_LIMIT or offset % page_bytes:
        seam_error(errno.EINVAL, f"{shown}: expected a page-aligned offset in [0, {MMAP_OFFSET_LIMIT:#x})")
    if length < 1:
        seam_error(errno.EINVAL, f"{shown}: expected a length of at least 1 byte")
    if length > MMAP_OFFSET_LIMIT - page_bytes:
        seam_error(errno.ENOMEM, f"{shown}: the length rounded up to pages exceeds the 64-bit address space")
    return length, offset


def check_mapped_buffer(buf: Any) -> MappedBuffer:
    """``buf`` if it is a :class:`MappedBuffer` (what ``munmap`` takes).

    Raises:
        TypeError: anything else (``munmap(None)``).
    """
    if not isinstance(buf, MappedBuffer):
        raise TypeError(f"buf={type(buf).__name__} object, expected the MappedBuffer that mmap returned")
    return buf


def check_path(path: Any) -> str:
    """``path`` as a str, converted as ``os.open`` converts it (``os.fspath``, bytes decoded with ``os.fsdecode``).

    Raises:
        TypeError: not a str, bytes or os.PathLike.
        ValueError: the path has a NUL byte ("embedded null byte", as ``os.open`` says).
    """
    text = os.fsdecode(os.fspath(path))
    if "\0" in text:
        raise ValueError(f"path {text[:80]!r}: embedded null byte")
    return text


def user_memory(buf: Any) -> memoryview:
    """The ioctl argument as the user memory the kernel copies from and to.

    A contiguous buffer (a ctypes object, a bytearray) is memory of its size; a read-only one (bytes) can be read but
    not written; anything else (None, an int, a non-contiguous view) is memory of no bytes, as a NULL pointer is.
    The kernel's copy of the size a request encodes then faults (``EFAULT``) where it leaves that memory.
    """
    try:
        return memoryview(buf).cast("B")
    except (TypeError, ValueError):
        return _NO_MEMORY
