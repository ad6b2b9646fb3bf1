"""``tinyhil bench copyin``: the copyin throughput a timing model predicts, next to the hardware figures.

Each protocol revision copies the same bytes into ``MOCKUSB+AMD`` in timed mode, where every USB transfer, 0xF2
DMA, GPU copy and poll costs virtual time by the model (:mod:`tinyhil.emulators.timing`). The throughput is the
copyin's bytes over its virtual duration, from the device's own profile event (GPU timestamps taken before and after
it), after a small warm-up copyin has done the protocol's one-time setup. MB are 10**6 bytes.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from tinyhil._check import check_int
from tinyhil.allocator import OutOfMemory
from tinyhil.cli.usage import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_command_group, add_subcommand, description
from tinyhil.device import Buffer, Device
from tinyhil.emulators.timing import TimingModel
from tinyhil.errors import DeviceError, InvalidArgument
from tinyhil.profile import ProfileRangeEvent
from tinyhil.registry import TargetRegistry, default_registry
from tinyhil.spec.copyin import HARDWARE_COPYIN_MBPS

__all__ = [
    "DEFAULT_TOLERANCE",
    "MAX_TOLERANCE",
    "CopyinResult",
    "add_bench_command",
    "bench_copyin",
    "check_tolerance",
    "format_size",
    "largest_alloc_bytes",
    "parse_size",
]

DEFAULT_TOLERANCE: Final = 0.15
# A tolerance is a fraction of the hardware figure; at 1 or more, |error| <= tolerance passes any slower prediction
# (error = model / hardware - 1 >= -1), so the check would mean nothing.
MAX_TOLERANCE: Final = 1.0
_PERCENT: Final = 100  # a tolerance in (1, 100) was most likely meant in percent (15 for 0.15)
_WARMUP_BYTES: Final = 4096
_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SUGGESTED_UNITS: Final = ("M", "K", "")  # a suggested --size: whole MB, else whole KB, else bytes
_SIZE: Final = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864 (K, M, G are powers of 1024; ``"4096"`` is bytes).

    Raises:
        InvalidArgument: not a size.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) <= 0:
        raise InvalidArgument(f"size {text!r}, expected a positive number of bytes with an optional K, M or G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def format_size(nbytes: int) -> str:
    """``1073741824`` -> ``"1G"``, ``264171520`` -> ``"251.9M"``, ``6144`` -> ``"6K"``: whole G or M (powers of
    1024) when exact, else MB to one decimal, and whole K or bytes below 1M."""
    for unit in ("G", "M"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]}{unit}"
    if nbytes >= _UNITS["M"]:
        return f"{nbytes / _UNITS['M']:.1f}M"
    return f"{nbytes // _UNITS['K']}K" if nbytes >= _UNITS["K"] and nbytes % _UNITS["K"] == 0 else str(nbytes)


def _suggested_size(nbytes: int) -> str:
    """The largest round ``--size`` (whole MB, else whole KB, else bytes) that is at most ``nbytes`` (>= 1)."""
    unit = next(u for u in _SUGGESTED_UNITS if nbytes >= _UNITS[u])
    return f"{nbytes // _UNITS[unit]}{unit}"


def check_tolerance(value: float) -> float:
    """Return ``value`` as a float if it is a usable tolerance: a fraction of the hardware figure in ``[0, 1)``.

    Raises:
        InvalidArgument: not a number, negative, NaN, or 1 or more (which would pass any slower prediction).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"tolerance={value!r}, expected a number")
    if not 0 <= value < MAX_TOLERANCE:
        hint = f"; did you mean {value / _PERCENT:g} ({value:g}%)?" if MAX_TOLERANCE < value < _PERCENT else ""
        raise InvalidArgument(
            f"tolerance={value!r}, expected a fraction of the hardware figure with 0 <= tolerance < {MAX_TOLERANCE:g} "
            f"(0.15 allows 15%; {MAX_TOLERANCE:g} or more would pass any slower prediction){hint}"
        )
    return float(value)


def largest_alloc_bytes(device: Device, limit: int) -> int:
    """The largest ``device.alloc`` that succeeds now, at most ``limit`` bytes (0 when not even 1 byte fits).

    Found by bisection with real allocations, each freed at once, so it is exactly the limit the device's own
    allocator imposes (for MOCKUSB+AMD: the VRAM BAR less the rings below the heap and the runtime's signal pages).
    """
    fits, misses = 0, check_int("limit", limit, min_value=0) + 1
    while misses - fits > 1:
        middle = (fits + misses) // 2
        try:
            buffer = device.alloc(middle)
        except OutOfMemory:
            misses = middle
        else:
            device.free(buffer)
            fits = middle
    return fits


