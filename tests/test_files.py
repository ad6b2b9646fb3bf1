"""The one way to replace a file's content at once (tinyhil._files): the old file or the new one, nothing between."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tinyhil._files import replacing, write_atomically


def test_a_text_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "made" / "here.json"
    write_atomically(path, "first")
    write_atomically(path, b"second", durable=True)
    assert path.read_bytes() == b"second"
    assert [p.name for p in path.parent.iterdir()] == ["here.json"]


def test_a_block_that_raises_keeps_the_old_file_and_removes_the_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="half way"), replacing(path) as out:
        out.write(b"new, but only half")
        raise RuntimeError("half way")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.bin"]


def test_a_new_file_gets_the_mode_open_gives_and_the_block_may_change_it(tmp_path: Path) -> None:
    (tmp_path / "opened").write_text("")
    write_atomically(tmp_path / "replaced", "")
    assert stat.S_IMODE((tmp_path / "replaced").stat().st_mode) == stat.S_IMODE((tmp_path / "opened").stat().st_mode)
    with replacing(tmp_path / "tool") as out:
        os.fchmod(out.fileno(), 0o755)
    assert stat.S_IMODE((tmp_path / "tool").stat().st_mode) == 0o755
