"""Traces on MOCKUSB+AMD (sync mode): what recording costs, and how fast a replay runs, as ratios in one run.

    python benchmarks/bench_trace.py [--mb 64] [--repeats 3]

Recording: a copyin of ``--mb`` MB on a MOCKUSB+AMD device opened with ``record=`` (the USB handle, its transfers
and its context wrapped by :mod:`tinyhil.trace.recorder`) against the same copyin on a device opened without it,
the two interleaved round by round (the recorder's records are dropped between rounds; nothing is written: the hex
encoding happens only when a trace is saved). The goal is at most 1.5x.

Replay: a whole recorded session (open, bring-up, alloc, one copyin of ``--mb`` MB, close) run again through the
replay handle (REPLAY+AMD: the real transport and driver, every answer from the trace, loaded once beforehand)
against the same session on the emulator (MOCKUSB+AMD), as emulator time over replay time.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from tinyhil.benchtime import best_seconds
from tinyhil.device import Device
from tinyhil.mocks.replay import replay_device
from tinyhil.mocks.targets import REPLAY_TARGET
from tinyhil.registry import default_registry, open_target
from tinyhil.trace import load_trace

MB = 1 << 20
MAX_RECORDING_RATIO = 1.5
TARGET = "MOCKUSB+AMD"


def recording_ratio(nbytes: int, repeats: int) -> float:
    """Seconds of a recorded copyin over seconds of an unrecorded one (best of ``repeats`` interleaved rounds)."""
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as scratch:
        plain = open_target(TARGET)
        recorded = open_target(TARGET, record=str(Path(scratch) / "bench.hiltrace.jsonl"))
        try:
            buffers = {device: device.alloc(nbytes) for device in (plain, recorded)}
            recorder = recorded.transport.recorder  # type: ignore[attr-defined]

            def copy(device: Device) -> None:
                recorder.discard()
                device.copyin(buffers[device], data)

            for device in (plain, recorded):
                copy(device)  # warm-up: the protocol's one-time setup, VRAM pages committed
            seconds = best_seconds({"off": lambda: copy(plain), "on": lambda: copy(recorded)}, repeats)
        finally:
            plain.close()
            recorder.discard()
            recorded.close()  # writes what is left: the close's own requests
    return seconds["on"] / seconds["off"]


def _session(device: Device, data: np.ndarray) -> None:
    with device:
        device.copyin(device.alloc(data.nbytes), data)


def replay_ratio(nbytes: int, repeats: int) -> float:
    """Seconds of a session on the emulator over seconds of its replay (best of ``repeats`` interleaved rounds)."""
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "session.hiltrace.jsonl"
        _session(open_target(TARGET, record=str(path)), data)
        trace = load_trace(path)
    replay = default_registry().resolve(REPLAY_TARGET)
    seconds = best_seconds({"emulator": lambda: _session(open_target(TARGET), data),
                            "replay": lambda: _session(replay_device(replay, trace), data)}, repeats)  # fmt: skip
    return seconds["emulator"] / seconds["replay"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="bytes per copyin, in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the best run of each side counts (default 3)")
    args = parser.parse_args(argv)
    nbytes = args.mb * MB
    ratio = recording_ratio(nbytes, args.repeats)
    verdict = "ok" if ratio <= MAX_RECORDING_RATIO else f"ABOVE {MAX_RECORDING_RATIO}"
    print(f"{TARGET} copyin {args.mb} MB recorded: {ratio:.2f}x the unrecorded time (aim <= {MAX_RECORDING_RATIO}: "
          f"{verdict})")  # fmt: skip
    speedup = replay_ratio(nbytes, args.repeats)
    print(f"REPLAY+AMD session with a {args.mb} MB copyin: {speedup:.2f}x the emulator's throughput (emulator time / "
          "replay time)")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
