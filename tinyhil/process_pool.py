"""One lazily created pool of spawn worker processes for CPU-bound fan-out, parallel compilation first.

- **Size**: ``PARALLEL`` (environment) if set, else the usable CPUs (``os.sched_getaffinity``) divided by the
  pytest-xdist worker count (``PYTEST_XDIST_WORKER_COUNT``), at least 1. ``PARALLEL=0`` disables the pool: work
  runs inline in the caller. The size is read when the pool is created; :func:`shutdown_pool` lets the next use
  re-read it.
- **Spawn without replaying ``__main__``**: a spawned child normally re-imports the parent's ``__main__`` script,
  re-running its top-level code (and, in a script without a ``__main__`` guard, creating pools recursively). Every
  worker start hides ``__main__.__file__`` and ``__main__.__spec__`` under a lock and restores them afterwards, so
  children import only what the tasks need. This is enforced by the pool's own process class, so workers the
  executor starts later are covered too.
- **Workers hold no devices**: tasks are top-level functions of importable modules plus plain data; a device, a
  lambda, a closure or a function of ``__main__`` is refused before anything is sent.
- **Interrupts**: workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group); a
  ``KeyboardInterrupt`` in the parent while it waits terminates every worker and discards the pool.
- **Deduplication**: :meth:`WorkerPool.map_unique` and :func:`compile_many` run each distinct key once.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import multiprocessing
import multiprocessing.context
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final, TypeVar

from tinyhil.compiler import Compiler
from tinyhil.device import DeviceBase
from tinyhil.errors import CompileError, InvalidArgument, StateError

__all__ = ["PARALLEL_ENV", "XDIST_WORKERS_ENV", "WorkerPool", "compile_many", "get_pool", "pool_size", "shutdown_pool"]

PARALLEL_ENV: Final = "PARALLEL"
XDIST_WORKERS_ENV: Final = "PYTEST_XDIST_WORKER_COUNT"
_TERMINATE_GRACE_S: Final = 5.0
_HIDDEN_MAIN_ATTRS: Final = ("__file__", "__spec__")

T = TypeVar("T")
R = TypeVar("R")

_main_lock = threading.Lock()  # one worker start at a time may hide and restore __main__'s attributes
_pool_lock = threading.Lock()
_pool: WorkerPool | None = None
_in_worker = False  # set in pool workers: a task that fans out again runs inline instead of nesting pools


def pool_size() -> int:
    """The worker count the pool gets: ``PARALLEL``, else usable CPUs // xdist workers (>= 1); 0 means inline.

    Raises:
        InvalidArgument: ``PARALLEL`` or ``PYTEST_XDIST_WORKER_COUNT`` is not a non-negative integer.
    """
    parallel = _env_count(PARALLEL_ENV, "a worker count >= 0 (0 runs work inline)")
    if parallel is not None:
        return parallel
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    xdist_workers = _env_count(XDIST_WORKERS_ENV, "the number of pytest-xdist workers") or 1
    return max(1, usable // xdist_workers)


def _env_count(name: str, expected: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidArgument(f"{name}={raw!r}, expected {expected}")
    return value


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Hide ``__main__``'s file and spec so a spawned child does not re-import (re-run) the user's script."""
    main = sys.modules.get("__main__")
    with _main_lock:
        if main is None:
            yield
            return
        saved: dict[str, Any] = {name: vars(main)[name] for name in _HIDDEN_MAIN_ATTRS if name in vars(main)}
        vars(main).pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            vars(main).update(saved)


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawn process whose start never lets the child see the parent's ``__main__`` script."""

    def start(self) -> None:
        with _main_hidden():
            super().start()


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn context of one pool: makes :class:`_WorkerProcess` workers and remembers them for terminate."""

    def __init__(self) -> None:
        super().__init__()
        self.processes: list[_WorkerProcess] = []

    def Process(self, *args: Any, **kwargs: Any) -> _WorkerProcess:  # type: ignore[override]
        process = _WorkerProcess(*args, **kwargs)
        self.processes.append(process)
        return process


def _worker_init() -> None:
    global _in_worker
    _in_worker = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt means


def _check_task(fn: Callable[..., Any], items: Sequence[Any]) -> None:
    """Refuse work a spawn worker cannot or must not receive, before anything is sent."""
    if not (inspect.isfunction(fn) or inspect.isbuiltin(fn)):
        raise InvalidArgument(f"fn={fn!r}, expected a top-level function of an importable module")
    qualname = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if "<" in qualname or "." in qualname or module in (None, "__main__", "__mp_main__"):
        raise InvalidArgument(
            f"fn={module}.{qualname}, expected a top-level function of an importable module: workers do not "
            "import the parent's __main__, so lambdas, closures, methods and script functions cannot reach them"
        )
    for index, item in enumerate(items):
        parts = item if isinstance(item, tuple | list) else (item,)
        if any(isinstance(part, DeviceBase) for part in parts):
            raise InvalidArgument(
                f"items[{index}] holds a device; pool workers never open or receive devices: pass plain data"
            )


class WorkerPool:
    """A fixed set of spawn workers running top-level functions over plain data; see the module docstring."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgument(f"workers={workers!r}, expected an int >= 1")
        self.workers = workers
        self._context = _WorkerContext()
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=workers, mp_context=self._context, initializer=_worker_init
        )

    def __repr__(self) -> str:
        state = "terminated" if self._executor is None else f"{len(self.pids)} started"
        return f"<WorkerPool {self.workers} spawn workers ({state})>"

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers started so far (workers start as work arrives)."""
        return [p.pid for p in self._context.processes if p.pid is not None]

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(item) for item in items]``, computed by the workers; results in input order.

        A worker's exception is re-raised here. A ``KeyboardInterrupt`` while waiting, or a worker that dies
        (``BrokenProcessPool``), terminates the pool; :func:`get_pool` then creates a new one.

        Raises:
            InvalidArgument: ``fn`` is not a top-level function of an importable module, or an item is a device.
            StateError: the pool was terminated.
        """
        work = list(items)
        _check_task(fn, work)
        if self._executor is None:
            raise StateError(f"{self!r}.map() called, but the pool was terminated; use tinyhil.process_pool.get_pool()")
        try:
            futures: list[Future[R]] = [self._executor.submit(fn, item) for item in work]
            return [future.result() for future in futures]
        except (KeyboardInterrupt, BrokenProcessPool):
            self.terminate()  # interrupted, or a worker died: this pool is done; get_pool() makes a new one
            raise

    def map_unique(self, fn: Callable[[T], R], items: Iterable[T], key: Callable[[T], Hashable]) -> list[R]:
        """Like :meth:`map`, but items with equal ``key(item)`` are computed once and share the result."""
        work = list(items)
        keys = [key(item) for item in work]
        key2item = dict(zip(keys, work, strict=True))
        key2result = dict(zip(key2item, self.map(fn, key2item.values()), strict=True))
        return [key2result[k] for k in keys]

    def terminate(self) -> None:
        """Stop every worker now (pending work is cancelled); the pool cannot be used afterwards."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        for process in self._context.processes:
            if process.is_alive():
                process.terminate()
        executor.shutdown(wait=False, cancel_futures=True)
        for process in self._context.processes:
            process.join(_TERMINATE_GRACE_S)
            if process.is_alive():
                process.kill()
                process.join()
        _forget(self)

    def close(self) -> None:
        """Finish queued work, then stop the workers."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        _forget(self)


