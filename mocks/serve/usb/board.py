"""The board ``tinyhil serve usb`` serves: a target string and its ``--option KEY=VALUE`` options, checked once.

The options are read by :func:`~tinyhil.mocks.serve.options.parse_options` (JSON, else an integer, else the text).
docs/serve.md lists them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import FaultPlan
from tinyhil.emulators.timing import TimingModel
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.serve.options import parse_options
from tinyhil.mocks.targets import GFX_TARGET_VERSIONS, MOCKUSB_ARCHS, mock_usb_amd
from tinyhil.mocks.usb.context import TransferMode
from tinyhil.mocks.usb3 import fresh_board
from tinyhil.registry import TargetRegistry, check_choice, default_registry
from tinyhil.trace.convert import trace_format

__all__ = ["BOARD_OPTIONS", "RECORD_OPTION", "ServedBoard", "served_board"]

# The options that build the served board (MockUSB3's fresh-board options), ``mode``, and ``record`` (a trace path).
RECORD_OPTION: Final = "record"
BOARD_OPTIONS: Final = ("mode", "seed", "faults", "quirks", "timing", "vram_bytes", "usb3", RECORD_OPTION)


@dataclass(frozen=True, slots=True)
class ServedBoard:
    """The emulated board to serve, how its transfers complete (``mode``, as in MockUSB3), the options it was built
    from (``options``, as given) and where to write a trace of the session (``record``, or ``None``)."""

    target: str
    bridge: Asm2464
    mode: TransferMode
    options: dict[str, Any]
    record: str | None = None


def _board_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """The fresh board's keyword arguments from parsed options (each value typed once, here)."""
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key == "faults":
            kwargs[key] = value if isinstance(value, FaultPlan) else FaultPlan.from_data(value)
        elif key == "quirks":
            if not isinstance(value, dict):
                raise InvalidArgument(f"quirks={value!r}, expected a JSON object of Quirks fields")
            try:
                kwargs[key] = Quirks(**value)
            except TypeError as exc:
                raise InvalidArgument(f"quirks={value!r}: {exc}, expected Quirks fields") from None
        elif key == "timing":
            kwargs[key] = TimingModel.preset(str(value))
        elif key in ("seed", "vram_bytes"):
            if type(value) is not int:
                raise InvalidArgument(f"{key}={value!r}, expected an integer")
            kwargs[key] = value
        elif key == "usb3":
            if type(value) is not bool:
                raise InvalidArgument(f"usb3={value!r}, expected true or false")
            kwargs[key] = value
    return kwargs


def served_board(target: str, options: Sequence[str], registry: TargetRegistry | None = None) -> ServedBoard:
    """Resolve ``target`` (a ``MOCKUSB+AMD`` target) and build the fresh board its ``options`` describe.

    Raises:
        InvalidArgument: another target, an unknown option, or a bad value (named).
    """
    registry = default_registry() if registry is None else registry
    resolved = registry.resolve(target)
    if resolved.definition.name != mock_usb_amd.name:
        raise InvalidArgument(f"--target {target!r}, expected a MOCKUSB+AMD target (the emulated ASM2464 board)")
    parsed = parse_options(options)
    unknown = sorted(set(parsed) - set(BOARD_OPTIONS))
    if unknown:
        raise InvalidArgument(f"--option {unknown[0]}=..., expected one of {', '.join(BOARD_OPTIONS)}")
    given = dict(parsed)
    mode = check_choice("mode", parsed.pop("mode", TransferMode.SYNC.value), TransferMode)
    record = parsed.pop(RECORD_OPTION, None)
    if record is not None:
        if not isinstance(record, str):
            raise InvalidArgument(f"record={record!r}, expected a path ending in .hiltrace.jsonl or .pcapng")
        trace_format(record)
    kwargs = _board_kwargs(parsed)
    bridge = fresh_board(gfx_target_version=GFX_TARGET_VERSIONS[resolved.arch or MOCKUSB_ARCHS[0]], **kwargs)
    return ServedBoard(resolved.name, bridge, TransferMode(mode), given, record)
