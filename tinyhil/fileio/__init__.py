"""The file-I/O seam (open / close / ioctl / mmap / munmap / read / listdir / exists) and its real implementation.

A KFD client takes a :class:`FileIO` and never touches ``os`` itself, so the same client runs on
:class:`RealFileIO` (a machine with ``/dev/kfd``) and on MOCKKFD's virtual device tree
(``tinyhil.mocks.kfd.MockKFD(...).fileio``).
"""

from __future__ import annotations

from tinyhil.fileio.buffers import MappedBuffer, OnWrite
from tinyhil.fileio.protocol import FileIO, IoctlArg
from tinyhil.fileio.real import RealFileIO

__all__ = ["FileIO", "IoctlArg", "MappedBuffer", "OnWrite", "RealFileIO"]
