"""The errors of traces: a malformed file, and a replay whose driver did something other than the recording."""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from tinyhil.errors import TinyHilError
from tinyhil.loading import FileFormatError
from tinyhil.printable import printable

__all__ = ["ReplayExhausted", "ReplayMismatch", "TraceError", "TraceFormatError", "TraceNotConsumed"]

_LINE: Final = re.compile(r"line (\d+)")


class TraceError(TinyHilError):
    """Base class of every trace error."""


class TraceFormatError(TraceError, FileFormatError):
    """A trace file tinyhil cannot use: ``path: where: problem``, where ``where`` is ``line N`` (JSONL, the record on
    that line), ``offset 0x... (record N)`` (pcapng) or ``record seq N``, and ``problem`` names the field, the value
    and what was expected.

    It is the :class:`~tinyhil.loading.FileFormatError` of traces (one base for "a file tinyhil cannot use").

    Attributes:
        where: the place in the file. problem: what was wrong there. line: the JSONL line, 0 elsewhere.
        field: the field named, ``file`` when none.
    """

    def __init__(self, where: str, problem: str, *, path: str = "", field: str = "file") -> None:
        line = _LINE.match(where)
        FileFormatError.__init__(self, path, int(line.group(1)) if line else 0, field, problem)
        prefix = f"{path}: " if path else ""
        self.args = (printable(f"{prefix}{where}: {problem}", newlines=False),)
        self.where = where
        self.problem = problem

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:  # pickled across processes (xdist, farm workers) with its fields
        return functools.partial(TraceFormatError, path=self.path, field=self.field), (self.where, self.problem)

    def at(self, path: str) -> TraceFormatError:
        """This error naming the file ``path`` (readers raise it without the path, their callers add it); itself when
        it names a file already."""
        if self.path:
            return self
        return TraceFormatError(self.where, self.problem, path=path, field=self.field)

    def within(self, where: str) -> TraceFormatError:
        """This error placed at ``where`` (a record's line or offset) when it names no line or offset itself."""
        if self.where.startswith(("line ", "offset ")):
            return self
        inner = "" if self.where in ("", "header") else f", {self.where}"
        return TraceFormatError(f"{where}{inner}", self.problem, field=self.field)


class ReplayMismatch(TraceError, AssertionError):
    """The driver asked a replay for another request than the next recorded one; the message shows both.

    Attributes:
        seq: the ``seq`` of the recorded request that was expected (``None`` past the end).
    """

    def __init__(self, message: str, *, seq: int | None) -> None:
        super().__init__(message)
        self.seq = seq


class ReplayExhausted(ReplayMismatch):
    """The driver asked for a request after the last recorded one (raised at once: a replay never waits)."""


class TraceNotConsumed(ReplayMismatch):
    """The replay ended (closed, or :meth:`assert_consumed`) with recorded requests the driver never made."""
