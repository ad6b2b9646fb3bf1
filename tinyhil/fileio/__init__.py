"""The file-I/O seam (open / close / ioctl / mmap / munmap / read / listdir / exists) and its real implementation.

A KFD client takes a :class:`FileIO` and never touches ``os`` itself, so the same client runs on
:class:`RealFileIO` (a machine with ``/dev/kfd``) and on MOCKKFD's virtual device tree
(``tinyhil.mocks.kfd.MockKFD(...).fileio``).

Modules: :mod:`~tinyhil.fileio.file_io` (the seam), :mod:`~tinyhil.fileio.arguments` (the argument rules every
implementation applies, with Linux's ioctl request encoding from :mod:`tinyhil.spec.linux_ioctl`),
:mod:`~tinyhil.fileio.buffers` (what ``mmap`` returns) and :mod:`~tinyhil.fileio.real`.
"""

from __future__ import annotations

from tinyhil.fileio.buffers import MappedBuffer, OnWrite
from tinyhil.fileio.file_io import FileIO, IoctlArg
from tinyhil.fileio.real import RealFileIO

__all__ = ["FileIO", "IoctlArg", "MappedBuffer", "OnWrite", "RealFileIO"]
