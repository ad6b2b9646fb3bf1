"""The ASM2464's hardware quirks as one frozen value of switches (docs/faults.md "Quirks"), all off by default."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import STREAM_WEDGE_BYTES

__all__ = ["Quirks", "UnknownRequests"]


class UnknownRequests(StrEnum):
    """How the firmware answers a vendor request it does not know (docs/asm2464.md "Vendor requests")."""

    STRICT = "strict"  # stall: a silent ack hides driver bugs (the default)
    FIRMWARE = "firmware"  # what the real firmware does: acknowledge an unknown OUT request with no data stage


@dataclass(frozen=True, slots=True)
class Quirks:
    """Every quirk of the spec as a switch; ``Quirks()`` is a well-behaved bridge.

    Attributes:
        full_window_corruption: quirk 1: a single bulk OUT that fills every slot of its 256 KB window (starts on a
            window boundary, a whole number of windows long) lands its last 512 B sector corrupted (bit-inverted).
        sys_buf_collision: quirk 2: GPU writes into PCIe ``0x820000-0x8207FF`` while an 0xF2 transfer is in flight
            are lost (the engine clobbers them); ``0x820800`` and up stays stable.
        stream_wedge: quirk 3: a single 0xF0 stream longer than ``stream_wedge_threshold_bytes`` wedges the bridge:
            every later request times out until ``reset()`` (a board power cycle).
        stream_wedge_threshold_bytes: the stream length (bytes) past which the wedge hits (upstream saw 4 MB).
        link_up_delay_ns: quirk 4: virtual ns between 0xF3 power-on and the link reaching L0.
        landing_delay_ns: virtual ns between a bulk OUT completing on the wire and its bytes landing in SRAM.
        landing_jitter_ns: extra landing delay drawn per transfer from ``[0, jitter]`` with the board's seeded
            generator, so landings may reorder *across* transfers (never within one).
        unknown_requests: ``strict`` (stall, default) or ``firmware`` (ack an unknown OUT request).
    """

    full_window_corruption: bool = False
    sys_buf_collision: bool = False
    stream_wedge: bool = False
    stream_wedge_threshold_bytes: int = STREAM_WEDGE_BYTES
    link_up_delay_ns: int = 0
    landing_delay_ns: int = 0
    landing_jitter_ns: int = 0
    unknown_requests: UnknownRequests = UnknownRequests.STRICT

    def __post_init__(self) -> None:
        for name in ("full_window_corruption", "sys_buf_collision", "stream_wedge"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"{name}={getattr(self, name)!r}, expected a bool")
        check_int("stream_wedge_threshold_bytes", self.stream_wedge_threshold_bytes, min_value=0)
        check_int("link_up_delay_ns", self.link_up_delay_ns, min_value=0)
        check_int("landing_delay_ns", self.landing_delay_ns, min_value=0)
        check_int("landing_jitter_ns", self.landing_jitter_ns, min_value=0)
        try:
            object.__setattr__(self, "unknown_requests", UnknownRequests(self.unknown_requests))
        except ValueError:
            known = [m.value for m in UnknownRequests]
            raise InvalidArgument(f"unknown_requests={self.unknown_requests!r}, expected one of {known}") from None
