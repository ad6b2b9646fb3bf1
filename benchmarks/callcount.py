"""Deterministic call-count budgets for the MOCKUSB+AMD copy path: Python calls per copyin chunk and copyout piece.

    python benchmarks/callcount.py [--chunks 8] [--revision pipelined]

A profiler hook (``sys.setprofile``) counts the ``'call'`` events of the current thread while one copy runs: every
Python function or method entered, a generator or coroutine resumed included. Calls into C (``'c_call'``: builtins,
numpy's C functions, methods of ``bytes`` and ``memoryview``) are counted separately and printed, but the budget is
on ``'call'`` alone: that is the interpreter overhead a structural change removes. Neither count depends on the
machine's speed, only on the code path, so a test can assert it where it cannot assert a time.

The copies run in sync mode (the default) on one device. Each kind is warmed up right before it is counted, at both
sizes it is counted at (the protocol's one-time setup, VRAM pages committed, per-size caches filled; and the first
copyin after a copyout has its windows to clean). Then a copyin of ``2 * chunks`` full chunks (``CHUNK_BYTES``) less
one of ``chunks``, divided by ``chunks``, is the steady-state count per chunk; copyout_into likewise with ``chunks``
and ``chunks // 2`` pieces (``COPYOUT_PIECE_BYTES``). What the shorter copy has left over is the fixed cost of one
call (argument checks, control transfers, the program built), printed but not divided into the per-chunk figure.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

import numpy as np

from tinyhil.registry import open_target
from tinyhil.spec.copyin import CHUNK_BYTES, COPYOUT_PIECE_BYTES

__all__ = ["TARGET", "Counts", "copy_call_counts", "count_calls", "describe"]

TARGET = "MOCKUSB+AMD"


class Counts(NamedTuple):
    """Calls per steady-state chunk (copyin) or piece (copyout_into), and per call beyond its chunks or pieces."""

    call: float  # 'call' events: Python functions entered (the budget)
    c_call: float  # 'c_call' events: C functions called (printed, not budgeted)
    call_fixed: float
    c_call_fixed: float


def count_calls(fn: Callable[[], object]) -> tuple[int, int]:
    """``('call' events, 'c_call' events)`` of this thread while ``fn()`` runs.

    The garbage collector is off meanwhile: a collection that happens to fall inside the copy would run the
    callbacks other libraries register (hypothesis has one) and count their calls as the copy's.
    """
    counts = {"call": 0, "c_call": 0}

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event in counts:
            counts[event] += 1

    previous = sys.getprofile()
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(previous)
        if collecting:
            gc.enable()
    counts["c_call"] -= 1  # the sys.setprofile call that removed the hook reports itself as a 'c_call'
    return counts["call"], counts["c_call"]


def copy_call_counts(chunks: int = 8, revision: str = "pipelined") -> dict[str, Counts]:
    """Calls per steady-state copyin chunk and copyout_into piece, and what one call costs beyond them, on the
    gfx1100 behind the emulated bridge.

    A copy of ``2 * chunks`` chunks (``chunks`` pieces) less one of ``chunks`` chunks (``chunks // 2`` pieces),
    divided by the difference: the one-time cost of a call cancels out and only steady-state chunks are counted.
    """
    if chunks < 2 or chunks % 2:
        raise ValueError(f"chunks={chunks}, expected an even number >= 2 (a copyout piece is two chunks' windows)")
    pieces = chunks // 2
    data = np.random.default_rng(0).integers(0, 256, 2 * chunks * CHUNK_BYTES, dtype=np.uint8)
    out = np.zeros(2 * pieces * COPYOUT_PIECE_BYTES, dtype=np.uint8)
    with open_target(TARGET, revision=revision) as device:
        buf = device.alloc(max(data.nbytes, out.nbytes))

        def copyin(n: int) -> None:
            device.copyin(buf, data[: n * CHUNK_BYTES])

        def copyout(n: int) -> None:
            device.copyout_into(buf, out[: n * COPYOUT_PIECE_BYTES])

        # Each is warmed up right before it is counted: the first copyin after a copyout has its windows to clean.
        copyin_counts = _steady_state(copyin, chunks)
        copyout_counts = _steady_state(copyout, pieces)
    if not np.array_equal(out[: data.nbytes], data[: out.nbytes]):
        raise AssertionError("copyout_into returned other bytes than copyin stored")
    return {"copyin": copyin_counts, "copyout_into": copyout_counts}


def _steady_state(copy: Callable[[int], None], units: int) -> Counts:
    copy(units)  # warm-up at both sizes: the protocol's one-time setup, VRAM pages committed, per-size caches filled
    copy(2 * units)
    short = count_calls(lambda: copy(units))
    long = count_calls(lambda: copy(2 * units))
    call, c_call = (long[0] - short[0]) / units, (long[1] - short[1]) / units
    return Counts(call, c_call, short[0] - units * call, short[1] - units * c_call)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=8, help="copyin chunks, even (default 8 = 2 MiB, against 16)")
    parser.add_argument("--revision", default="pipelined", help="copyin protocol revision (default pipelined)")
    args = parser.parse_args(argv)
    for name, counts in copy_call_counts(args.chunks, args.revision).items():
        print(f"{TARGET} {name}: {describe(name, counts)}")
    return 0


def describe(name: str, counts: Counts) -> str:
    """One line: the Python and C calls per chunk or piece, and per call beyond them."""
    unit = f"chunk ({CHUNK_BYTES} B)" if name == "copyin" else f"piece ({COPYOUT_PIECE_BYTES} B)"
    return (
        f"{counts.call:.1f} Python calls ({counts.c_call:.1f} C calls) per {unit}, "
        f"+{counts.call_fixed:.0f} ({counts.c_call_fixed:.0f}) per {name} call"
    )


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
