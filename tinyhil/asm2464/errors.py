"""Errors of the ASM2464 controller client."""

from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass
from typing import ClassVar

from tinyhil.errors import DetailedDeviceError
from tinyhil.spec.asm2464 import CplStatus, RetStatus

__all__ = ["PcieError"]


@dataclass(eq=False, repr=False)
class PcieError(DetailedDeviceError):
    """A PCIe transaction through the bridge's 0xF0 engine failed.

    Either the completer answered with a non-successful completion status (``cpl_status``: ``UR``, ``CRS``,
    ``CA``, or a reserved value kept as a plain int), or the firmware could not complete the exchange even after
    retries (``ret_status``: ``ERROR`` / ``TIMEOUT``). The message names the TLP type, address and size in hex.
    """

    OP: ClassVar[str] = "pcie_request"
    message: InitVar[str]
    _: KW_ONLY
    fmt_type: int
    address: int
    size: int
    cpl_status: CplStatus | int | None = None
    ret_status: RetStatus | int | None = None
    attempts: int = 1
