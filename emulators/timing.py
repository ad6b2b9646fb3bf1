"""How much virtual time each operation on the USB bridge costs: the ``asm2464-usb3`` preset and its parameters.

The model charges virtual time per control transfer (submission latency, then EP0 service on the bridge's 8051),
per bulk transfer and byte (setup, then the firmware's DMA rate), per SRAM landing (the bridge's landing-delay quirk,
default 0), per GPU copy byte across PCIe (:attr:`TimingModel.gpu_copy_bytes_per_s`, applied by the GPU model's SDMA
engine) and per GPU poll (the POLL_REGMEM interval of docs/amdgpu.md: 16 clock cycles of 10 ns per unit).

Four parameters are free and were fitted, from one parameter set, to the three copyin throughputs measured on
hardware (docs/copyin.md: naive 107, sentinel-sector 276, current 323 MB/s); the rest are the spec's firmware
figures. ``tinyhil bench copyin --model asm2464-usb3`` prints the fit next to the hardware numbers.

Free parameters (fitted):

- ``usb_latency_ns`` = 80 us: host submission to the transfer reaching the device (host USB stack, xHCI). Source:
  batching the arm with the fence read took 294 -> 323 MB/s, one round trip less per 256 KB chunk = 80 us.
- ``control_service_ns`` = 15 us: the 8051 handling one vendor request on EP0 (setup, data and status stages).
- ``bulk_setup_ns`` = 5 us: the firmware priming the 0xF2 DMA for one bulk transfer.
- ``gpu_copy_bytes_per_s`` = 330 MB/s: the GPU's SDMA reading the bridge's SRAM across PCIe. Source: the naive
  revision overlaps nothing, and 107 MB/s leaves ~0.8 ms of GPU copy per 256 KB chunk; the pipelined revision
  needs the GPU to drain a chunk within about one chunk period (~0.8 ms), which bounds it from below.

Spec figures (fixed): ``bulk_out_bytes_per_s`` 381 MB/s ("0xF2 DMA writes about 381 MB/s"), ``bulk_in_bytes_per_s``
700 MB/s ("bulk IN DMA about 700 MB/s"), ``stream_bytes_per_s`` 4 MB/s ("0xF0 streaming a few MB/s"),
``stream_packet_bytes`` 1024 B (USB3 stream packets; 512 B on USB2).

What makes the revisions differ in the model is the bridge's single 8051 core (see
:mod:`tinyhil.emulators.asm2464.front`): EP0 service waits for a running 0xF2 DMA, so every control round trip a
revision puts between two bulk transfers adds to the time per chunk. Durations are integer nanoseconds, rounded up.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Final

from tinyhil._check import check_int
from tinyhil.align import ceil_div
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import STREAM_PACKET_BYTES_USB3

__all__ = ["DEFAULT_PRESET", "TIMING_PRESETS", "TimingModel"]

_NS_PER_S: Final = 1_000_000_000
DEFAULT_PRESET: Final = "asm2464-usb3"


def _ns_for(nbytes: int, bytes_per_s: int) -> int:
    return ceil_div(nbytes * _NS_PER_S, bytes_per_s)


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
        gpu_copy_bytes_per_s: rate at which the GPU copies between the bridge's SRAM and VRAM over PCIe (the GPU
            model's SDMA engine charges COPY_LINEAR to or from the system aperture at this rate).
    """

    usb_latency_ns: int
    control_service_ns: int
    bulk_setup_ns: int
    bulk_out_bytes_per_s: int
    bulk_in_bytes_per_s: int
    stream_bytes_per_s: int
    stream_packet_bytes: int
    gpu_copy_bytes_per_s: int

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
        return self.bulk_setup_ns - (-nbytes * _NS_PER_S // self.bulk_out_bytes_per_s)  # as _ns_for

    def bulk_in_ns(self, nbytes: int) -> int:
        """A bulk IN of ``nbytes`` out of SRAM."""
        return self.bulk_setup_ns - (-nbytes * _NS_PER_S // self.bulk_in_bytes_per_s)  # as _ns_for

    def stream_ns(self, nbytes: int) -> int:
        """A bulk transfer of ``nbytes`` through an 0xF0 stream, whole packets at the stream rate."""
        packets = ceil_div(nbytes, self.stream_packet_bytes)
        return self.bulk_setup_ns + _ns_for(packets * self.stream_packet_bytes, self.stream_bytes_per_s)

    def stream_packets_done(self, elapsed_ns: int) -> int:
        """How many whole stream packets have moved ``elapsed_ns`` after a stream transfer started."""
        moving_ns = max(0, elapsed_ns - self.bulk_setup_ns)
        return moving_ns * self.stream_bytes_per_s // (_NS_PER_S * self.stream_packet_bytes)

    def gpu_copy_ns(self, nbytes: int) -> int:
        """The GPU copying ``nbytes`` between the bridge's SRAM and VRAM."""
        return _ns_for(nbytes, self.gpu_copy_bytes_per_s)


# The calibrated preset: see the module docstring for each parameter's meaning and source.
TIMING_PRESETS: Final[dict[str, TimingModel]] = {
    DEFAULT_PRESET: TimingModel(
        usb_latency_ns=80_000,
        control_service_ns=15_000,
        bulk_setup_ns=5_000,
        bulk_out_bytes_per_s=381_000_000,
        bulk_in_bytes_per_s=700_000_000,
        stream_bytes_per_s=4_000_000,
        stream_packet_bytes=STREAM_PACKET_BYTES_USB3,
        gpu_copy_bytes_per_s=330_000_000,
    ),
}
