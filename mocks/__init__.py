"""Drop-in seam implementations over the emulators; their targets register through ``tinyhil.mocks.targets``.

- :class:`MockUSB3`: an emulated ASM2464 board (and the AMD GPU behind it) behind the USB transport seam.
- :class:`MockKFD`: a virtual ``/dev/kfd``, render nodes and KFD sysfs topology over emulated AMD GPUs.
- :func:`open_mock_usb3`: the bridge level of the ``MOCKUSB+AMD`` target.

The names load on first use: the registry's entry point imports ``tinyhil.mocks.targets`` (and so this package) for
every ``tinyhil targets``, which must not pay for the emulators.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tinyhil.mocks.kfd import MockKFD
    from tinyhil.mocks.targets import open_mock_usb3
    from tinyhil.mocks.usb3 import MockUSB3

__all__ = ["MockKFD", "MockUSB3", "open_mock_usb3"]

_name2module: Final = {"MockKFD": "tinyhil.mocks.kfd", "MockUSB3": "tinyhil.mocks.usb3",
                       "open_mock_usb3": "tinyhil.mocks.targets"}  # fmt: skip


def __getattr__(name: str) -> Any:
    """Import an exported mock when it is first used (PEP 562)."""
    module = _name2module.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
