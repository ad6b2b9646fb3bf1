"""Fault plans: which operation fails, at which occurrence, and how, as plain frozen hashable values.

A plan is data: a test can parametrize over it, hypothesis can generate and shrink it (``fixtures/strategies.py``),
and a repro bundle can store its ``repr``, which reads like the code that built it::

    FaultPlan((FaultRule(Operation.bulk_out(), 3, Fault.stall()),))

Occurrences count from 1 since the board's last ``reset()``; every attempt of the operation counts, including
attempts that fail for other reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import CplStatus, RetStatus

__all__ = ["Fault", "FaultKind", "FaultPlan", "FaultRule", "Operation", "Transfer"]

_RULE_KEYS: Final = ("operation", "request", "occurrence", "fault", "partial_bytes", "status")  # FaultPlan.from_data


class Transfer(Enum):
    """The kinds of operation a fault can hit."""

    CONTROL_OUT = "control_out"  # a control transfer host-to-device, keyed by bRequest
    CONTROL_IN = "control_in"  # a control transfer device-to-host, keyed by bRequest
    BULK_OUT = "bulk_out"
    BULK_IN = "bulk_in"
    TLP = "tlp"  # a non-posted single TLP the 0xF0 engine issues (its completion carries the fault)


class FaultKind(Enum):
    """What goes wrong."""

    STALL = "stall"  # the transfer stalls (a bulk endpoint then stays halted until clearHalt)
    TIMEOUT = "timeout"  # the transfer times out after moving ``partial_bytes``
    NO_DEVICE = "no_device"  # the device is gone: this and every later request fails with no-device
    SHORT_WRITE = "short_write"  # a bulk OUT completes after sending only ``partial_bytes``
    DROP = "drop"  # a bulk OUT completes on the wire but its bytes never land in SRAM (the 0xF2 engine loses them)
    BABBLE = "babble"  # an IN transfer's device sends more than the host asked for: the host reports an overflow
    RET_STATUS = "ret_status"  # the TLP exchange fails: 0xF0 IN byte 7 reads ``status``
    CPL_STATUS = "cpl_status"  # the completer answers ``status`` (UR, CRS, CA) in 0xF0 IN byte 4 bits 7:5

    @property
    def usb(self) -> bool:
        return self in _USB_KINDS

    def allows(self, transfer: Transfer) -> bool:
        """Whether a rule may put this kind of fault on ``transfer`` (the check :class:`FaultRule` makes)."""
        if (transfer is Transfer.TLP) == self.usb:
            return False
        allowed = _KIND2TRANSFERS.get(self)
        return allowed is None or transfer in allowed[0]


_USB_KINDS: Final = frozenset(
    (FaultKind.STALL, FaultKind.TIMEOUT, FaultKind.NO_DEVICE, FaultKind.SHORT_WRITE, FaultKind.DROP, FaultKind.BABBLE)
)
# The faults that hit one direction only, and how a message names it: a short write or a drop loses OUT bytes, a
# babble is a device overrunning an IN data stage (docs/faults.md "Faults")
_BULK_OUT_ONLY: Final = ((Transfer.BULK_OUT,), "bulk OUT")
_KIND2TRANSFERS: Final = {
    FaultKind.SHORT_WRITE: _BULK_OUT_ONLY,
    FaultKind.DROP: _BULK_OUT_ONLY,
    FaultKind.BABBLE: ((Transfer.BULK_IN, Transfer.CONTROL_IN), "IN transfers (bulk_in, control_in)"),
}


@dataclass(frozen=True, slots=True)
class Operation:
    """One kind of operation; build it with the class methods (``Operation.control_out(0xF2)``)."""

    transfer: Transfer
    request: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.transfer, Transfer):
            raise InvalidArgument(f"transfer={self.transfer!r}, expected a Transfer")
        if self.transfer in (Transfer.CONTROL_OUT, Transfer.CONTROL_IN):
            check_int("request", self.request, min_value=0, max_value=0xFF)
        elif self.request is not None:
            raise InvalidArgument(f"request={self.request!r} on {self.transfer.value}, expected None (control only)")

    @classmethod
    def control_out(cls, request: int) -> Operation:
        return cls(Transfer.CONTROL_OUT, request)

    @classmethod
    def control_in(cls, request: int) -> Operation:
        return cls(Transfer.CONTROL_IN, request)

    @classmethod
    def bulk_out(cls) -> Operation:
        return cls(Transfer.BULK_OUT)

    @classmethod
    def bulk_in(cls) -> Operation:
        return cls(Transfer.BULK_IN)

    @classmethod
    def tlp(cls) -> Operation:
        return cls(Transfer.TLP)

    def __repr__(self) -> str:
        argument = "" if self.request is None else f"{self.request:#04x}"
        return f"Operation.{self.transfer.value}({argument})"


@dataclass(frozen=True, slots=True)
class Fault:
    """What goes wrong; build it with the class methods (``Fault.timeout(partial_bytes=512)``)."""

    kind: FaultKind
    partial_bytes: int = 0
    status: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FaultKind):
            raise InvalidArgument(f"kind={self.kind!r}, expected a FaultKind")
        check_int("partial_bytes", self.partial_bytes, min_value=0)
        if self.partial_bytes and self.kind not in (FaultKind.TIMEOUT, FaultKind.SHORT_WRITE):
            raise InvalidArgument(f"partial_bytes={self.partial_bytes} on {self.kind.value}, expected 0")
        if self.kind is FaultKind.RET_STATUS and self.status not in (RetStatus.ERROR, RetStatus.TIMEOUT):
            raise InvalidArgument(f"status={self.status!r}, expected RetStatus.ERROR (1) or RetStatus.TIMEOUT (0xFF)")
        if self.kind is FaultKind.CPL_STATUS and self.status not in (CplStatus.UR, CplStatus.CRS, CplStatus.CA):
            raise InvalidArgument(f"status={self.status!r}, expected CplStatus.UR, CRS or CA")
        if self.kind.usb and self.status:
            raise InvalidArgument(f"status={self.status!r} on {self.kind.value}, expected 0")

    @classmethod
    def stall(cls) -> Fault:
        return cls(FaultKind.STALL)

    @classmethod
    def timeout(cls, partial_bytes: int = 0) -> Fault:
        return cls(FaultKind.TIMEOUT, partial_bytes)

    @classmethod
    def no_device(cls) -> Fault:
        return cls(FaultKind.NO_DEVICE)

    @classmethod
    def short_write(cls, partial_bytes: int) -> Fault:
        return cls(FaultKind.SHORT_WRITE, partial_bytes)

    @classmethod
    def drop(cls) -> Fault:
        return cls(FaultKind.DROP)

    @classmethod
    def babble(cls) -> Fault:
        return cls(FaultKind.BABBLE)

    @classmethod
    def ret_status(cls, status: int) -> Fault:
        return cls(FaultKind.RET_STATUS, status=status)

    @classmethod
    def cpl_status(cls, status: int) -> Fault:
        return cls(FaultKind.CPL_STATUS, status=status)

    def __repr__(self) -> str:
        if self.kind in (FaultKind.TIMEOUT, FaultKind.SHORT_WRITE):
            return f"Fault.{self.kind.value}(partial_bytes={self.partial_bytes})"
        if self.kind is FaultKind.RET_STATUS:
            return f"Fault.ret_status(RetStatus.{RetStatus(self.status).name})"
        if self.kind is FaultKind.CPL_STATUS:
            return f"Fault.cpl_status(CplStatus.{CplStatus(self.status).name})"
        return f"Fault.{self.kind.value}()"


@dataclass(frozen=True, slots=True)
class FaultRule:
    """The ``occurrence``-th (from 1) attempt of ``operation`` suffers ``fault``."""

    operation: Operation
    occurrence: int
    fault: Fault

    def __post_init__(self) -> None:
        if not isinstance(self.operation, Operation):
            raise InvalidArgument(f"operation={self.operation!r}, expected an Operation (Operation.bulk_out(), ...)")
        if not isinstance(self.fault, Fault):
            raise InvalidArgument(f"fault={self.fault!r}, expected a Fault (Fault.stall(), ...)")
        check_int("occurrence", self.occurrence, min_value=1)
        transfer, kind = self.operation.transfer, self.fault.kind
        if kind.allows(transfer):
            return
        if (transfer is Transfer.TLP) == kind.usb:
            raise InvalidArgument(
                f"{self.fault!r} on {self.operation!r}, expected ret_status/cpl_status faults on Operation.tlp() "
                "and USB faults (stall, timeout, no_device, short_write, drop, babble) on USB transfers"
            )
        only = _KIND2TRANSFERS[kind][1]
        raise InvalidArgument(f"{self.fault!r} on {self.operation!r}, expected {kind.value} on {only} only")

    def __repr__(self) -> str:
        return f"FaultRule({self.operation!r}, {self.occurrence}, {self.fault!r})"


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """A set of fault rules; at most one rule per (operation, occurrence). ``FaultPlan()`` injects nothing."""

    rules: tuple[FaultRule, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.rules, tuple):
            raise InvalidArgument(f"rules={self.rules!r}, expected a tuple of FaultRule")
        seen: set[tuple[Operation, int]] = set()
        for rule in self.rules:
            if not isinstance(rule, FaultRule):
                raise InvalidArgument(f"rule {rule!r}, expected a FaultRule (pass the plan, not a strategy)")
            key = (rule.operation, rule.occurrence)
            if key in seen:
                raise InvalidArgument(f"two rules for occurrence {rule.occurrence} of {rule.operation!r}, expected one")
            seen.add(key)

    @classmethod
    def single(cls, operation: Operation, occurrence: int, fault: Fault) -> FaultPlan:
        """A plan of one rule."""
        return cls((FaultRule(operation, occurrence, fault),))

    @classmethod
    def from_data(cls, rules: Any) -> FaultPlan:
        """A plan from plain data (a hardware map's TOML, any JSON): a list of rule tables, each naming the
        operation, the occurrence and the fault, e.g. ``{operation = "bulk_out", occurrence = 3, fault = "timeout",
        partial_bytes = 512}`` (``request`` for a control transfer, ``status`` for a status fault). The names are
        those of :class:`Transfer` and :class:`FaultKind`.

        Raises:
            InvalidArgument: naming the rule (from 1) and the field that is wrong.
        """
        if not isinstance(rules, list):
            raise InvalidArgument(f"faults={rules!r}, expected a list of rule tables")
        built = []
        for number, rule in enumerate(rules, 1):
            where = f"faults rule {number}"
            if not isinstance(rule, dict):
                raise InvalidArgument(f"{where}: {rule!r}, expected a table")
            unknown = sorted(set(rule) - set(_RULE_KEYS))
            if unknown:
                raise InvalidArgument(f"{where}: unknown field {unknown[0]!r}, expected {', '.join(_RULE_KEYS)}")
            transfer = _choice(f"{where}: operation", rule.get("operation"), Transfer)
            kind = _choice(f"{where}: fault", rule.get("fault"), FaultKind)
            try:
                operation = Operation(transfer, rule.get("request"))
                fault = Fault(kind, rule.get("partial_bytes", 0), rule.get("status", 0))
                built.append(FaultRule(operation, rule.get("occurrence"), fault))  # type: ignore[arg-type]
            except InvalidArgument as exc:
                raise InvalidArgument(f"{where}: {exc}") from None
        try:
            return cls(tuple(built))
        except InvalidArgument as exc:
            raise InvalidArgument(f"faults: {exc}") from None

    def fault_for(self, operation: Operation, occurrence: int) -> Fault | None:
        """The fault for this attempt, or ``None``."""
        for rule in self.rules:
            if rule.occurrence == occurrence and rule.operation == operation:
                return rule.fault
        return None

    def __repr__(self) -> str:
        inner = ", ".join(repr(rule) for rule in self.rules)
        return f"FaultPlan(({inner},))" if len(self.rules) == 1 else f"FaultPlan(({inner}))"


def _choice(where: str, value: Any, kind: type[Transfer] | type[FaultKind]) -> Any:
    names = [member.value for member in kind]
    if value not in names:
        raise InvalidArgument(f"{where} {value!r}, expected one of {', '.join(names)}")
    return kind(value)
