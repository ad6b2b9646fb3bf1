"""The farm's inventory: the hardware map, what a host has (discovery), and the drift between the two.

- :mod:`~tinyhil.device_farm.inventory.hwmap`: the hardware map (``hwmap.toml``) and its boards;
- :mod:`~tinyhil.device_farm.inventory.board_options`: a map entry's target options;
- :mod:`~tinyhil.device_farm.inventory.served_boards`: served boards (an emulator under ``tinyhil serve``);
- :mod:`~tinyhil.device_farm.inventory.toml_lines`: where a map's entries are, for errors that name the line;
- :mod:`~tinyhil.device_farm.inventory.discovery`: the boards a host has (sysfs, libusb, NVML);
- :mod:`~tinyhil.device_farm.inventory.map_drift`: map against host (missing, new, changed boards).
"""

from __future__ import annotations

from tinyhil.device_farm.inventory.discovery import Discovery, FoundBoard, discover
from tinyhil.device_farm.inventory.hwmap import (
    Board,
    BoardKind,
    HardwareMap,
    HwmapError,
    emulated_inventory,
    load_hwmap,
    target_inventory,
)
from tinyhil.device_farm.inventory.map_drift import Drift, compare, map_entry

__all__ = [
    "Board",
    "BoardKind",
    "Discovery",
    "Drift",
    "FoundBoard",
    "HardwareMap",
    "HwmapError",
    "compare",
    "discover",
    "emulated_inventory",
    "load_hwmap",
    "map_entry",
    "target_inventory",
]
