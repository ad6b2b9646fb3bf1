"""The PCI device id of the board this project models for each AMD GPU version.

Keyed by ``gfx_target_version`` (KFD's encoding: major * 10000 + minor * 100 + stepping). Each id is the one the
Linux graphics stack names that board by: mesa/drm's ``data/amdgpu.ids`` (libdrm's marketing-name table, ``device_id,
revision_id, product_name``); docs/amdgpu.md, "Device ids", cites it. The bring-up of the USB path reads the id from
config space, MOCKKFD writes it to each node's ``device_id`` property; neither model's behaviour depends on it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEVICE_IDS"]

DEVICE_IDS: Final[dict[int, int]] = {
    90008: 0x738C,  # gfx908, Instinct MI100
    90010: 0x740F,  # gfx90a, Instinct MI210
    90402: 0x74A1,  # gfx942, Instinct MI300X
    90500: 0x75A3,  # gfx950, Instinct MI355X (0x75A0 is the MI350X)
    100300: 0x73BF,  # gfx1030, Navi 21 (RX 6800/6900)
    110000: 0x744C,  # gfx1100, Navi 31 (RX 7900 XTX)
    110001: 0x747E,  # gfx1101, Navi 32 (RX 7800 XT)
    110002: 0x7480,  # gfx1102, Navi 33 (RX 7600)
    120001: 0x7550,  # gfx1201, Navi 48 (RX 9070 XT)
}
