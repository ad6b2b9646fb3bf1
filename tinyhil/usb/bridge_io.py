"""What a driver of the ASM2464 bridge needs from a transport: the API of :class:`Usb3Transport`, as protocols.

:class:`~tinyhil.usb.transport.Usb3Transport` implements both (over ``usb1`` or the emulated handle); anything else
that offers the same methods (a MockUSB3 that is not built on the transport, a recording proxy) works with the
ASM2464 client and the copyin protocol unchanged. Timeouts are in milliseconds.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tinyhil._check import check_int
from tinyhil.spec.asm2464 import MAX_TIMEOUT_MS

__all__ = ["MAX_TIMEOUT_MS", "AsyncBridgeIO", "BridgeIO", "check_timeout_ms"]


def check_timeout_ms(timeout: object) -> int:
    """``timeout`` if it is a transfer timeout a bridge takes: an int of milliseconds in ``1..MAX_TIMEOUT_MS``.

    libusb reads 0 as "wait forever", and tinyhil never waits forever, so a bound is required (past 32 bits ctypes
    would even truncate it: ``1 << 32`` would go out as 0, forever). The one check of a timeout for every BridgeIO
    call and for the drivers above them, which run it before their first request so a bad timeout sends nothing.

    Raises:
        InvalidArgument: ``timeout`` is no int (a bool neither), or outside ``1..MAX_TIMEOUT_MS`` (2 h).
    """
    if type(timeout) is int and 1 <= timeout <= MAX_TIMEOUT_MS:
        return timeout
    return check_int("timeout (ms)", timeout, min_value=1, max_value=MAX_TIMEOUT_MS)


@runtime_checkable
class BridgeIO(Protocol):
    """Synchronous vendor requests and bulk transfers, and a pause that lets an emulated clock advance."""

    def control_write(self, request: int, value: int = 0, index: int = 0, data: Any = b"", timeout: int = 1000) -> None:
        """Vendor control OUT (0x40)."""

    def control_read(self, request: int, length: int, value: int = 0, index: int = 0, timeout: int = 1000) -> Any:
        """Vendor control IN (0xC0) of exactly ``length`` bytes."""

    def bulk_write(self, payload: Any, timeout: int = 1000) -> None:
        """Bulk OUT on 0x02."""

    def bulk_read(self, length: int, timeout: int = 1000) -> Any:
        """Bulk IN on 0x81 of exactly ``length`` bytes."""

    def pause(self, seconds: float) -> None:
        """Wait about ``seconds`` (pumping USB events)."""


@runtime_checkable
class AsyncBridgeIO(BridgeIO, Protocol):
    """Tagged asynchronous transfers on top of :class:`BridgeIO` (reaped with ``bulk_wait``)."""

    def bulk_write_async(self, payload: Any, timeout: int = 10_000) -> int:
        """Submit a bulk OUT; the payload must stay unchanged until the tag is reaped."""

    def control_write_async(
        self, request: int, value: int = 0, index: int = 0, data: Any = b"", timeout: int = 1000
    ) -> int:
        """Submit a vendor control OUT."""

    def control_read_async(
        self, request: int, length: int, value: int = 0, index: int = 0, timeout: int = 1000
    ) -> tuple[int, bytearray]:
        """Submit a vendor control IN; the buffer is filled once the tag is reaped."""

    def bulk_read_into(self, buffer: Any, timeout: int = 1000) -> None:
        """Bulk IN on 0x81 of exactly ``len(buffer)`` bytes into ``buffer`` (an asynchronous transfer, reaped)."""

    def bulk_wait(self, tag: int | None) -> None:
        """Pump events until ``tag`` completes (a tag not in flight, ``None`` too, returns at once); raises the
        oldest latched async failure once."""

    def clear_error(self) -> tuple[BaseException, ...]:
        """Drop latched async failures that have not surfaced (after recovering); returns them."""

    def clear_halt(self, endpoint: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on a bulk endpoint (also resets the bridge's 0xF2 engine)."""
