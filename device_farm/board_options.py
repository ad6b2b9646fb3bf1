"""Target options of an emulated map entry, as data: ``emulated = { target = ..., options = { ... } }``.

Scalar options (``seed = 3``, ``mode = "timed"``, ``revision = "naive"``) pass through as they are; ``faults``
(for ``MOCKUSB`` targets, whose fault plans are the bridge's) is a list of rules, each a table naming the
operation, the occurrence and the fault::

    options = { faults = [ { operation = "control_in", request = 0xE4, occurrence = 1, fault = "stall" },
                           { operation = "bulk_out", occurrence = 3, fault = "timeout", partial_bytes = 512 } ] }

(the names are those of :class:`~tinyhil.emulators.faults.Transfer` and
:class:`~tinyhil.emulators.faults.FaultKind`). The target's options dataclass checks every value, as it does for
``open_target``; the same function turns the data into options in the farm, its probes and its shards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tinyhil.emulators.faults import Fault, FaultKind, FaultPlan, FaultRule, Operation, Transfer
from tinyhil.errors import InvalidArgument
from tinyhil.registry import TargetRegistry, default_registry

__all__ = ["fault_plan_from_data", "target_options"]

_USB_FAULT_TARGETS: Final = "MOCKUSB"  # the targets whose ``faults`` option is a bridge FaultPlan
_RULE_KEYS: Final = ("operation", "request", "occurrence", "fault", "partial_bytes", "status")


def _choice(where: str, value: Any, kind: type[Transfer] | type[FaultKind]) -> Any:
    names = [member.value for member in kind]
    if value not in names:
        raise InvalidArgument(f"{where} {value!r}, expected one of {', '.join(names)}")
    return kind(value)


def fault_plan_from_data(rules: Any) -> FaultPlan:
    """A :class:`~tinyhil.emulators.faults.FaultPlan` from a list of rule tables.

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
        return FaultPlan(tuple(built))
    except InvalidArgument as exc:
        raise InvalidArgument(f"faults: {exc}") from None


def target_options(target: str, data: Mapping[str, Any], registry: TargetRegistry | None = None) -> dict[str, Any]:
    """The keyword options ``target`` opens with, from a map entry's ``options`` table (checked by the target).

    Raises:
        InvalidArgument: an unknown option, a bad value, a malformed fault rule, or faults on a target that takes
            none.
    """
    registry = default_registry() if registry is None else registry
    resolved = registry.resolve(target)
    options = dict(data)
    if "faults" in options:
        if not resolved.definition.name.startswith(_USB_FAULT_TARGETS):
            raise InvalidArgument(f"faults on {resolved.name}: a map entry's faults are the bridge's fault plans, "
                                  "expected a MOCKUSB target")  # fmt: skip
        options["faults"] = fault_plan_from_data(options["faults"])
    resolved.build_options(options)
    return options
