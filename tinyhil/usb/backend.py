"""The real USB backend: find an ASM2464 bridge through ``usb1`` on the system libusb and open a transport to it.

Discovery matches the bridge VID:PIDs of ``docs/asm2464.md`` (``ADD1:0001``, ``3801:0001``), picks a board by serial
number when several are attached, checks the product string (``custom...`` or ``AS2462...``: the custom firmware),
selects configuration 1 (unless the host already has: the device says so) and hands the handle to
:class:`~tinyhil.usb.transport.Usb3Transport`, which claims interface 0. Every way this can fail here raises
:class:`~tinyhil.usb.errors.BridgeUnavailable` with a precise reason, which the ``USB+AMD`` target's probe reports as
is; ``usb1`` errors from the device itself pass through.

``context`` parameters take an *unopened* ``usb1.USBContext``-like object (tests inject one whose ``open()`` raises
the ``OSError`` usb1 raises when libusb is missing); by default a fresh ``usb1.USBContext()`` is used.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Final, Protocol

from tinyhil.spec.asm2464 import BRIDGE_CONFIGURATION, BRIDGE_INTERFACE, BRIDGE_VID_PIDS, PRODUCT_PREFIXES
from tinyhil.usb import typed_usb1
from tinyhil.usb.errors import BridgeUnavailable
from tinyhil.usb.transport import Usb3Transport

__all__ = ["NO_BRIDGE_REASON", "BridgeInfo", "list_bridges", "open_bridge_handle", "open_usb3", "probe_usb3"]


def _vid_pid(vendor_id: int, product_id: int) -> str:
    return f"{vendor_id:04X}:{product_id:04X}"


NO_BRIDGE_REASON: Final = (
    f"no ASM2464 bridge found (looked for {', '.join(_vid_pid(v, p) for v, p in BRIDGE_VID_PIDS)})"
)
_LIBUSB_HINT: Final = "install the system package libusb-1.0-0 (Debian, Ubuntu) or libusb (Homebrew)"


class _Device(Protocol):
    """The ``usb1.USBDevice`` methods discovery uses."""

    def getVendorID(self) -> int: ...
    def getProductID(self) -> int: ...
    def getBusNumber(self) -> int: ...
    def getDeviceAddress(self) -> int: ...
    def getSerialNumber(self) -> str | None: ...
    def open(self) -> Any: ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class BridgeInfo:
    """An attached bridge as enumeration sees it (no handle is opened to list it)."""

    vendor_id: int
    product_id: int
    bus: int
    address: int

    def __str__(self) -> str:
        return f"{_vid_pid(self.vendor_id, self.product_id)} at bus {self.bus} address {self.address}"


def _open_context(context: Any) -> Any:
    """Open ``context`` (a fresh ``usb1.USBContext`` when ``None``); libusb trouble becomes BridgeUnavailable."""
    ctx = typed_usb1.new_context() if context is None else context
    try:
        ctx.open()
    except OSError as exc:  # usb1 raises OSError(ENOENT) when it cannot load the C library
        raise BridgeUnavailable(f"libusb-1.0 not found: {exc}; {_LIBUSB_HINT}") from exc
    except typed_usb1.USBError as exc:
        raise BridgeUnavailable(f"libusb-1.0 failed to initialise: {exc}") from exc
    return ctx


def _bridges(ctx: Any) -> list[_Device]:
    found: list[_Device] = []
    for device in ctx.getDeviceIterator(skip_on_error=True):
        if (device.getVendorID(), device.getProductID()) in BRIDGE_VID_PIDS:
            found.append(device)
        else:
            device.close()
    return found


def _info(device: _Device) -> BridgeInfo:
    return BridgeInfo(device.getVendorID(), device.getProductID(), device.getBusNumber(), device.getDeviceAddress())


def _serial_of(device: _Device) -> str:
    try:
        return repr(device.getSerialNumber())
    except typed_usb1.USBError as exc:
        return f"<serial unreadable: {exc}>"


def list_bridges(*, context: Any = None) -> tuple[BridgeInfo, ...]:
    """Every attached ASM2464 bridge (possibly none), without opening any of them.

    Raises:
        BridgeUnavailable: libusb is missing or fails to initialise.
    """
    ctx = _open_context(context)
    try:
        devices = _bridges(ctx)
        infos = tuple(_info(device) for device in devices)
        for device in devices:
            device.close()
        return infos
    finally:
        ctx.close()


def probe_usb3(*, context: Any = None) -> str | None:
    """``None`` when at least one bridge is attached, else the precise reason none can be used here.

    The reasons are ``"libusb-1.0 not found: ..."``, ``"libusb-1.0 failed to initialise: ..."`` and
    :data:`NO_BRIDGE_REASON`. Probing opens no device.
    """
    try:
        bridges = list_bridges(context=context)
    except BridgeUnavailable as exc:
        return exc.reason
    return None if bridges else NO_BRIDGE_REASON


def _choose(devices: list[_Device], serial: str | None) -> _Device:
    if not devices:
        raise BridgeUnavailable(NO_BRIDGE_REASON)
    if serial is None:
        if len(devices) == 1:
            return devices[0]
        listing = ", ".join(f"{_info(d)} serial {_serial_of(d)}" for d in devices)
        raise BridgeUnavailable(f"{len(devices)} ASM2464 bridges attached ({listing}); pass serial= to choose one")
    for device in devices:
        with contextlib.suppress(typed_usb1.USBError):
            if device.getSerialNumber() == serial:
                return device
    listing = ", ".join(f"{_info(d)} serial {_serial_of(d)}" for d in devices)
    raise BridgeUnavailable(f"no ASM2464 bridge with serial {serial!r} (attached: {listing})")


def _check_product(handle: Any, device: _Device) -> None:
    product = handle.getProduct()
    if not isinstance(product, str) or not product.startswith(PRODUCT_PREFIXES):
        expected = " or ".join(repr(p) for p in PRODUCT_PREFIXES)
        raise BridgeUnavailable(
            f"ASM2464 bridge {_info(device)} reports product {product!r}, expected one starting with {expected} "
            "(is the custom firmware flashed?)"
        )


def _detach_kernel_driver_on_claim(handle: Any) -> None:
    """Have libusb detach a kernel driver bound to interface 0 when the transport claims it (else claiming fails).

    Only when one is bound: with auto-detach on, libusb claims through usbfs's disconnect ioctls even when no driver
    is bound, and a usbfs without them (umockdev's) fails the claim with ``LIBUSB_ERROR_OTHER``. Where the host
    cannot tell (``kernelDriverActive`` raises: ``USBErrorNotSupported`` where libusb has no such query,
    ``USBErrorOther`` under umockdev) nothing is detached: a driver bound after all shows as ``USBErrorBusy`` at the
    claim.
    Optional: an emulated usb1 stack has no kernel drivers and need not offer the calls.
    """
    detach = getattr(handle, "setAutoDetachKernelDriver", None)
    if detach is None:
        return
    driver_active = getattr(handle, "kernelDriverActive", None)
    if driver_active is not None:
        try:
            if not driver_active(BRIDGE_INTERFACE):
                return
        except typed_usb1.USBError:
            return
    with contextlib.suppress(typed_usb1.USBErrorNotSupported):
        detach(True)


def _select_configuration(handle: Any) -> None:
    """Put the bridge in configuration 1 when it is not in it already.

    A host that enumerated the device has configured it (Linux picks configuration 1 for the bridge), and usbfs
    turns SET_CONFIGURATION of the active configuration into a reset of the configuration's endpoints (umockdev
    refuses it: ``LIBUSB_ERROR_OTHER``), so the real path asks first (``getConfiguration``, which libusb answers from
    sysfs without a transfer). Every handle asks the same way: the emulated one answers from the bridge's state, a
    replay one from its trace. A handle that cannot say (no ``getConfiguration``) is configured.
    """
    get_configuration = getattr(handle, "getConfiguration", None)
    if get_configuration is not None and get_configuration() == BRIDGE_CONFIGURATION:
        return
    handle.setConfiguration(BRIDGE_CONFIGURATION)


def open_bridge_handle(serial: str | None = None, *, context: Any = None) -> tuple[Any, Any]:
    """Find, open and configure the bridge (see :func:`open_usb3`); return ``(handle, opened context)``.

    For transports built on the same discovery (``MockUSB3`` opens its emulated board through here, so the checks a
    real board gets run on the emulated one too). The caller owns both and closes the handle before the context.
    Configuration 1 is selected only when the device is in another one (:func:`_select_configuration`).
    """
    if serial is not None and not isinstance(serial, str):
        raise BridgeUnavailable(f"serial={serial!r}, expected a string (the USB serial number) or None")
    ctx = _open_context(context)
    handle: Any = None
    try:
        devices = _bridges(ctx)
        device = _choose(devices, serial)
        for other in devices:
            if other is not device:
                other.close()
        handle = device.open()
        _check_product(handle, device)
        _detach_kernel_driver_on_claim(handle)
        _select_configuration(handle)
        return handle, ctx
    except BaseException:
        if handle is not None:
            handle.close()
        ctx.close()
        raise


def open_usb3(serial: str | None = None, *, context: Any = None) -> Usb3Transport:
    """Open the attached ASM2464 bridge (the one with serial number ``serial`` when several are attached).

    The returned transport owns the handle and the libusb context: closing it closes both.

    Raises:
        BridgeUnavailable: libusb missing, no bridge attached, several attached and no ``serial``, no bridge with
            that serial, or a product string that is not the custom firmware's.
        usb1.USBError: the device refused to open, configure or give up its interface (e.g. ``USBErrorAccess``:
            check the udev rules; ``USBErrorBusy``: another process has it).
    """
    handle, ctx = open_bridge_handle(serial, context=context)
    try:
        return Usb3Transport(handle, ctx, on_close=ctx.close)
    except BaseException:
        handle.close()
        ctx.close()
        raise
