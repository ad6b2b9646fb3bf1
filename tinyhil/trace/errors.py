"""The errors of traces: a malformed file, and a replay whose driver did something other than the recording."""

from __future__ import annotations

from tinyhil.errors import TinyHilError

__all__ = ["ReplayExhausted", "ReplayMismatch", "TraceError", "TraceFormatError", "TraceNotConsumed"]


class TraceError(TinyHilError):
    """Base class of every trace error."""


class TraceFormatError(TraceError, ValueError):
    """A trace file is malformed; the message names the line (JSONL) or byte offset (pcapng) and the field.

    Attributes:
        where: ``"line N"`` or ``"offset 0x..."``, the place in the file.
    """

    def __init__(self, where: str, problem: str, *, path: str = "") -> None:
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}{where}: {problem}")
        self.where = where
        self.problem = problem


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
