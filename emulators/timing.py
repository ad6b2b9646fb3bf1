"""How much virtual time each operation on the USB bridge costs: a few named physical parameters.

The model is deliberately small so a later calibration against the measured copyin throughputs (spec/copyin.md) can
fit it: every parameter has a unit in its name and a physical meaning. Durations are integer nanoseconds, rounded up.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm24 import STREAM_PACKET_BYTES_USB3

__all__ = ["TIMING_PRESETS", "TimingModel"]

_NS_PER_S: Final = 1_000_000_000


def _ns_for(nbytes: int, bytes_per_s: int) -> int:
    return -(-nbytes * _NS_PER_S // bytes_per_s)


@dataclass(frozen=True, slots=True)
class TimingModel:
    """Virtual-time costs of USB and bridge operations.

    Attributes:
        usb_latency_ns: from the host submitting a transfer to the transfer reaching its endpoint on the device
            (host USB stack, xHCI scheduling), charged once per transfer. A synchronous call pays it every time;
            asynchronous transfers submitted together overlap it (what batching the arm with the fence read saves).
        control_service_ns: how long one control transfer occupies EP0 (setup, data and status stages and the
            8051 firmware handling the request). A synchronous control round trip costs latency + service.
        bulk_setup_ns: per bulk transfer, from the transfer reaching the head of its endpoint queue to its first
            packet (URB handling, the firmware priming its DMA).
        bulk_out_bytes_per_s: payload rate of a bulk OUT into the 0xF2 engine (the firmware's DMA write rate
            limits it, not the wire).
        bulk_in_bytes_per_s: payload rate of a bulk IN out of SRAM.
        stream_bytes_per_s: payload rate of the 0xF0 stream modes (every packet becomes TLPs issued by the 8051).
        stream_packet_bytes: packet size of the stream modes (1024 B on USB3, 512 B on USB2); a partial last packet
            costs a whole one.
        gpu_copy_bytes_per_s: rate at which the GPU copies between the bridge's SRAM and VRAM over PCIe (for the
            GPU model's copy engines).
        poll_interval_ns: one retry interval of a GPU memory poll (POLL_REGMEM ``interval``) in ns.
    """

    usb_latency_ns: int
    control_service_ns: int
    bulk_setup_ns: int
    bulk_out_bytes_per_s: int
    bulk_in_bytes_per_s: int
    stream_bytes_per_s: int
    stream_packet_bytes: int
    gpu_copy_bytes_per_s: int
    poll_interval_ns: int

    _RATES: ClassVar[tuple[str, ...]] = (
        "bulk_out_bytes_per_s",
        "bulk_in_bytes_per_s",
        "stream_bytes_per_s",
        "gpu_copy_bytes_per_s",
    )

    def __post_init__(self) -> None:
        for field in fields(self):
            check_int(field.name, getattr(self, field.name), min_value=1 if field.name in self._RATES else 0)
        check_int("stream_packet_bytes", self.stream_packet_bytes, min_value=4)

    @classmethod
    def preset(cls, name: str) -> TimingModel:
        """A named preset (``asm2464-usb3``).

        Raises:
            InvalidArgument: unknown name.
        """
        try:
            return TIMING_PRESETS[name]
        except KeyError:
            raise InvalidArgument(f"timing preset {name!r}, expected one of {sorted(TIMING_PRESETS)}") from None

    def control_ns(self) -> int:
        """EP0 time of one control transfer (without the submission latency)."""
        return self.control_service_ns

    def control_round_trip_ns(self) -> int:
        """A synchronous control transfer as the host sees it: latency + service."""
        return self.usb_latency_ns + self.control_service_ns

    def bulk_out_ns(self, nbytes: int) -> int:
        """A bulk OUT of ``nbytes`` into the 0xF2 engine."""
        return self.bulk_setup_ns + _ns_for(nbytes, self.bulk_out_bytes_per_s)

    def bulk_in_ns(self, nbytes: int) -> int:
        """A bulk IN of ``nbytes`` out of SRAM."""
        return self.bulk_setup_ns + _ns_for(nbytes, self.bulk_in_bytes_per_s)

    def stream_ns(self, nbytes: int) -> int:
        """A bulk transfer of ``nbytes`` through an 0xF0 stream, whole packets at the stream rate."""
        packets = -(-nbytes // self.stream_packet_bytes)
        return self.bulk_setup_ns + _ns_for(packets * self.stream_packet_bytes, self.stream_bytes_per_s)

    def stream_packets_done(self, elapsed_ns: int) -> int:
        """How many whole stream packets have moved ``elapsed_ns`` after a stream transfer started."""
        moving_ns = max(0, elapsed_ns - self.bulk_setup_ns)
        return moving_ns * self.stream_bytes_per_s // (_NS_PER_S * self.stream_packet_bytes)

    def gpu_copy_ns(self, nbytes: int) -> int:
        """The GPU copying ``nbytes`` between the bridge's SRAM and VRAM."""
        return _ns_for(nbytes, self.gpu_copy_bytes_per_s)


# Firmware figures from spec/asm24.md "Timing" and spec/copyin.md: 0xF2 DMA writes about 381 MB/s, bulk IN DMA about
# 700 MB/s, 0xF0 streaming a few MB/s. Latency and control service are first estimates from the copyin table:
# batching the fence read with the arm (one latency saved per chunk) took a 256 KB chunk from 294 to 323 MB/s, about
# 80 us; the rest of that revision's per-chunk overhead suggests ~20 us of EP0 time per control transfer. Bulk setup,
# GPU copy rate and poll interval are uncalibrated; the calibration issue fits all of them against the table.
TIMING_PRESETS: Final[dict[str, TimingModel]] = {
    "asm2464-usb3": TimingModel(
        usb_latency_ns=80_000,
        control_service_ns=20_000,
        bulk_setup_ns=20_000,
        bulk_out_bytes_per_s=381_000_000,
        bulk_in_bytes_per_s=700_000_000,
        stream_bytes_per_s=4_000_000,
        stream_packet_bytes=STREAM_PACKET_BYTES_USB3,
        gpu_copy_bytes_per_s=4_000_000_000,
        poll_interval_ns=1_000,
    ),
}
