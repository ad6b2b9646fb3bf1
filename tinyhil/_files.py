"""Replacing a file's content at once: a reader sees the old file or the new one, never part of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["replacing", "write_atomically"]

_UMASK: Final = os.umask(0o022)  # read once, at import: the process's umask has no getter
os.umask(_UMASK)
_NEW_FILE_MODE: Final = 0o666 & ~_UMASK  # what open(path, "w") gives a new file


@contextlib.contextmanager
def replacing(path: Path, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content to: a temporary file beside ``path`` (made with ``path``'s
    folder if missing), renamed over ``path`` when the block ends, removed when it raises. ``durable`` fsyncs the
    data before the rename, so a crash leaves the old file or the new one. The file gets the permissions
    ``open(path, "w")`` would give a new file (the block may change them, ``os.fchmod``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, _NEW_FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            yield out
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: str | bytes, *, durable: bool = False) -> None:
    """Replace ``path``'s content with ``data`` through :func:`replacing`.

    Text is written as UTF-8; what UTF-8 cannot carry (a lone surrogate, as a test's message naming an undecodable
    file name holds) is written as its backslash escape, so the file is whole and valid UTF-8."""
    with replacing(path, durable=durable) as out:
        out.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)
