"""The worker pool: sizing from PARALLEL and xdist, spawn without replaying __main__, interrupts, deduplication."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from tinyhil import process_pool as pool_module
from tinyhil.compiler import HostCCompiler
from tinyhil.errors import CompileError, InvalidArgument, StateError
from tinyhil.null_device import NullDevice
from tinyhil.process_pool import WorkerPool, compile_many, get_pool, pool_size, shutdown_pool

ELF_MAGIC = b"\x7fELF"


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("PARALLEL", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    shutdown_pool()
    yield
    shutdown_pool()


def _cpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(pool_module.os, "sched_getaffinity", lambda pid: set(range(count)))


@pytest.mark.parametrize(
    ("cpus", "parallel", "xdist", "expected"),
    [
        (8, None, None, 8),  # every usable CPU
        (8, None, "2", 4),  # shared among the xdist workers
        (8, None, "3", 2),
        (2, None, "4", 1),  # never below one
        (8, "3", "4", 3),  # PARALLEL wins
        (8, "0", None, 0),  # PARALLEL=0 disables the pool
        (8, "", "2", 4),  # an empty PARALLEL is unset
    ],
)
def test_pool_size_follows_parallel_then_cpus_per_xdist_worker(
    monkeypatch: pytest.MonkeyPatch, cpus: int, parallel: str | None, xdist: str | None, expected: int
) -> None:
    _cpus(monkeypatch, cpus)
    for name, value in (("PARALLEL", parallel), ("PYTEST_XDIST_WORKER_COUNT", xdist)):
        if value is not None:
            monkeypatch.setenv(name, value)
    assert pool_size() == expected


def test_the_created_pool_has_the_configured_size_and_parallel_zero_runs_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cpus(monkeypatch, 6)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    first = get_pool()
    assert first is not None and first.workers == 2 and get_pool() is first  # one lazily created pool
    monkeypatch.setenv("PARALLEL", "0")
    assert get_pool() is first, "the size is read when the pool is created"
    shutdown_pool()
    assert get_pool() is None
    assert compile_many(HostCCompiler(), ["int a;", "int b;"])[0].startswith(ELF_MAGIC)  # inline still compiles


BAD_INPUTS: list[tuple[str, Any, str]] = [
    ("env:PARALLEL", "many", "PARALLEL='many', expected a worker count >= 0"),
    ("env:PARALLEL", "-1", "PARALLEL='-1', expected a worker count >= 0"),
    ("env:PYTEST_XDIST_WORKER_COUNT", "x", "expected the number of pytest-xdist workers"),
    ("workers", 0, "workers=0, expected an int >= 1"),
    ("workers", True, "workers=True, expected an int >= 1"),
    ("fn", lambda x: x, "expected a top-level function of an importable module"),
    ("fn", WorkerPool.map, "lambdas, closures, methods and script functions"),
    ("items", [NullDevice("NULL")], r"items\[0\] holds a device"),
    ("sources", [b"int a;", 7], r"sources\[1\]=int object, expected str or bytes"),
]


@pytest.mark.parametrize(
    ("what", "value", "message"), BAD_INPUTS, ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(BAD_INPUTS)]
)
def test_bad_input_raises_typed_errors(monkeypatch: pytest.MonkeyPatch, what: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        if what.startswith("env:"):
            monkeypatch.setenv(what.removeprefix("env:"), value)
            pool_size()
        elif what == "workers":
            WorkerPool(value)
        elif what == "fn":
            WorkerPool(1).map(value, [1])
        elif what == "items":
            WorkerPool(1).map(repr, value)
        else:
            compile_many(HostCCompiler(), value)


def test_workers_ignore_sigint_and_run_tasks_in_other_processes() -> None:
    pool = WorkerPool(2)
    try:
        assert pool.map(signal.getsignal, [signal.SIGINT]) == [signal.SIG_IGN]
        task_pids = {int(pid) for pid in pool.map(os.readlink, ["/proc/self"] * 8)}
        assert task_pids <= set(pool.pids) and os.getpid() not in task_pids
        assert 1 <= len(pool.pids) <= 2
    finally:
        pool.close()
    with pytest.raises(StateError, match="terminated"):
        pool.map(repr, [1])


def test_a_worker_that_dies_breaks_only_this_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARALLEL", "1")
    pool = get_pool()
    assert pool is not None
    with pytest.raises(BrokenProcessPool):
        pool.map(os._exit, [3])  # the worker process exits under the task
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pool.pids)
    replacement = get_pool()
    assert replacement is not None and replacement is not pool
    assert replacement.map(abs, [-2]) == [2]


def test_map_unique_runs_each_key_once_and_scatters_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "count"
    countcc = tmp_path / "countcc"
    countcc.write_text(f'#!/bin/sh\necho run >> "{counter}"\nexec cc "$@"\n')
    countcc.chmod(0o755)
    sources = ["int a;", "int b;", "int a;", b"int a;", "int c;", "int b;"]
    monkeypatch.setenv("PARALLEL", "2")  # compile_many fans out over the process-wide pool of two workers
    binaries = compile_many(HostCCompiler(str(countcc)), sources)
    pool = get_pool()
    assert pool is not None and pool.pids, "the compiles ran in the pool's workers"
    assert counter.read_text().count("run") == 3, "three distinct sources, three compiles"
    assert binaries[0] == binaries[2] == binaries[3] != binaries[1] == binaries[5]
    assert all(b.startswith(ELF_MAGIC) for b in binaries)


def test_compile_many_raises_the_first_failing_source_with_the_compiler_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARALLEL", "2")
    with pytest.raises(CompileError) as info:
        compile_many(HostCCompiler(), ["int ok;", "int broken = ;", "this is not C;"])
    assert info.value.compiler == "CC"
    assert "expected expression" in info.value.message or "error" in info.value.message
    assert "this is not C" not in info.value.message, "the first failing source in input order is reported"


SCRIPT_WITHOUT_MAIN_GUARD = """
import sys
from tinyhil.compiler import HostCCompiler
from tinyhil.process_pool import compile_many, get_pool

