"""Replacing a file's content at once: a reader sees the old file or the new one, never part of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, data: str | bytes, *, durable: bool = False) -> None:
    """Write ``data`` to a temporary file beside ``path`` (made with ``path``'s folder if missing), then rename it
    over ``path``. ``durable`` fsyncs the data before the rename, so a crash leaves the old file or the new one.

    Text is written as UTF-8; what UTF-8 cannot carry (a lone surrogate, as a test's message naming an undecodable
    file name holds) is written as its backslash escape, so the file is whole and valid UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
