"""The exception classes tinyhil raises.

One base, :class:`TinyHilError`; each subclass also inherits the closest builtin so generic handlers still work.
Errors that cross a seam keep the seam's own vocabulary instead (``usb1`` exceptions on the USB seam, ``OSError``
with a Linux errno on the file seam): these classes are for tinyhil's own API.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CapabilityMissing",
    "CompileError",
    "DetailedDeviceError",
    "DeviceError",
    "DeviceTimeout",
    "InvalidArgument",
    "StateError",
    "TargetUnavailable",
    "TinyHilError",
]


class TinyHilError(Exception):
    """Base class of every error tinyhil raises itself."""


class InvalidArgument(TinyHilError, ValueError):
    """An argument at a public boundary is malformed or out of range."""


class StateError(TinyHilError, RuntimeError):
    """An operation was called on an object in a state that does not allow it."""


class TargetUnavailable(TinyHilError, RuntimeError):
    """A target cannot be opened on this machine; ``reason`` says precisely why."""

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(f"target {target} is unavailable: {reason}")
        self.target = target
        self.reason = reason


class CapabilityMissing(TinyHilError, NotImplementedError):
    """A target was asked for an operation whose capability it does not have."""

    def __init__(self, target: str, capability: str, detail: str = "") -> None:
        message = f"target {target} lacks capability {capability!r}"
        super().__init__(f"{message}: {detail}" if detail else message)
        self.target = target
        self.capability = capability


class DeviceError(TinyHilError, RuntimeError):
    """The device (real or emulated) reported a failure: a queue error, a memory fault, a lost transfer."""

    def __init__(self, message: str, *, target: str = "", op: str = "") -> None:
        super().__init__(message)
        self.target = target
        self.op = op


class DetailedDeviceError(DeviceError):
    """A :class:`DeviceError` with typed fields: subclasses are ``@dataclass(eq=False, repr=False)`` classes that
    declare ``message: InitVar[str]``, then ``_: KW_ONLY`` and their fields, and set ``OP`` (the ``op`` they report).

    The dataclass stores the fields; ``str()`` is the message. Pickling keeps the message and every field (errors
    cross process pools), where the default would call the constructor with the message alone.
    """

    OP: ClassVar[str] = ""

    def __post_init__(self, message: str) -> None:
        DeviceError.__init__(self, message, op=self.OP)

    def __reduce__(self) -> tuple[object, tuple[type[DetailedDeviceError], tuple[object, ...], dict[str, object]]]:
        return _restore_detailed, (type(self), self.args, dict(vars(self)))


def _restore_detailed(
    cls: type[DetailedDeviceError], args: tuple[object, ...], fields: dict[str, object]
) -> DetailedDeviceError:
    error = cls.__new__(cls)
    error.args = args
    vars(error).update(fields)
    return error


class DeviceTimeout(DeviceError, TimeoutError):
    """A wait on the device ran out of (virtual or wall) time; the message names what was awaited."""

    def __new__(cls, *args: Any, **kwargs: Any) -> DeviceTimeout:
        # The instance layout is OSError's. Unpicklers that rebuild an exception as ``cls.__new__(cls, *args)`` (tblib,
        # which Dask installs for every exception class) would otherwise find RuntimeError's ``__new__`` first in the
        # MRO, which refuses an OSError-shaped class. No arguments go to OSError's ``__new__``: it would read them as
        # (errno, strerror); ``__init__`` sets ``args`` as for every other tinyhil error.
        return TimeoutError.__new__(cls)


class CompileError(TinyHilError, RuntimeError):
    """The compiler rejected a program; ``message`` is the compiler's own output."""

    def __init__(self, compiler: str, message: str) -> None:
        super().__init__(f"{compiler} failed to compile:\n{message}")
        self.compiler = compiler
        self.message = message

    def __reduce__(self) -> tuple[type[CompileError], tuple[str, str]]:
        # Crosses process boundaries (worker pool): rebuild from the constructor's arguments, not from str(self).
        return type(self), (self.compiler, self.message)