with open(sys.argv[1], "a") as counter:
    counter.write("top-level code ran\\n")
kernels = [f"int kernel{i}(int x) {{ return x * {i}; }}" for i in range(6)]
binaries = compile_many(HostCCompiler(), kernels)
print(get_pool().workers, len(binaries), all(b.startswith(b"\\x7fELF") for b in binaries))
"""

REPLAYING_SCRIPT = """
import multiprocessing, os, sys
with open(sys.argv[1], "a") as counter:
    counter.write("top-level code ran\\n")
if __name__ == "__main__":
    plain = multiprocessing.get_context("spawn").Pool(2)
    plain.map(abs, [1, 2, 3, 4])
    plain.close()
    plain.join()  # both children finished starting (and replaying the script)
"""


def _run_script(tmp_path: Path, source: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source))
    counter = tmp_path / "counter.txt"
    counter.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, str(script), str(counter)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    return done, counter.read_text().count("top-level code ran")


def test_a_script_compiling_in_parallel_runs_its_top_level_code_exactly_once(tmp_path: Path) -> None:
    done, runs = _run_script(tmp_path, SCRIPT_WITHOUT_MAIN_GUARD, PARALLEL="2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "6", "True"]
    assert runs == 1


def test_plain_spawn_would_replay_the_script_which_is_what_the_pool_prevents(tmp_path: Path) -> None:
    done, runs = _run_script(tmp_path, REPLAYING_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert runs == 3, "the parent plus one replay per spawned child: the hazard the pool hides __main__ from"


INTERRUPTED_SCRIPT = """
import os, sys, threading, time
from tinyhil.process_pool import get_pool

pool = get_pool()

def report():
    while len(pool.pids) < pool.workers:
        time.sleep(0.02)
    time.sleep(0.3)  # let the workers pick up their tasks
    print(" ".join(map(str, pool.pids)), flush=True)

threading.Thread(target=report, daemon=True).start()
try:
    pool.map(time.sleep, [60.0] * pool.workers)
except KeyboardInterrupt:
    alive = [pid for pid in pool.pids if os.path.exists(f"/proc/{pid}")]
    print("interrupted; workers still present:", alive, "; pool replaced:", get_pool() is not pool, flush=True)
"""


def test_keyboard_interrupt_in_the_parent_terminates_the_workers(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PARALLEL": "2"},
        start_new_session=True,
    )
    assert proc.stdout is not None
    pids = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(pids) == 2, proc.stderr.read() if proc.stderr else ""
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group gets SIGINT
    out, err = proc.communicate(timeout=60)
    assert "interrupted; workers still present: [] ; pool replaced: True" in out, err
    assert time.monotonic() - started < 30, "the workers' 60 s sleeps were cut short"
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