def _forget(pool: WorkerPool) -> None:
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None


def get_pool() -> WorkerPool | None:
    """The process-wide pool, created on first use with :func:`pool_size` workers; ``None`` means run inline.

    Inside a pool worker this is always ``None``: fan-out never nests.
    """
    global _pool
    if _in_worker:
        return None
    with _pool_lock:
        if _pool is None:
            size = pool_size()
            if size == 0:
                return None
            _pool = WorkerPool(size)
        return _pool


def shutdown_pool() -> None:
    """Stop the process-wide pool (if any); the next :func:`get_pool` creates a new one with the current size."""
    with _pool_lock:
        pool = _pool
    if pool is not None:
        pool.close()


def _compile_job(job: tuple[Compiler, bytes]) -> tuple[bool, bytes | str, str]:
    """Run one compile; a :class:`CompileError` comes back as data (its constructor does not survive pickling)."""
    compiler, source = job
    try:
        return True, compiler.compile(source), ""
    except CompileError as exc:
        return False, exc.message, exc.compiler


def compile_many(compiler: Compiler, sources: Sequence[str | bytes]) -> list[bytes]:
    """Compile every source with ``compiler``; returns the binaries in input order.

    Equal sources compile once. The work fans out over the process-wide pool unless the pool is disabled
    (``PARALLEL=0``), there is one distinct source, or the compiler sets ``pool_fan_out = False`` (a compiler whose
    work already happens in a server process of its own, such as the shared qemu compile server: its sources are
    sent one at a time from this process).

    Raises:
        CompileError: of the first source (in input order) that failed, after every compile finished.
        InvalidArgument: a source is neither ``str`` nor ``bytes``, or the compiler cannot be sent to workers.
    """
    codes: list[bytes] = []
    for index, source in enumerate(sources):
        if not isinstance(source, str | bytes):
            raise InvalidArgument(f"sources[{index}]={type(source).__name__} object, expected str or bytes")
        codes.append(source.encode() if isinstance(source, str) else source)
    keys = [hashlib.sha256(code).hexdigest() for code in codes]
    key2code = dict(zip(keys, codes, strict=True))
    jobs = [(compiler, code) for code in key2code.values()]
    pool = get_pool() if getattr(compiler, "pool_fan_out", True) and len(jobs) > 1 else None
    if pool is None:
        outcomes = [_compile_job(job) for job in jobs]
    else:
        try:
            pickle.dumps(compiler)
        except Exception as exc:
            raise InvalidArgument(
                f"compiler={compiler!r} cannot be sent to pool workers ({exc}); make it picklable or set PARALLEL=0"
            ) from exc
        outcomes = pool.map(_compile_job, jobs)
    key2outcome = dict(zip(key2code, outcomes, strict=True))
    results: list[bytes] = []
    for key in keys:
        ok, payload, name = key2outcome[key]
        if not ok:
            raise CompileError(name, str(payload))
        assert isinstance(payload, bytes)  # guaranteed by _compile_job
        results.append(payload)
    return results
