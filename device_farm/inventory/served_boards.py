"""Served boards in the hardware map: an emulated board served through the operating system's own interfaces.

A ``kind = "served"`` entry names the emulator ``tinyhil serve`` runs (docs/serve.md) and the options it opens
with::

    [[board]]
    id = "served-kfd"
    kind = "served"
    served = { serve = "kfd", target = "MOCKKFD+AMD", options = { gpus = 1 } }

The board serves the real-interface target of its ``serve`` (``USB+AMD`` for ``usb``, ``KFD+AMD`` for ``kfd``):
its shards run under ``tinyhil serve``, so the suite drives tinyhil's real backends against the emulator. ``serve``
and ``target`` are checked against the fixed table :data:`SERVE_ROUTES`; ``options`` go through the emulated
target's own option check (:func:`~tinyhil.device_farm.inventory.board_options.target_options`) and must be options
``tinyhil serve`` takes; they reach it as ``--option KEY=VALUE`` strings (:func:`serve_arguments`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from tinyhil.capabilities import REAL_HARDWARE
from tinyhil.device_farm.inventory.board_options import target_options
from tinyhil.errors import InvalidArgument
from tinyhil.loading import Fields
from tinyhil.mocks.serve.options import option_text
from tinyhil.mocks.serve.usb.board import BOARD_OPTIONS, RECORD_OPTION
from tinyhil.mocks.targets import mock_kfd_amd, mock_usb_amd
from tinyhil.registry import TargetRegistry, default_registry

__all__ = ["SERVE_ROUTES", "ServeKind", "ServeRoute", "ServedLocator", "check_served_targets",
           "parse_served", "serve_arguments", "served_capabilities"]  # fmt: skip


class ServeKind(StrEnum):
    """What ``tinyhil serve`` serves a served board through (its subcommand)."""

    USB = "usb"
    KFD = "kfd"


@dataclass(frozen=True, slots=True)
class ServeRoute:
    """The emulated target a serve kind serves (a target definition's name), the real-interface target its shards
    run, and the options ``tinyhil serve`` takes for it when they are fewer than the target's own (``None``: all)."""

    emulated: str
    real: str
    options: tuple[str, ...] | None = None


# The one table of what a served board may be: the serve kinds, the emulators they serve, the targets they present.
SERVE_ROUTES: Final[Mapping[ServeKind, ServeRoute]] = {
    ServeKind.USB: ServeRoute(mock_usb_amd.name, "USB+AMD", BOARD_OPTIONS),
    ServeKind.KFD: ServeRoute(mock_kfd_amd.name, "KFD+AMD"),
}


@dataclass(frozen=True, slots=True)
class ServedLocator:
    """A served board: the serve kind, the emulated target it serves and that target's options as the map gave them
    (JSON text, as :class:`~tinyhil.device_farm.inventory.hwmap.EmulatedLocator` keeps them)."""

    serve: ServeKind
    target: str
    options_json: str = "{}"

    @property
    def options(self) -> dict[str, Any]:
        """The options table as the map gave it."""
        value: dict[str, Any] = json.loads(self.options_json)
        return value

    @property
    def route(self) -> ServeRoute:
        """What the serve kind serves and presents."""
        return SERVE_ROUTES[self.serve]


def serve_arguments(locator: ServedLocator, *, record: bool = True) -> list[str]:
    """``tinyhil serve``'s arguments after ``serve``: the kind, the target and each option, e.g. ``["kfd", "--target",
    "MOCKKFD+AMD", "--option", "gpus=1"]``; without ``record``, the ``record`` option is left out (a probe writes no
    trace)."""
    arguments = [locator.serve.value, "--target", locator.target]
    for key, value in sorted(locator.options.items()):
        if key != RECORD_OPTION or record:
            arguments += ["--option", option_text(key, value)]
    return arguments


def parse_served(table: Fields, registry: TargetRegistry | None = None) -> ServedLocator:
    """The ``served`` table of a map entry, checked (errors name the field).

    Raises:
        FileFormatError: an unknown serve kind, a target the kind does not serve, or an option the target or
            ``tinyhil serve`` refuses.
    """
    registry = default_registry() if registry is None else registry
    serve = table.choice("serve", ServeKind)
    target = table.string("target")
    assert serve is not None and target is not None
    route = SERVE_ROUTES[serve]
    try:
        resolved = registry.resolve(target)
    except InvalidArgument as exc:
        raise table.error("target", str(exc)) from None
    if resolved.definition.name != route.emulated:
        raise table.error("target", f"{target!r:.60} for serve = {serve.value!r}, expected a {route.emulated} target")
    options = table.of_type("options", dict, required=False) or {}
    unknown = sorted(set(options) - set(route.options or options))
    if unknown and route.options:
        raise table.error("options", f"{unknown[0]!r:.60}, expected options tinyhil serve {serve.value} takes: "
                                     f"{', '.join(route.options)}")  # fmt: skip
    locator = ServedLocator(serve, resolved.name, json.dumps(options, sort_keys=True))
    try:
        target_options(target, options, registry)
        serve_arguments(locator)
    except InvalidArgument as exc:
        raise table.error("options", str(exc)) from None
    return locator


def check_served_targets(entry: Fields, locator: ServedLocator, given: tuple[str, ...],
                         registry: TargetRegistry) -> tuple[str, ...]:  # fmt: skip
    """The targets a served board serves: those its entry lists (each one of its route's real target), else the real
    target.

    Raises:
        FileFormatError: a listed target the board does not present.
    """
    for text in given:
        try:
            name = registry.resolve(text).definition.name
        except InvalidArgument as exc:
            raise entry.error("targets", str(exc)) from None
        if name != locator.route.real:
            raise entry.error("targets", f"{text!r:.60} on a served {locator.serve.value} board, expected "
                                         f"{locator.route.real} (the interface it is served through)")  # fmt: skip
    return given or (locator.route.real,)


def served_capabilities(entry: Fields, capabilities: frozenset[str]) -> frozenset[str]:
    """A served board's capabilities: its target's, or those its entry declares, without ``real-hardware`` (the
    board is an emulator: tests that need hardware never run on it).

    Raises:
        FileFormatError: the entry declares ``real-hardware``.
    """
    if REAL_HARDWARE in entry.table.get("capabilities", ()):
        raise entry.error("capabilities", f"{REAL_HARDWARE!r} on a served board, expected capabilities an emulator "
                                          "has (a served board is emulated)")  # fmt: skip
    return capabilities - {REAL_HARDWARE}
