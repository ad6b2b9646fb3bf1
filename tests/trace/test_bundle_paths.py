"""A repro bundle names only what lies inside its rootdir and only options its target takes, checked when it is
loaded; and ``tinyhil repro`` takes a bundle file by any name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.scripts import TINYHIL

from tinyhil.trace.bundle import BUNDLE_FILE, BundleError, load_bundle


def _bundle(root: Path, **changes: Any) -> dict[str, Any]:
    data = {"format": "tinyhil-repro", "version": 1, "nodeid": "test_t.py::test_t[MOCKKFD+AMD]",
            "target": "MOCKKFD+AMD", "options": {"gpus": 2}, "outcome": "failed", "when": "call",
            "reason": "AssertionError: boom", "rootdir": str(root), "invocation_dir": str(root)}  # fmt: skip
    return {**data, **changes}


def _load(directory: Path, data: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / BUNDLE_FILE).write_text(json.dumps(data))
    load_bundle(directory)


def test_a_test_path_outside_the_rootdir_is_refused(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "evil.py").write_text("")
    (root / "link.py").symlink_to(elsewhere / "evil.py")
    for test_path in (elsewhere / "evil.py", root / ".." / "elsewhere" / "evil.py", root / "link.py"):
        with pytest.raises(BundleError) as caught:
            _load(tmp_path / "b", _bundle(root, test_path=str(test_path)))
        assert caught.value.field == "test_path" and "outside the rootdir" in str(caught.value)
    (root / "test_t.py").write_text("")
    _load(tmp_path / "b", _bundle(root, test_path=str(root / "test_t.py")))


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [("NULL", {"vram_bytes": 1}, "unknown option 'vram_bytes' for NULL"),
     ("MOCKKFD+AMD", {"gpu": 2}, "did you mean 'gpus'?"), ("MOCKKFD+AMD", {"gpus": 0}, "gpus"),
     ("MOCKKFD+AMD", {"vram_bytes": "big"}, "vram_bytes"), ("NO-SUCH-TARGET", {}, "NO-SUCH-TARGET")],
)  # fmt: skip
def test_options_the_target_refuses_are_refused_at_load(
    tmp_path: Path, target: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(BundleError) as caught:
        _load(tmp_path / "b", _bundle(tmp_path, target=target, options=options, nodeid=f"t.py::t[{target}]"))
    assert caught.value.field in ("options", "target") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_repro_takes_a_bundle_file_by_any_name(tmp_path: Path) -> None:
    (tmp_path / "test_t.py").write_text("def test_t(hil_target):\n    assert False, 'boom'\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.json").write_text(json.dumps(_bundle(tmp_path)))
    done = subprocess.run([str(TINYHIL), "repro", "--on", "emulator", "b/two.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduces: the test failed again" in done.stdout
