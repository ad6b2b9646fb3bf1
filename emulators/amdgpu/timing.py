"""The GPU's virtual-time costs: what each packet and each copied byte charges to the event kernel's clock.

A simple, documented model so timestamps advance deterministically; a later issue calibrates the numbers against
the hardware anchors in ``docs/copyin.md``. All times are integer nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tinyhil._check import check_int
from tinyhil.align import ceil_div
from tinyhil.spec.amdgpu import POLL_INTERVAL_CYCLES

__all__ = ["DEFAULT_TIMING", "GpuTiming"]


@dataclass(frozen=True, slots=True)
class GpuTiming:
    """Per-packet, per-byte and per-workgroup costs of the engines.

    ``packet_ns``: every packet (and every poll re-check) occupies its engine this long.
    ``bytes_per_us``: COPY_LINEAR, CONST_FILL and WRITE move this many bytes per microsecond on top of the
    packet cost (rounded up to whole nanoseconds).
    ``system_bytes_per_us``: the rate instead when a COPY_LINEAR reads or writes the system aperture (the bridge's
    SRAM across PCIe, USB path); 0 means ``bytes_per_us``. MockUSB3 sets it from the bridge timing model's
    ``gpu_copy_bytes_per_s``.
    ``clock_ns``: one model clock cycle; POLL_REGMEM / WAIT_REG_MEM intervals count 16 of them.
    ``dispatch_ns`` + ``workgroup_ns`` per workgroup: a DISPATCH_DIRECT.
    """

    packet_ns: int = 50
    bytes_per_us: int = 16_000  # 16 GB/s
    clock_ns: int = 10  # a 100 MHz model clock, the rate of the timestamp counter
    dispatch_ns: int = 2_000
    workgroup_ns: int = 100
    system_bytes_per_us: int = 0

    def __post_init__(self) -> None:
        check_int("packet_ns", self.packet_ns, min_value=1)
        check_int("bytes_per_us", self.bytes_per_us, min_value=1)
        check_int("clock_ns", self.clock_ns, min_value=1)
        check_int("dispatch_ns", self.dispatch_ns, min_value=0)
        check_int("workgroup_ns", self.workgroup_ns, min_value=0)
        check_int("system_bytes_per_us", self.system_bytes_per_us, min_value=0)

    def transfer_ns(self, nbytes: int, *, system: bool = False) -> int:
        """Time to move ``nbytes`` (beyond the packet cost); ``system``: to or from the system aperture."""
        rate = self.system_bytes_per_us if system and self.system_bytes_per_us else self.bytes_per_us
        return ceil_div(nbytes * 1000, rate)

    def poll_interval_ns(self, interval: int) -> int:
        """A poll interval field (units of 16 clock cycles) in nanoseconds."""
        return interval * POLL_INTERVAL_CYCLES * self.clock_ns

    def dispatch_cost_ns(self, workgroups: int) -> int:
        return self.dispatch_ns + workgroups * self.workgroup_ns


DEFAULT_TIMING: Final = GpuTiming()
