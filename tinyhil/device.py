"""The device runtime seam: the operations a test performs on any device target.

Every device target (NULL, emulated, real hardware) implements :class:`Device` with the same meaning. Most
implement it by subclassing :class:`DeviceBase`, which validates every argument in one place and forwards to
``_``-prefixed hooks, so "same meaning" is enforced by construction rather than by convention.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Final, ParamSpec, Protocol, TypeVar, runtime_checkable

from tinyhil._check import (
    GRID_MAX_DIM,
    GRID_MAX_SIZE,
    HOST_NATIVE_MAX_WORKGROUPS,
    WORKGROUP_MAX_DIM,
    WORKGROUP_MAX_SIZE,
    as_readonly_bytes,
    as_writable_bytes,
    check_int,
    check_launch,
    check_range,
)
from tinyhil._state import requires_open
from tinyhil.errors import CapabilityMissing, InvalidArgument
from tinyhil.profile import ProfileEvent, ProfileRangeEvent, profile_key

__all__ = [
    "GRID_MAX_DIM",
    "GRID_MAX_SIZE",
    "HOST_NATIVE_MAX_WORKGROUPS",
    "RUNTIME_CAPABILITIES",
    "WORKGROUP_MAX_DIM",
    "WORKGROUP_MAX_SIZE",
    "Buffer",
    "Device",
    "DeviceBase",
    "Dim3",
    "KernelArg",
    "Program",
    "requires_open",
]

# Capabilities that name runtime operations; a target lists those it implements.
RUNTIME_CAPABILITIES: Final = frozenset({"copyin", "copyout", "copy", "fill", "exec", "compile", "timestamps"})
_U64_MAX: Final = (1 << 64) - 1
_I64_MIN: Final = -(1 << 63)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A device allocation: ``nbytes`` bytes at device address ``addr``, owned by the device named ``device``."""

    device: str
    addr: int
    nbytes: int
    handle: int

    def __repr__(self) -> str:
        return f"Buffer({self.device}, addr={self.addr:#x}, nbytes={self.nbytes:#x}, handle={self.handle})"


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled program: its entry-point ``name`` and the compiler's output ``binary``.

    ``key`` (a content hash of the binary) identifies it on profiling timelines, so two programs with the same name
    and different code never merge.
    """

    name: str
    binary: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgument(f"name={self.name!r}, expected a non-empty entry-point name")
        if not isinstance(self.binary, bytes):
            raise InvalidArgument(f"binary={type(self.binary).__name__} object, expected bytes")

    @property
    def key(self) -> str:
        return profile_key(self.binary)

    def __repr__(self) -> str:
        return f"Program({self.name!r}, {len(self.binary)} bytes, key={self.key})"


KernelArg = Buffer | int
Dim3 = tuple[int, int, int]


@runtime_checkable
class Device(Protocol):
    """An opened device target. Use it as a context manager; leaving it releases everything it holds."""

    @property
    def name(self) -> str: ...
    @property
    def capabilities(self) -> frozenset[str]: ...
    @property
    def profile_events(self) -> list[ProfileEvent]: ...
    def alloc(self, nbytes: int) -> Buffer: ...
    def free(self, buf: Buffer) -> None: ...
    def copyin(self, buf: Buffer, data: Any, offset: int = 0) -> None: ...
    def copyout(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> bytearray: ...
    def copyout_into(self, buf: Buffer, out: Any, offset: int = 0) -> None: ...
    def fill(self, buf: Buffer, value: int, nbytes: int | None = None, offset: int = 0) -> None: ...
    def copy(self, dst: Buffer, src: Buffer, nbytes: int | None = None) -> None: ...
    def compile(self, source: str | bytes, name: str) -> Program: ...
    def exec(
        self, program: Program, grid: int | Sequence[int], local: int | Sequence[int], args: Sequence[KernelArg]
    ) -> None: ...
    def synchronize(self) -> None: ...
    def timestamp(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> Device: ...
    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None: ...


P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D", bound="DeviceBase")


class DeviceBase:
    """Validation, bookkeeping and profiling shared by every device implementation.

    Subclasses set ``capabilities`` and implement the hooks ``_alloc``, ``_free``, ``_copyin``, ``_copyout``,
    ``_fill``, ``_copy``, ``_compile``, ``_exec``, ``_synchronize``, ``_now_ns`` and ``_close`` for the
    capabilities they claim. A hook whose capability is missing is never reached: the public method raises
    :class:`CapabilityMissing` first.

    ``max_workgroups`` caps the workgroups of one :meth:`exec`, on top of the AMD launch limits every target
    checks (``tinyhil._check.check_launch``): by default :data:`HOST_NATIVE_MAX_WORKGROUPS`, what the emulated
    GPUs' host-native executor runs, so a launch one target accepts runs on every emulated target.
    """

    max_workgroups: ClassVar[int] = HOST_NATIVE_MAX_WORKGROUPS

    def __init__(self, name: str, capabilities: frozenset[str]) -> None:
        self._name = name
        self._capabilities = frozenset(capabilities)
        self.closed = False
        self._handles = itertools.count(1)
        self._live: dict[int, Buffer] = {}
        self._profile: list[ProfileEvent] = []

    # --- seam properties ---------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def capabilities(self) -> frozenset[str]:
        return self._capabilities

    @property
    def profile_events(self) -> list[ProfileEvent]:
        return list(self._profile)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._live)} buffers"
        return f"<{type(self).__name__} {self._name} ({state})>"

    # --- validation helpers ------------------------------------------------------------------------------------
    def _require(self, capability: str) -> None:
        if capability not in self._capabilities:
            raise CapabilityMissing(self._name, capability)

    def _check_buffer(self, name: str, buf: Any) -> Buffer:
        if not isinstance(buf, Buffer):
            raise InvalidArgument(f"{name}={buf!r}, expected a Buffer from {self._name}.alloc()")
        if buf.device != self._name or self._live.get(buf.handle) != buf:
            raise InvalidArgument(
                f"{name}={buf!r} is not a live buffer of {self._name} (freed, or from another device)"
            )
        return buf

    def _span(self, what: str, buf: Buffer, nbytes: int | None, offset: int) -> int:
        check_int(f"{what} offset", offset, min_value=0)
        count = buf.nbytes - offset if nbytes is None else nbytes
        check_range(what, offset, count, buf.nbytes)
        return count

    # --- the seam ----------------------------------------------------------------------------------------------
    @requires_open
    def alloc(self, nbytes: int) -> Buffer:
        """Allocate ``nbytes`` of device memory (contents undefined)."""
        check_int("nbytes", nbytes, min_value=0)
        buf = Buffer(self._name, self._alloc(nbytes), nbytes, next(self._handles))
        self._live[buf.handle] = buf
        return buf

    @requires_open
    def free(self, buf: Buffer) -> None:
        """Release ``buf``; using it afterwards raises :class:`InvalidArgument`."""
        self._check_buffer("buf", buf)
        del self._live[buf.handle]
        self._free(buf)

    @requires_open
    def copyin(self, buf: Buffer, data: Any, offset: int = 0) -> None:
        """Copy the bytes-like ``data`` to ``buf`` at byte ``offset``; returns once the bytes are on the device.

        Raises:
            InvalidArgument (``ValueError``): ``data`` does not fit in ``buf`` after ``offset``.
        """
        self._require("copyin")
        self._check_buffer("buf", buf)
        view = as_readonly_bytes("data", data)
        check_int("offset", offset, min_value=0)
        if offset + view.nbytes > buf.nbytes:
            raise InvalidArgument(
                f"copyin of {view.nbytes:#x} bytes at offset {offset:#x} overruns {buf!r} (ends at {buf.nbytes:#x})"
            )
        self._copyin(buf, view, offset)

    @requires_open
    def copyout(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> bytearray:
        """Return ``nbytes`` (default: to the end of ``buf``) read from ``buf`` at byte ``offset``, as a new
        ``bytearray``: :meth:`copyout_into` a fresh one (use that to reuse memory you already have)."""
        self._require("copyout")
        self._check_buffer("buf", buf)
        out = bytearray(self._span("copyout", buf, nbytes, offset))
        self.copyout_into(buf, out, offset)
        return out

    @requires_open
    def copyout_into(self, buf: Buffer, out: Any, offset: int = 0) -> None:
        """Fill the caller's writable bytes-like ``out`` with bytes of ``buf`` from byte ``offset``: as many as
        ``out`` holds, counted in bytes (``memoryview(out).nbytes``, not elements); returns once they are there.
        Capability ``copyout``; no memory is allocated, so a caller reusing ``out`` pays no page faults.

        ``out`` may be a bytearray, a numpy array, a writable memoryview: any C-contiguous writable buffer.

        Raises:
            InvalidArgument (``ValueError``): ``out`` is not a bytes-like object, is read-only or non-contiguous,
                ``offset`` is negative, or ``out`` does not fit in ``buf`` after ``offset``.
        """
        self._require("copyout")
        self._check_buffer("buf", buf)
        view = as_writable_bytes("out", out)
        with view:
            check_int("offset", offset, min_value=0)
            if offset + view.nbytes > buf.nbytes:
                raise InvalidArgument(
                    f"copyout_into of {view.nbytes:#x} bytes at offset {offset:#x} overruns {buf!r} "
                    f"(ends at {buf.nbytes:#x})"
                )
            if view.nbytes:
                self._copyout(buf, view, offset)

    @requires_open
    def fill(self, buf: Buffer, value: int, nbytes: int | None = None, offset: int = 0) -> None:
        """Set ``nbytes`` (default: to the end) of ``buf`` from ``offset`` to the byte ``value``."""
        self._require("fill")
        self._check_buffer("buf", buf)
        check_int("value", value, min_value=0, max_value=0xFF)
        count = self._span("fill", buf, nbytes, offset)
        if count:
            self._fill(buf, value, count, offset)

    @requires_open
    def copy(self, dst: Buffer, src: Buffer, nbytes: int | None = None) -> None:
        """Copy ``nbytes`` (default: all of ``src``) from ``src`` to ``dst`` on the device."""
        self._require("copy")
        self._check_buffer("dst", dst)
        self._check_buffer("src", src)
        count = src.nbytes if nbytes is None else nbytes
        check_range("copy source", 0, count, src.nbytes)
        check_range("copy destination", 0, count, dst.nbytes)
        if count:
            self._copy(dst, src, count)

    @requires_open
    def compile(self, source: str | bytes, name: str) -> Program:
        """Compile ``source`` with this target's compiler; ``name`` is the entry point.

        Raises:
            CompileError: the compiler rejected the source (its message is attached).
        """
        self._require("compile")
        code = source.encode() if isinstance(source, str) else source
        if not isinstance(code, bytes):
            raise InvalidArgument(f"source={type(source).__name__} object, expected str or bytes")
        return Program(name, self._compile(code, name))

    @requires_open
    def exec(
        self,
        program: Program,
        grid: int | Sequence[int],
        local: int | Sequence[int],
        args: Sequence[KernelArg] = (),
    ) -> None:
        """Launch ``program`` over ``grid`` workgroups of ``local`` threads with ``args`` (buffers or ints).

        ``grid`` and ``local`` are each an int or a tuple of 1 to 3 positive ints (missing dimensions are 1).

        Raises:
            InvalidArgument: a malformed argument, or a launch past the limits, each named: at most
                :data:`WORKGROUP_MAX_SIZE` threads per workgroup (:data:`WORKGROUP_MAX_DIM` along each dimension),
                :data:`GRID_MAX_DIM` work-items along each grid dimension and :data:`GRID_MAX_SIZE` in all (an AMD
                GPU's limits, as ROCr reports them), and at most ``max_workgroups`` workgroups. Nothing is
                submitted.
        """
        self._require("exec")
        if not isinstance(program, Program):
            raise InvalidArgument(f"program={program!r}, expected a Program (from Device.compile)")
        grid3, local3 = check_launch(grid, local, max_workgroups=self.max_workgroups)
        if not isinstance(args, tuple | list):
            raise InvalidArgument(f"args={type(args).__name__} object, expected a list or tuple of Buffers and ints")
        for index, arg in enumerate(args):
            if isinstance(arg, Buffer):
                self._check_buffer(f"args[{index}]", arg)
            else:
                check_int(f"args[{index}]", arg, min_value=_I64_MIN, max_value=_U64_MAX)
        self._exec(program, grid3, local3, tuple(args))

    @requires_open
    def synchronize(self) -> None:
        """Wait until every submitted operation has finished; errors from the device surface here."""
        self._synchronize()

    @requires_open
    def timestamp(self) -> int:
        """The device clock in nanoseconds (virtual on emulated targets): monotonic non-decreasing."""
        self._require("timestamps")
        return self._now_ns()

    def close(self) -> None:
        """Free every buffer and release the device; closing twice is harmless."""
        if self.closed:
            return
        try:
            for buf in list(self._live.values()):
                self._free(buf)
            self._live.clear()
            self._close()
        finally:
            self.closed = True

    def __enter__(self) -> DeviceBase:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- profiling ---------------------------------------------------------------------------------------------
    def _record_range(
        self, name: str, start_ns: int, end_ns: int, *, key: str | None = None, queue: str = "compute", **args: Any
    ) -> None:
        self._profile.append(
            ProfileRangeEvent(self._name, name, start_ns, end_ns, key, queue, tuple(sorted(args.items())))
        )

    # --- hooks -------------------------------------------------------------------------------------------------
    def _alloc(self, nbytes: int) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement alloc")

    def _free(self, buf: Buffer) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement free")

    def _copyin(self, buf: Buffer, data: memoryview, offset: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement copyin")

    def _copyout(self, buf: Buffer, out: memoryview, offset: int) -> None:
        """Write ``out.nbytes`` (> 0) bytes of ``buf`` from ``offset`` into ``out`` (flat unsigned bytes, writable;
        the caller's own memory for :meth:`copyout_into`): what both ``copyout`` and ``copyout_into`` run."""
        raise NotImplementedError(f"{type(self).__name__} does not implement copyout")

    def _fill(self, buf: Buffer, value: int, nbytes: int, offset: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement fill")

    def _copy(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement copy")

    def _compile(self, source: bytes, name: str) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} does not implement compile")

    def _exec(self, program: Program, grid: Dim3, local: Dim3, args: tuple[KernelArg, ...]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement exec")

    def _synchronize(self) -> None:
        return None

    def _now_ns(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement timestamps")

    def _close(self) -> None:
        return None
