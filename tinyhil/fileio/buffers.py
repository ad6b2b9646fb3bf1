"""The buffer object ``FileIO.mmap`` returns: CPU access to mapped memory with slice reads and writes.

A :class:`MappedBuffer` is a ctypes ``c_char`` array (so it supports the buffer protocol: ``memoryview(buf)``,
``numpy.frombuffer(buf)``) aliasing the mapped memory, with Python-level slice access like :class:`mmap.mmap`:
``buf[a:b]`` returns ``bytes``, ``buf[a:b] = data`` copies any bytes-like object in one ``memoryview`` slice
assignment. An emulated seam passes ``on_write``, called once per slice assignment with ``(offset, nbytes)``, so a
write to a doorbell page or to memory a queue waits on can wake the device model without per-byte work. Writes
through the buffer protocol (a numpy view, ``ctypes.memmove``) bypass ``on_write``: use slice assignment for memory
the device watches.

Indexing follows :class:`mmap.mmap` exactly (the messages say ``MappedBuffer``)::

    buf[i], buf[i] = v      i outside [-len, len)                       IndexError "index out of range"
    buf[i] = v              v not an int / not in range(256)            TypeError / ValueError
    buf[a:b]                any slice; it is clipped to the buffer      bytes (b"" past the end)
    buf[a:b] = data         len(data) != the clipped slice's length     IndexError "slice assignment is wrong size"
    buf[a:b] = data         data not bytes-like / not C-contiguous      TypeError / BufferError
    buf[key]                key neither an integer nor a slice          TypeError
    any access after release()                                          ValueError

A rejected assignment writes nothing and does not call ``on_write``.
"""

from __future__ import annotations

import ctypes
import functools
import operator
from collections.abc import Callable
from typing import Any, cast, overload

from tinyhil._check import as_writable_bytes, check_int
from tinyhil.errors import InvalidArgument

__all__ = ["MappedBuffer", "OnWrite"]

OnWrite = Callable[[int, int], None]
_BYTE_MAX = 0xFF
_SHOWN_INDEX_LIMIT = 1 << 64  # a larger index is named by its width, not its digits


class MappedBuffer:
    """Mapped memory; construct with :meth:`over` (a view of a Python buffer) or :meth:`at_address` (raw memory).

    Concrete objects are instances of ``MappedBuffer`` combined with ``ctypes.c_char * length``.
    """

    _bytes: memoryview
    _on_write: OnWrite | None
    _release: Callable[[], None] | None

    @classmethod
    def over(
        cls, source: Any, offset: int = 0, nbytes: int | None = None, *, on_write: OnWrite | None = None
    ) -> MappedBuffer:
        """A buffer aliasing ``nbytes`` bytes of the writable buffer ``source`` from ``offset`` (default: the rest).

        Raises:
            InvalidArgument: ``source`` is not a writable contiguous buffer, or the range lies outside it.
        """
        view = as_writable_bytes("source", source)
        check_int("offset", offset, min_value=0, max_value=len(view))
        length = len(view) - offset if nbytes is None else check_int("nbytes", nbytes, min_value=0)
        if offset + length > len(view):
            raise InvalidArgument(f"range {offset:#x}+{length:#x} ends past the source's {len(view):#x} bytes")
        obj = cast(MappedBuffer, _array_class(length).from_buffer(view, offset))
        obj._setup(on_write, None)
        return obj

    @classmethod
    def at_address(
        cls, address: int, nbytes: int, *, on_write: OnWrite | None = None, release: Callable[[], None] | None = None
    ) -> MappedBuffer:
        """A buffer over ``nbytes`` of raw memory at ``address``, which the caller guarantees is mapped.

        ``release`` runs once when the buffer is released (the real seam passes its ``munmap``).
        """
        check_int("address", address, min_value=1)
        check_int("nbytes", nbytes, min_value=0)
        obj = cast(MappedBuffer, _array_class(nbytes).from_address(address))
        obj._setup(on_write, release)
        return obj

    def _setup(self, on_write: OnWrite | None, release: Callable[[], None] | None) -> None:
        self._bytes = memoryview(cast(Any, self)).cast("B")
        self._on_write = on_write
        self._release = release

    @property
    def address(self) -> int:
        """The CPU address of byte 0."""
        return ctypes.addressof(cast(Any, self))

    @property
    def released(self) -> bool:
        """Whether :meth:`release` ran (slice access then raises ``ValueError``)."""
        try:
            _ = self._bytes.nbytes
        except ValueError:
            return True
        return False

    def release(self) -> None:
        """Stop slice access and run the release hook (``munmap``); a second call does nothing."""
        if self.released:
            return
        self._bytes.release()
        if self._release is not None:
            release, self._release = self._release, None
            release()

    def __len__(self) -> int:
        return len(self._bytes)

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            return bytes(self._bytes[key])
        return int(self._bytes[self._index(key)])

    def __setitem__(self, key: int | slice, value: Any) -> None:
        view = self._bytes
        if isinstance(key, slice):
            data = _source_bytes(value)
            touched = range(*key.indices(len(view)))
            if len(data) != len(touched):
                raise IndexError(
                    f"MappedBuffer slice assignment is wrong size: the slice selects {len(touched):#x} of the "
                    f"buffer's {len(view):#x} bytes, the value has {len(data):#x}"
                )
            if not touched:
                return
            view[key] = data
            low, high = min(touched[0], touched[-1]), max(touched[0], touched[-1]) + 1
        else:
            low = self._index(key)
            try:
                byte = operator.index(value)
            except TypeError:
                raise TypeError(f"MappedBuffer item value={type(value).__name__} object, expected an int") from None
            if not 0 <= byte <= _BYTE_MAX:
                raise ValueError(f"MappedBuffer item value={byte:#x}, expected an int in range(0, 256)")
            view[low] = byte
            high = low + 1
        if self._on_write is not None:
            self._on_write(low, high - low)

    def _index(self, key: Any) -> int:
        """``key`` as an index into the buffer, negative ones counted from the end."""
        try:
            index = operator.index(key)
        except TypeError:
            raise TypeError(f"MappedBuffer indices must be integers or slices, not {type(key).__name__}") from None
        length = len(self._bytes)
        if not -length <= index < length:
            shown = f"{index:#x}" if abs(index) < _SHOWN_INDEX_LIMIT else f"of {index.bit_length()} bits"
            raise IndexError(f"MappedBuffer index {shown} out of range for a {length:#x}-byte buffer")
        return index % length

    def __repr__(self) -> str:
        state = "released" if self.released else f"at {self.address:#x}"
        return f"<MappedBuffer {len(self._bytes) if not self.released else '?'} bytes {state}>"


def _source_bytes(value: Any) -> memoryview:
    """The bytes of a slice assignment's value, as :class:`mmap.mmap` takes them (any C-contiguous bytes-like)."""
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(value).__name__!r}") from None
    if not view.c_contiguous:
        raise BufferError("MappedBuffer slice assignment: the value is not C-contiguous, expected a contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


@functools.lru_cache(maxsize=256)
def _array_class(length: int) -> type[ctypes.Array[ctypes.c_char]]:
    base = ctypes.c_char * length
    return cast(type[ctypes.Array[ctypes.c_char]], type(f"MappedBuffer[{length:#x}]", (MappedBuffer, base), {}))
