"""``REAL_FIRMWARE``: the mark of a test that needs the gfx1100 firmware files installed (``/lib/firmware/amdgpu``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhil.spec.amdgpu_firmware import FIRMWARE_DIR, FIRMWARE_PACKAGE, GFX1100_FIRMWARE

REAL_FIRMWARE = pytest.mark.skipif(
    not all(Path(FIRMWARE_DIR, name).is_file() for name in GFX1100_FIRMWARE),
    reason=f"the gfx1100 firmware files are not in {FIRMWARE_DIR}: install {FIRMWARE_PACKAGE}",
)
