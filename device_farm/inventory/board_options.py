"""Target options of an emulated map entry, as data: ``emulated = { target = ..., options = { ... } }``.

Scalar options (``seed = 3``, ``mode = "timed"``, ``revision = "naive"``) pass through as they are; ``faults``
(for ``MOCKUSB`` targets, whose fault plans are the bridge's) is a list of rules, each a table naming the
operation, the occurrence and the fault::

    options = { faults = [ { operation = "control_in", request = 0xE4, occurrence = 1, fault = "stall" },
                           { operation = "bulk_out", occurrence = 3, fault = "timeout", partial_bytes = 512 } ] }

(read by :meth:`~tinyhil.emulators.faults.FaultPlan.from_data`, the one fault-plan parser). The target's options
dataclass checks every value, as it does for ``open_target``; the same function turns the data into options in the
farm, its probes and its shards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tinyhil.emulators.faults import FaultPlan
from tinyhil.errors import InvalidArgument
from tinyhil.registry import TargetRegistry, default_registry

__all__ = ["target_options"]

_USB_FAULT_TARGETS: Final = "MOCKUSB"  # the targets whose ``faults`` option is a bridge FaultPlan


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
        options["faults"] = FaultPlan.from_data(options["faults"])
    resolved.build_options(options)
    return options
