"""Benchmarks the farm runs: ``tinyhil bench copyin`` predicts copyin throughput from a timing model.

Each protocol revision copies the same bytes into ``MOCKUSB+AMD`` in timed mode, where every USB transfer, 0xF2
DMA, GPU copy and poll costs virtual time by the model (:mod:`tinyhil.emulators.timing`). The throughput is the
copyin's bytes over its virtual duration, from the device's own profile event (GPU timestamps taken before and after
it), after a small warm-up copyin has done the protocol's one-time setup. MB are 10**6 bytes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from tinyhil.emulators.timing import TimingModel
from tinyhil.errors import DeviceError, InvalidArgument
from tinyhil.profile import ProfileRangeEvent
from tinyhil.registry import default_registry
from tinyhil.spec.copyin import HARDWARE_COPYIN_MBPS

__all__ = ["DEFAULT_TOLERANCE", "CopyinResult", "bench_copyin", "best_seconds", "parse_size"]

DEFAULT_TOLERANCE: Final = 0.15
_WARMUP_BYTES: Final = 4096
_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE: Final = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?", re.IGNORECASE)


def best_seconds(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best wall time of each run over ``repeats`` rounds; a round times every run once, so all see the same load
    (what the side-by-side benchmarks in ``benchmarks/`` measure with: the machine is shared and noisy)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864 (K, M, G are powers of 1024; ``"4096"`` is bytes).

    Raises:
        InvalidArgument: not a size.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) <= 0:
        raise InvalidArgument(f"size {text!r}, expected a positive number of bytes with an optional K, M or G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


@dataclass(frozen=True, slots=True)
class CopyinResult:
    """One revision's predicted copyin throughput next to the hardware figure."""

    revision: str
    nbytes: int
    virtual_ns: int
    hardware_mbps: float

    @property
    def mbps(self) -> float:
        return self.nbytes / self.virtual_ns * 1e3

    @property
    def error(self) -> float:
        """Relative difference from the hardware figure (+0.05: 5% faster than measured)."""
        return self.mbps / self.hardware_mbps - 1


def bench_copyin(
    model: str,
    nbytes: int,
    *,
    revisions: tuple[str, ...] = tuple(HARDWARE_COPYIN_MBPS),
    target: str = "MOCKUSB+AMD",
    on_result: Callable[[CopyinResult], object] | None = None,
) -> list[CopyinResult]:
    """Copy ``nbytes`` of random data into ``target`` (timed mode, ``model``'s timing) with each revision, check the
    bytes landed, and return the virtual throughputs.

    Raises:
        InvalidArgument: unknown model or revision, or a bad size.
        DeviceError: a copy went wrong (bytes differ, or the device failed).
    """
    timing = TimingModel.preset(model)
    unknown = [r for r in revisions if r not in HARDWARE_COPYIN_MBPS]
    if unknown:
        raise InvalidArgument(f"revisions {unknown}, expected some of {list(HARDWARE_COPYIN_MBPS)}")
    if nbytes <= 0:
        raise InvalidArgument(f"nbytes={nbytes}, expected > 0")
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    results = []
    resolved = default_registry().resolve(target)
    for revision in revisions:
        with resolved.open(mode="timed", timing=timing, revision=revision) as device:
            buffer = device.alloc(nbytes)
            device.copyin(buffer, data[:_WARMUP_BYTES])  # the protocol's one-time setup happens here
            device.copyin(buffer, data)
            event = [e for e in device.profile_events if isinstance(e, ProfileRangeEvent) and e.name == "copyin"][-1]
            check = device.copyout(buffer, min(nbytes, 1 << 20), nbytes - min(nbytes, 1 << 20))
            if bytes(check) != data[nbytes - len(check) :].tobytes():
                raise DeviceError(f"{revision}: the copied bytes differ from the source", op="bench copyin")
            result = CopyinResult(revision, nbytes, event.end_ns - event.start_ns, HARDWARE_COPYIN_MBPS[revision])
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
