"""A trace file read lazily: its header at open, its records one at a time, each pass reading the file again.

Both formats' readers (:class:`~tinyhil.trace.jsonl.JsonlSource`, :class:`~tinyhil.trace.pcapng_reader.PcapngSource`)
are a :class:`TraceSource`, so a consumer that walks the records once (``tinyhil trace show``, ``convert``, the
drift check) holds one record at a time, and one that needs them all (a replay) keeps what it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Any

from tinyhil.trace.errors import TraceFormatError
from tinyhil.trace.records import Record, Trace, TraceHeader

__all__ = ["TraceSource"]


class TraceSource:
    """A trace file: :attr:`header`, read when it is made, and :meth:`records`, read lazily.

    ``opener`` returns a fresh binary stream of the file for each pass; ``name`` (the path) is put in every error.
    Subclasses read the header in ``_read_header`` and the records in ``_read_records``.

    Raises (construction, and iterating :meth:`records`): :class:`TraceFormatError` naming the file.
    """

    header: TraceHeader

    def __init__(self, opener: Callable[[], IO[bytes]], name: str = "") -> None:
        self._opener, self.name = opener, name
        with self._stream() as stream:
            try:
                self.header = self._read_header(stream)
            except TraceFormatError as exc:
                raise self._named(exc) from None

    def _read_header(self, stream: IO[bytes]) -> TraceHeader:
        raise NotImplementedError

    def _read_records(self, stream: IO[bytes]) -> Iterator[Record]:
        raise NotImplementedError

    def _named(self, exc: TraceFormatError) -> TraceFormatError:
        return exc.at(self.name) if self.name else exc

    def _stream(self) -> IO[bytes]:
        try:
            return self._opener()
        except OSError as exc:
            raise self._named(TraceFormatError("file", f"cannot read it: {exc.strerror or exc}")) from None

    def records(self) -> Iterator[Record]:
        """The records in file order, one at a time (each call reads the file again, checking it as it goes)."""
        with self._stream() as stream:
            items: Iterator[Any] = self._read_records(stream)
            try:
                yield from items
            except TraceFormatError as exc:
                raise self._named(exc) from None

    def trace(self) -> Trace:
        """The whole trace in memory (for a consumer that needs every record at once)."""
        return Trace(self.header, tuple(self.records()))
