"""Parallel and qemu-backed compilation, measured side by side in one run.

    python benchmarks/bench_compile.py [--kernels 32] [--later 20] [--workers N]

1. Host C compiler: N distinct kernels compiled serially, then through the worker pool (``compile_many``);
   prints the speed-up with the worker count (cold: including the workers' start-up; warm: a second batch).
2. The qemu compile server (Debian's tcc for aarch64): the first compile (includes the server's start-up) and the
   median of later compiles, against a new ``qemu-aarch64-static ... tcc -c`` process per compile.
3. N kernels through qemu: one shared server in this process against one server per pool worker.

Times are wall-clock on whatever machine runs this: read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tinyhil.compiler import Compiler, HostCCompiler
from tinyhil.process_pool import compile_many, get_pool, shutdown_pool
from tinyhil.qemu import QemuCompiler, shutdown_servers
from tinyhil.qemu.toolchains import qemucc_compiler, qemucc_unavailable_reason

KERNEL = """
#include <stdint.h>
void kernel_{index}(float *out, const float *a, const float *b, uint32_t n) {{
    for (uint32_t i = 0; i < n; i++) {{
        float acc = 0.0f;
        for (uint32_t k = 0; k < {depth}u; k++) acc += a[(i + k) % n] * b[(i * {index} + k) % n];
        out[i] = acc * {index}.5f + (acc > 0.0f ? acc : -acc);
    }}
}}
"""


def kernels(count: int, salt: str = "") -> list[bytes]:
    """``count`` distinct kernels (distinct sources: the pool would deduplicate repeats)."""
    return [(KERNEL.format(index=i, depth=8 + i % 5) + f"/* {salt} */\n").encode() for i in range(count)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pool_batches(compiler: Compiler, count: int, salt: str = "") -> tuple[int, float, float]:
    """On a fresh worker pool: its size, then the seconds of a first (cold: includes the workers' start-up) and a
    second (warm) ``compile_many`` of ``count`` distinct kernels."""
    shutdown_pool()
    pool = get_pool()
    workers = pool.workers if pool is not None else 0
    cold = timed(lambda: compile_many(compiler, kernels(count, f"{salt}cold")))
    warm = timed(lambda: compile_many(compiler, kernels(count, f"{salt}warm")))
    return workers, cold, warm


def bench_host_cc(count: int) -> None:
    compiler = HostCCompiler()
    serial = timed(lambda: [compiler.compile(source) for source in kernels(count, "serial")])
    workers, cold, warm = pool_batches(compiler, count)
    print(
        f"host cc, {count} distinct kernels: serial {serial:.3f} s; pool of {workers} spawn workers: "
        f"cold {cold:.3f} s, warm {warm:.3f} s"
    )
    print(f"  ratio serial / pool: cold {serial / cold:.2f}x, warm {serial / warm:.2f}x (workers={workers})")


def bench_qemu_server(compiler: QemuCompiler, later: int) -> None:
    shutdown_servers()
    sources = kernels(later + 1, "server")
    first = timed(lambda: compiler.compile(sources[0]))
    later_s = statistics.median(timed(partial(compiler.compile, source)) for source in sources[1:])
    qemu, _, rootfs, _ = compiler.command
    tcc = str(Path(rootfs) / "usr" / "bin" / "tcc")
    per_process = []
    with tempfile.TemporaryDirectory(prefix="tinyhil-bench-") as scratch:
        for index, source in enumerate(kernels(later, "process")):
            path = Path(scratch) / f"k{index}.c"
            path.write_bytes(source)
            command = [qemu, "-L", rootfs, tcc, "-c", str(path), "-o", str(path.with_suffix(".o"))]
            per_process.append(timed(partial(subprocess.run, command, check=True)))
    process_s = statistics.median(per_process)
    print(
        f"qemu tcc server: first compile {first * 1e3:.1f} ms (includes start-up), median of {later} later "
        f"compiles {later_s * 1e3:.1f} ms; new qemu process per compile: median {process_s * 1e3:.1f} ms"
    )
    print(f"  ratio new-process / server: {process_s / later_s:.2f}x per compile")


def bench_shared_vs_per_worker(compiler: QemuCompiler, count: int) -> None:
    shutdown_servers()
    compiler.compile(b"int warm;")  # the shared server's start-up is not what this compares
    shared = timed(lambda: compile_many(compiler, kernels(count, "shared")))
    per_worker = QemuCompiler(
        compiler.name, compiler.command, elf_machine=compiler.elf_machine, per_worker_servers=True
    )
    workers, cold, warm = pool_batches(per_worker, count, "per-worker ")
    print(
        f"qemu, {count} distinct kernels: one shared server {shared:.3f} s; one server per worker "
        f"({workers} workers): cold {cold:.3f} s (includes worker and server start-ups), warm {warm:.3f} s"
    )
    print(f"  ratio shared / per-worker: cold {shared / cold:.2f}x, warm {shared / warm:.2f}x (workers={workers})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=32, help="distinct kernels per batch (default 32)")
    parser.add_argument("--later", type=int, default=20, help="later compiles whose median is reported (default 20)")
    parser.add_argument("--workers", type=int, help="pool size (sets PARALLEL; default: the pool's own sizing)")
    args = parser.parse_args(argv)
    if args.workers is not None:
        os.environ["PARALLEL"] = str(args.workers)
    print(f"python {sys.version.split()[0]}, {len(os.sched_getaffinity(0))} usable CPUs")
    try:
        bench_host_cc(args.kernels)
        reason = qemucc_unavailable_reason("aarch64")
        if reason is not None:
            print(f"qemu: skipped, target NULL:QEMUCC:aarch64 is unavailable here: {reason}")
            return 0
        compiler = qemucc_compiler("aarch64")
        bench_qemu_server(compiler, args.later)
        bench_shared_vs_per_worker(compiler, args.kernels)
    finally:
        shutdown_pool()
        shutdown_servers()
    return 0


if __name__ == "__main__":
    from _cli import run_main  # this script's folder is on sys.path when it runs as a script

    run_main(main)
