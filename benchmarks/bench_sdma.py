"""SDMA throughput of the emulated GPU against numpy on the same bytes, measured side by side in one run.

    python benchmarks/bench_sdma.py [--mb 64] [--repeats 5]

COPY_LINEAR of N MB VRAM to VRAM against ``numpy.copyto`` of the same VRAM bytes, and a dword CONST_FILL against
``ndarray.fill`` of the same bytes. Each side is the best of ``--repeats`` runs, interleaved round by round (pages
are committed first, so no side pays the first-touch cost). The emulated side runs the whole driver path: packets
written into the ring by the reference queue object, doorbell, engine step on the event kernel, fence wait. Ratios
are emulated / numpy throughput: higher is better; the goal is copy >= 0.7 and fill >= 0.5.
"""

from __future__ import annotations

import argparse

import numpy as np

from tinyhil.align import round_up
from tinyhil.amdgpu import AmdQueue, sdma_const_fill, sdma_copy_linear, sdma_fence
from tinyhil.benchtime import best_seconds
from tinyhil.emulators.amdgpu import AmdGpu, QueueKind
from tinyhil.emulators.kernel import EventKernel
from tinyhil.mocks.amdgpu import DirectQueueTransport

MB = 1 << 20
RING, RPTR, WPTR, FENCE, DATA = 0x10000, 0x1000, 0x1008, 0x2000, 16 * MB
COPY_MIN_RATIO, FILL_MIN_RATIO = 0.7, 0.5


def measure(nbytes: int, repeats: int = 5) -> dict[str, float]:
    """Ratios (emulated throughput / numpy throughput) for COPY_LINEAR and CONST_FILL of ``nbytes``."""
    vram_bytes = round_up(DATA + 2 * nbytes, MB)
    gpu = AmdGpu(EventKernel(), vram_bytes=vram_bytes, vram_at_zero=True)
    layout = {"ring_va": RING, "ring_bytes": 0x10000, "rptr_va": RPTR, "wptr_va": WPTR, "doorbell_index": 0}
    queue = AmdQueue(DirectQueueTransport(gpu, wait_ns=10**12), QueueKind.SDMA, **layout)
    queue.initialize()
    gpu.create_queue(QueueKind.SDMA, **layout)
    vram = np.frombuffer(gpu.vram, np.uint8)
    src, dst = vram[DATA : DATA + nbytes], vram[DATA + nbytes : DATA + 2 * nbytes]
    src[:] = np.arange(nbytes, dtype=np.uint8)  # commit every page of both ranges
    dst[:] = 1
    sequence = [0]

    def submit_and_wait(packet: np.ndarray) -> None:
        sequence[0] += 1
        value = sequence[0]
        queue.submit(packet, sdma_fence(FENCE, value))
        gpu.wait(lambda: gpu.memory.read_u32(FENCE) == value, 10**12, what=f"fence {value}")

    copy = sdma_copy_linear(DATA + nbytes, DATA, nbytes)
    fill = sdma_const_fill(DATA + nbytes, 0x5A5A5A5A, nbytes)
    dst_words = dst.view(np.uint32)
    copies = best_seconds({"emulated": lambda: submit_and_wait(copy), "numpy": lambda: np.copyto(dst, src)}, repeats)
    fills = best_seconds({"emulated": lambda: submit_and_wait(fill), "numpy": lambda: dst_words.fill(0x5A5A5A5A)},
                         repeats)  # fmt: skip
    dst[:] = 1  # then each check sees what the emulated GPU alone wrote
    submit_and_wait(copy)
    assert np.array_equal(dst, src), "COPY_LINEAR left other bytes than numpy.copyto"
    submit_and_wait(fill)
    assert bool(np.all(dst_words == 0x5A5A5A5A)), "CONST_FILL left other bytes than ndarray.fill"
    return {"copy": copies["numpy"] / copies["emulated"], "fill": fills["numpy"] / fills["emulated"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="bytes per operation, in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per side; the best counts (default 5)")
    args = parser.parse_args(argv)
    ratios = measure(args.mb * MB, args.repeats)
    print(f"SDMA COPY_LINEAR {args.mb} MB VRAM->VRAM / numpy.copyto: {ratios['copy']:.2f} (need >= {COPY_MIN_RATIO})")
    print(f"SDMA CONST_FILL  {args.mb} MB / ndarray.fill:            {ratios['fill']:.2f} (need >= {FILL_MIN_RATIO})")
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
