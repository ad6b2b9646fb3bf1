"""Errors of the ASM2464 controller client."""

from __future__ import annotations

from tinyhil.errors import DeviceError
from tinyhil.spec.asm2464 import CplStatus, RetStatus

__all__ = ["PcieError"]


class PcieError(DeviceError):
    """A PCIe transaction through the bridge's 0xF0 engine failed.

    Either the completer answered with a non-successful completion status (``cpl_status``: ``UR``, ``CRS``,
    ``CA``, or a reserved value kept as a plain int), or the firmware could not complete the exchange even after
    retries (``ret_status``: ``ERROR`` / ``TIMEOUT``). The message names the TLP type, address and size in hex.
    """

    def __init__(
        self,
        message: str,
        *,
        fmt_type: int,
        address: int,
        size: int,
        cpl_status: CplStatus | int | None = None,
        ret_status: RetStatus | int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message, op="pcie_request")
        self.fmt_type = fmt_type
        self.address = address
        self.size = size
        self.cpl_status = cpl_status
        self.ret_status = ret_status
        self.attempts = attempts
