"""Linux ioctl request numbers: the ``_IOC`` encoding of ``include/uapi/asm-generic/ioctl.h``.

The encoding is asm-generic's (x86, arm, arm64, riscv): bits 0-7 number, 8-15 type, 16-29 the argument size in
bytes, 30-31 the direction (1 write = to the kernel, 2 read = from the kernel). The kernel's ``ioctl(2)`` takes the
request as an ``unsigned int``: :data:`IOC_REQUEST_MASK` is the part of a number that reaches a driver. The seam
(which checks that an argument holds the encoded size) and the KFD request table (:mod:`tinyhil.spec.kfd_ioctls`) share
it.
"""

from __future__ import annotations

from enum import IntFlag
from typing import Final

__all__ = [
    "IOC_NRBITS",
    "IOC_REQUEST_MASK",
    "IOC_SIZEBITS",
    "IOC_TYPEBITS",
    "IocDir",
    "ioc",
    "ioc_dir",
    "ioc_nr",
    "ioc_size",
    "ioc_type",
]

IOC_NRBITS: Final = 8
IOC_TYPEBITS: Final = 8
IOC_SIZEBITS: Final = 14
_IOC_DIRBITS: Final = 2
_IOC_NRSHIFT: Final = 0
_IOC_TYPESHIFT: Final = _IOC_NRSHIFT + IOC_NRBITS
_IOC_SIZESHIFT: Final = _IOC_TYPESHIFT + IOC_TYPEBITS
_IOC_DIRSHIFT: Final = _IOC_SIZESHIFT + IOC_SIZEBITS
# SYSCALL_DEFINE3(ioctl, unsigned int, fd, unsigned int, cmd, unsigned long, arg): the request is 32 bits.
IOC_REQUEST_MASK: Final = (1 << (_IOC_DIRSHIFT + _IOC_DIRBITS)) - 1


class IocDir(IntFlag):
    """The direction bits of a request number (the kernel's ``_IOC_NONE``, ``_IOC_WRITE``, ``_IOC_READ``)."""

    IOC_NONE = 0
    IOC_WRITE = 1
    IOC_READ = 2


def ioc(direction: int, type_: int, nr: int, size: int) -> int:
    """``_IOC(dir, type, nr, size)``: the request number."""
    return (direction << _IOC_DIRSHIFT) | (size << _IOC_SIZESHIFT) | (type_ << _IOC_TYPESHIFT) | (nr << _IOC_NRSHIFT)


def ioc_dir(request: int) -> int:
    """``_IOC_DIR(request)``."""
    return (request >> _IOC_DIRSHIFT) & ((1 << _IOC_DIRBITS) - 1)


def ioc_type(request: int) -> int:
    """``_IOC_TYPE(request)``."""
    return (request >> _IOC_TYPESHIFT) & ((1 << IOC_TYPEBITS) - 1)


def ioc_nr(request: int) -> int:
    """``_IOC_NR(request)``."""
    return (request >> _IOC_NRSHIFT) & ((1 << IOC_NRBITS) - 1)


def ioc_size(request: int) -> int:
    """``_IOC_SIZE(request)``: the argument size in bytes the request number encodes."""
    return (request >> _IOC_SIZESHIFT) & ((1 << IOC_SIZEBITS) - 1)
