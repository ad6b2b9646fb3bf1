"""Drift: where a device's replies to a trace's requests differ from the replies the trace recorded.

A trace's host side (its requests, :func:`~tinyhil.trace.exchanges.exchanges`) is fed to another device (the
emulator, by :mod:`tinyhil.mocks.trace_drift`), which gives one :class:`Reply` per exchange; :func:`compare` lists every
exchange whose reply differs from the recorded one as a :class:`Divergence`: the record's ``seq``, the request (by
name, from the bridge spec), the expected and the actual reply and the first byte where the data differ. This
module only compares: it builds no device (the bottom floor imports no mock).

Raises (:func:`compare`): :class:`~tinyhil.errors.InvalidArgument` when the replies do not pair with the exchanges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tinyhil.errors import InvalidArgument
from tinyhil.trace.exchanges import Exchange, exchanges, first_difference
from tinyhil.trace.pcapng import ERR2STATUS
from tinyhil.trace.records import Payload, Trace, TransferStatus

__all__ = ["Divergence", "Reply", "compare", "drift_lines", "trace_divergence"]

_SHOWN_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class Reply:
    """A device's answer to one request: ``status`` (an async status; a synchronous error's status by its class),
    ``actual`` bytes moved, ``data`` the IN bytes, ``err`` the ``usb1`` error class name (or the class name of any
    other error the device raised, with ``note`` its message), ``ret`` a host call's answer (get_configuration)."""

    status: TransferStatus = TransferStatus.COMPLETED
    actual: int = 0
    data: Payload = b""
    err: str | None = None
    ret: int | None = None
    note: str = ""

    @classmethod
    def recorded(cls, exchange: Exchange) -> Reply:
        """The reply ``exchange`` recorded."""
        if exchange.submit_err is not None:
            return cls(ERR2STATUS.get(exchange.submit_err, TransferStatus.ERROR), err=exchange.submit_err)
        return cls(exchange.status, exchange.actual, exchange.data, exchange.err, exchange.ret)

    @classmethod
    def failed(cls, err: str, *, actual: int = 0, data: Payload = b"", note: str = "") -> Reply:
        """The reply of a call that raised ``err`` (a usb1 class name: its status follows; else ``ERROR``)."""
        return cls(ERR2STATUS.get(err, TransferStatus.ERROR), actual, data, err, note=note)

    def describe(self) -> str:
        text = self.status.value if self.err is None else f"{self.err} ({self.status.value})"
        text += f" actual={self.actual}"
        if self.ret is not None:
            text += f" ret={self.ret}"
        if self.data:
            more = "..." if len(self.data) > _SHOWN_BYTES else ""
            text += f" data={bytes(self.data[:_SHOWN_BYTES]).hex()}{more}"
        return text + (f" [{self.note}]" if self.note else "")


@dataclass(frozen=True, slots=True)
class Divergence:
    """One request whose reply differs: the record's ``seq``, the request in words, both replies, what differs
    (``fields``: ``status``, ``actual``, ``data``, ``ret``) and ``first_byte``, the offset of the first data byte
    that differs (``None`` when the data agree)."""

    seq: int
    request: str
    expected: Reply
    got: Reply
    fields: tuple[str, ...]
    first_byte: int | None = None

    def describe(self) -> str:
        where = ""
        if self.first_byte is not None:
            at = self.first_byte
            mine = _byte(self.expected.data, at)
            theirs = _byte(self.got.data, at)
            where = f"; data differs first at byte {at:#x}: expected {mine}, got {theirs}"
        return (f"record seq {self.seq}: {self.request}: {', '.join(self.fields)} differ{where}\n"
                f"  expected: {self.expected.describe()}\n  got:      {self.got.describe()}")  # fmt: skip


def _byte(data: Payload, at: int) -> str:
    return f"{data[at]:#04x}" if at < len(data) else "(end of data)"


def compare(exchanges: Sequence[Exchange], replies: Sequence[Reply]) -> list[Divergence]:
    """Every exchange whose reply in ``replies`` (one per exchange, in the same order) differs from the recorded one.

    Raises:
        InvalidArgument: ``replies`` is not as long as ``exchanges``.
    """
    if len(replies) != len(exchanges):
        raise InvalidArgument(f"{len(replies)} replies for {len(exchanges)} exchanges, expected one reply each")
    found = []
    for exchange, got in zip(exchanges, replies, strict=True):
        expected = Reply.recorded(exchange)
        at = first_difference(expected.data, got.data)
        differ = tuple(
            name
            for name, same in (("status", expected.status is got.status), ("actual", expected.actual == got.actual),
                               ("data", at is None), ("ret", expected.ret == got.ret or exchange.ret is None))
            if not same
        )  # fmt: skip
        if differ:
            found.append(Divergence(exchange.seq, exchange.request.describe(), expected, got, differ, at))
    return found


def drift_lines(divergences: Sequence[Divergence], *, name: str = "the trace", total: int | None = None) -> list[str]:
    """What ``tinyhil trace drift`` prints: ``no drift``, or a count then each divergence, the first explained."""
    of = "" if total is None else f" of {total}"
    if not divergences:
        return [f"{name}: no drift ({'every reply agrees' if total is None else f'all {total} replies agree'})"]
    lines = [f"{name}: {len(divergences)}{of} replies differ; the first is record seq {divergences[0].seq}"]
    lines.extend(d.describe() for d in divergences)
    return lines


def trace_divergence(expected: Trace, got: Trace) -> str | None:
    """Where trace ``got`` (a rerun's) first departs from ``expected`` (the bundle's), in words: the first exchange
    whose request differs (the record ``seq`` in ``expected``, both requests, the first differing byte), else the
    first whose reply differs, else where one trace ends before the other; ``None`` when they agree throughout."""
    mine, theirs = exchanges(expected), exchanges(got)
    for index, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a.request != b.request:
            at = first_difference(a.request.data, b.request.data) if a.request.data or b.request.data else None
            where = "" if at is None else f"; data differs first at byte {at:#x}"
            return (f"request {index + 1} (record seq {a.seq}) differs{where}\n  recorded: {a.request.describe()}\n"
                    f"  rerun:    {b.request.describe()}")  # fmt: skip
        found = compare([a], [Reply.recorded(b)])
        if found:
            return f"request {index + 1}: the reply differs: {found[0].describe()}"
    common = min(len(mine), len(theirs))
    if len(mine) == len(theirs):
        return None
    longer, who = (mine, "the recording") if len(mine) > common else (theirs, "the rerun")
    return (
        f"{who} goes on after {common} requests (recorded {len(mine)}, rerun {len(theirs)}); the next is "
        f"{longer[common].request.describe()}"
    )