def _copyin_buffer(device: Device, nbytes: int) -> Buffer:
    """A buffer of ``nbytes`` on ``device``, or an ``InvalidArgument`` naming the largest copyin that fits."""
    try:
        return device.alloc(nbytes)
    except OutOfMemory:
        largest = largest_alloc_bytes(device, nbytes - 1)
    fix = f"pass --size {_suggested_size(largest)} or less" if largest else "no copyin fits"
    raise InvalidArgument(
        f"size {nbytes} bytes ({format_size(nbytes)}) exceeds the largest copyin {device.name} can hold, "
        f"{largest:#x} bytes ({format_size(largest)}); {fix}"
    )


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

    The size is checked against the target before any data is made or copied: the first revision's device must hold
    a buffer of ``nbytes`` (see :func:`largest_alloc_bytes`).

    Raises:
        InvalidArgument: unknown model or revision, or a bad size (too large: the message names the largest that
            fits).
        DeviceError: a copy went wrong (bytes differ, or the device failed).
    """
    timing = TimingModel.preset(model)
    unknown = [r for r in revisions if r not in HARDWARE_COPYIN_MBPS]
    if unknown:
        raise InvalidArgument(f"revisions {unknown}, expected some of {list(HARDWARE_COPYIN_MBPS)}")
    check_int("nbytes", nbytes, min_value=1)
    data: np.ndarray | None = None  # made once the first device has room for it
    results = []
    resolved = default_registry().resolve(target)
    for revision in revisions:
        with resolved.open(mode="timed", timing=timing, revision=revision) as device:
            buffer = _copyin_buffer(device, nbytes)
            if data is None:
                data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
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


def _bench_copyin(args: argparse.Namespace, registry: TargetRegistry) -> int:
    nbytes = parse_size(args.size)
    TimingModel.preset(args.model)  # an unknown model fails before anything is printed
    rows: list[CopyinResult] = []

    def show(result: CopyinResult) -> None:
        if not rows:  # printed once the first revision has run: a size the target cannot hold fails before it
            print(
                f"tinyhil bench copyin: {args.size} ({nbytes} bytes) into MOCKUSB+AMD in timed mode, timing model "
                f"{args.model!r}; MB/s = 10**6 bytes per second of virtual time",
            )
            print(f"{'revision':<16} {'model MB/s':>10} {'hardware MB/s':>13} {'error':>7}", flush=True)
        rows.append(result)
        flag = "" if abs(result.error) <= args.tolerance else f"  outside +-{args.tolerance:.0%}"
        print(f"{result.revision:<16} {result.mbps:>10.1f} {result.hardware_mbps:>13.0f} {result.error:>+7.1%}{flag}",
              flush=True)  # fmt: skip

    bench_copyin(args.model, nbytes, on_result=show)
    worst = max(abs(r.error) for r in rows)
    verdict = "within" if worst <= args.tolerance else "NOT within"
    print(f"every revision {verdict} {args.tolerance:.0%} of its hardware figure (worst {worst:.1%})")
    return EXIT_OK if worst <= args.tolerance else EXIT_FAILED


def _argparse_type(check: Callable[[float], float]) -> Callable[[str], float]:
    """An argparse ``type=`` that parses a float and checks it with the one validator for that value."""

    def convert(text: str) -> float:
        try:
            return check(float(text))
        except (ValueError, InvalidArgument) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def add_bench_command(commands: Any) -> None:
    """Add ``bench`` and its benchmarks to the ``tinyhil`` parser's subcommands."""
    benches = add_command_group(
        commands,
        "bench",
        "benchmarks of the timing model: copyin, the predicted USB copyin throughput per protocol revision",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
        details=description(__doc__),
        dest="bench",
        metavar="BENCH",
    )
    copyin = add_subcommand(benches, "copyin", "predicted USB copyin throughput of each protocol revision next to the "
                            "hardware figures", EXIT_OK, EXIT_FAILED, EXIT_USAGE)  # fmt: skip
    copyin.add_argument("--model", default="asm2464-usb3", help="timing model preset (default: asm2464-usb3)")
    copyin.add_argument("--size", default="64M", help="bytes to copy in, e.g. 64M, 512K (default: 64M)")
    copyin.add_argument(
        "--tolerance",
        type=_argparse_type(check_tolerance),
        default=DEFAULT_TOLERANCE,
        help=f"exit 1 when a revision is further than this from its hardware figure (default: {DEFAULT_TOLERANCE})",
    )
    copyin.set_defaults(handler=_bench_copyin)
