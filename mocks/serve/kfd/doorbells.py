"""The doorbell watcher: notices the client's doorbell stores in the shared frames, as a GPU does, without a syscall.

A thread compares each GPU's doorbell frame (8 KiB, shared with the client) with the last values it saw; a slot
whose u64 changed rings that queue's doorbell through MOCKKFD (``QueueIoctls.doorbell_written``, the same call an
in-process store makes). Between the client's waits the emulated GPU runs on: each pass runs the event kernel for
the wall time since the previous pass (its virtual clock then keeps pace with the wall clock) and re-checks queues
polling memory, which the client's stores cannot wake by themselves. The pass sleeps ``min_sleep_s`` after a
doorbell and doubles the sleep on each idle pass up to ``max_sleep_s``: docs/serve.md gives the measured latency and
CPU cost. The server also calls :meth:`DoorbellWatcher.scan` before each ioctl, so a doorbell rung just before a
``WAIT_EVENTS`` is never missed.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

import numpy as np

from tinyhil.emulators.kernel import NoProgress
from tinyhil.mocks.kfd._errno import LOG
from tinyhil.spec.kfd_queues import KFD_DOORBELL_BYTES

if TYPE_CHECKING:
    from tinyhil.mocks.kfd import MockKFD

__all__ = ["MAX_SLEEP_S", "MIN_SLEEP_S", "DoorbellWatcher"]

MIN_SLEEP_S: Final = 20e-6
MAX_SLEEP_S: Final = 1e-3
_MAX_RUN_NS: Final = 10_000_000  # at most 10 ms of virtual time per pass, however long the pass slept
_ALL_MEMORY: Final = 1 << 64
_DOORBELL: Final = np.dtype(f"<u{KFD_DOORBELL_BYTES}")


class DoorbellWatcher:
    """Watch the doorbell frames of ``kfd``'s GPUs; every MOCKKFD call happens under ``lock``."""

    def __init__(
        self, kfd: MockKFD, lock: threading.Lock, *, min_sleep_s: float = MIN_SLEEP_S, max_sleep_s: float = MAX_SLEEP_S
    ) -> None:
        self.kfd = kfd
        self.lock = lock
        self.min_sleep_s = min_sleep_s
        self.max_sleep_s = max_sleep_s
        self.rings = 0  # doorbells noticed
        self.passes = 0
        # Notified after a pass that rang a doorbell, and by the server after each ioctl: what a blocked wait awaits.
        self.activity = threading.Condition(lock)
        self._seen: dict[int, tuple[object, np.ndarray, np.ndarray]] = {}  # gpu index -> (frame, view, last values)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scan(self) -> int:
        """Ring every doorbell whose slot changed since the last scan; returns how many. Call with the lock held."""
        if not self.kfd.has_process:
            return 0
        rung = 0
        for gpu in self.kfd.gpus:
            frame = gpu.doorbell_page
            seen = self._seen.get(gpu.identity.index)
            if seen is None or seen[0] is not frame:  # a new frame (a new KFD process) starts all zero
                view = np.frombuffer(frame, _DOORBELL)
                seen = (frame, view, np.zeros_like(view))
                self._seen[gpu.identity.index] = seen
            _, view, last = seen
            changed = np.flatnonzero(view != last)
            if changed.size:
                last[changed] = view[changed]
                for slot in changed.tolist():
                    self.kfd.queues.doorbell_written(gpu, slot * KFD_DOORBELL_BYTES, KFD_DOORBELL_BYTES)
                rung += changed.size
        self.rings += rung
        return rung

    def run_gpus(self, duration_ns: int) -> None:
        """Let the GPUs run ``duration_ns`` of virtual time, polls re-checked first. Call with the lock held."""
        kernel = self.kfd.kernel
        for gpu in self.kfd.gpus:
            if getattr(gpu.port, "polling_queues", lambda: ())():
                gpu.port.memory_written(0, _ALL_MEMORY)
        if kernel.pending:
            try:
                kernel.run_for(min(duration_ns, _MAX_RUN_NS))
            except NoProgress as exc:
                LOG.warning("served GPUs made no progress: %s", exc)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tinyhil-kfd-doorbells", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        sleep_s = self.max_sleep_s
        last_ns = time.monotonic_ns()
        while not self._stop.is_set():
            now_ns = time.monotonic_ns()
            with self.lock:
                self.passes += 1
                rung = self.scan()
                self.run_gpus(now_ns - last_ns)
                if rung:
                    self.activity.notify_all()
            last_ns = now_ns
            sleep_s = self.min_sleep_s if rung else min(sleep_s * 2, self.max_sleep_s)
            time.sleep(sleep_s)
