"""The one check of a USB request, shared by the synchronous calls (``handle.py``) and the transfers (``transfer.py``).

Each request kind has one validator, called once per transfer on either path: :func:`check_control` and
:func:`check_bulk`. Both follow what ``usb1`` (PyPI libusb1 3.x) does with its arguments, which it hands to ctypes:

- An integer field (``request_type``, ``request``, ``value``, ``index``, ``endpoint``, ``timeout``) is anything with
  ``__index__`` (an ``int``, a ``bool``, an ``IntEnum``, a numpy integer), taken as that integer. Anything else is
  :class:`ArgumentTypeError`, which is both of what ``usb1`` raises: ``ctypes.ArgumentError`` from its
  synchronous calls (ctypes ``argtypes``) and ``TypeError`` from its transfers (ctypes structure fields).
- An integer out of its field's range (8 bits, 16 bits, 32 bits for the timeout) is ``USBErrorInvalidParam``. This
  is one deliberate difference: ctypes truncates it silently (``value=0x10000`` goes out as ``wValue`` 0), so
  ``usb1`` would send a request the caller did not write; the error says what it would have sent.
- A timeout beyond :data:`MAX_TIMEOUT_MS` (2 virtual hours, the emulator's wait cap
  :data:`~tinyhil.emulators.asm2464.WAIT_CAP_NS`) is ``USBErrorInvalidParam`` too, the other deliberate difference
  (:func:`check_timeout` says why).
- A length is an ``int`` (``bool`` included, as ``isinstance`` has it); a negative one is ``ValueError``
  (``bytearray``'s "negative count"). Data is the first ``len(data)`` bytes of any object with a length that
  ``bytearray()`` accepts (``usb1``'s ``create_initialised_buffer``; for a buffer of items wider than a byte that
  is fewer bytes than it holds, as with ``usb1``); anything else is ``TypeError``. A writable contiguous buffer is
  used in place and anything else is copied, as ``usb1`` does. Control data or length beyond wLength's 16 bits is
  ``USBErrorInvalidParam`` (``usb1`` would truncate wLength). ``usb1``'s ``setControl`` alone concatenates its
  data to the setup bytes instead, refusing a list of ints; the emulated one applies the rule above.
- The synchronous calls force the direction (``controlRead`` / ``bulkRead`` set bit 7, the writes clear it) and
  take a length to read or data to write, never the other (``controlWrite(data=5)`` is ``TypeError``, as
  ``len(5)`` is in ``usb1``); a transfer takes the direction from ``request_type`` / ``endpoint`` and either.
- A bulk endpoint the bridge does not have is ``USBErrorIO`` (usbfs has no such endpoint), from the synchronous
  call or from ``submit()``, where libusb reports it (:data:`BULK_ENDPOINTS`, :func:`no_such_endpoint`).
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, Final, Literal, overload

import usb1  # type: ignore[import-untyped]  # libusb1 ships no type information

from tinyhil.emulators.asm2464 import UNBOUNDED_WAIT_NS
from tinyhil.mocks.usb._errors import invalid_param
from tinyhil.spec.asm2464 import BULK_IN_EP, BULK_OUT_EP, MAX_TIMEOUT_MS

__all__ = [
    "BULK_ENDPOINTS",
    "DIRECTION_IN",
    "DIRECTION_OUT",
    "MAX_TIMEOUT_MS",
    "NS_PER_MS",
    "U8",
    "U16",
    "U32",
    "ArgumentTypeError",
    "check_bulk",
    "check_control",
    "check_field",
    "check_timeout",
    "no_such_endpoint",
]

NS_PER_MS: Final = 1_000_000
U8: Final = 0xFF
U16: Final = 0xFFFF
U32: Final = 0xFFFFFFFF  # libusb's timeout is an unsigned int of milliseconds
DIRECTION_IN: Final = 0x80  # usb1.ENDPOINT_IN
DIRECTION_OUT: Final = 0x00  # usb1.ENDPOINT_OUT
BULK_ENDPOINTS: Final = frozenset({BULK_OUT_EP, BULK_IN_EP})

_Setup = tuple[int, int, int, int]
_Data = memoryview | bytearray


class ArgumentTypeError(ctypes.ArgumentError, TypeError):
    """An integer field that is not an integer (usb1 raises ctypes.ArgumentError or TypeError: this is both)."""


def check_field(name: str, value: Any, limit: int) -> int:
    """``value`` as the plain int ctypes would pass for a field of ``0..limit``.

    Raises:
        ArgumentTypeError: ``value`` has no ``__index__``.
        usb1.USBErrorInvalidParam: it is out of range (ctypes would truncate it).
    """
    try:
        number = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{name}={value!r}, expected an int in 0..{limit:#x} (usb1 hands it to ctypes)"
        ) from None
    if not 0 <= number <= limit:
        truncated = number & limit
        raise invalid_param(
            f"{name}={value!r}, expected an int in 0..{limit:#x} (ctypes would truncate it to {truncated:#x})"
        )
    return number


def check_timeout(timeout: Any) -> int:
    """``timeout`` (milliseconds, 0 for libusb's "no timeout") as the plain int of a field of ``0..MAX_TIMEOUT_MS``.

    libusb takes any unsigned int (up to 49.7 days) and a real device would be waited on that long. The emulator
    cannot honour more than its wait cap: a wait of days in virtual time can take hours on the host while a model
    schedules events (the GPU polls), and ending such a transfer with ``USBErrorTimeout`` at the cap would report a
    timeout the caller did not ask for (the transfer might have completed later on hardware). So a longer timeout
    is a parameter this device cannot take, refused up front before any state changes, with the usb1 class libusb
    gives a parameter it cannot honour: ``USBErrorInvalidParam``, naming the limit. ``0`` waits
    :data:`~tinyhil.emulators.asm2464.UNBOUNDED_WAIT_NS` (1 h), within the cap.

    Raises:
        ArgumentTypeError: ``timeout`` has no ``__index__``.
        usb1.USBErrorInvalidParam: it is negative, past libusb's 32 bits (ctypes would truncate it) or beyond
            :data:`MAX_TIMEOUT_MS`.
    """
    number = check_field("timeout", timeout, U32)
    if number > MAX_TIMEOUT_MS:
        raise invalid_param(
            f"timeout={timeout!r} ms, expected at most {MAX_TIMEOUT_MS} ms (2 h, the emulator's virtual wait cap "
            f"WAIT_CAP_NS); pass a shorter timeout, or 0 for libusb's unbounded wait ({UNBOUNDED_WAIT_NS // NS_PER_MS} "
            "ms here)"
        )
    return number


def no_such_endpoint(endpoint: int) -> usb1.USBError:
    """``USBErrorIO`` for a bulk endpoint not in :data:`BULK_ENDPOINTS` (usbfs refuses the URB; it never moves)."""
    error = usb1.USBErrorIO(usb1.ERROR_IO)
    error.add_note(f"endpoint={endpoint:#04x}, expected {BULK_OUT_EP:#04x} (bulk OUT) or {BULK_IN_EP:#04x} (bulk IN)")
    return error


_WANTED: Final = {
    "data": "a bytes-like object",
    "length": "an int",
    "buffer_or_len": "an int (a length) or a bytes-like object",
}


def _negative(length: int) -> ValueError:
    return ValueError(f"length={length}, expected >= 0 (negative count)")


def _data(data: Any, *, in_place: bool, name: str) -> _Data:
    """usb1's ``create_initialised_buffer``: the first ``len(data)`` bytes; in place when writable, else a copy.

    ``in_place=False`` (data a synchronous write sends before it returns) takes a read-only buffer without a copy
    and always gives a ``memoryview``.
    """
    if isinstance(data, str):
        raise TypeError(f"{name}={data!r}, expected {_WANTED[name]} (a str has no bytes: encode it)")
    try:
        size = len(data)
    except TypeError:
        raise TypeError(f"{name}={data!r}, expected {_WANTED[name]} (it has no length)") from None
    try:
        view = memoryview(data)
    except TypeError:
        try:
            copy = bytearray(data)  # a sequence of ints, which usb1 accepts too
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name}={type(data).__name__} object, expected {_WANTED[name]} ({error})") from None
        return copy[:size] if in_place else memoryview(copy)[:size]
    if not view.c_contiguous or (view.readonly and in_place):
        copy = bytearray(view)
        return copy[:size] if in_place else memoryview(copy)[:size]
    flat = view if view.format == "B" and view.ndim == 1 else view.cast("B")
    return flat[:size] if size != len(flat) else flat


def _not_a_length(length: Any, method: str) -> ArgumentTypeError:
    """A synchronous read's length that is no int: usb1 makes its buffer of it (``TypeError`` when it has no
    bytes), then ctypes refuses it as the length."""
    _data(length, in_place=False, name="length")
    return ArgumentTypeError(f"length={length!r}, expected an int ({method} reads a length)")


def _as_view(data: Any, direction: int | None) -> memoryview:
    view = _data(data, in_place=False, name="buffer_or_len" if direction is None else "data")
    assert type(view) is memoryview  # _data gives a view when not in place
    return view


def check_control(
    request_type: Any, request: Any, value: Any, index: Any, data_or_length: Any, timeout: Any, direction: int | None
) -> tuple[_Setup, int, memoryview | None, int]:
    """The one check of a control request: ``(setup, wLength, data or None, deadline_ns)``.

    ``direction`` is :data:`DIRECTION_IN` for ``controlRead`` (``data_or_length`` a length),
    :data:`DIRECTION_OUT` for ``controlWrite`` (data) and ``None`` for ``setControl`` (either; the direction is
    bit 7 of ``request_type``). The data comes back only when the caller passed some.

    Raises:
        ArgumentTypeError, TypeError, ValueError, usb1.USBErrorInvalidParam: as usb1 would (module docstring).
    """
    if not (
        type(request_type) is type(request) is type(value) is type(index) is type(timeout) is int
        and 0 <= request_type <= U8
        and 0 <= request <= U8
        and 0 <= value <= U16
        and 0 <= index <= U16
        and 0 <= timeout <= MAX_TIMEOUT_MS
    ):
        request_type, request = check_field("request_type", request_type, U8), check_field("request", request, U8)
        value, index = check_field("value", value, U16), check_field("index", index, U16)
        timeout = check_timeout(timeout)
    if direction is not None:
        request_type = request_type & ~usb1.ENDPOINT_DIR_MASK | direction
    data: memoryview | None = None
    if isinstance(data_or_length, int) and direction != DIRECTION_OUT:
        if data_or_length < 0:
            raise _negative(data_or_length)
        length = int(data_or_length)  # a bool is a length too, as usb1's bytearray(length) has it
    elif direction == DIRECTION_IN:
        raise _not_a_length(data_or_length, "controlRead")
    elif isinstance(data_or_length, int):
        raise TypeError(f"data={data_or_length!r}, expected a bytes-like object to send (controlWrite sends data)")
    else:
        kind = type(data_or_length)
        if kind is bytes:
            data = memoryview(data_or_length)
        elif kind is memoryview and data_or_length.ndim == 1 and data_or_length.format == "B":  # the transport's views
            data = data_or_length if data_or_length.c_contiguous else _as_view(data_or_length, direction)
        else:
            data = _as_view(data_or_length, direction)
        length = len(data)
    if length > U16:
        raise invalid_param(f"control data of {length:#x} bytes, expected at most 0xffff (wLength is 16 bits)")
    return (request_type, request, value, index), length, data, timeout * NS_PER_MS if timeout else UNBOUNDED_WAIT_NS


@overload
def check_bulk(
    endpoint: Any, buffer_or_len: Any, timeout: Any, direction: Literal[0x00]
) -> tuple[int, int, memoryview, int]: ...
@overload
def check_bulk(
    endpoint: Any, buffer_or_len: Any, timeout: Any, direction: Literal[0x80]
) -> tuple[int, int, None, int]: ...
@overload
def check_bulk(endpoint: Any, buffer_or_len: Any, timeout: Any, direction: None) -> tuple[int, int, _Data, int]: ...
def check_bulk(
    endpoint: Any, buffer_or_len: Any, timeout: Any, direction: int | None
) -> tuple[int, int, _Data | None, int]:
    """The one check of a bulk request: ``(endpoint, length, buffer or None, deadline_ns)``.

    ``direction`` is :data:`DIRECTION_IN` for ``bulkRead`` (a length; no buffer comes back),
    :data:`DIRECTION_OUT` for ``bulkWrite`` (data to send, a read-only buffer not copied) and ``None`` for
    ``setBulk`` (a length, which gets a zeroed buffer, or a buffer, used in place when writable). The endpoint is
    not checked against :data:`BULK_ENDPOINTS`: the caller does that where libusb would.

    Raises:
        ArgumentTypeError, TypeError, ValueError, usb1.USBErrorInvalidParam: as usb1 would (module docstring).
    """
    if not (type(endpoint) is type(timeout) is int and 0 <= endpoint <= U8 and 0 <= timeout <= MAX_TIMEOUT_MS):
        endpoint, timeout = check_field("endpoint", endpoint, U8), check_timeout(timeout)
    if direction is not None:
        endpoint = endpoint & ~usb1.ENDPOINT_DIR_MASK | direction
    deadline_ns = timeout * NS_PER_MS if timeout else UNBOUNDED_WAIT_NS
    # a flat byte view (the copy path's chunks) is used as it is
    if (
        type(buffer_or_len) is memoryview
        and direction != DIRECTION_IN
        and buffer_or_len.ndim == 1
        and buffer_or_len.format == "B"
        and buffer_or_len.c_contiguous
        and not (buffer_or_len.readonly and direction is None)
    ):
        return endpoint, len(buffer_or_len), buffer_or_len, deadline_ns
    if isinstance(buffer_or_len, int) and direction != DIRECTION_OUT:
        if buffer_or_len < 0:
            raise _negative(buffer_or_len)
        length = int(buffer_or_len)  # a bool is a length too, as usb1's bytearray(length) has it
        return endpoint, length, None if direction is not None else bytearray(length), deadline_ns
    if direction == DIRECTION_IN:
        raise _not_a_length(buffer_or_len, "bulkRead")
    if isinstance(buffer_or_len, int):
        raise TypeError(f"data={buffer_or_len!r}, expected a bytes-like object to send (bulkWrite sends data)")
    buffer = _data(buffer_or_len, in_place=direction is None, name="data" if direction is not None else "buffer_or_len")
    return endpoint, len(buffer), buffer, deadline_ns
